package antiloop

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"
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

func lines(n int, format string) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, format, i)
	}
	return b.String()
}

const sentence = "The sky is blue because of Rayleigh scattering. "

// repeatCases is the corpus of the rules (issue 25), modelled on the public
// loop detectors' tests (Gemini CLI's loopDetectionService.test.ts,
// OpenHands' test_is_stuck.py, qwen-code's loop detection tests): for each
// rule a loop that must be caught and look-alikes that must not. keep is the
// text kept, when a loop.
var repeatCases = []struct {
	name string
	in   string
	loop bool
	keep string
}{
	// Long periods (issue 10).
	{"short text", "hello", false, ""},
	{"real answer", realAnswer, false, ""},
	{"four copies then more", "Answer: " + strings.Repeat(sentence, 4) + "And that is all there is to it.", false, ""},
	{"five copies", "Answer: " + strings.Repeat(sentence, 5), true, "Answer: " + strings.TrimSpace(sentence)},
	{"sixty copies", "Answer: " + strings.Repeat(sentence, 60), true, "Answer: " + strings.TrimSpace(sentence)},
	{"accented", strings.Repeat("Le ciel est bleu à cause de la diffusion. ", 5), true, "Le ciel est bleu à cause de la diffusion. "},
	{"segment too long to search", strings.Repeat(lines(100, "line %d of a long segment\n"), 5), false, ""},
	// Rule 1: anywhere in the answer, whatever follows.
	{"loop then a closing line", strings.Repeat(sentence, 40) + "\nThat is all I can say about it.", true, strings.TrimSpace(sentence)},
	{"loop in the middle", "Intro line here.\n" + strings.Repeat(sentence, 8) + "\n\nAnd then a different ending, long enough to matter.", true, "Intro line here.\n" + strings.TrimSpace(sentence)},
	// Rule 2: short periods with letters, ≥ 10 copies over ≥ 200 characters.
	{"short chant", strings.Repeat("All set. ", 100), true, "All set."},
	{"one word stutter", "I think " + strings.Repeat("and ", 300), true, "I think and"},
	{"laughter", "Ha" + strings.Repeat("ha ", 200), true, "Haha"},
	{"short, under 200 characters", strings.Repeat("la ", 60), false, ""},
	{"short, nine copies", strings.Repeat("Some words here, ", 9) + "then the rest of the answer is different.", false, ""},
	{"rule of equals", strings.Repeat("=", 400), false, ""},
	{"separator without letters", strings.Repeat("-- ", 200), false, ""},
	{"19 characters, ten copies", strings.Repeat("abcdefghijklmnopqr ", 11), true, "abcdefghijklmnopqr"},
	{"20 characters, five copies", strings.Repeat("abcdefghijklmnopqrs ", 5), true, "abcdefghijklmnopqrs "},
	// Rule 3: list markers ignored when lines are compared.
	{"numbered runaway", "Plan:\n" + lines(80, "%d. Open the config file and check the port.\n"), true, "Plan:\n1. Open the config file and check the port."},
	{"numbered short, few", lines(12, "%d) Check again.\n"), false, ""},
	{"numbered short, many", lines(40, "%d) Check it again.\n"), true, "1) Check it again."},
	{"bullets repeated", strings.Repeat("- Read the notes file once more.\n", 6), true, "- Read the notes file once more."},
	{"two-line steps repeated", lines(30, "%d. Read notes.md\n   - it says first draft\n"), true, "1. Read notes.md\n   - it says first draft"},
	{"numbered distinct steps", lines(30, "%d. Step number %[1]d of the procedure, done.\n"), false, ""},
	{"bullets with a long shared prefix", lines(30, "- The configuration file sets option number %d to its default value.\n"), false, ""},
	// Rule 4: code, tables, poems, records.
	{"six identical lines of code", "```python\n" + strings.Repeat("    layers.append(nn.Linear(512, 512))\n", 6) + "```\n", false, ""},
	{"nineteen identical lines of code", "```python\n" + strings.Repeat("    layers.append(nn.Linear(512, 512))\n", 19) + "```\nDone.", false, ""},
	{"twenty identical lines of code", "```python\n" + strings.Repeat("    layers.append(nn.Linear(512, 512))\n", 25) + "```\n", true, "```python\n    layers.append(nn.Linear(512, 512))"},
	{"identical table rows", "| a | b |\n|---|---|\n" + strings.Repeat("| item | ok, nothing to report |\n", 12), false, ""},
	{"poem refrain", strings.Repeat("", 0) + lines(6, "Verse %d goes on about the sea and sky.\nAnd still the river runs, the river runs.\n"), false, ""},
	{"json records", "[\n" + lines(40, "  {\"id\": %d, \"name\": \"same name\", \"status\": \"active\"},\n") + "]", false, ""},
	{"pretty json records", "[\n" + lines(20, "  {\n    \"id\": %d,\n    \"name\": \"same name\",\n    \"status\": \"active\"\n  },\n") + "]", false, ""},
	{"gemini ids", lines(30, "This is a unique sentence, id=%d. "), false, ""},
}

