package chain_test

import (
	"context"
	"fmt"
	"strings"
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

// TestSimpleAnswerIsTheAnsweringTurn: in simple mode, a model that says
// "Let me look." before a tool call and answers in its next turn gives the
// client that answer alone; a stream shows both turns a paragraph apart.
func TestSimpleAnswerIsTheAnsweringTurn(t *testing.T) {
	h := newHarness(t, `
chain:
  simple_node: OL1
nodes:
  - name: OL1
    provider: mock
    mock:
      turns:
        - content: "Let me look at the workspace."
          tool_calls: [{name: list_dir, args: {path: "."}}]
        - content: "The workspace holds a.txt."
  - {name: M1, provider: mock, mock: {turns: [{content: "Synthesis."}]}}
  - {name: M2, provider: mock, mock: {turns: [{content: "Answer."}]}}
`)
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			var streamed strings.Builder
			var emit func(chain.Event) error
			if stream {
				emit = func(ev chain.Event) error {
					if ev.Kind == chain.EventDelta {
						streamed.WriteString(ev.Content)
					}
					return nil
				}
			}
			res, err := h.engine.Run(context.Background(), &chain.RunRequest{
				Model: chain.ModelSimple, Messages: []chain.Message{{Role: "user", Content: "what is there?"}},
			}, emit)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := res.Message.Content, "The workspace holds a.txt."; got != want {
				t.Errorf("answer = %q, want %q", got, want)
			}
			if got, want := res.Trace.Stages[0].Output, "Let me look at the workspace.\n\nThe workspace holds a.txt."; got != want {
				t.Errorf("trace output = %q, want %q", got, want)
			}
			if want := "Let me look at the workspace.\n\nThe workspace holds a.txt."; stream && streamed.String() != want {
				t.Errorf("streamed = %q, want %q", streamed.String(), want)
			}
		})
	}
}
