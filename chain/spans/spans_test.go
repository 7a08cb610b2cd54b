package spans

import "testing"

// TestServerOf: a model call's server.address and server.port are the
// node's base URL's host and port, the scheme's default when it names
// none; a URL without a host (a mock node) gives none.
func TestServerOf(t *testing.T) {
	tests := []struct {
		name, url string
		host      string
		port      int
	}{
		{"port named", "http://127.0.0.1:11434", "127.0.0.1", 11434},
		{"https default", "https://api.example.com/v1", "api.example.com", 443},
		{"http default", "http://ollama.lan/v1", "ollama.lan", 80},
		{"ipv6", "http://[::1]:8000/v1", "::1", 8000},
		{"no host", "", "", 0},
		{"not a url", "://", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host, port := serverOf(tt.url)
			if host != tt.host || port != tt.port {
				t.Errorf("serverOf(%q) = %q, %d, want %q, %d", tt.url, host, port, tt.host, tt.port)
			}
		})
	}
}
