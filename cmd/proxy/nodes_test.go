package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"chainproxy/internal/fakeollama"
	"chainproxy/internal/fakeopenai"
)

// TestOpenAINodeOnOllamaReady: an OpenAI-compatible node on Ollama's /v1
// names its model without a tag, as Ollama's own CLI takes it; Ollama's
// /v1/models lists it as "tiny:latest". The node has its model: /readyz
// says ready.
func TestOpenAINodeOnOllamaReady(t *testing.T) {
	tests := []struct {
		name, model string
		listed      []string
		want        string
	}{
		{"untagged is latest", "tiny", []string{"other:7b", "tiny:latest"}, "ready"},
		{"tagged as listed", "tiny:latest", []string{"tiny:latest"}, "ready"},
		{"another tag is another model", "tiny", []string{"tiny:7b"}, "unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakeopenai.New(t)
			srv.SetModels(tt.listed...)
			base := startWired(t, fmt.Sprintf(`
nodes:
  - {name: M2, provider: openai, base_url: %q, model: %q}
chain:
  stages: [{node: M2, max_turns: 1}]
  simple_node: M2
tools:
  root: ""
`, srv.BaseURL(), tt.model))
			resp, err := http.Get(base + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			var ready struct {
				Nodes []struct{ Name, Status, Error string }
			}
			err = json.NewDecoder(resp.Body).Decode(&ready)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if len(ready.Nodes) != 1 || ready.Nodes[0].Status != tt.want {
				t.Errorf("readyz nodes = %+v, want M2 %s", ready.Nodes, tt.want)
			}
		})
	}
}

// TestNodeTimeoutsThroughWiring: a call's first byte, its silences and its
// whole length are bounded apart (nodes[].first_byte_timeout, idle_timeout,
// timeout), and the trace's call says which bound ended it. Each fake
// hangs for good, so the short bounds hold on a loaded machine.
func TestNodeTimeoutsThroughWiring(t *testing.T) {
	tests := []struct {
		name, keys string
		reply      fakeollama.Reply
		want       string
	}{
		{"no first byte", "first_byte_timeout: 200ms", fakeollama.Reply{Hang: true}, "no first byte within 200ms (nodes[].first_byte_timeout)"},
		{"silence", "idle_timeout: 200ms", fakeollama.Reply{Content: []string{"Hello, "}, Hang: true}, "silent for 200ms (nodes[].idle_timeout)"},
		{"whole length, set", "timeout: 300ms, idle_timeout: 1m", fakeollama.Reply{Content: []string{"Hello, "}, Hang: true}, "call longer than 300ms (nodes[].timeout)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakeollama.New(t, tt.reply)
			base := startWired(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, base_url: %q, model: m, %s}
chain:
  stages: [{node: OL1, max_turns: 1}]
tools:
  root: ""
`, srv.URL, tt.keys))
			resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"OL1","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(body), tt.want) {
				t.Errorf("stream lacks %q:\n%s", tt.want, body)
			}
			resp, err = http.Get(base + "/v1/chain/traces/" + resp.Header.Get("X-Chain-Trace-Id"))
			if err != nil {
				t.Fatal(err)
			}
			var trace struct {
				Chain struct {
					Stages []struct {
						Status string
						Calls  []struct{ Error string }
					}
				}
			}
			err = json.NewDecoder(resp.Body).Decode(&trace)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if st := trace.Chain.Stages; len(st) != 1 || len(st[0].Calls) != 1 || !strings.Contains(st[0].Calls[0].Error, tt.want) {
				t.Errorf("trace stages = %+v, want one call ended by %q", st, tt.want)
			}
		})
	}
}

// deadAddr returns a loopback address where nothing listens: connections
// to it are refused until the test listens there.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// serveAt serves h at addr until the test ends.
func serveAt(t *testing.T, addr string, h http.Handler) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln) // exits when Close closes the listener
	t.Cleanup(func() { srv.Close() })
}

// TestNodeBackAtOnceThroughWiring: a model server that starts after the
// proxy (docker compose starts both at once) serves the next request, not
// offline_for later. A request that finds every host of its node offline
// probes them, one probe at a time, rather than fail.
func TestNodeBackAtOnceThroughWiring(t *testing.T) {
	tests := []struct {
		name, node, model string
		hosts             int
	}{
		{"two hosts, simple", "base_urls: [%q, %q]", "OL1", 2},
		{"one host, reflexive stage", "base_url: %q", "chain/reflexive", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addrs := []any{}
			for range tt.hosts {
				addrs = append(addrs, "http://"+deadAddr(t))
			}
			base := startWired(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, `+tt.node+`, model: m}
chain:
  stages: [{node: OL1, max_turns: 1}]
tools:
  root: ""
`, addrs...))
			chat := func() (int, string) {
				resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"`+tt.model+`","messages":[{"role":"user","content":"hi"}]}`))
				if err != nil {
					t.Error(err)
					return 0, ""
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			if code, body := chat(); code != http.StatusBadGateway {
				t.Fatalf("chat with the server down: %d %s, want 502", code, body)
			}

			live := fakeollama.New(t, fakeollama.Reply{Content: []string{"back"}})
			target, _ := url.Parse(live.URL)
			var probes, inFlight, most atomic.Int64
			fwd := httputil.NewSingleHostReverseProxy(target)
			serveAt(t, strings.TrimPrefix(addrs[0].(string), "http://"), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/api/version" {
					probes.Add(1)
					n := inFlight.Add(1)
					defer inFlight.Add(-1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
				}
				fwd.ServeHTTP(w, r)
			}))

			const burst = 8
			var wg sync.WaitGroup
			codes := make([]int, burst)
			for i := range burst {
				wg.Go(func() { codes[i], _ = chat() })
			}
			wg.Wait()
			for i, c := range codes {
				if c != http.StatusOK {
					t.Errorf("request %d after the server started: %d, want 200", i, c)
				}
			}
			if p, m := probes.Load(), most.Load(); p != 1 || m != 1 {
				t.Errorf("probes = %d, most at once %d, want 1 and 1", p, m)
			}
			if n := len(live.Requests()); n != burst {
				t.Errorf("server got %d calls, want %d", n, burst)
			}
		})
	}
}
