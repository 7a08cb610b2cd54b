package chain_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"chainproxy/chain"
)

// A four-turn research stage on a node with a 1,024-token window, whose
// tool results (2.5 KB each) outgrow it: every turn's prompt still holds
// the user's question and every call made so far, the older results are
// shortened, and the trace says so.
func TestStageToolResultsFitted(t *testing.T) {
	h := newHarness(t, `
nodes:
  - name: OL1
    provider: mock
    model: ol1-model
    context_window: 1024
    mock:
      turns:
        - tool_calls: [{name: read_file, args: {path: f1.txt}}]
        - tool_calls: [{name: read_file, args: {path: f2.txt}}]
        - tool_calls: [{name: read_file, args: {path: f3.txt}}]
        - content: "Raw findings: four files."
  - {name: M2, provider: mock, model: m2-model, mock: {turns: [{content: "The answer."}]}}
chain:
  stages: [{node: OL1, max_turns: 4, tools: true}, {node: M2, max_turns: 1}]
  simple_node: OL1
  max_total_turns: 6
memory: {answer_reserve: 128}
`)
	for i := 1; i <= 3; i++ {
		body := strings.Repeat(fmt.Sprintf("line %d of file %d\n", i, i), 140)
		if err := os.WriteFile(filepath.Join(h.cfg.Tools.Root, fmt.Sprintf("f%d.txt", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const question = "Read the project files and compare them in detail."
	res, _, err := h.run(t, chain.ModelReflexive, question)
	if err != nil {
		t.Fatal(err)
	}
	reqs := h.nodes["OL1"].requests()
	if len(reqs) != 4 {
		t.Fatalf("%d calls to OL1, want 4", len(reqs))
	}
	for i, req := range reqs {
		var text strings.Builder
		calls := 0
		for _, m := range req.Messages {
			text.WriteString(m.Content)
			calls += len(m.ToolCalls)
		}
		if !strings.Contains(text.String(), question) {
			t.Errorf("turn %d: the user's question is missing from the prompt", i+1)
		}
		if calls != i {
			t.Errorf("turn %d: the prompt holds %d of the %d calls made", i+1, calls, i)
		}
	}
	st := res.Trace.Stages[0]
	if st.Status != chain.StageOK || st.Context == nil || st.Context.Window != 1024 {
		t.Fatalf("stage %s, context %+v", st.Status, st.Context)
	}
	shortened := 0
	for _, a := range st.Context.Actions {
		if a.Action == "shortened" {
			shortened++
		}
	}
	if shortened == 0 {
		t.Fatalf("no result shortened: %+v", st.Context.Actions)
	}
	if res.Trace.Stages[1].Context != nil {
		t.Error("a node of unknown window gets no context trace")
	}
}

// A stage whose node cannot take even the question is skipped with the
// reason, and the next stage answers.
func TestStageSkippedForContext(t *testing.T) {
	h := newHarness(t, `
nodes:
  - {name: OL1, provider: mock, model: ol1-model, context_window: 512, mock: {turns: [{content: "notes"}]}}
  - {name: M2, provider: mock, model: m2-model, mock: {turns: [{content: "The answer."}]}}
chain:
  stages: [{node: OL1, max_turns: 2}, {node: M2, max_turns: 1}]
  simple_node: OL1
`)
	res, _, err := h.run(t, chain.ModelReflexive, "compare "+strings.Repeat("these words ", 400))
	if err != nil {
		t.Fatal(err)
	}
	st := res.Trace.Stages[0]
	if st.Status != chain.StageSkippedContext || !strings.Contains(st.Error, "node OL1") || !strings.Contains(st.Error, "512 tokens") || st.Turns != 0 {
		t.Fatalf("stage 0: %s %q turns %d", st.Status, st.Error, st.Turns)
	}
	if res.Message.Content != "The answer." || res.Trace.Turns != 1 {
		t.Fatalf("answer %q after %d turns", res.Message.Content, res.Trace.Turns)
	}
	if len(h.nodes["OL1"].requests()) != 0 {
		t.Fatal("a prompt known not to fit was sent")
	}
}
