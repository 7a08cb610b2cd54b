package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

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
