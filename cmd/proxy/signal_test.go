package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"chainproxy/internal/fakeopenai"
)

// TestSecondSignalStopsAtOnce: the first SIGTERM lets a stream run for
// server.shutdown_timeout; an operator who sends a second one (Ctrl-C
// again) does not want to wait for it. os/signal's NotifyContext keeps
// catching the signals until its stop is called, so without that the
// second one was swallowed and the process lived out the grace period.
func TestSecondSignalStopsAtOnce(t *testing.T) {
	fake := fakeopenai.New(t, fakeopenai.Reply{Content: []string{"partial "}, Hang: true})
	bin := buildProxy(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	err := os.WriteFile(cfg, fmt.Appendf(nil, "server: {shutdown_timeout: 60s}\n%stools: {root: %q}\n", nodes(fake.BaseURL()), dir), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	p := startReplica(t, bin, cfg, "p")
	resp, err := http.Post(p.base+"/v1/chat/completions", "application/json", strings.NewReader(
		`{"model":"M2","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	go io.Copy(io.Discard, resp.Body)
	<-fake.Hanging()

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Shutting down: the listener is closed.
	host := strings.TrimPrefix(p.base, "http://")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := net.Dial("tcp", host)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("still accepting 10s after SIGTERM: %s", p.log())
		}
	}
	select {
	case <-p.exited:
		t.Fatalf("exited at the first signal, with a stream in flight and 60s of grace: %s", p.log())
	default:
	}
	sent := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
		t.Logf("exited %v after the second signal: %v", time.Since(sent), p.cmd.ProcessState)
	case <-time.After(10 * time.Second):
		t.Fatalf("still running 10s after a second SIGTERM (shutdown_timeout 60s): %s", p.log())
	}
}

// TestAddressInUse: a proxy started on an address another process holds
// says so, naming the key to change, and before it starts anything else:
// a stdio MCP server that is slow to answer (a cold npx install) made the
// operator wait up to 10 s for the error, with the child started for
// nothing.
func TestAddressInUse(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	err = os.WriteFile(cfg, fmt.Appendf(nil, "server: {addr: %q}\ntools:\n  root: %q\n  mcp:\n    - {name: slow, command: [sleep, \"60\"]}\n", held.Addr().String(), dir), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	start := time.Now()
	code := run(t.Context(), []string{"-demo", "-config", cfg, "-log-batch", "0"}, io.Discard, &stderr)
	took := time.Since(start)
	out := stderr.String()
	if code == 0 || !strings.Contains(out, held.Addr().String()) || !strings.Contains(out, "address already in use") || !strings.Contains(out, "-addr or server.addr") {
		t.Errorf("run = %d, stderr:\n%s\nwant an error naming the address, that it is in use, and -addr or server.addr", code, out)
	}
	if took > 5*time.Second {
		t.Errorf("the error came after %v: the proxy started the rest before listening", took)
	}
}
