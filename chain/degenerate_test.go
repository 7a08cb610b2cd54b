package chain

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

// findLoop is findRun reporting loops only.
func findLoop(s string) (repetition, bool) {
	rep, ok := findRun(s)
	return rep, ok && rep.loop()
}

func TestFindLoop(t *testing.T) {
	sentence := "The sky is blue because of Rayleigh scattering. "
	tests := []struct {
		name   string
		in     string
		loop   bool
		keep   string // the text kept, when a loop
		copies int
	}{
		{"short text", "hello", false, "", 0},
		{"real answer", realAnswer, false, "", 0},
		{"four copies then more", "Answer: " + strings.Repeat(sentence, 4) + "And that is all there is to it.", false, "", 0},
		{"four copies", "Answer: " + strings.Repeat(sentence, 4), false, "", 0},
		// The run of copies starts at the space before the first "The": the
		// text is cut after the first sentence's full stop.
		{"five copies", "Answer: " + strings.Repeat(sentence, 5), true, "Answer: " + strings.TrimSpace(sentence), 5},
		{"sixty copies", "Answer: " + strings.Repeat(sentence, 60), true, "Answer: " + strings.TrimSpace(sentence), 60},
		{"loop cut mid-copy", "Answer: " + strings.Repeat(sentence, 5) + "The sky", true, "Answer: " + strings.TrimSpace(sentence), 5},
		{"short period is not a loop", "Ha" + strings.Repeat("ha ", 200), false, "", 0},
		{"19 characters is not a loop", strings.Repeat("abcdefghijklmnopqr ", 10), false, "", 0},
		{"20 characters is", strings.Repeat("abcdefghijklmnopqrs ", 5), true, "abcdefghijklmnopqrs ", 5},
		{"no letters", strings.Repeat("| 1 | 2 | 3 | 4 | 5 | 6 |\n", 8), false, "", 0},
		{"long segment", "x" + strings.Repeat(strings.Repeat("word ", 100)+"end.\n", 5), true, "x" + strings.Repeat("word ", 100) + "end.\n", 5},
		{"accented", strings.Repeat("Le ciel est bleu à cause de la diffusion. ", 5), true, "Le ciel est bleu à cause de la diffusion. ", 5},
		{"segment too long to search", strings.Repeat(strings.Repeat("x", loopMaxPeriod)+"y", 5), false, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, ok := findLoop(tt.in)
			if ok != tt.loop {
				t.Fatalf("findLoop(…) = %+v, %v; want loop %v", rep, ok, tt.loop)
			}
			if !ok {
				return
			}
			if got := tt.in[:rep.keep]; got != tt.keep || rep.copies != tt.copies {
				t.Errorf("findLoop kept %q (%d copies), want %q (%d)", got, rep.copies, tt.keep, tt.copies)
			}
		})
	}
}

// TestFindLoopStreamed feeds a real answer and a loop byte by byte, as
// the smallest chunks a stream can bring: the answer never trips the
// detector, and the loop is caught at its fifth copy.
func TestFindLoopStreamed(t *testing.T) {
	for i := 1; i <= len(realAnswer); i++ {
		if rep, ok := findLoop(realAnswer[:i]); ok {
			t.Fatalf("findLoop(realAnswer[:%d]) = %+v: a real answer seen as a loop", i, rep)
		}
	}
	sentence := "I will now check the file again. "
	loop := strings.Repeat(sentence, 10)
	for i := 1; i <= len(loop); i++ {
		if _, ok := findLoop(loop[:i]); ok {
			if want := 5 * len(sentence); i != want {
				t.Errorf("loop found after %d bytes, want %d (five copies)", i, want)
			}
			return
		}
	}
	t.Error("loop never found")
}

