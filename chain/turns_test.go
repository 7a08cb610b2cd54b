package chain_test

import (
	"context"
	"testing"

	"chainproxy/chain"
)

// TestStageOutputKeepsTurnBoundaries: a stage that writes in two turns shows
// both texts in its trace output with a paragraph break between them, never
// glued into one sentence.
func TestStageOutputKeepsTurnBoundaries(t *testing.T) {
	h := newHarness(t, `
nodes:
  - name: OL1
    provider: mock
    mock:
      turns:
        - content: "Let me look at the workspace."
          tool_calls: [{name: list_dir, args: {path: "."}}]
        - content: "Raw findings: a.txt is there."
  - {name: M1, provider: mock, mock: {turns: [{content: "Synthesis."}]}}
  - {name: M2, provider: mock, mock: {turns: [{content: "Answer."}]}}
`)
	res, err := h.engine.Run(context.Background(), &chain.RunRequest{
		Model: chain.ModelReflexive, Messages: []chain.Message{{Role: "user", Content: "what is there?"}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "Let me look at the workspace.\n\nRaw findings: a.txt is there."
	if got := res.Trace.Stages[0].Output; got != want {
		t.Errorf("OL1 output = %q, want %q", got, want)
	}
}
