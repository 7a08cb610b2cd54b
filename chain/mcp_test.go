package chain_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/chain/mock"
	"chainproxy/config"
	"chainproxy/store"
	"chainproxy/tools"
	"chainproxy/tools/mcp"

	"chainproxy/internal/nodetest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPToolsInTheChain: an MCP server's tools go through the same path
// as the built-ins (trace name <server>__<tool>, anti-loop repeat stop,
// isError → error), the tool set is read per request, and a server that is
// down is named in the trace reasons.
func toolNames(ts []chain.Tool) []string {
	out := make([]string, len(ts))
	for i, tl := range ts {
		out[i] = tl.Name
	}
	return out
}

func TestMCPToolsInTheChain(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	srv.AddTool(&sdk.Tool{Name: "lookup", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`), Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "answer 42"}}}, nil
		})
	srv.AddTool(&sdk.Tool{Name: "fail", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "bad row"}}}, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	var down atomic.Bool
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer ts.Close()

	cfg, err := config.Parse([]byte(`
nodes:
  - name: OL1
    provider: mock
    mock:
      turns:
        - tool_calls: [{name: kb__fail, args: {}}]
        - tool_calls: [{name: kb__lookup, args: {q: x}}]
        - tool_calls: [{name: kb__lookup, args: {q: x}}]
        - content: "never reached"
chain:
  stages: [{node: OL1, max_turns: 6, tools: true}]
  simple_node: OL1
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Root = t.TempDir()
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg.StartMCP(t.Context(), []config.MCPServer{{Name: "kb", URL: ts.URL}}, mcp.Options{KeepAlive: 300 * time.Millisecond, MinBackoff: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	defer reg.Close()
	rec := &recorder{Backend: mock.New(cfg.Nodes[0])}
	eng, err := chain.New(cfg, chain.Deps{
		Nodes: nodetest.Build(t, cfg, ownMocks(t, map[string]*recorder{"OL1": rec})),
		Tools: reg,
		Guard: antiloop.NewGuard(store.NewMemory(1000, 10), cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL),
	})
	if err != nil {
		t.Fatal(err)
	}
	run := func(conv string) *chain.Result {
		t.Helper()
		res, err := eng.Run(t.Context(), &chain.RunRequest{TraceID: "t", Model: chain.ModelSimple, Conversation: conv,
			Messages: []chain.Message{{Role: "user", Content: "look it up"}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	res := run("c1")
	used := res.Trace.ToolsUsed()
	var got []string
	for _, u := range used {
		got = append(got, u.Name+":"+u.Status)
	}
	want := []string{"kb__fail:error", "kb__lookup:ok", "kb__lookup:" + chain.ToolBlocked}
	if !slices.Equal(got, want) {
		t.Errorf("tool calls = %v, want %v", got, want)
	}
	if len(used) > 1 && !strings.Contains(used[1].Result, "answer 42") {
		t.Errorf("kb__lookup result = %q, want the server's text", used[1].Result)
	}
	if len(used) > 0 && !strings.Contains(used[0].Result, "bad row") {
		t.Errorf("kb__fail result = %q, want the server's error text", used[0].Result)
	}
	if offered := rec.requests()[0].Tools; !slices.ContainsFunc(offered, func(tl chain.Tool) bool { return tl.Name == "kb__lookup" }) {
		t.Errorf("tools offered = %v, want kb__lookup", toolNames(offered))
	}
	if st := res.Trace.Stages[0].Status; st != chain.StageStoppedRepeat {
		t.Errorf("stage status = %q, want %q", st, chain.StageStoppedRepeat)
	}

	// The server goes down: its tools are withdrawn, which the next request
	// sees, and the trace says why.
	down.Store(true)
	deadline := time.Now().Add(10 * time.Second)
	for _, ok := reg.Lookup("kb__lookup"); ok; _, ok = reg.Lookup("kb__lookup") {
		if time.Now().After(deadline) {
			t.Fatal("kb tools still offered while the server is down")
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := len(rec.requests())
	res = run("c2")
	offered := rec.requests()[before].Tools
	if slices.ContainsFunc(offered, func(tl chain.Tool) bool { return strings.HasPrefix(tl.Name, "kb__") }) {
		t.Errorf("tools offered while kb is down = %v, want no kb__ tool", toolNames(offered))
	}
	if !slices.ContainsFunc(offered, func(tl chain.Tool) bool { return tl.Name == "read_file" }) {
		t.Errorf("tools offered while kb is down = %v, want the built-ins still", toolNames(offered))
	}
	if !slices.ContainsFunc(res.Trace.Reasons, func(r string) bool { return strings.Contains(r, "mcp server kb unavailable") }) {
		t.Errorf("reasons = %q, want one naming kb as unavailable", res.Trace.Reasons)
	}
	if used := res.Trace.ToolsUsed(); len(used) == 0 || used[0].Status != chain.ToolError || !strings.Contains(used[0].Result, "unknown tool") {
		t.Errorf("calls while kb is down = %+v, want an unknown-tool error", used)
	}
}