func TestAnswerGate(t *testing.T) {
	tests := []struct {
		name   string
		gate   answerGate
		pieces []string
		// shown is what the stream shows, end included; calls or copies
		// found at the end show nothing more.
		shown string
	}{
		{"prose streams", answerGate{calls: true, bare: true}, []string{"Hel", "lo ", "world"}, "Hello world"},
		{"tag held", answerGate{calls: true, bare: true}, []string{"Let me see. <tool", `_call>{"name":"a","arguments":{}}`, "</tool_call>"}, "Let me see. "},
		{"bare call held", answerGate{calls: true, bare: true}, []string{" {", `"name":"a",`, `"arguments":{}}`}, ""},
		{"json answer shown at the end", answerGate{calls: true, bare: true}, []string{"{", `"a":1}`}, `{"a":1}`},
		{"copy held", answerGate{copies: []string{"Same answer."}}, []string{"Same ", "answer.", "\n"}, ""},
		{"four copies held then released", answerGate{}, append(strings.SplitAfter(strings.Repeat("Row: the same twenty-odd bytes. ", 4), " "), "Then", " more."),
			strings.Repeat("Row: the same twenty-odd bytes. ", 4) + "Then more."},
		{"diverging copy released", answerGate{copies: []string{"Same answer."}}, []string{"Same ", "thing, better."}, "Same thing, better."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := tt.gate
			var content, shown strings.Builder
			for _, p := range tt.pieces {
				content.WriteString(p)
				s, err := g.next(content.String())
				if err != nil {
					t.Fatal(err)
				}
				shown.WriteString(s)
			}
			text := content.String()
			tc := textCalls{rest: text}
			if g.calls {
				tc = parseTextCalls(text, g.bare)
			}
			shown.WriteString(g.end(text, tc))
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
	g := answerGate{copies: earlier}
	if _, err := g.next("Second"); err != nil {
		t.Fatal(err)
	}
	if len(g.copies) != 1 || earlier[0] != "First answer." || earlier[1] != "Second answer." {
		t.Errorf("gate copies %q, stage's list %q; want [Second answer.] and the list untouched", g.copies, earlier)
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
	var g answerGate
	var content, shown strings.Builder
	for i := 0; i < 60; i++ {
		for _, w := range split(sentence, " ") {
			content.WriteString(w)
			s, err := g.next(content.String())
			shown.WriteString(s)
			if err == errLoop {
				if got, want := shown.String(), strings.Repeat(sentence, 4); got != want {
					t.Errorf("shown %q, want four copies", got)
				}
				if got := content.String()[:g.loop.keep]; got != sentence {
					t.Errorf("kept %q, want %q", got, sentence)
				}
				return
			}
		}
	}
	t.Error("the loop was never stopped")
}

// streamed is what run.model does with each chunk: pass, else next.
func streamed(g *answerGate, content string) (string, error) {
	if out, ok := g.pass(content); ok {
		return out, nil
	}
	return g.next(content)
}

// BenchmarkAnswerGate is the cost of the gate on the streaming path: a
// realistic answer delivered in 4-byte chunks, each checked for a loop and
// a text call. It reports the cost per answer; divide by the chunks.
func BenchmarkAnswerGate(b *testing.B) {
	b.ReportAllocs()
	chunks := (len(realAnswer) + 3) / 4
	b.ReportMetric(float64(chunks), "chunks/op")
	for b.Loop() {
		g := answerGate{calls: true, bare: true}
		for i := 4; i < len(realAnswer)+4; i += 4 {
			if _, err := streamed(&g, realAnswer[:min(i, len(realAnswer))]); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// FuzzGatePass: the streaming path's shortcut (pass, else next) shows
// exactly what next alone shows, chunk by chunk, and stops at the same
// loop, whatever the content, the cut and the gate's settings.
func FuzzGatePass(f *testing.F) {
	f.Add(strings.Repeat("The sky is blue, said the model again. ", 7), uint8(3), uint8(1))
	f.Add("Let me see <tool_call>{\"name\":\"a\"}</tool_call> done [TOOL:x:{}] and [1]", uint8(2), uint8(3))
	f.Add(realAnswer, uint8(5), uint8(4))
	f.Add("Same answer, then more.", uint8(4), uint8(8))
	f.Fuzz(func(t *testing.T, content string, step, mode uint8) {
		base := answerGate{calls: mode&1 != 0, bare: mode&2 != 0, quiet: mode&4 != 0}
		if mode&8 != 0 {
			base.copies = []string{"Same answer.", strings.TrimSpace(content[:len(content)/2])}
		}
		ref, fast := base, base
		n := int(step%16) + 1
		for i := n; ; i += n {
			c := content[:min(i, len(content))]
			want, werr := ref.next(c)
			got, gerr := streamed(&fast, c)
			if got != want || werr != gerr {
				t.Fatalf("at %d of %q: pass path showed %q (%v), next %q (%v)", len(c), content, got, gerr, want, werr)
			}
			if werr != nil || i >= len(content) {
				break
			}
		}
		if ref.shown != fast.shown || (ref.loop == nil) != (fast.loop == nil) {
			t.Fatalf("gates differ at the end: shown %d vs %d, loop %v vs %v", ref.shown, fast.shown, ref.loop, fast.loop)
		}
	})
}

// BenchmarkFindLoop is one check at the end of a long answer, the worst
// case of a chunk: the whole search window is scanned.
func BenchmarkFindLoop(b *testing.B) {
	b.ReportAllocs()
	s := strings.Repeat(realAnswer, 4)
	for b.Loop() {
		findRun(s)
	}
}

// FuzzAnswerGate streams content cut every step bytes: the gate never
// panics, shows a prefix of the content, and, when it finds a loop, has
// shown fewer than five copies of the segment and keeps one.
func FuzzAnswerGate(f *testing.F) {
	f.Add(strings.Repeat("The sky is blue, said the model again. ", 7), uint8(3), true)
	f.Add("Let me see <tool_call>{\"name\":\"a\"}</tool_call> done", uint8(1), true)
	f.Add(realAnswer, uint8(5), false)
	f.Fuzz(func(t *testing.T, content string, step uint8, calls bool) {
		g := answerGate{calls: calls, bare: calls}
		var shown strings.Builder
		n := int(step%16) + 1
		for i := n; ; i += n {
			s, err := g.next(content[:min(i, len(content))])
			shown.WriteString(s)
			if err == errLoop {
				if !strings.HasPrefix(content, shown.String()) || len(shown.String()) > g.loop.hold {
					t.Fatalf("shown %q past the fifth copy's start %d of %q", shown.String(), g.loop.hold, content)
				}
				return
			}
			if i >= len(content) {
				break
			}
		}
		if !strings.HasPrefix(content, shown.String()) {
			t.Fatalf("shown %q is not a prefix of %q", shown.String(), content)
		}
	})
}

// TestQuietGateLoop: a call that is not streamed (an earlier stage) is
// checked less often, and its loop is still stopped within a few copies
// and cut to the first one.
func TestQuietGateLoop(t *testing.T) {
	sentence := "The answer is in the file notes.md, read it. "
	g := answerGate{quiet: true}
	var content strings.Builder
	for i := 0; i < 60; i++ {
		for _, w := range strings.SplitAfter(sentence, " ") {
			content.WriteString(w)
			if _, err := g.next(content.String()); err == errLoop {
				if n := strings.Count(content.String(), sentence); n > 5+quietStep/len(sentence)+1 {
					t.Errorf("stopped after %d copies", n)
				}
				if got := content.String()[:g.loop.keep]; got != sentence {
					t.Errorf("kept %q, want %q", got, sentence)
				}
				return
			}
		}
	}
	t.Error("the loop was never stopped")
}
