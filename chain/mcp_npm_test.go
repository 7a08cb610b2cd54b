package chain_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/config"
	"chainproxy/internal/mcptest"
	"chainproxy/internal/nodetest"
	"chainproxy/store"
	"chainproxy/tools"
	"chainproxy/tools/mcp"
)

// npmDir holds the pinned reference MCP servers (package.json and its lock
// file); .ci/run installs them with npm ci.
const npmDir = "../tools/mcp/testdata/npm"

// TestMCPReferenceServers: a scripted OL1 uses the npm reference servers
// through the chain: filesystem over stdio, everything over streamable HTTP.
func TestMCPReferenceServers(t *testing.T) {
	nodeBin, fsServer, everything := mcptest.Servers(t, npmDir)
	url := mcptest.ServeEverything(t, nodeBin, everything)
	work := t.TempDir()
	note := filepath.Join(work, "note.txt")
	if err := os.WriteFile(note, []byte("first version"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
nodes:
  - name: OL1
    provider: mock
    mock:
      turns:
        - tool_calls: [{name: fs__read_text_file, args: {path: %[1]q}}]
        - tool_calls: [{name: fs__read_text_file, args: {path: %[1]q}}]
        - content: "never reached"
      scenarios:
        - when: write
          turns:
            - tool_calls: [{name: fs__write_file, args: {path: %[1]q, content: "second version"}}]
            - tool_calls: [{name: fs__read_text_file, args: {path: %[1]q}}]
            - tool_calls: [{name: everything__echo, args: {message: "over http"}}]
            - content: "done"
chain:
  stages: [{node: OL1, max_turns: 6, tools: true}]
  simple_node: OL1
`, note)))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Root = work
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg.StartMCP(t.Context(), []config.MCPServer{
		{Name: "fs", Command: []string{nodeBin, fsServer, work}},
		{Name: "everything", URL: url},
	}, mcp.Options{StartTimeout: 2 * time.Minute}) // returns once both are up
	defer reg.Close()
	if st := reg.MCPStatus(); len(st) != 2 || st[0].Status != "ok" || st[1].Status != "ok" {
		t.Fatalf("MCPStatus() = %+v, want both ok", st)
	}
	eng, err := chain.New(cfg, chain.Deps{
		Nodes: nodetest.Build(t, cfg, nodetest.Mocks),
		Tools: reg,
		Guard: antiloop.NewGuard(store.NewMemory(1000, 10), cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL),
	})
	if err != nil {
		t.Fatal(err)
	}
	run := func(conv, msg string) *chain.Trace {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		res, err := eng.Run(ctx, &chain.RunRequest{TraceID: "t", Model: chain.ModelSimple, Conversation: conv,
			Messages: []chain.Message{{Role: "user", Content: msg}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return &res.Trace
	}
	summary := func(tr *chain.Trace) []string {
		var out []string
		for _, u := range tr.ToolsUsed() {
			out = append(out, u.Name+":"+u.Status)
		}
		return out
	}

	tr := run("read", "read the note")
	if got, want := summary(tr), []string{"fs__read_text_file:ok", "fs__read_text_file:blocked"}; !slices.Equal(got, want) {
		t.Errorf("read twice: calls = %v, want %v", got, want)
	}
	if used := tr.ToolsUsed(); len(used) > 0 && !strings.Contains(used[0].Result, "first version") {
		t.Errorf("fs__read_text_file result = %q, want the file's text", used[0].Result)
	}
	if st := tr.Stages[0].Status; st != chain.StageStoppedRepeat {
		t.Errorf("read twice: stage status = %q, want %q", st, chain.StageStoppedRepeat)
	}

	// The same conversation, so the first version's read is in the TTL
	// cache: fs__write_file is a write by its annotations, and makes it
	// stale, so the read after it runs and sees the new text.
	tr = run("read", "write the note please")
	if got, want := summary(tr), []string{"fs__write_file:ok", "fs__read_text_file:ok", "everything__echo:ok"}; !slices.Equal(got, want) {
		t.Errorf("write then read: calls = %v, want %v", got, want)
	}
	if used := tr.ToolsUsed(); len(used) == 3 {
		if !strings.Contains(used[1].Result, "second version") {
			t.Errorf("read after write = %q, want the fresh text", used[1].Result)
		}
		if !strings.Contains(used[2].Result, "over http") {
			t.Errorf("everything__echo result = %q, want the echo", used[2].Result)
		}
	}
}
