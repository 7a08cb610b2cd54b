package judge

import (
	"fmt"
	"strings"
	"testing"
)

// realAnswer is what a long, legitimate answer looks like: a list whose
// items share their start, a table with repeated cells, a rule, code.
var realAnswer = func() string {
	var b strings.Builder
	b.WriteString("Here is the comparison you asked for.\n\n")
	for i := 1; i <= 8; i++ {
		fmt.Fprintf(&b, "- The configuration file sets option number %d to its default value.\n", i)
	}
	b.WriteString("\n| Name | Status | Notes |\n|------|--------|-------|\n")
	for i := 0; i < 8; i++ {
		fmt.Fprintf(&b, "| item%d | ok     | none  |\n", i)
	}
	b.WriteString("\n" + strings.Repeat("=", 120) + "\n")
	b.WriteString(strings.Repeat("|       |       |       |\n", 6))
	b.WriteString(strings.Repeat("0, 0, 0, 0, 0, 0, 0, 0, 0,\n", 6))
	b.WriteString("```go\nfor i := range n {\n\tfmt.Println(i)\n}\n```\n")
	for i := 0; i < 6; i++ {
		fmt.Fprintf(&b, "Step %d: run the tests again and read the output carefully.\n", i)
	}
	return b.String()
}()

func TestAnswerGate(t *testing.T) {
	tests := []struct {
		name   string
		gate   AnswerGate
		pieces []string
		// shown is what the stream shows, end included; calls or copies
		// found at the end show nothing more.
		shown string
	}{
		{"prose streams", AnswerGate{Calls: true, Bare: true}, []string{"Hel", "lo ", "world"}, "Hello world"},
		{"tag held", AnswerGate{Calls: true, Bare: true}, []string{"Let me see. <tool", `_call>{"name":"a","arguments":{}}`, "</tool_call>"}, "Let me see. "},
		{"bare call held", AnswerGate{Calls: true, Bare: true}, []string{" {", `"name":"a",`, `"arguments":{}}`}, ""},
		{"json answer shown at the end", AnswerGate{Calls: true, Bare: true}, []string{"{", `"a":1}`}, `{"a":1}`},
		{"copy held", AnswerGate{Copies: []string{"Same answer."}}, []string{"Same ", "answer.", "\n"}, ""},
		{"copy with new whitespace held", AnswerGate{Copies: []string{"Same answer, two lines."}}, []string{"\n  Same ", "\n\n  answer,", "   two\n lines.", "\n"}, ""},
		{"four copies held then released", AnswerGate{}, append(strings.SplitAfter(strings.Repeat("Row: the same twenty-odd bytes. ", 4), " "), "Then", " more."),
			strings.Repeat("Row: the same twenty-odd bytes. ", 4) + "Then more."},
		{"diverging copy released", AnswerGate{Copies: []string{"Same answer."}}, []string{"Same ", "thing, better."}, "Same thing, better."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := tt.gate
			var content, shown strings.Builder
			for _, p := range tt.pieces {
				content.WriteString(p)
				s, err := g.Next(content.String())
				if err != nil {
					t.Fatal(err)
				}
				shown.WriteString(s)
			}
			text := content.String()
			tc := TextCalls{Rest: text}
			if g.Calls {
				tc = ParseTextCalls(text, g.Bare)
			}
			shown.WriteString(g.End(text, tc))
			if got := shown.String(); got != tt.shown {
				t.Errorf("shown %q, want %q", got, tt.shown)
			}
		})
	}
}

// TestAnswerGateKeepsEarlier: a gate drops the answers its content
// diverged from without touching the stage's list, which the stage's next
// call starts from.
func TestAnswerGateKeepsEarlier(t *testing.T) {
	earlier := []string{"First answer.", "Second answer."}
	g := AnswerGate{Copies: earlier}
	if _, err := g.Next("Second"); err != nil {
		t.Fatal(err)
	}
	if len(g.Copies) != 1 || earlier[0] != "First answer." || earlier[1] != "Second answer." {
		t.Errorf("gate copies %q, stage's list %q; want [Second answer.] and the list untouched", g.Copies, earlier)
	}
}

// TestAnswerGateLoop streams 60 copies of a sentence token by token, cut
// after or before the spaces: fewer than five copies are shown, not even
// the start of the fifth, and the gate stops the stream.
func TestAnswerGateLoop(t *testing.T) {
	sentence := "The answer is in the file notes.md, read it. "
	for _, split := range []func(string, string) []string{strings.SplitAfter, splitBefore} {
		testGateLoop(t, sentence, split)
	}
}

