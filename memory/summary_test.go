package memory

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// agentSession is an agent's conversation as a coding client (opencode,
// Cline, Continue) sends it: a first turn in which the model called a tool
// calls times, each result size bytes, before it answered; a few short
// turns after it; and the current question.
func agentSession(calls, size int) []Message {
	msgs := []Message{
		{Role: "system", Content: "You are a coding agent."},
		{Role: "user", Content: "Audit every Go file of the repository for unchecked errors."},
	}
	for i := 1; i <= calls; i++ {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			Message{Role: "assistant", ToolCalls: []ToolCall{{ID: id, Name: "read_file", Arguments: fmt.Sprintf(`{"path":"internal/pkg%02d/file.go"}`, i)}}},
			Message{Role: "tool", ToolCallID: id, Name: "read_file", Content: strings.Repeat(fmt.Sprintf("line of pkg%02d\n", i), size/15)})
	}
	msgs = append(msgs, Message{Role: "assistant", Content: "Found 3 unchecked errors: pkg02, pkg17 and pkg41."})
	for i := 2; i <= 4; i++ {
		msgs = append(msgs,
			Message{Role: "user", Content: fmt.Sprintf("Question %d about the audit?", i)},
			Message{Role: "assistant", Content: strings.Repeat("details ", 200)})
	}
	return append(msgs, Message{Role: "user", Content: "Fix the first one."})
}

// TestSummaryOfOneLongTurn: a first turn longer than the summarizer's own
// window (an agent that read 80 files before answering) is still
// summarized, its rendering cut to fit the summarizer's window, rather
// than dropped with every call it made: a summarizer prompt that never
// fits made no summary at all.
func TestSummaryOfOneLongTurn(t *testing.T) {
	for _, tc := range []struct {
		name          string
		calls, window int
	}{
		{"fits", 20, 4096},
		{"longer than the summarizer's window", 80, 4096},
		{"far longer", 300, 4096},
		{"small summarizer", 80, 2048},
	} {
		t.Run(tc.name, func(t *testing.T) {
			folder := &scripted{window: tc.window}
			msgs := agentSession(tc.calls, 3000)
			in := &Input{Msgs: msgs, Current: len(msgs) - 1, Window: 8192, Reserve: 1024, Ratio: 4, Shares: DefaultShares}
			r, err := Fit(context.Background(), in, folder)
			if err != nil {
				t.Fatal(err)
			}
			if folder.calls != 1 {
				t.Fatalf("%d summarizer calls, want 1; actions %+v", folder.calls, r.Actions)
			}
			if p := folder.prompts[0]; Chars(p) > (tc.window-summarizerReserve)*4 {
				t.Errorf("summarizer prompt weighs %d chars, its window %d tokens", Chars(p), tc.window)
			}
			if len(r.Actions) == 0 || r.Actions[0].Action != ActSummarized || r.Actions[0].FromTurn != 1 {
				t.Fatalf("actions %+v: want turn 1 summarized", r.Actions)
			}
			p := folder.prompts[0][1].Content
			for _, want := range []string{"Audit every Go file", "read_file {\"path\":\"internal/pkg01/file.go\"}", "Found 3 unchecked errors"} {
				if !strings.Contains(p, want) {
					t.Errorf("summarizer prompt lacks %q", want)
				}
			}
		})
	}
}

// TestSummaryInTheConversationsLanguage: the summarizer's instructions
// are in English, and a small model follows the language of its
// instructions: a French conversation came back summarized in English,
// its names and the user's terms translated. The instructions ask for the
// conversation's own language.
func TestSummaryInTheConversationsLanguage(t *testing.T) {
	msgs := []Message{{Role: "system", Content: "Tu es un assistant."}}
	for i := 1; i <= 30; i++ {
		msgs = append(msgs,
			Message{Role: "user", Content: fmt.Sprintf("Question %d : que fait la fonction calculerTVA%d ?", i, i)},
			Message{Role: "assistant", Content: strings.Repeat("Elle calcule la taxe sur la valeur ajoutée. ", 40)})
	}
	msgs = append(msgs, Message{Role: "user", Content: "Laquelle arrondit au centime ?"})
	folder := &scripted{}
	if _, err := Fit(context.Background(), input(msgs, 2048), folder); err != nil {
		t.Fatal(err)
	}
	if folder.calls != 1 {
		t.Fatalf("%d summarizer calls", folder.calls)
	}
	if sys := folder.prompts[0][0].Content; !strings.Contains(sys, "in the language of the conversation") {
		t.Errorf("the summarizer is not asked to keep the conversation's language:\n%s", sys)
	}
}
