package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestCockpitShowsMCPToolNames: a call to an MCP server's tool shows in
// OL1's unfolded badge under its full name, server prefix included.
func TestCockpitShowsMCPToolNames(t *testing.T) {
	chromium := findChromium(t)
	bin := proxyBinary(t)
	srv := sdk.NewServer(&sdk.Implementation{Name: "kb", Version: "1"}, nil)
	srv.AddTool(&sdk.Tool{Name: "lookup", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`), Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "the plan has three phases"}}}, nil
		})
	kb := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(kb.Close) // registered before startProxy: runs after the proxy stopped and dropped its SSE stream
	cfgPath := filepath.Join(t.TempDir(), "mcp.yaml")
	err := os.WriteFile(cfgPath, fmt.Appendf(nil, `
tools:
  mcp:
    - {name: kb, url: %q}
nodes:
  - name: OL1
    provider: mock
    model: demo-qwen3-1.7b
    mock:
      turns:
        - tool_calls: [{name: kb__lookup, args: {q: plans}}]
        - content: "Raw findings from the knowledge base."
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
	ol1 := a.badge("OL1")
	p.do(t, chromedp.Click(chromedp.CSS(ol1)))
	tools := eval[[]string](t, p, fmt.Sprintf(`[...document.getElementById(document.querySelector(%q).getAttribute("aria-controls")).querySelectorAll(".tool-call")].map(e => e.dataset.tool)`, ol1))
	if !slices.Equal(tools, []string{"kb__lookup"}) {
		t.Errorf("OL1 tool calls = %q, want [kb__lookup]", tools)
	}
	if detail := p.text(t, a.sel(`.stage-detail[data-node="OL1"]`)); !strings.Contains(detail, "kb__lookup") || !strings.Contains(detail, "three phases") {
		t.Errorf("OL1 detail lacks the MCP call's name or result; it reads:\n%s", detail)
	}
}
