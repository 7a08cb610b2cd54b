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
