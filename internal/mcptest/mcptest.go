// Package mcptest starts the pinned reference MCP servers
// (tools/mcp/testdata/npm) for tests in several packages: the engine's,
// the wiring's. It exists so that finding the servers, skipping (or
// failing under CI) without them, and waiting for server-everything's
// HTTP mode are written once.
package mcptest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Servers returns node and the entry points of the reference servers
// installed under npmDir (the path of tools/mcp/testdata/npm from the
// calling test's package), or skips (fails when CI is set) when node or
// the packages are missing.
func Servers(t testing.TB, npmDir string) (node, fsServer, everything string) {
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

// ServeEverything runs server-everything in streamable HTTP mode (it reads
// its port from PORT and serves /mcp) and returns its URL once it listens.
// The process is killed at the test's cleanup.
func ServeEverything(t testing.TB, node, entry string) string {
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