// judge feeds in to a Repeats in pieces of step bytes (0: whole) and ends it.
func judge(in string, step int) (Loop, bool) {
	var d Repeats
	if step > 0 {
		for i := step; i < len(in); i += step {
			if _, ok := d.Scan(in[:i]); ok {
				break
			}
		}
	}
	return d.End(in)
}

// TestRepeats: every case gets the same verdict and the same cut whole and
// streamed in pieces of any size.
func TestRepeats(t *testing.T) {
	for _, tt := range repeatCases {
		t.Run(tt.name, func(t *testing.T) {
			whole, ok := judge(tt.in, 0)
			if ok != tt.loop {
				t.Fatalf("judge(whole) = %+v, %v; want loop %v", whole, ok, tt.loop)
			}
			if ok {
				if got := strings.TrimSpace(tt.in[:whole.Keep]); got != strings.TrimSpace(tt.keep) {
					t.Errorf("kept %q, want %q", got, strings.TrimSpace(tt.keep))
				}
			}
			for _, step := range []int{1, 3, 7, 64} {
				got, gok := judge(tt.in, step)
				if gok != ok || got.Keep != whole.Keep || got.Start != whole.Start {
					t.Errorf("in pieces of %d: %+v, %v; whole: %+v, %v", step, got, gok, whole, ok)
				}
			}
		})
	}
}

// TestRepeatsRealAnswerPrefixes: no prefix of a real answer is a loop.
func TestRepeatsRealAnswerPrefixes(t *testing.T) {
	var d Repeats
	for i := 1; i <= len(realAnswer); i++ {
		if l, ok := d.Scan(realAnswer[:i]); ok {
			t.Fatalf("Scan(realAnswer[:%d]) = %+v: a real answer seen as a loop", i, l)
		}
	}
}

// TestRepeatsHold: streamed byte by byte, a chanted sentence is held from
// its fifth copy: what is before Hold never holds five copies.
func TestRepeatsHold(t *testing.T) {
	loop := strings.Repeat(sentence, 10)
	var d Repeats
	shown := 0
	for i := 1; i <= len(loop); i++ {
		if l, ok := d.Scan(loop[:i]); ok {
			if want := 5 * len(sentence); i != want {
				t.Errorf("loop found after %d bytes, want %d (five copies)", i, want)
			}
			if n := strings.Count(loop[:shown], sentence); n != 4 {
				t.Errorf("%d copies shown before the loop was found, want 4", n)
			}
			if l.Keep != len(sentence) {
				t.Errorf("Keep = %d, want %d", l.Keep, len(sentence))
			}
			return
		}
		shown = max(shown, min(i, d.Hold()))
	}
	t.Error("loop never found")
}

// TestRepeatsAllocs: judging allocates nothing, whatever the text.
func TestRepeatsAllocs(t *testing.T) {
	for _, tt := range repeatCases {
		if n := testing.AllocsPerRun(5, func() { judge(tt.in, 7) }); n != 0 {
			t.Errorf("%s: %v allocations, want 0", tt.name, n)
		}
	}
}

// TestRepeatsSize: the detector's state is a few hundred bytes, whatever
// the text: each model call carries one, two with reasoning.
func TestRepeatsSize(t *testing.T) {
	if n := unsafe.Sizeof(Repeats{}); n > 512 {
		t.Errorf("Repeats is %d bytes, want at most 512", n)
	}
}

// FuzzRepeats: on any text, cut anywhere, judging never panics, allocates
// nothing, and gives the verdict and the cut the whole text gets.
func FuzzRepeats(f *testing.F) {
	for _, tt := range repeatCases {
		f.Add(tt.in, uint8(5))
	}
	f.Fuzz(func(t *testing.T, in string, step uint8) {
		whole, ok := judge(in, 0)
		got, gok := judge(in, int(step%64)+1)
		if gok != ok || got != whole {
			t.Fatalf("in pieces of %d: %+v, %v; whole: %+v, %v", step%64+1, got, gok, whole, ok)
		}
		if ok && (whole.Keep <= whole.Start || whole.Keep > len(in)) {
			t.Fatalf("loop %+v out of the text's %d bytes", whole, len(in))
		}
	})
}

// BenchmarkRepeatsStream is the detector's cost on the streaming path: a
// real answer in 4-byte chunks. It reports the cost per answer.
func BenchmarkRepeatsStream(b *testing.B) {
	b.ReportAllocs()
	b.ReportMetric(float64((len(realAnswer)+3)/4), "chunks/op")
	for b.Loop() {
		var d Repeats
		for i := 4; i < len(realAnswer)+4; i += 4 {
			d.Scan(realAnswer[:min(i, len(realAnswer))])
		}
		d.End(realAnswer)
	}
}

// BenchmarkRepeatsWhole judges a long answer in one piece.
func BenchmarkRepeatsWhole(b *testing.B) {
	b.ReportAllocs()
	s := strings.Repeat(realAnswer, 4)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		var d Repeats
		d.End(s)
	}
}
