package tools

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"chainproxy/config"
	"chainproxy/internal/hostiletest"
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
