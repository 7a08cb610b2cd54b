package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"chainproxy/config"
	"chainproxy/internal/fakeopenai"
)

// lockedBuffer collects a process's log lines while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startProxy runs the real proxy with the config text and returns its base
// URL, its stderr, a stop function (SIGTERM) and the exit code channel.
// args are added to the command line.
func startProxy(t *testing.T, cfg string, args ...string) (base string, logs *lockedBuffer, stop func(), code <-chan int) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	if !strings.Contains(cfg, "tools:") { // a missing tools.root is a config error
		cfg += "tools: {root: \"" + dir + "\"}\n"
	}
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	logs = &lockedBuffer{}
	c := make(chan int, 1)
	go func() { // exits when run returns, after ctx ends
		c <- run(ctx, append([]string{"-config", path}, args...), pw, logs)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		if after, ok := strings.CutPrefix(sc.Text(), "chainproxy listening on "); ok {
			base = after
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if base == "" {
		cancel()
		t.Fatalf("no listening line; stderr:\n%s", logs)
	}
	t.Cleanup(cancel)
	return base, logs, cancel, c
}

// nodes is a config's node list, every node served by the fake at url.
func nodes(url string) string {
	var b strings.Builder
	b.WriteString("nodes:\n")
	for _, n := range []string{"OL1", "M1", "M2"} {
		b.WriteString("  - {name: " + n + ", provider: openai, base_url: \"" + url + "\", model: m}\n")
	}
	return b.String()
}

// TestNonLoopbackBindRefused: serving every interface with no key would let
// anyone on the network run the chain and its file tools.
func TestNonLoopbackBindRefused(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"all interfaces, no keys", []string{"-demo", "-addr", "0.0.0.0:0"}, 2},
		{"empty host, no keys", []string{"-demo", "-addr", ":0"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr strings.Builder
			code := run(t.Context(), tt.args, io.Discard, &stderr)
			if code != tt.want || !strings.Contains(stderr.String(), "server.allow_unauthenticated: true") {
				t.Errorf("run(%v) = %d, stderr %q; want %d naming server.allow_unauthenticated: true", tt.args, code, stderr.String(), tt.want)
			}
		})
	}
	for _, s := range []struct {
		name string
		srv  config.Server
		ok   bool
	}{
		{"loopback", config.Server{Addr: "127.0.0.1:8080"}, true},
		{"localhost", config.Server{Addr: "localhost:8080"}, true},
		{"ipv6 loopback", config.Server{Addr: "[::1]:8080"}, true},
		{"lan with keys", config.Server{Addr: "0.0.0.0:8080", APIKeys: []string{"k"}}, true},
		{"lan insisted", config.Server{Addr: "192.168.1.5:8080", AllowUnauthenticated: true}, true},
		{"lan open", config.Server{Addr: "192.168.1.5:8080"}, false},
	} {
		if err := checkExposure(s.srv); (err == nil) != s.ok {
			t.Errorf("checkExposure(%s) = %v, want ok %v", s.name, err, s.ok)
		}
	}
}

// TestSecretsRedactedInLogs: the base URL's password and query string never
// reach the log.
func TestSecretsRedactedInLogs(t *testing.T) {
	fake := fakeopenai.New(t)
	url := strings.Replace(fake.BaseURL(), "http://", "http://user:PASSWORD@", 1) + "?api_key=QUERYSECRET"
	_, logs, stop, code := startProxy(t, "server: {addr: \"127.0.0.1:0\"}\n"+nodes(url))
	stop()
	<-code
	out := logs.String()
	if !strings.Contains(out, "node ready") && !strings.Contains(out, "node unreachable") {
		t.Fatalf("no node line in the log:\n%s", out)
	}
	for _, secret := range []string{"PASSWORD", "QUERYSECRET"} {
		if strings.Contains(out, secret) {
			t.Errorf("log shows %s:\n%s", secret, out)
		}
	}
}

// TestSIGTERMEndsStreamsWithDone: a stream still running when the process
// is told to stop ends, before the grace period, with an OpenAI error event
// and data: [DONE], rather than a connection cut mid-way.
func TestSIGTERMEndsStreamsWithDone(t *testing.T) {
	fake := fakeopenai.New(t, fakeopenai.Reply{Content: []string{"partial "}, Hang: true})
	base, _, stop, code := startProxy(t, "server: {addr: \"127.0.0.1:0\", shutdown_timeout: 1s}\n"+nodes(fake.BaseURL()))
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(
		`{"model":"M2","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-fake.Hanging()
	stop()
	body, _ := io.ReadAll(resp.Body)
	got := string(body)
	if !strings.Contains(got, `"code":"server_shutting_down"`) || !strings.HasSuffix(got, "data: [DONE]\n\n") {
		t.Errorf("stream at shutdown ends %q; want an error event then data: [DONE]", tail(got))
	}
	if c := <-code; c != 0 {
		t.Errorf("exit code %d, want 0", c)
	}
}
