package node_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"chainproxy/chain/node"
	"chainproxy/chain/node/ollama"
	"chainproxy/chain/node/openai"
	"chainproxy/config"
	"chainproxy/internal/hostiletest"
)

// proberBackend is a node backend that can also probe its server.
type proberBackend interface {
	node.Backend
	node.Prober
}

// nodeBackends builds a node's backend for each provider; path is what the
// provider's base_url ends with.
var nodeBackends = []struct {
	provider string
	path     string
	prober   func(config.Node) proberBackend
}{
	{config.ProviderOllama, "", func(n config.Node) proberBackend {
		return ollama.New(n, nil)
	}},
	{config.ProviderOpenAI, "/v1", func(n config.Node) proberBackend {
		return openai.New(n, nil)
	}},
}

// TestNodeRedirects: a node whose base_url redirects is not followed, to
// another host, another port or even its own origin: the target receives
// nothing (no prompt, no key), and the call fails with an upstream status
// error naming the status and the target's host, not its body. The same
// for every provider.
func TestNodeRedirects(t *testing.T) {
	otherHost := hostiletest.NewTarget(t, "127.0.0.2")
	otherPort := hostiletest.NewTarget(t, "127.0.0.1")
	for _, be := range nodeBackends {
		for _, tt := range []struct {
			name   string
			status int
			target *hostiletest.Target
		}{
			{"307 to another host", http.StatusTemporaryRedirect, otherHost},
			{"302 to another host", http.StatusFound, otherHost},
			{"307 to another port", http.StatusTemporaryRedirect, otherPort},
		} {
			t.Run(be.provider+"/"+tt.name, func(t *testing.T) {
				before := len(tt.target.Hits())
				red := hostiletest.Redirector(t, tt.status, tt.target.URL)
				n := config.Node{Name: "N", Provider: be.provider, BaseURL: red.URL, Model: "m", APIKey: "node-key-1234", Timeout: 5 * time.Second, ConnectTimeout: time.Second}
				err := be.prober(n).Chat(t.Context(), &node.Request{Model: "m", Messages: []node.Message{{Role: "user", Content: "secret prompt"}}}, func(node.Chunk) error { return nil })
				var ue *node.UpstreamError
				if !errors.As(err, &ue) || ue.Kind != node.KindStatus || ue.Status != tt.status {
					t.Fatalf("Chat error = %v; want an upstream status error with HTTP %d", err, tt.status)
				}
				host := strings.TrimPrefix(tt.target.URL, "http://")
				if msg := err.Error(); !strings.Contains(msg, host) || !strings.Contains(msg, strconv.Itoa(tt.status)) || strings.Contains(msg, hostiletest.Body) {
					t.Errorf("Chat error %q: want the status and %s named, no body", msg, host)
				}
				if n := len(tt.target.Hits()) - before; n != 0 {
					t.Errorf("the redirect target received %d requests, want 0", n)
				}
			})
		}
	}
}

// TestProbeHugeAnswer: a node answering its probe with 100 MiB costs the
// proxy at most MaxBodyBytes: the probe fails saying the answer was
// too large. The same for every provider.
func TestProbeHugeAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"data":"`)
		chunk := strings.Repeat("x", 64<<10)
		for range 1600 {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
		io.WriteString(w, `"}`)
	}))
	defer srv.Close()
	for _, be := range nodeBackends {
		t.Run(be.provider, func(t *testing.T) {
			// The node's default timeout: reading 32 MiB under -race takes
			// seconds on a loaded machine, and the cap, not a timeout, must
			// end the probe.
			b := be.prober(config.Node{Name: "N", Provider: be.provider, BaseURL: srv.URL + be.path, Model: "m", Timeout: 2 * time.Minute, ConnectTimeout: time.Second})
			if err := b.Probe(t.Context()); err == nil || !strings.Contains(err.Error(), "larger than") {
				t.Errorf("Probe error = %.300v; want the answer said too large", err)
			}
		})
	}
}