// splitBefore cuts s before each sep, as tokenizers that glue a space to
// the next word do.
func splitBefore(s, sep string) []string {
	var out []string
	for len(s) > 0 {
		i := strings.Index(s[1:], sep)
		if i < 0 {
			return append(out, s)
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

func testGateLoop(t *testing.T, sentence string, split func(string, string) []string) {
	t.Helper()
	var g AnswerGate
	var content, shown strings.Builder
	for i := 0; i < 60; i++ {
		for _, w := range split(sentence, " ") {
			content.WriteString(w)
			s, err := g.Next(content.String())
			shown.WriteString(s)
			if err == ErrLoop {
				if got, want := shown.String(), strings.Repeat(sentence, 4); got != want {
					t.Errorf("shown %q, want four copies", got)
				}
				if got := content.String()[:g.Loop.Keep]; got != sentence {
					t.Errorf("kept %q, want %q", got, sentence)
				}
				return
			}
		}
	}
	t.Error("the loop was never stopped")
}

// streamed is what the engine's run.stream does with each chunk: Pass, else Next.
func streamed(g *AnswerGate, content string) (string, error) {
	if out, ok := g.Pass(content); ok {
		return out, nil
	}
	return g.Next(content)
}

// BenchmarkAnswerGate is the cost of the gate on the streaming path: a
// realistic answer delivered in 4-byte chunks, each checked for a loop and
// a text call. It reports the cost per answer; divide by the chunks.
func BenchmarkAnswerGate(b *testing.B) {
	b.ReportAllocs()
	chunks := (len(realAnswer) + 3) / 4
	b.ReportMetric(float64(chunks), "chunks/op")
	for b.Loop() {
		g := AnswerGate{Calls: true, Bare: true}
		for i := 4; i < len(realAnswer)+4; i += 4 {
			if _, err := streamed(&g, realAnswer[:min(i, len(realAnswer))]); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// FuzzAnswerGate streams content cut every step bytes: the gate never
// panics, shows a prefix of the content, and finds the loop the whole
// content holds, with the same cut.
func FuzzAnswerGate(f *testing.F) {
	f.Add(strings.Repeat("The sky is blue, said the model again. ", 7), uint8(3), true)
	f.Add("Let me see <tool_call>{\"name\":\"a\"}</tool_call> done", uint8(1), true)
	f.Add(realAnswer, uint8(5), false)
	f.Add(strings.Repeat("All set. ", 40)+"\nDone.", uint8(2), false)
	f.Fuzz(func(t *testing.T, content string, step uint8, calls bool) {
		g := AnswerGate{Calls: calls, Bare: calls}
		var shown strings.Builder
		n := int(step%16) + 1
		for i := n; i < len(content); i += n {
			s, err := streamed(&g, content[:i])
			shown.WriteString(s)
			if err == ErrLoop {
				break
			}
		}
		g.Finish(content)
		whole := AnswerGate{Quiet: true}
		whole.Finish(content)
		if (g.Loop == nil) != (whole.Loop == nil) || g.Loop != nil && *g.Loop != *whole.Loop {
			t.Fatalf("streamed loop %v, whole %v", g.Loop, whole.Loop)
		}
		if !strings.HasPrefix(content, shown.String()) {
			t.Fatalf("shown %q is not a prefix of %q", shown.String(), content)
		}
	})
}

// TestQuietGateLoop: a call that is not streamed (an earlier stage) is
// judged as a streamed one: its loop is stopped at the fifth copy and cut to
// the first one.
func TestQuietGateLoop(t *testing.T) {
	sentence := "The answer is in the file notes.md, read it. "
	g := AnswerGate{Quiet: true}
	var content strings.Builder
	for i := 0; i < 60; i++ {
		for _, w := range strings.SplitAfter(sentence, " ") {
			content.WriteString(w)
			if _, err := g.Next(content.String()); err == ErrLoop {
				if n := strings.Count(content.String(), sentence); n != 5 {
					t.Errorf("stopped after %d copies, want 5", n)
				}
				if got := content.String()[:g.Loop.Keep]; got != sentence {
					t.Errorf("kept %q, want %q", got, sentence)
				}
				return
			}
		}
	}
	t.Error("the loop was never stopped")
}

func TestFoldPrefix(t *testing.T) {
	tests := []struct {
		c, t         string
		prefix, same bool
	}{
		{"Same answer.", "", true, false},
		{"Same answer.", "Same", true, false},
		{"Same answer.", "Same ", true, false},
		{"Same answer.", "\n\n  Same \n\n answer", true, false},
		{"Same answer.", "Same answer.\n", true, true},
		{"Same answer.", "  Same\tanswer.  ", true, true},
		{"Same answer.", "Sameness", false, false},
		{"Same answer.", "Same answer. More", false, false},
		{"Same answer.", "Same answer.More", false, false},
		{"Same  answer.", "Same answer.", true, true},
		{"", "   ", true, true},
	}
	for _, tt := range tests {
		prefix, same := FoldPrefix(tt.c, tt.t)
		if prefix != tt.prefix || same != tt.same {
			t.Errorf("FoldPrefix(%q, %q) = %v, %v; want %v, %v", tt.c, tt.t, prefix, same, tt.prefix, tt.same)
		}
	}
}
