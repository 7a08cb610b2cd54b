package config

import "testing"

func TestTextCallsDefaultOn(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want bool
	}{
		{"unset", "", true},
		{"true", "text_tool_calls: true", true},
		{"false", "text_tool_calls: false", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := "{name: A, provider: ollama, base_url: \"http://127.0.0.1:1\", model: m"
			if tt.yaml != "" {
				node += ", " + tt.yaml
			}
			cfg, err := Parse([]byte("nodes:\n  - " + node + "}\nchain: {simple_node: A, stages: [{node: A, max_turns: 1}]}\n"))
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Nodes[0].TextCalls(); got != tt.want {
				t.Errorf("TextCalls() with %q = %v, want %v", tt.yaml, got, tt.want)
			}
		})
	}
}
