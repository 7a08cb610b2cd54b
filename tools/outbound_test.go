package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"chainproxy/config"
	"chainproxy/internal/hostiletest"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHTTPToolRedirects: an HTTP tool never follows a redirect to another
// origin (another host, or another port of the same host), whatever the
// status; the target receives nothing, and the error names the status and
// the target's host, never a body. Same-origin redirects are followed only
// with follow_redirects: same_origin.
func TestHTTPToolRedirects(t *testing.T) {
	otherHost := hostiletest.NewTarget(t, "127.0.0.2")
	otherPort := hostiletest.NewTarget(t, "127.0.0.1")
	tests := []struct {
		name   string
		status int
		target *hostiletest.Target
		follow string
	}{
		{"307 to another host", http.StatusTemporaryRedirect, otherHost, ""},
		{"302 to another host", http.StatusFound, otherHost, ""},
		{"307 to another host, same_origin", http.StatusTemporaryRedirect, otherHost, config.FollowSameOrigin},
		{"308 to another port", http.StatusPermanentRedirect, otherPort, config.FollowSameOrigin},
		{"302 to another port", http.StatusFound, otherPort, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(tt.target.Hits())
			red := hostiletest.Redirector(t, tt.status, tt.target.URL)
			r := newHTTPRegistry(t, config.HTTPTool{
				Name: "fetch", URL: red.URL + "/tool", Timeout: 5 * time.Second, FollowRedirects: tt.follow,
				Headers: map[string]string{"Authorization": "Bearer tool-token-1234", "X-Api-Key": "tool-key-5678"},
			})
			got, err := r.Call(t.Context(), "fetch", []byte(`{"q":"model-chosen"}`))
			if err == nil {
				t.Fatalf("Call = %q, nil; want a redirect error", got)
			}
			host := strings.TrimPrefix(tt.target.URL, "http://")
			msg := err.Error()
			for _, want := range []string{"redirect", strconv.Itoa(tt.status), host} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not name %q", msg, want)
				}
			}
			if strings.Contains(msg, hostiletest.Body) || strings.Contains(got, hostiletest.Body) {
				t.Errorf("the target's body reached the result: %q, %q", got, msg)
			}
			if n := len(tt.target.Hits()) - before; n != 0 {
				t.Errorf("the redirect target received %d requests, want 0", n)
			}
		})
	}
}

// TestHTTPToolSameOriginRedirect: with follow_redirects: same_origin a
// redirect on the tool's own origin is followed, headers included; without
// it, it is an error.
func TestHTTPToolSameOriginRedirect(t *testing.T) {
	var gotKey string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/new", http.StatusTemporaryRedirect)
			return
		}
		gotKey = r.Header.Get("X-Api-Key")
		w.Write([]byte("moved here"))
	}))
	defer srv.Close()
	for _, follow := range []string{"", config.FollowSameOrigin} {
		t.Run("follow="+follow, func(t *testing.T) {
			gotKey = ""
			r := newHTTPRegistry(t, config.HTTPTool{Name: "fetch", URL: srv.URL + "/old", Timeout: 5 * time.Second, FollowRedirects: follow,
				Headers: map[string]string{"X-Api-Key": "k-1234"}})
			got, err := r.Call(t.Context(), "fetch", []byte(`{}`))
			if follow == "" {
				if err == nil || !strings.Contains(err.Error(), "307") {
					t.Errorf("Call = %q, %v; want a 307 redirect error", got, err)
				}
				return
			}
			if err != nil || got != "moved here" || gotKey != "k-1234" {
				t.Errorf("Call = %q, %v (key %q); want %q, nil (key k-1234)", got, err, gotKey, "moved here")
			}
		})
	}
}

