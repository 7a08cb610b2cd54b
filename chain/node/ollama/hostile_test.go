package ollama

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"chainproxy/chain/node"
	"chainproxy/internal/hostiletest"
)

// TestMetadataCallsBoundedByNodeTimeout: after a node's first call, and on
// the first request after it came back, the chain asks Ollama the model's
// details (POST /api/show) and its loaded window (GET /api/ps) with the
// user's request's context. A server that sends its headers and then
// stalls, or trickles a byte now and then, must not hold that request past
// nodes[].timeout ("bound on one upstream call", docs/config.md), as it
// cannot hold a chat call.
func TestMetadataCallsBoundedByNodeTimeout(t *testing.T) {
	calls := []struct {
		name string
		call func(context.Context, *Backend) error
	}{
		{"Describe", func(ctx context.Context, b *Backend) error { _, err := b.Describe(ctx); return err }},
		{"LoadedWindow", func(ctx context.Context, b *Backend) error { _, err := b.LoadedWindow(ctx); return err }},
	}
	servers := []struct {
		name     string
		interval time.Duration
	}{
		{"headers then a stall", 0},
		{"a trickle", 20 * time.Millisecond},
	}
	for _, c := range calls {
		for _, s := range servers {
			t.Run(c.name+"/"+s.name, func(t *testing.T) {
				srv := hostiletest.Staller(t, "application/json; charset=utf-8", s.interval)
				n := nodeAt(srv.URL)
				n.Timeout = 200 * time.Millisecond
				done := make(chan error, 1)
				go func() { done <- c.call(t.Context(), New(n, nil)) }()
				select {
				case err := <-done:
					var ue *node.UpstreamError
					if !errors.As(err, &ue) || ue.Kind != node.KindTimeout {
						t.Errorf("%s() error = %v, want an upstream error of kind %q", c.name, err, node.KindTimeout)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("%s() still waits 10s on, past nodes[].timeout (200ms)", c.name)
				}
			})
		}
	}
}

// TestChatLineWithoutEnd: a server that sends one NDJSON line without end
// (megabytes and no newline) costs the proxy at most maxLine, and the
// error says what went wrong in the words of the stream, not bufio's
// ("token too long").
func TestChatLineWithoutEnd(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Write([]byte(`{"model":"qwen3:1.7b","created_at":"2025-01-01T00:00:00Z","message":{"role":"assistant","content":"`))
		chunk := bytes.Repeat([]byte("a"), 64<<10)
		for range (maxLine + 1<<20) / len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	_, err := collect(t.Context(), New(nodeAt(srv.URL), nil), userRequest("hi"))
	var ue *node.UpstreamError
	if !errors.As(err, &ue) || ue.Kind != node.KindProtocol {
		t.Fatalf("Chat() error = %v, want an upstream protocol error", err)
	}
	if want := "stream line longer than 8 MiB"; !strings.Contains(err.Error(), want) {
		t.Errorf("Chat() error = %v, want it to say %q", err, want)
	}
}

// TestHTMLPageInTheNodesPlace: a proxy in front of Ollama, or a captive
// portal, answers with its own page and status 200: `ollama list` then
// said "invalid character '<' looking for beginning of value"
// (ollama/ollama#12480, an HTTP proxy from the environment). Every call
// says what came instead.
func TestHTMLPageInTheNodesPlace(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(`<!DOCTYPE html><html><head><title>Sign in</title></head><body>Sign in to continue</body></html>`))
	}))
	t.Cleanup(srv.Close)
	b := New(nodeAt(srv.URL), nil)
	calls := []struct {
		name string
		call func() error
	}{
		{"Chat", func() error { _, err := collect(t.Context(), b, userRequest("hi")); return err }},
		{"Describe", func() error { _, err := b.Describe(t.Context()); return err }},
		{"Probe", func() error { return b.Probe(t.Context()) }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			var ue *node.UpstreamError
			if !errors.As(err, &ue) || ue.Kind != node.KindProtocol || !strings.Contains(err.Error(), "an HTML page") {
				t.Errorf("%s error = %v, want an upstream protocol error that says it got an HTML page", c.name, err)
			}
		})
	}
}
