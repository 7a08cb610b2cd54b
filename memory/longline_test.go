package memory

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// minified is a bundler's output: the code on one line, then the source
// map comment on a line of its own and the final newline (ECMA-426, Source
// Map §"Linking generated code to source maps": "//# sourceMappingURL=…"
// as the file's last line, as esbuild, terser and webpack write it).
func minified(size int) string {
	return "!function(){" + strings.Repeat("var a=b(c);", size/11) + "}();\n//# sourceMappingURL=app.min.js.map\n"
}

// pasted is how people paste a one-line payload (a JSON response, a log
// line) into a question: the payload, a blank line, then their words.
func pasted(size int) string {
	return `{"items":[` + strings.Repeat(`{"id":1,"ok":false},`, size/20) + `{}]}` + "\n\nWhy does every item fail?"
}

// A text whose first line alone outgrows the head's share, followed by a
// few short lines, is still cut to about the limit: those short lines
// all fit in the tail, so no whole line is left out, but the first line
// must be cut.
func TestHeadTailLongFirstLine(t *testing.T) {
	for _, tc := range []struct {
		name, in, tail string
	}{
		{"minified bundle", minified(20000), "//# sourceMappingURL=app.min.js.map\n"},
		{"pasted payload", pasted(20000), "Why does every item fail?"},
		{"command output", strings.Repeat("é", 9000) + "\n\nexit status 1", "exit status 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, limit := range []int{200, 600, 4000} {
				out, n := HeadTail(tc.in, limit)
				if n == 0 || len(out) > limit+60 {
					t.Errorf("limit %d: %d bytes out, %d omitted", limit, len(out), n)
				}
				if !strings.HasPrefix(out, tc.in[:8]) || !strings.HasSuffix(out, tc.tail) {
					t.Errorf("limit %d: head or tail lost: %.40q … %q", limit, out, out[max(0, len(out)-40):])
				}
				if !strings.Contains(out, "characters omitted") {
					t.Errorf("limit %d: the cut is not said: %.80q", limit, out)
				}
			}
		})
	}
}

// An agent that read a minified bundle into a 4,096-token window: the
// latest result is cut to what the window leaves, not the whole request
// refused.
func TestFitLatestResultOneLongLine(t *testing.T) {
	msgs := []Message{
		{Role: "system", Content: "You are a coding agent."},
		{Role: "user", Content: "Why does the bundle throw on load?"},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "1", Name: "read_file", Arguments: `{"path":"dist/app.min.js"}`}}},
		{Role: "tool", Name: "read_file", ToolCallID: "1", Content: minified(60000)},
	}
	in := &Input{Msgs: msgs, Current: 1, Window: 4096, Reserve: 1024, Ratio: 4, Shares: DefaultShares}
	r, err := Fit(context.Background(), in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Chars > in.Budget() || r.Marks[3] != MarkShortened || r.Msgs[1].Content != msgs[1].Content {
		t.Fatalf("chars %d budget %d marks %q", r.Chars, in.Budget(), r.Marks)
	}
}

// A conversation whose first question pasted a 20 KB one-line payload: its
// later requests fit a 2,048-token window, the earlier question listed
// shortened within the questions' share, the current one whole.
func TestFitEarlierQuestionPasted(t *testing.T) {
	msgs := []Message{{Role: "system", Content: "You are a helpful assistant."}, {Role: "user", Content: pasted(20000)}, {Role: "assistant", Content: "Every item has ok false: the batch was rejected."}}
	for i := 2; i <= 6; i++ {
		msgs = append(msgs,
			Message{Role: "user", Content: fmt.Sprintf("Question %d: and item %d?", i, i)},
			Message{Role: "assistant", Content: strings.Repeat("It failed too. ", 40)})
	}
	msgs = append(msgs, Message{Role: "user", Content: "What did I paste first?"})
	in := input(msgs, 2048)
	r, err := Fit(context.Background(), in, nil)
	if err != nil {
		t.Fatal(err)
	}
	qs := marked(r, MarkEarlierQuestions)
	if len(qs) != 1 || !strings.Contains(qs[0].Content, "[turn 1] {\"items\"") || !strings.Contains(qs[0].Content, "Why does every item fail?") {
		t.Fatalf("earlier questions %+v", qs)
	}
	if len(qs[0].Content) > in.share(in.Shares.Questions)+questionCap {
		t.Errorf("the earlier questions weigh %d characters", len(qs[0].Content))
	}
	if last := r.Msgs[len(r.Msgs)-1]; last.Content != "What did I paste first?" {
		t.Errorf("last message %q", last.Content)
	}
}
