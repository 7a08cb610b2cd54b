package origin

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

func TestSame(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"http://h/a", "http://h/b?x=1", true},
		{"http://h/", "http://h:80/", true},
		{"https://H:443/", "https://h/", true},
		{"http://h/", "https://h/", false},
		{"http://h:8080/", "http://h:8081/", false},
		{"http://127.0.0.1/", "http://127.0.0.2/", false},
		{"http://[::1]:80/", "http://[::1]/", true},
	}
	for _, tt := range tests {
		a, _ := url.Parse(tt.a)
		b, _ := url.Parse(tt.b)
		if got := Same(a, b); got != tt.want {
			t.Errorf("Same(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestHeadersOnlyToOrigin: the configured headers go with requests to the
// configured origin, and with no other, whoever asked for the URL.
func TestHeadersOnlyToOrigin(t *testing.T) {
	got := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got[r.URL.Path] = r.Header.Get("X-Api-Key")
	}))
	defer srv.Close()
	configured, _ := url.Parse(srv.URL + "/mcp")
	elsewhere, _ := url.Parse(srv.URL)
	elsewhere.Host = "localhost:" + elsewhere.Port() // same server, another origin by name
	c := &http.Client{Transport: &Headers{Origin: configured, Values: map[string]string{"X-Api-Key": "k"}}}
	for _, u := range []string{srv.URL + "/mcp", srv.URL + "/other", elsewhere.String() + "/away"} {
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	want := map[string]string{"/mcp": "k", "/other": "k", "/away": ""}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("X-Api-Key sent to %s = %q, want %q", p, got[p], w)
		}
	}
}
