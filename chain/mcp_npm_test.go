package chain_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/chain/mock"
	"chainproxy/chain/node"
	"chainproxy/config"
	"chainproxy/store"
	"chainproxy/tools"
	"chainproxy/tools/mcp"
)

// npmDir holds the pinned reference MCP servers (package.json and its lock
// file); .ci/run installs them with npm ci.
const npmDir = "../tools/mcp/testdata/npm"

// needNPMServers returns the path of an installed reference server's entry
// point, or skips (fails under CI) when node or the packages are missing.
func needNPMServers(t *testing.T) (node, fsServer, everything string) {
	t.Helper()
	miss := func(why string) {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s (CI is set, so this fails instead of skipping)", why)
		}
		t.Skipf("%s: run `npm ci` in tools/mcp/testdata/npm to test against the reference MCP servers", why)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		miss("node is not installed")
	}
	mods, _ := filepath.Abs(filepath.Join(npmDir, "node_modules", "@modelcontextprotocol"))
	fsServer = filepath.Join(mods, "server-filesystem", "dist", "index.js")
	everything = filepath.Join(mods, "server-everything", "dist", "index.js")
	for _, p := range []string{fsServer, everything} {
		if _, err := os.Stat(p); err != nil {
			miss("reference MCP server missing: " + p)
		}
	}
	return node, fsServer, everything
}

// startEverything runs server-everything in streamable HTTP mode (it reads
// its port from PORT and serves /mcp) and returns its URL once it listens.
func startEverything(t *testing.T, node, entry string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(node, entry, "streamableHttp")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), fmt.Sprintf("PORT=%d", port)}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	listening := make(chan struct{})
	go func() { // exits when the server's stderr closes (the process ends at cleanup)
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			if !once && strings.Contains(sc.Text(), "listening on port") {
				once = true
				close(listening)
			}
		}
	}()
	select {
	case <-listening:
	case <-time.After(2 * time.Minute): // node starts it in seconds on a loaded machine
		t.Fatal("server-everything did not start listening")
	}
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
}

// TestMCPReferenceServers: a scripted OL1 uses the npm reference servers
// through the chain: filesystem over stdio, everything over streamable HTTP.
func TestMCPReferenceServers(t *testing.T) {
	nodeBin, fsServer, everything := needNPMServers(t)
	url := startEverything(t, nodeBin, everything)
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
		Nodes: node.SetOf(map[string]node.Backend{"OL1": mock.New(cfg.Nodes[0])}),
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
