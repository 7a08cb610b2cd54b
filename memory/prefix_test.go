package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// rendered is a prompt as a server's cache sees it: the messages' roles
// and texts one after the other.
func rendered(msgs []Message) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(m.Role)
		b.WriteString("\n")
		b.WriteString(m.Content)
		b.WriteString("\n\x00")
	}
	return b.String()
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// growing is one conversation as an OpenAI client sends it on its n-th
// request: the system message, n-1 answered turns whose answers weigh
// about size bytes, the n-th question.
func growing(n, size int) []Message {
	msgs := []Message{{Role: "system", Content: "You are a helpful assistant."}}
	for i := 1; i < n; i++ {
		msgs = append(msgs,
			Message{Role: "user", Content: fmt.Sprintf("Question %d: tell me about topic-%d.", i, i)},
			Message{Role: "assistant", Content: fmt.Sprintf("Answer %d: ", i) + strings.Repeat("lorem ipsum ", size/12)})
	}
	return append(msgs, Message{Role: "user", Content: fmt.Sprintf("Question %d: tell me about topic-%d.", n, n)})
}

// TestPrefixStableAcrossRequests: Ollama and llama-server keep the
// previous prompt's KV cache and evaluate only what follows the longest
// common prefix (ollama runner/ollamarunner/cache.go LoadCacheSlot,
// llama-server's cache_prompt). A conversation that outgrew the window,
// resent one turn longer at each request, must keep its prompt (the
// system message, the summary, the earlier questions, the raw turns) as
// the head of the next one between two folds, and make a summarizer call
// only at a fold, several turns apart, not at every request: folding the
// least each time moved the fold by one turn at every request, a
// summarizer call and a prompt evaluated again from its second message
// each time.
func TestPrefixStableAcrossRequests(t *testing.T) {
	for _, tc := range []struct {
		name           string
		window, answer int
		requests       int
		// maxFolds: a fold leaves half the raw turns' room free, a few
		// turns of the long answers, some 60 of the short ones.
		maxFolds int
	}{
		{"long answers", 2048, 480, 40, 7},
		// More turns between two folds than the summary's lookup reads
		// back (lookback): the summary is found all the same, and the
		// next fold consolidates it rather than start from turn 1.
		{"short answers, larger window", 8192, 100, 400, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			folder := &scripted{}
			var prev string
			folds, beyond, changed := 0, 0, 0
			for n := 1; n <= tc.requests; n++ {
				msgs := growing(n, tc.answer)
				in := &Input{Msgs: msgs, Current: len(msgs) - 1, Window: tc.window, Reserve: 512, Ratio: 4, Shares: DefaultShares}
				before := folder.calls
				r, err := Fit(context.Background(), in, folder)
				if err != nil {
					t.Fatal(err)
				}
				cur := rendered(r.Msgs)
				common := commonPrefix(prev, cur)
				folded := folder.calls > before
				if testing.Verbose() && (beyond > 0 || len(r.Actions) > 0) {
					t.Logf("request %3d: %5d chars, common prefix %5d of the previous %5d, summarizer called %v, actions %+v", n, len(cur), common, len(prev), folded, r.Actions)
				}
				if len(r.Actions) > 0 {
					beyond++
				}
				if folded {
					folds++
					if folds > 1 && !strings.Contains(r.Actions[0].Detail, "consolidated") {
						t.Errorf("request %d: a new summary from turn 1, not from the cached one: %+v", n, r.Actions)
					}
				} else if common < len(prev) {
					t.Errorf("request %d: no fold, yet the previous prompt is not the head of this one (%d of %d characters in common)", n, common, len(prev))
					changed++
				}
				prev = cur
			}
			if beyond < 10 {
				t.Fatalf("only %d requests beyond the window: the test proves nothing", beyond)
			}
			if folds > tc.maxFolds {
				t.Errorf("%d summarizer calls in %d requests beyond the window, want at most %d: the fold moves too often", folds, beyond, tc.maxFolds)
			}
		})
	}
}

// TestFoldFailedKeepsRawTurns: a fold goes further than the window needs
// only for a summary that stays the same over the next requests. When the
// summarizer fails, the turns are dropped instead, and as few as without
// a summarizer: no summary anchors the fold, and the turns the hysteresis
// would have folded are kept raw.
func TestFoldFailedKeepsRawTurns(t *testing.T) {
	msgs := growing(20, 480)
	fit := func(folder Folder) *Result {
		t.Helper()
		in := &Input{Msgs: msgs, Current: len(msgs) - 1, Window: 2048, Reserve: 512, Ratio: 4, Shares: DefaultShares}
		r, err := Fit(context.Background(), in, folder)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	none := fit(nil)
	down := fit(&scripted{fail: errors.New("summarizer offline")})
	if rendered(down.Msgs) != rendered(none.Msgs) {
		t.Errorf("summarizer down: actions %+v, want those without a summarizer %+v", down.Actions, none.Actions)
	}
	if down.SummaryErr == nil {
		t.Error("the summarizer's failure is not reported")
	}
	made := fit(&scripted{})
	if made.Actions[0].Action != ActSummarized || made.Actions[0].ToTurn <= none.Actions[0].ToTurn {
		t.Errorf("with a summary, actions %+v: want more turns folded than the %+v dropped without", made.Actions, none.Actions)
	}
}
