package web

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/config"
	"chainproxy/store"
	"chainproxy/tools"
	"chainproxy/tools/mcp"

	"chainproxy/internal/nodetest"
	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestReadyzListsMCPServers: /readyz names each MCP server with "ok" or
// its error, and a server that is down does not make the proxy unready.
func TestReadyzListsMCPServers(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	srv.AddTool(&sdk.Tool{Name: "ping", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{}, nil
	})
	up := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	defer up.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + ln.Addr().String() + "/mcp"
	ln.Close() // nothing listens there: connection refused

	cfg, err := config.Parse([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Root = t.TempDir()
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg.StartMCP(t.Context(), []config.MCPServer{{Name: "kb", URL: up.URL}, {Name: "gone", URL: gone}}, mcp.Options{StartTimeout: 5 * time.Second, MinBackoff: time.Hour})
	defer reg.Close()
	mem := store.NewMemory(1000, 10)
	eng, err := chain.New(cfg, chain.Deps{Nodes: nodetest.Build(t, cfg, nodetest.Mocks), Tools: reg, Guard: antiloop.NewGuard(mem, cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL)})
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(New(Options{Config: cfg, Engine: eng, Traces: mem}))
	defer s.Close()

	resp, err := http.Get(s.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Status string            `json:"status"`
		MCP    []tools.MCPStatus `json:"mcp"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || got.Status != "ready" {
		t.Errorf("readyz = %d %q, want 200 ready with an MCP server down", resp.StatusCode, got.Status)
	}
	if len(got.MCP) != 2 {
		t.Fatalf("readyz mcp = %+v, want kb and gone", got.MCP)
	}
	if diff := cmp.Diff(tools.MCPStatus{Name: "kb", Status: "ok"}, got.MCP[0]); diff != "" {
		t.Errorf("readyz mcp[0] (-want +got):\n%s", diff)
	}
	if got.MCP[1].Name != "gone" || got.MCP[1].Status == "ok" || got.MCP[1].Status == "" {
		t.Errorf("readyz mcp[1] = %+v, want gone with its error", got.MCP[1])
	}
}
