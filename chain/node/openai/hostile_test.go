package openai

import (
	"bytes"
	"compress/gzip"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"chainproxy/chain/node"
	"chainproxy/internal/hostiletest"
)

// TestDescribeBoundedByNodeTimeout: the chain asks a node's model list in
// the path of a user's request (the first request after the node came
// back), with the request's context. A server that sends its headers and
// then stalls, or trickles a byte now and then, must not hold that request
// past nodes[].timeout ("bound on one upstream call", docs/config.md), as
// it cannot hold a chat call.
func TestDescribeBoundedByNodeTimeout(t *testing.T) {
	tests := []struct {
		name     string
		interval time.Duration
	}{
		{"headers then a stall", 0},
		{"a trickle", 20 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := hostiletest.Staller(t, "application/json", tc.interval)
			n := nodeAt(srv.URL)
			n.Timeout = 200 * time.Millisecond
			done := make(chan error, 1)
			go func() {
				_, err := New(n, nil).Describe(t.Context())
				done <- err
			}()
			select {
			case err := <-done:
				var ue *node.UpstreamError
				if !errors.As(err, &ue) || ue.Kind != node.KindTimeout {
					t.Errorf("Describe() error = %v, want an upstream error of kind %q", err, node.KindTimeout)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Describe() still waits 10s on, past nodes[].timeout (200ms)")
			}
		})
	}
}

// TestChatContentEncoding: what a user is told when a node answers a chat
// call compressed. gzip, which net/http asks for by itself, is decoded and
// the caps count the decoded bytes: one line that inflates to 64 MiB is an
// event over maxEvent, whatever it weighed on the wire. A coding the proxy
// did not ask for (an nginx cache serving br to clients that asked for gzip
// and deflate: canonical/ubuntu.com#13980) is named, not read as a stream
// that "ended before a finish_reason" or an answer that does not decode.
func TestChatContentEncoding(t *testing.T) {
	var bomb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&bomb, gzip.BestCompression)
	zw.Write([]byte(`data: {"choices":[{"index":0,"delta":{"content":"`))
	chunk := bytes.Repeat([]byte("a"), 64<<10)
	for range (64 << 20) / len(chunk) {
		zw.Write(chunk)
	}
	zw.Close()
	tests := []struct {
		name     string
		encoding string
		body     []byte
		whole    bool
		want     string
	}{
		{"gzip bomb in one event", "gzip", bomb.Bytes(), false, "stream event larger than 16 MiB"},
		{"br stream", "br", []byte("\x1b\x0f\x00\xf8\xa5\x02\x42\x01"), false, `Content-Encoding "br"`},
		{"zstd whole answer", "zstd", []byte("\x28\xb5\x2f\xfd\x04\x58\x61\x00"), true, `Content-Encoding "zstd"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				if tc.whole {
					w.Header().Set("Content-Type", "application/json")
				}
				w.Header().Set("Content-Encoding", tc.encoding)
				w.Write(tc.body)
			}))
			t.Cleanup(srv.Close)
			req := userRequest("hi")
			req.Whole = tc.whole
			_, err := collect(t.Context(), New(nodeAt(srv.URL), nil), req)
			var ue *node.UpstreamError
			if !errors.As(err, &ue) || ue.Kind != node.KindProtocol || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Chat() error = %v, want an upstream protocol error that says %q", err, tc.want)
			}
		})
	}
}

// TestHTMLPageInTheNodesPlace: a proxy in front of the node, or a captive
// portal, answers with its own page and status 200 (an HTTP proxy from
// the environment did so for `ollama list`: ollama/ollama#12480). Every
// call says so, where a stream read as one without events ("stream ended
// before a finish_reason"), a whole answer as bad JSON, and a model list
// as an empty one, the model taken as there.
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
		{"Chat, streamed", func() error { _, err := collect(t.Context(), b, userRequest("hi")); return err }},
		{"Chat, whole", func() error {
			req := userRequest("hi")
			req.Whole = true
			_, err := collect(t.Context(), b, req)
			return err
		}},
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
