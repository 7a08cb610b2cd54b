package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadReportsEveryProblem: one message per problem, each with the file,
// the line and the key, in the file's terms (no Go type names).
func TestLoadReportsEveryProblem(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{
			name: "unknown keys and a bad duration",
			yaml: "server:\n  adr: x\nchain:\n  max_turns_total: 3\ntools:\n  timeout: 15 seconds\n",
			want: []string{
				`:2: server.adr: unknown key "adr"`,
				`:4: chain.max_turns_total: unknown key "max_turns_total"`,
				`:6: tools.timeout: "15 seconds" is not a duration (write 15s, 2m or 1h30m)`,
			},
		},
		{
			name: "wrong kinds",
			yaml: "chain: 3\nclassify:\n  short_chars: many\nnodes:\n  - {name: A, provider: mock, text_tool_calls: maybe, mock: {turns: []}}\n",
			want: []string{
				`:1: chain: want a mapping of keys, got "3"`,
				`:3: classify.short_chars: want a whole number, got "many"`,
				`:5: nodes[0].text_tool_calls: want true or false, got "maybe"`,
			},
		},
		{
			name: "invalid YAML",
			yaml: "server:\n  addr: [unclosed\n",
			want: []string{":2: invalid YAML: "},
		},
		{
			name: "validation placed on its line",
			yaml: "chain:\n  traces: 0\n  max_total_turns: 0\n",
			want: []string{`:3: chain.max_total_turns: must be positive`, `:2: chain.traces: must be positive`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "proxy.yaml")
			if err := os.WriteFile(path, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			if err == nil {
				t.Fatalf("Load(%q) = nil error, want %q", tt.yaml, tt.want)
			}
			got := err.Error()
			for _, w := range tt.want {
				if !strings.Contains(got, path+w) {
					t.Errorf("Load error =\n%s\nwant a line %s%s", got, path, w)
				}
			}
			if strings.Contains(got, "Go struct") || strings.Contains(got, "config.") {
				t.Errorf("Load error speaks Go: %s", got)
			}
		})
	}
}

// TestURLErrorsHideSecrets: a URL that does not validate is quoted in its
// error with its password and query values masked, as telemetry's already
// was: the error goes to stderr, and so to the service's journal. A
// mistyped or missing scheme is the likely mistake, with the credentials
// left in.
func TestURLErrorsHideSecrets(t *testing.T) {
	const secret = "S3cretPW-42"
	const nodes = "nodes:\n  - {name: OL1, provider: openai, base_url: \"http://127.0.0.1:1/v1\", model: m}\nchain: {stages: [{node: OL1, max_turns: 1}], simple_node: OL1}\n"
	tests := []struct {
		name, yaml, key string
	}{
		{"scheme typo", "nodes:\n  - {name: OL1, provider: ollama, base_url: \"htp://user:" + secret + "@127.0.0.1:11434\", model: m}\nchain: {stages: [{node: OL1, max_turns: 1}], simple_node: OL1}\n", "nodes[0].base_url"},
		{"no scheme", "nodes:\n  - {name: OL1, provider: ollama, base_url: \"user:" + secret + "@127.0.0.1:11434\", model: m}\nchain: {stages: [{node: OL1, max_turns: 1}], simple_node: OL1}\n", "nodes[0].base_url"},
		{"query", "nodes:\n  - {name: OL1, provider: openai, base_urls: [\"127.0.0.1:8000/v1?api_key=" + secret + "\"], model: m}\nchain: {stages: [{node: OL1, max_turns: 1}], simple_node: OL1}\n", "nodes[0].base_urls[0]"},
		{"redis", nodes + "store: {redis_url: \"redis:/:" + secret + "@127.0.0.1:6379/0\"}\n", "store.redis_url"},
		{"http tool", nodes + "tools: {http: [{name: t, url: \"htps://127.0.0.1:9000/q?token=" + secret + "\"}]}\n", "tools.http[0].url"},
		{"mcp", nodes + "tools: {mcp: [{name: m, url: \"ws://u:" + secret + "@127.0.0.1:3001/mcp\"}]}\n", "tools.mcp[0].url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.key+": want a") {
				t.Fatalf("Parse = %v, want an error at %s", err, tt.key)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error shows the secret: %v", err)
			}
		})
	}
}
