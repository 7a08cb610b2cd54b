package tools

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"chainproxy/config"
)

// TestHTTPToolHeaderCap: an endpoint answering 2 MiB of headers (net/http
// reads up to 10 MiB by default) fails the call instead of making it hold
// them.
func TestHTTPToolHeaderCap(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for i := range 32 {
			w.Header().Set("X-Pad-"+strings.Repeat("p", i+1), strings.Repeat("x", 64<<10))
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	reg := newHTTPRegistry(t, config.HTTPTool{Name: "lookup", URL: srv.URL, Timeout: 5 * time.Second})
	got, err := reg.Call(t.Context(), "lookup", []byte(`{}`))
	if err == nil || !strings.Contains(err.Error(), "headers exceeded") {
		t.Errorf("Call = %q, %v; want net/http's headers exceeded", got, err)
	}
}
