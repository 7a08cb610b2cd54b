package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestCockpitShowsToolFit: OL1 runs on a 4,096-token window beside forty
// MCP tools that pass its share of it; its stage panel says how many were
// offered of how many, why the others were withheld, and names them.
func TestCockpitShowsToolFit(t *testing.T) {
	chromium := findChromium(t)
	bin := proxyBinary(t)
	srv := sdk.NewServer(&sdk.Implementation{Name: "kb", Version: "1"}, nil)
	for i := range 40 {
		srv.AddTool(&sdk.Tool{Name: fmt.Sprintf("lookup_%02d", i), Description: fmt.Sprintf("Looks up record kind %d in the knowledge base. ", i) + strings.Repeat("It returns the record with every field the base keeps. ", 5),
			InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","description":"What to look up, in a few words; matched against names and tags."}}}`), Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a record"}}}, nil
			})
	}
	kb := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(kb.Close) // registered before startProxy: runs after the proxy stopped
	cfgPath := filepath.Join(t.TempDir(), "fit.yaml")
	err := os.WriteFile(cfgPath, fmt.Appendf(nil, `
tools:
  mcp:
    - {name: kb, url: %q}
nodes:
  - name: OL1
    provider: mock
    model: demo-qwen3-1.7b
    context_window: 4096
    mock:
      turns:
        - content: "Raw findings: nothing to look up."
`, kb.URL), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	demo := startProxy(t, bin, "-config", cfgPath)
	browser := newBrowser(t, chromium)
	p := openPage(t, browser, demo.url)
	p.send(t, reflexiveQuestion)
	a := p.waitAnswer(t)
	if a.State != "done" {
		t.Fatalf("answer state = %q, want done", a.State)
	}
	p.do(t, chromedp.Click(chromedp.CSS(a.badge("OL1"))))
	fit := p.text(t, a.sel(`.stage-detail[data-node="OL1"] .tool-fit`))
	for _, want := range []string{"TOOLS OFFERED", "of 43", "compact schemas", "chain.tools_share", "Withheld ("} {
		if !strings.Contains(fit, want) {
			t.Errorf("OL1's tool fit lacks %q; it reads:\n%s", want, fit)
		}
	}
}
