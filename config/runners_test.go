package config

import (
	"maps"
	"strings"
	"testing"
)

// ollamaNode is an Ollama node on url with its window and keep_alive.
func ollamaNode(name, model, url string, window int, keepAlive string) Node {
	return Node{Name: name, Provider: ProviderOllama, Model: model, BaseURL: url, ContextWindow: window, KeepAlive: keepAlive}
}

// Nodes that share an Ollama runner (one model on one host) send one
// num_ctx, the largest of their windows: Ollama reloads the runner when it
// changes (v0.17.4 server/sched.go, needsReload), and a node left unset
// would run it at Ollama's default.
func TestRunnerWindows(t *testing.T) {
	node := ollamaNode
	tests := []struct {
		name  string
		nodes []Node
		want  map[string]int
	}{
		{"same window", []Node{
			node("OL1", "qwen3:4b", "http://127.0.0.1:11434", 8192, ""),
			node("SUM", "qwen3:4b", "http://127.0.0.1:11434/", 8192, "")}, map[string]int{"OL1": 8192, "SUM": 8192}},
		{"different windows", []Node{
			node("OL1", "qwen3:4b", "http://127.0.0.1:11434", 8192, ""),
			node("SUM", "qwen3:4b", "http://127.0.0.1:11434/", 4096, "")}, map[string]int{"OL1": 8192, "SUM": 8192}},
		{"one unset", []Node{
			node("OL1", "qwen3:4b", "http://127.0.0.1:11434", 0, ""),
			node("SUM", "qwen3:4b", "http://127.0.0.1:11434", 4096, "")}, map[string]int{"OL1": 4096, "SUM": 4096}},
		{"none set", []Node{
			node("OL1", "qwen3:4b", "http://h:11434", 0, ""),
			node("SUM", "qwen3:4b", "http://h:11434", 0, "")}, map[string]int{"OL1": 0, "SUM": 0}},
		{"implied latest tag", []Node{
			node("A", "llama3", "http://h:11434", 8192, ""),
			node("B", "llama3:latest", "http://h:11434", 0, "")}, map[string]int{"A": 8192, "B": 8192}},
		{"registry host with a port", []Node{
			node("A", "localhost:5000/llama3", "http://h:11434", 8192, ""),
			node("B", "localhost:5000/llama3:latest", "http://h:11434", 0, "")}, map[string]int{"A": 8192, "B": 8192}},
		{"other host", []Node{
			node("A", "qwen3:4b", "http://a:11434", 8192, ""),
			node("B", "qwen3:4b", "http://b:11434", 0, "")}, map[string]int{"A": 8192, "B": 0}},
		{"other model", []Node{
			node("A", "qwen3:4b", "http://a:11434", 8192, ""),
			node("B", "qwen3:8b", "http://a:11434", 0, "")}, map[string]int{"A": 8192, "B": 0}},
		{"openai provider", []Node{
			node("A", "qwen3:4b", "http://a:11434", 4096, ""),
			{Name: "B", Provider: ProviderOpenAI, Model: "qwen3:4b", BaseURL: "http://a:11434", ContextWindow: 8192}}, map[string]int{"A": 4096}},
		{"one host of base_urls shared", []Node{
			node("A", "qwen3:4b", "http://a:11434", 8192, ""),
			{Name: "B", Provider: ProviderOllama, Model: "qwen3:4b", BaseURLs: []string{"http://b:11434", "http://a:11434"}, ContextWindow: 4096}},
			map[string]int{"A": 8192, "B": 8192}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (&Config{Nodes: tt.nodes}).RunnerWindows(); !maps.Equal(got, tt.want) {
				t.Errorf("RunnerWindows() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSharedRunnerWarnings(t *testing.T) {
	node := ollamaNode
	tests := []struct {
		name  string
		nodes []Node
		want  []string // substrings of the one warning; nil for none
	}{
		{"different windows", []Node{
			node("OL1", "qwen3:4b", "http://h:11434", 8192, ""),
			node("SUM", "qwen3:4b", "http://h:11434", 4096, "")}, nil},
		{"keep_alive 0", []Node{
			node("OL1", "qwen3:4b", "http://h:11434", 0, "-1"),
			node("SUM", "qwen3:4b", "http://h:11434", 0, "0")},
			[]string{"node SUM's keep_alive 0 unloads", `model "qwen3:4b" on http://h:11434`, "node OL1 loads it again"}},
		{"keep_alive 0, password masked", []Node{
			node("OL1", "qwen3:4b", "http://u:secret@a:11434", 0, ""),
			node("SUM", "qwen3:4b", "http://u:secret@a:11434", 0, "0")},
			[]string{"http://u:***@a:11434"}},
		{"keep_alive 0 alone", []Node{
			node("SUM", "qwen3:4b", "http://h:11434", 0, "0")}, nil},
		{"keep_alive 0, other model", []Node{
			node("OL1", "qwen3:8b", "http://h:11434", 0, ""),
			node("SUM", "qwen3:4b", "http://h:11434", 0, "0")}, nil},
		{"keep_alive 0 beside keep_loaded, which wins", []Node{
			{Name: "OL1", Provider: ProviderOllama, Model: "qwen3:4b", BaseURL: "http://h:11434", KeepLoaded: true},
			node("SUM", "qwen3:4b", "http://h:11434", 0, "0")}, nil},
		{"keep_alive differs, none 0", []Node{
			node("OL1", "qwen3:4b", "http://h:11434", 0, "30m"),
			node("SUM", "qwen3:4b", "http://h:11434", 0, "5m")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := (&Config{Nodes: tt.nodes}).SharedRunnerWarnings()
			if tt.want == nil {
				if len(got) != 0 {
					t.Fatalf("warnings = %q, want none", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("warnings = %q, want one", got)
			}
			for _, w := range tt.want {
				if !strings.Contains(got[0], w) {
					t.Errorf("warning %q lacks %q", got[0], w)
				}
			}
			if strings.Contains(got[0], "secret") {
				t.Errorf("warning %q shows a password", got[0])
			}
		})
	}
}
