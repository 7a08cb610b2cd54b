package spans

import (
	"errors"
	"testing"

	"chainproxy/chain/node"
)

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

// TestUpstreamError: a span says of an upstream error its node, kind and
// status, and a transport's error, never what the node said.
func TestUpstreamError(t *testing.T) {
	tests := []struct {
		name string
		err  node.UpstreamError
		want string
	}{
		{"status, message left out", node.UpstreamError{Node: "M1", Kind: node.KindStatus, Status: 400, Message: "prompt: the user's words"}, "node M1: upstream status error (HTTP 400)"},
		{"refused connection", node.UpstreamError{Node: "OL1", Kind: node.KindConnect, Err: errors.New("connection refused")}, "node OL1: upstream connect error: connection refused"},
		{"protocol, its error left out", node.UpstreamError{Node: "M2", Kind: node.KindProtocol, Err: errors.New("bad chunk: the user's words")}, "node M2: upstream protocol error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := UpstreamError(&tt.err); got != tt.want {
				t.Errorf("UpstreamError(%+v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}
