package web

import (
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"chainproxy/config"
	"chainproxy/internal/fakeollama"
	"chainproxy/internal/fakeopenai"
)

// TestUpstreamFaults: every way an upstream can fail is mapped to an OpenAI
// error (or, once streaming, an error chunk), the server serves the next
// request, and no goroutine is left behind.
func TestUpstreamFaults(t *testing.T) {
	closedURL := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		return "http://" + ln.Addr().String()
	}
	tests := []struct {
		name       string
		node       func(t *testing.T) config.Node
		timeout    bool // node timeout shortened: the fake hangs
		status     int  // non-stream status
		streamWant string
	}{
		{"ollama refuses connections", func(t *testing.T) config.Node { return ollamaNode("A", closedURL(t)) }, false, 502, `"code":"upstream_error"`},
		{"openai refuses connections", func(t *testing.T) config.Node { return openaiNode("A", closedURL(t)+"/v1") }, false, 502, `"code":"upstream_error"`},
		{"ollama answers 500", func(t *testing.T) config.Node {
			return ollamaNode("A", fakeollama.New(t, fakeollama.Reply{Status: 500, Error: "model crashed"}).URL)
		}, false, 502, "model crashed"},
		{"openai answers 500", func(t *testing.T) config.Node {
			return openaiNode("A", fakeopenai.New(t, fakeopenai.Reply{Status: 500, Error: "overloaded", ErrorType: "server_error"}).BaseURL())
		}, false, 502, "overloaded"},
		{"ollama hangs", func(t *testing.T) config.Node {
			return ollamaNode("A", fakeollama.New(t, fakeollama.Reply{Hang: true}).URL)
		}, true, 504, "upstream_timeout"},
		{"openai hangs", func(t *testing.T) config.Node {
			return openaiNode("A", fakeopenai.New(t, fakeopenai.Reply{Hang: true}).BaseURL())
		}, true, 504, "upstream_timeout"},
		{"ollama cuts the stream", func(t *testing.T) config.Node {
			return ollamaNode("A", fakeollama.New(t, fakeollama.Reply{Content: []string{"half "}, Cut: true}).URL)
		}, false, 502, `"error"`},
		{"openai cuts the stream", func(t *testing.T) config.Node {
			return openaiNode("A", fakeopenai.New(t, fakeopenai.Reply{Content: []string{"half "}, Cut: true}).BaseURL())
		}, false, 502, `"error"`},
		{"ollama error mid-stream", func(t *testing.T) config.Node {
			return ollamaNode("A", fakeollama.New(t, fakeollama.Reply{Content: []string{"half "}, Error: "runner died"}).URL)
		}, false, 502, "runner died"},
		{"openai error mid-stream", func(t *testing.T) config.Node {
			return openaiNode("A", fakeopenai.New(t, fakeopenai.Reply{Content: []string{"half "}, StreamError: "shard lost"}).BaseURL())
		}, false, 502, "shard lost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t,
				goleak.IgnoreCurrent(),
				goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
				goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
				goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
			)
			node := tt.node(t)
			if tt.timeout {
				node.Timeout = 300 * time.Millisecond
			}
			_, srv := wireProxy(t, []config.Node{node}, oneStage)
			ts := &testServer{Server: srv}
			resp := ts.post(t, "/v1/chat/completions", `{"model":"A","messages":[{"role":"user","content":"hi"}]}`)
			body := readAll(t, resp.Body)
			if resp.StatusCode != tt.status || !strings.Contains(string(body), `"error"`) {
				t.Errorf("non-stream: %d %s, want %d", resp.StatusCode, body, tt.status)
			}
			resp = ts.post(t, "/v1/chat/completions", `{"model":"A","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
			body = readAll(t, resp.Body)
			if !strings.Contains(string(body), tt.streamWant) {
				t.Errorf("stream: %d %s, want %q", resp.StatusCode, body, tt.streamWant)
			}
			if resp.StatusCode == 200 && !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
				t.Errorf("a stream that failed after its 200 must still end with [DONE]: %s", body)
			}
			// Still serving.
			if resp, err := srv.Client().Get(srv.URL + "/healthz"); err != nil || resp.StatusCode != 200 {
				t.Errorf("healthz after the fault: %v", err)
			} else {
				resp.Body.Close()
			}
			srv.Close()
		})
	}
}
