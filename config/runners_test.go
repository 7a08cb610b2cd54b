package config

import (
	"strings"
	"testing"
)

// Ollama keeps one runner per model (v0.17.4 server/sched.go,
// schedulerModelKey) and reloads it when a request's runner options differ
// from the loaded ones (runnerRef.needsReload compares api.Runner, num_ctx
// among them), so two nodes on one model and host that ask different
// windows reload it at every alternation; and a keep_alive of 0 becomes the
// runner's (useLoadedRunner) and unloads it once the call ends, for the
// other node too.
func TestSharedRunnerWarnings(t *testing.T) {
	node := func(name, model, url string, window int, keepAlive string) Node {
		return Node{Name: name, Provider: ProviderOllama, Model: model, BaseURL: url, ContextWindow: window, KeepAlive: keepAlive}
	}
	tests := []struct {
		name  string
		nodes []Node
		want  []string // substrings of the one warning; nil for none
	}{
		{"same window", []Node{
			node("OL1", "qwen3:4b", "http://127.0.0.1:11434", 8192, ""),
			node("SUM", "qwen3:4b", "http://127.0.0.1:11434/", 8192, "")}, nil},
		{"different windows", []Node{
			node("OL1", "qwen3:4b", "http://127.0.0.1:11434", 8192, ""),
			node("SUM", "qwen3:4b", "http://127.0.0.1:11434/", 4096, "")},
			[]string{"nodes OL1 and SUM", `model "qwen3:4b" on http://127.0.0.1:11434`, "context_window 8192 and 4096"}},
		{"one unset", []Node{
			node("OL1", "qwen3:4b", "http://127.0.0.1:11434", 0, ""),
			node("SUM", "qwen3:4b", "http://127.0.0.1:11434", 4096, "")},
			[]string{"nodes OL1 and SUM", "context_window unset and 4096"}},
		{"implied latest tag", []Node{
			node("A", "llama3", "http://h:11434", 8192, ""),
			node("B", "llama3:latest", "http://h:11434", 0, "")},
			[]string{"nodes A and B"}},
		{"registry host with a port", []Node{
			node("A", "localhost:5000/llama3", "http://h:11434", 8192, ""),
			node("B", "localhost:5000/llama3:latest", "http://h:11434", 0, "")},
			[]string{"nodes A and B"}},
		{"other host", []Node{
			node("A", "qwen3:4b", "http://a:11434", 8192, ""),
			node("B", "qwen3:4b", "http://b:11434", 0, "")}, nil},
		{"other model", []Node{
			node("A", "qwen3:4b", "http://a:11434", 8192, ""),
			node("B", "qwen3:8b", "http://a:11434", 0, "")}, nil},
		{"openai provider", []Node{
			node("A", "qwen3:4b", "http://a:11434", 8192, ""),
			{Name: "B", Provider: ProviderOpenAI, Model: "qwen3:4b", BaseURL: "http://a:11434"}}, nil},
		{"one host of base_urls shared", []Node{
			node("A", "qwen3:4b", "http://a:11434", 8192, ""),
			{Name: "B", Provider: ProviderOllama, Model: "qwen3:4b", BaseURLs: []string{"http://b:11434", "http://a:11434"}}},
			[]string{"nodes A and B"}},
		{"password masked", []Node{
			node("A", "qwen3:4b", "http://u:secret@a:11434", 8192, ""),
			node("B", "qwen3:4b", "http://u:secret@a:11434", 0, "")},
			[]string{"http://u:***@a:11434"}},
		{"keep_alive 0", []Node{
			node("OL1", "qwen3:4b", "http://h:11434", 0, "-1"),
			node("SUM", "qwen3:4b", "http://h:11434", 0, "0")},
			[]string{"node SUM's keep_alive 0 unloads", "node OL1 loads it again"}},
		{"keep_alive 0 alone", []Node{
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
