package node

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"chainproxy/config"
)

// TestNodeClientHeaderCap: a node answering 2 MiB of headers (net/http
// reads up to 10 MiB by default) fails the call instead of making it hold
// them.
func TestNodeClientHeaderCap(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for i := range 32 {
			w.Header().Set("X-Pad-"+strings.Repeat("p", i+1), strings.Repeat("x", 64<<10))
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	resp, err := NewHTTPClient(config.Node{Name: "A"}).Get(srv.URL)
	if err == nil {
		resp.Body.Close()
		t.Fatal("2 MiB of headers were read")
	}
	if !strings.Contains(err.Error(), "headers exceeded") {
		t.Errorf("err = %v, want net/http's headers exceeded", err)
	}
}
