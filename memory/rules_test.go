package memory

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
)

// longWinded is a Folder whose summarizer writes far more than asked, as
// a small model does.
type longWinded struct{ scripted }

func (l *longWinded) Summarize(ctx context.Context, prompt []Message) (string, bool, error) {
	l.calls++
	var b strings.Builder
	for i := range 400 {
		fmt.Fprintf(&b, "- fact %d of the earlier conversation\n", i)
	}
	return b.String(), false, nil
}

// Design document 004's shares of the context budget: the user's last
// queries 5%, the recent raw turns 5% at least, the summaries 10%. Each
// memory part the fitting makes stays within its share of the window,
// whatever the conversation and the summarizer send.
func TestFitSharesOfTheWindow(t *testing.T) {
	for _, window := range []int{2048, 4096, 8192, 32768} {
		t.Run(fmt.Sprint(window), func(t *testing.T) {
			var msgs []Message
			msgs = append(msgs, Message{Role: "system", Content: "You are a helpful assistant."})
			for i := 1; i <= 200; i++ {
				msgs = append(msgs,
					Message{Role: "user", Content: fmt.Sprintf("Question %d: how does module-%d handle its configuration file, and why?", i, i)},
					Message{Role: "assistant", Content: strings.Repeat("lorem ipsum ", 100)})
			}
			msgs = append(msgs, Message{Role: "user", Content: "Which module reads YAML?"})
			in := input(msgs, window)
			r, err := Fit(context.Background(), in, &longWinded{})
			if err != nil {
				t.Fatal(err)
			}
			if r.Chars > in.Budget() {
				t.Errorf("weighs %d, budget %d", r.Chars, in.Budget())
			}
			for _, tc := range []struct {
				mark  string
				share float64
			}{
				{MarkEarlierQuestions, in.Shares.Questions},
				{MarkSummary, in.Shares.Summaries},
			} {
				for _, m := range marked(r, tc.mark) {
					if limit := in.share(tc.share); len(m.Content) > max(limit, 200) {
						t.Errorf("%s weighs %d characters, its share %d", tc.mark, len(m.Content), limit)
					}
				}
			}
			raw := 0
			for i, m := range r.Msgs {
				if r.Marks[i] == "" && i > 0 && i < len(r.Msgs)-1 {
					raw += len(m.Content)
				}
			}
			if least := in.share(in.Shares.Recent); raw < least-len(msgs[2].Content)-len(msgs[1].Content) {
				t.Errorf("recent raw turns weigh %d, their least share %d", raw, least)
			}
		})
	}
}

// The order of cuts: the current exchange's older tool results are
// shortened first, and when that is enough the history is left as the
// client sent it, no summarizer called.
func TestFitShortensBeforeFolding(t *testing.T) {
	msgs := conversation(4, 400)
	last := len(msgs) - 1
	msgs = append(msgs,
		Message{Role: "assistant", ToolCalls: []ToolCall{{ID: "1", Name: "read_file", Arguments: `{"path":"big.log"}`}}},
		Message{Role: "tool", ToolCallID: "1", Name: "read_file", Content: strings.Repeat("log line of the service\n", 1000)},
		Message{Role: "assistant", ToolCalls: []ToolCall{{ID: "2", Name: "read_file", Arguments: `{"path":"small.txt"}`}}},
		Message{Role: "tool", ToolCallID: "2", Name: "read_file", Content: "small"})
	in := &Input{Msgs: msgs, Current: last, Window: 4096, Reserve: 256, Ratio: 4, Shares: DefaultShares}
	folder := &scripted{}
	r, err := Fit(context.Background(), in, folder)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Actions) != 1 || r.Actions[0].Action != ActShortened || folder.calls != 0 {
		t.Fatalf("actions %+v, %d summarizer calls: want the older result shortened only", r.Actions, folder.calls)
	}
	for i := range last + 1 {
		if r.Msgs[i].Content != msgs[i].Content {
			t.Errorf("message %d changed", i)
		}
	}
}

// The estimate: 4 characters a token until a node reports, the first
// report taken as it is, each later one moving the ratio a third of the
// way, within 1 to 8; a tenth of the budget kept for what the count
// cannot see.
func TestEstimateRules(t *testing.T) {
	c := NewCalibration(nil)
	ctx := context.Background()
	steps := []struct {
		chars, tokens int
		want          float64
	}{
		{3000, 1000, 3},       // first report: taken
		{6000, 1000, 4},       // 3 + (6-3)/3
		{100000, 1000, 5.333}, // reported 100, bounded to 8: 4 + (8-4)/3
	}
	for _, s := range steps {
		c.Observe(ctx, "n", s.chars, s.tokens)
		if got := c.Ratio(ctx, "n"); got < s.want-0.01 || got > s.want+0.01 {
			t.Fatalf("after %d/%d: ratio %.3f, want %.3f", s.chars, s.tokens, got, s.want)
		}
	}
	in := &Input{Window: 4096, Reserve: 1024, Ratio: 4, ToolChars: 500}
	if got, want := in.Budget(), 11059-500; got != want {
		t.Errorf("budget %d, want %d", got, want)
	}
}

// A refit tightens the budget, but never past a byte a token: after a
// refusal the ratio is at most the refused prompt's characters per window
// token already, and halving it below the densest tokenizer there is left
// a byte-level model's stage no room for its question (issue 42).
func TestTightenedBudgetFloor(t *testing.T) {
	for _, tc := range []struct {
		name           string
		ratio, tighten float64
		want           int
	}{
		{"not tightened", 4, 1, 5529},
		{"tightened", 4, 0.5, 2764},
		{"tightened to the floor", 1.3, 0.5, 1382},
		{"below the floor already", 0.5, 0.5, 691},
		{"not tightened below the floor", 0.5, 1, 691},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &Input{Window: 2048, Reserve: 512, Ratio: tc.ratio, Tighten: tc.tighten, ToolChars: 0}
			if got := in.Budget(); got != tc.want {
				t.Errorf("Budget(ratio %g, tighten %g) = %d, want %d", tc.ratio, tc.tighten, got, tc.want)
			}
		})
	}
}

// A refusal teaches a ratio: half the one that failed, no more than the
// refused prompt's characters per window token, no less than the floor.
// It is shared at once, and the next report replaces it.
func TestRefusedRules(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name          string
		before        float64 // the ratio when refused (0: never observed)
		chars, window int
		want          float64
	}{
		{"default ratio", 0, 11736, 4096, 2},
		{"bounded by the prompt", 6, 6000, 4096, 1.465},
		{"at the floor", 1, 5000, 4096, 1},
		{"window unknown", 0, 5000, 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kv := &memKV{}
			c := NewCalibration(kv)
			if tt.before > 0 {
				c.Observe(ctx, "m", int(tt.before*1000), 1000)
			}
			c.Refused(ctx, "m", tt.chars, tt.window, 0.5)
			if got := c.Ratio(ctx, "m"); math.Abs(got-tt.want) > 0.01 {
				t.Errorf("Ratio after Refused = %.3f, want %.3f", got, tt.want)
			}
			// Another replica starts from it.
			if got := NewCalibration(kv).Ratio(ctx, "m"); math.Abs(got-tt.want) > 0.01 {
				t.Errorf("replica's Ratio = %.3f, want %.3f", got, tt.want)
			}
			// A report is taken as it is, not nudged from the guess.
			c.Observe(ctx, "m", 3000, 1000)
			if got := c.Ratio(ctx, "m"); math.Abs(got-3) > 0.01 {
				t.Errorf("Ratio after a report of 3 = %.3f, want 3", got)
			}
		})
	}
}
