package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
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
