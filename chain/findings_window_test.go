package chain_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"chainproxy/chain"
)

// A reflexive chain of three nodes with 4,096-token windows, whose research
// stage read three 8 KB source files: the analysis and review stages get
// the findings shortened to what their windows leave (every call still
// named), and run, instead of being skipped because context_budget (24,000
// characters, about 6,000 tokens) made their instructions alone too long.
func TestFindingsFitStageWindow(t *testing.T) {
	h := newHarness(t, `
nodes:
  - name: OL1
    provider: mock
    context_window: 4096
    mock:
      turns:
        - tool_calls: [{name: read_file, args: {path: f1.go}}, {name: read_file, args: {path: f2.go}}, {name: read_file, args: {path: f3.go}}]
        - content: "OL1 notes: three files."
  - {name: M1, provider: mock, context_window: 4096, mock: {turns: [{content: "M1 synthesis."}]}}
  - {name: M2, provider: mock, context_window: 4096, mock: {turns: [{content: "The answer."}]}}
chain:
  stages: [{node: OL1, max_turns: 3, tools: true}, {node: M1, max_turns: 1}, {node: M2, max_turns: 1}]
  simple_node: OL1
`)
	for i := 1; i <= 3; i++ {
		var b strings.Builder
		for j := 0; b.Len() < 8000; j++ {
			fmt.Fprintf(&b, "func f%d_%d(x int) int { return x * %d }\n", i, j, j)
		}
		if err := os.WriteFile(filepath.Join(h.cfg.Tools.Root, fmt.Sprintf("f%d.go", i)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const question = "Compare the three Go files and explain what they compute."
	res, _, err := h.run(t, chain.ModelReflexive, question)
	if err != nil {
		t.Fatal(err)
	}
	if res.Message.Content != "The answer." {
		t.Errorf("answer %q", res.Message.Content)
	}
	for i, st := range res.Trace.Stages {
		if st.Status != chain.StageOK {
			t.Errorf("stage %d (%s): %s %s", i, st.Node, st.Status, st.Error)
		}
	}
	for _, n := range []string{"M1", "M2"} {
		reqs := h.nodes[n].requests()
		if len(reqs) != 1 {
			t.Fatalf("%d calls to %s", len(reqs), n)
		}
		// The findings head the user's question, which ends the prompt.
		last := reqs[0].Messages[len(reqs[0].Messages)-1]
		for _, want := range []string{"## What the earlier stages found", `read_file {"path":"f1.go"}`, `read_file {"path":"f3.go"}`} {
			if !strings.Contains(last.Content, want) {
				t.Errorf("%s's question lacks %q", n, want)
			}
		}
		if last.Role != "user" || !strings.HasSuffix(last.Content, "\n\n"+question) {
			t.Errorf("%s's prompt ends with a %s message %q", n, last.Role, last.Content)
		}
	}
}
