package realollama_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"chainproxy/internal/mcptest"
)

// TestToolsFitRealWindow: the research stage on a real Ollama (the tiny
// model: 2,048 tokens, a byte-level tokenizer far denser than the
// estimate's 4 characters a token) beside both reference MCP servers and
// the built-ins, 30 tools that alone pass its window. The stage runs with
// the tools that fit instead of being skipped: Ollama refuses the first
// prompt, fitted at 4 characters a token, and takes the refit (the
// ratio learned from the refusal, the tools' share counted at it:
// find_tools alone), and nothing is cut.
func TestToolsFitRealWindow(t *testing.T) {
	f := setup(t)
	node, fsServer, everything := mcptest.Servers(t, "../../tools/mcp/testdata/npm")
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "marker.txt"), []byte("MARKER-real"), 0o644); err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t, f, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, base_url: %[1]s, model: tiny-tools, timeout: 5m}
chain:
  stages: [{node: OL1, max_turns: 1, tools: true}]
  simple_node: OL1
tools:
  root: %[2]q
  mcp:
    - {name: fs, command: [%[3]q, %[4]q, %[2]q]}
    - {name: everything, command: [%[3]q, %[5]q, stdio]}
`, f.ollama.URL, work, node, fsServer, everything))
	code, id, body := post(t, proxy, map[string]any{"model": "chain/reflexive", "max_tokens": 8,
		"messages": []map[string]string{{"role": "user", "content": "read the marker file through the MCP tools"}}})
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	resp, err := http.Get(proxy + "/v1/chain/traces/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Chain struct {
			Stages []struct {
				Status  string
				Error   string
				ToolFit *struct {
					Offered, Of int
					Reason      string
				} `json:"tool_fit"`
				Context *struct {
					Window         int
					ReportedTokens int `json:"reported_tokens"`
					Overflow       bool
				}
				Calls []struct{ Error string }
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || len(doc.Chain.Stages) != 1 {
		t.Fatalf("trace: %v, %+v", err, doc)
	}
	st := doc.Chain.Stages[0]
	if st.Status == "skipped_context" || st.Status == "failed" {
		t.Fatalf("OL1 %s: %s", st.Status, st.Error)
	}
	if st.ToolFit == nil || st.ToolFit.Of < 30 || st.ToolFit.Reason == "" {
		t.Errorf("OL1 tool_fit = %+v, want the 30 tools fitted, with a reason", st.ToolFit)
	}
	if st.Context == nil || st.Context.Overflow || st.Context.ReportedTokens == 0 {
		t.Errorf("OL1 context = %+v, want a reported prompt inside the window", st.Context)
	}
	t.Logf("OL1 %s: tool_fit %+v, context %+v, %d calls", st.Status, st.ToolFit, st.Context, len(st.Calls))
}
