package web

import (
	"slices"
	"strings"
	"testing"

	"chainproxy/chain"
	"chainproxy/config"
)

// More agent clients, built from their sources (testdata/agents/README.md
// says where each comes from): opencode, Crush and Zed's agent put what the
// user attaches beside the question in the same user message, and ask for
// titles and summaries of their own.
func TestMoreAgentClientsClassified(t *testing.T) {
	s := newTestServer(t, testConfig, func(c *config.Config) { c.Server.MaxBodyBytes = 1 << 20 })
	own := func(name string) string {
		return name + " request: the client's own work, not the user's words"
	}
	tests := []struct {
		file string
		mode string
		want []string // reasons the trace must hold, besides the verdict
	}{
		// opencode: the question as the first text part, then for each
		// @-mentioned file a "Called the Read tool …" part and the read
		// tool's output. The question is judged, the files set aside.
		{"opencode-trivial-files.json", chain.ModeSimple, []string{`text judged: "What is 2+2? @main.go @README.md"`, "ignored 2 opencode's attached file blocks, 954 B"}},
		{"opencode-analytical-files.json", chain.ModeReflexive, []string{"keyword: compare", "ignored 2 opencode's attached file blocks, 954 B"}},
		// Its title, asked with the title agent's system prompt: the user's
		// first message is the newest user message.
		{"opencode-title.json", chain.ModeSimple, []string{own("opencode's title generation")}},
		// Its compaction: the conversation, then "Provide a detailed prompt
		// for continuing our conversation above." and a template.
		{"opencode-compact.json", chain.ModeSimple, []string{own("opencode's compaction")}},
		// Since its core rewrite: one user message, the instruction, a
		// template and the conversation serialized ("[User]: …").
		{"opencode-compact-anchored.json", chain.ModeSimple, []string{own("opencode's compaction")}},
		// Crush: the attached files after the question, announced by
		// <system_info>, each in <file path='…'>.
		{"crush-trivial-attachments.json", chain.ModeSimple, []string{quote(trivialQuestion), "ignored 1 <system_info> block, 105 B", "ignored 2 <file> blocks, 532 B"}},
		{"crush-analytical-attachments.json", chain.ModeReflexive, []string{"keyword: compare", "ignored 2 <file> blocks, 532 B"}},
		// Its title ("Generate a concise title for the following content:"
		// and the user's first message) and its summary ("Provide a
		// detailed summary of our conversation above.").
		{"crush-title.json", chain.ModeSimple, []string{own("Crush's title generation")}},
		{"crush-summary.json", chain.ModeSimple, []string{own("Crush's summary")}},
		// Zed's agent: the question and the mention's link, then the
		// mentioned files in <context>, each piece a text part of its own,
		// "</context>" the last.
		{"zed-trivial-mention.json", chain.ModeSimple, []string{quote("What is 2+2? [@main.go](file:///home/user/demo/main.go)"), "ignored 1 Zed's attached context block, 494 B"}},
		{"zed-analytical-mention.json", chain.ModeReflexive, []string{"keyword: compare", "ignored 1 Zed's attached context block, 494 B"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			tr := classified(t, s, agentRequest(t, tt.file))
			if tr.Mode != tt.mode {
				t.Errorf("%s: mode %q, want %q (reasons %q)", tt.file, tr.Mode, tt.mode, tr.Reasons)
			}
			for _, w := range tt.want {
				if !slices.Contains(tr.Reasons, w) {
					t.Errorf("%s: reasons %q, want %q among them", tt.file, tr.Reasons, w)
				}
			}
			for _, r := range tr.Reasons {
				if strings.HasPrefix(r, "length ") || strings.HasPrefix(r, "multi-part") {
					t.Errorf("%s: reason %q: the client's scaffolding was judged", tt.file, r)
				}
			}
		})
	}
}

// quote is the reason that quotes the words judged, as the trace has it.
func quote(q string) string { return `text judged: "` + q + `"` }
