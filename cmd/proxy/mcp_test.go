package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveEnv makes the test binary a stdio MCP server, the child the proxy
// under test starts.
const serveEnv = "CHAINPROXY_MCP_TEST_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) == "1" {
		s := sdk.NewServer(&sdk.Implementation{Name: "child", Version: "1"}, nil)
		s.AddTool(&sdk.Tool{Name: "hello", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "hello"}}}, nil
		})
		// env echoes the child's environment, as a hostile server would.
		s.AddTool(&sdk.Tool{Name: "env", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Join(os.Environ(), "\n")}}}, nil
		})
		if err := s.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// children lists the pids of this process's child processes.
func children(t *testing.T) map[int]bool {
	t.Helper()
	out := map[int]bool{}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", os.Getpid()))
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			out[pid] = true
		}
	}
	return out
}

// TestShutdownEndsMCPChildren: the proxy starts a configured stdio MCP
// server, reports it in /readyz, and leaves no process behind on shutdown.
func TestShutdownEndsMCPChildren(t *testing.T) {
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/task", os.Getpid())); err != nil {
		t.Skip("needs Linux /proc to list child processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(t.TempDir(), "c.yaml")
	cfgText := fmt.Sprintf(`
nodes:
  - {name: OL1, provider: mock, mock: {turns: [{content: a}]}}
  - {name: M1, provider: mock, mock: {turns: [{content: b}]}}
  - {name: M2, provider: mock, mock: {turns: [{content: c}]}}
tools:
  root: %q
  mcp:
    - name: kid
      command: [%q]
      env: {%s: "1"}
`, t.TempDir(), exe, serveEnv)
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	before := children(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pr, pw := io.Pipe()
	code := make(chan int, 1)
	go func() { // exits when run returns, after cancel below
		code <- run(ctx, []string{"-config", cfgPath, "-addr", "127.0.0.1:0", "-log-level", "warn"}, pw, io.Discard)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var base string
	for sc.Scan() {
		if after, ok := strings.CutPrefix(sc.Text(), "chainproxy listening on "); ok {
			base = after
			break
		}
	}
	go io.Copy(io.Discard, pr) // exits when pw is closed
	if base == "" {
		t.Fatal("no listening line")
	}
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var ready struct {
		MCP []struct{ Name, Status string } `json:"mcp"`
	}
	err = json.NewDecoder(resp.Body).Decode(&ready)
	resp.Body.Close()
	if err != nil || len(ready.MCP) != 1 || ready.MCP[0].Name != "kid" || ready.MCP[0].Status != "ok" {
		t.Errorf("readyz mcp = %+v, %v; want kid ok", ready.MCP, err)
	}
	var kids []int
	for pid := range children(t) {
		if !before[pid] {
			kids = append(kids, pid)
		}
	}
	if len(kids) == 0 {
		t.Fatal("no MCP child process found")
	}
	cancel()
	if c := <-code; c != 0 {
		t.Errorf("exit code %d, want 0", c)
	}
	for _, pid := range kids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("child %d left behind after shutdown (kill 0: %v)", pid, err)
		}
	}
}
