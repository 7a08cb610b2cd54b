package memory

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// An agent on Ollama's API sends back each assistant message as it came,
// its thinking included (ollama-python's agents append response.message;
// `ollama run` keeps it too, ollama cmd/cmd.go), and Ollama renders the
// thinking of the messages after the last user message into the prompt
// (ollama v0.17.4 model/renderers/qwen3vl.go: `isThinking && i >
// lastQueryIndex`; deepseek3.go: `isCurrentTurn`), not that of earlier
// turns. A prompt whose current exchange carries pages of thinking was
// measured without it: sent as fitting, refused by Ollama
// (truncate:false), and the refit blamed the node's ratio.
func TestFitCountsCurrentThinking(t *testing.T) {
	thought := strings.Repeat("Let me think about which file to read first. ", 150) // ~6.7 KB
	msgs := []Message{
		{Role: "system", Content: "You are a coding agent."},
		{Role: "user", Content: "What does util.go do?"},
		// An earlier turn's thinking: not rendered, not counted.
		{Role: "assistant", Content: "It formats dates.", Reasoning: thought},
		{Role: "user", Content: "And main.go?"},
		{Role: "assistant", Reasoning: thought, ToolCalls: []ToolCall{{ID: "c1", Name: "read_file", Arguments: `{"path":"main.go"}`}}},
		{Role: "tool", ToolCallID: "c1", Name: "read_file", Content: "package main\n\nfunc main() {}\n"},
	}
	for _, tc := range []struct {
		name string
		sent bool // the node is sent the thinking (Ollama)
		fits bool
	}{
		{"ollama node", true, false},
		{"openai-compatible node", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &Input{Msgs: msgs, Current: 3, Window: 2048, Reserve: 256, Ratio: 4, Shares: DefaultShares, ThinkingSent: tc.sent}
			ok, chars := Fits(in)
			if ok != tc.fits {
				t.Fatalf("Fits = %v (%d chars, budget %d), want %v", ok, chars, in.Budget(), tc.fits)
			}
			if tc.sent && (chars < len(thought) || chars > 2*len(thought)) {
				t.Errorf("weighs %d chars: want the current thinking (%d) counted once, the earlier turn's not", chars, len(thought))
			}
			_, err := Fit(context.Background(), in, nil)
			if tc.fits != (err == nil) {
				t.Errorf("Fit: %v", err)
			}
			var tl *TooLongError
			if err != nil && (!errors.As(err, &tl) || tl.Estimate+tl.Reserve <= tl.Window) {
				t.Errorf("Fit: %v, want a TooLongError above the window", err)
			}
		})
	}
}