// TestMCPRedirects: an MCP url server that redirects elsewhere is not
// followed, even with follow_redirects: same_origin: the target receives
// nothing (none of the configured headers, no tool list request), its
// tools are not offered, and the server's status names the redirect.
func TestMCPRedirects(t *testing.T) {
	otherHost := hostiletest.NewTarget(t, "127.0.0.2")
	otherPort := hostiletest.NewTarget(t, "127.0.0.1")
	tests := []struct {
		name   string
		status int
		target *hostiletest.Target
		follow string
	}{
		{"307 to another host", http.StatusTemporaryRedirect, otherHost, ""},
		{"302 to another host, same_origin", http.StatusFound, otherHost, config.FollowSameOrigin},
		{"307 to another port, same_origin", http.StatusTemporaryRedirect, otherPort, config.FollowSameOrigin},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(tt.target.Hits())
			red := hostiletest.Redirector(t, tt.status, tt.target.URL)
			r := newMCPRegistry(t, 5*time.Second, config.MCPServer{Name: "web", URL: red.URL + "/mcp", FollowRedirects: tt.follow,
				Headers: map[string]string{"Authorization": "Bearer mcp-token-1234", "X-Api-Key": "mcp-key-5678"}})
			st := r.MCPStatus()
			host := strings.TrimPrefix(tt.target.URL, "http://")
			if len(st) != 1 || !strings.Contains(st[0].Status, "redirect") || !strings.Contains(st[0].Status, host) {
				t.Errorf("MCPStatus() = %+v; want the redirect to %s named", st, host)
			}
			for _, name := range r.Names() {
				if strings.HasPrefix(name, "web__") {
					t.Errorf("tool %s offered from a redirect target", name)
				}
			}
			if n := len(tt.target.Hits()) - before; n != 0 {
				t.Errorf("the redirect target received %d requests, want 0", n)
			}
		})
	}
}

// bigMCPServer serves newTestServer over streamable HTTP, except that a
// call of the tool "echo" with the text "big" is answered with a JSON
// result of 100 MiB, generated as it is sent (in JSON, or as one SSE event
// when sse is set).
func bigMCPServer(t *testing.T, sse bool) *httptest.Server {
	srv := newTestServer(nil)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			ID     json.RawMessage
			Method string
			Params struct {
				Name      string
				Arguments struct{ Text string }
			}
		}
		json.Unmarshal(body, &msg)
		if msg.Method != "tools/call" || msg.Params.Arguments.Text != "big" {
			r.Body = io.NopCloser(bytes.NewReader(body))
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Mcp-Session-Id", r.Header.Get("Mcp-Session-Id"))
		prefix := ""
		if sse {
			w.Header().Set("Content-Type", "text/event-stream")
			prefix = "event: message\ndata: "
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		fmt.Fprintf(w, `%s{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, prefix, msg.ID)
		chunk := strings.Repeat("x", 64<<10)
		for range 1600 { // 100 MiB
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
		io.WriteString(w, `"}]}}`)
		if sse {
			io.WriteString(w, "\n\n")
		}
	}))
	t.Cleanup(ts.Close)
	return ts
}

// TestMCPHugeResultBounded: an MCP url server answering a call with 100 MiB
// costs the proxy its body cap (4 MiB by default), not the answer: the call
// fails with a clear error, in JSON and in SSE alike, and the heap stays
// bounded.
func TestMCPHugeResultBounded(t *testing.T) {
	for _, sse := range []bool{false, true} {
		t.Run(fmt.Sprintf("sse=%v", sse), func(t *testing.T) {
			ts := bigMCPServer(t, sse)
			r := newMCPRegistry(t, 30*time.Second, config.MCPServer{Name: "big", URL: ts.URL})
			if got, err := r.Call(t.Context(), "big__echo", []byte(`{"text":"hi"}`)); err != nil || got != "echo: hi" {
				t.Fatalf("Call(echo hi) = %q, %v", got, err)
			}
			runtime.GC()
			var before, m runtime.MemStats
			runtime.ReadMemStats(&before)
			peak := before.HeapInuse
			done := make(chan struct{})
			sampled := make(chan struct{})
			go func() { // exits when done is closed
				defer close(sampled)
				for {
					select {
					case <-done:
						return
					case <-time.After(2 * time.Millisecond):
						runtime.ReadMemStats(&m)
						peak = max(peak, m.HeapInuse)
					}
				}
			}()
			got, err := r.Call(t.Context(), "big__echo", []byte(`{"text":"big"}`))
			close(done)
			<-sampled
			grew := int64(peak) - int64(before.HeapInuse)
			t.Logf("100 MiB MCP answer: heap peak +%d MiB, error %v", grew>>20, err)
			if err == nil {
				t.Errorf("Call(big) = %d bytes, nil; want an error", len(got))
			} else if !strings.Contains(err.Error(), "too large") && !strings.Contains(err.Error(), "exceeded") {
				t.Errorf("Call(big) error %q does not say the answer was too large", err)
			}
			if grew > 64<<20 {
				t.Errorf("heap grew by %d MiB, want at most 64 MiB", grew>>20)
			}
		})
	}
}
