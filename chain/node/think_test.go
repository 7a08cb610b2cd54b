package node

import (
	"strings"
	"testing"
)

// splitWhole is the reference: what ThinkSplitter must produce for s
// however s is cut into pieces, started inside or not. Started outside, a
// </think> before any <think> or tool call splits s only when s comes in
// one piece: the content sent before it cannot be taken back.
func splitWhole(s string, inside bool) (content, reasoning string) {
	t := strings.TrimLeft(s, thinkSpace)
	switch {
	case strings.HasPrefix(t, thinkOpen):
		t = strings.TrimLeft(t[len(thinkOpen):], thinkSpace)
	case !inside && !strayClose(s):
		return s, ""
	}
	i := strings.Index(t, thinkClose)
	// A tool call (the tag, then a JSON body) before </think> ends the
	// reasoning and is content.
	if k := callBefore(t, i); k >= 0 {
		return t[k:], t[:k]
	}
	if i < 0 {
		return "", t
	}
	return strings.TrimLeft(t[i+len(thinkClose):], thinkSpace), t[:i]
}

// strayClose reports whether s has a </think> before any <think> or tool
// call, not named in backticks or quotes nor inside code (after an odd
// number of backticks), and at a line's end: a block its model's prompt
// opened.
func strayClose(s string) bool {
	i := strings.Index(s, thinkClose)
	if i < 0 {
		return false
	}
	after := i + len(thinkClose)
	return !strings.Contains(s[:i], thinkOpen) && callBefore(s, i) < 0 && !(i > 0 && strings.ContainsRune("`\"'", rune(s[i-1]))) &&
		(after == len(s) || s[after] == '\n' || s[after] == '\r') &&
		strings.Count(s[:i], "`")%2 == 0
}

// callBefore is where the first tool call of t starts when it starts before
// index end (-1: anywhere), or -1.
func callBefore(t string, end int) int {
	for from := 0; ; {
		k := strings.Index(t[from:], callOpen)
		if k < 0 || end >= 0 && from+k > end {
			return -1
		}
		k += from
		if body := strings.TrimLeft(t[k+len(callOpen):], jsonSpace); body != "" && (body[0] == '{' || body[0] == '[') {
			return k
		}
		from = k + 1
	}
}

// split is what a stream fed to a ThinkSplitter gave.
type split struct {
	content, reasoning string
	// opened and known are PromptOpened before Flush.
	opened, known bool
}

// feedAll runs pieces through a fresh splitter and joins its outputs.
func feedAll(inside bool, pieces ...string) split {
	s := ThinkSplitter{Inside: inside}
	var c, r strings.Builder
	for _, p := range pieces {
		pc, pr := s.Feed(p)
		c.WriteString(pc)
		r.WriteString(pr)
	}
	var out split
	out.opened, out.known = s.PromptOpened()
	pc, pr := s.Flush()
	c.WriteString(pc)
	r.WriteString(pr)
	out.content, out.reasoning = c.String(), r.String()
	return out
}

var thinkCases = []struct {
	name string
	in   string
	// inside starts the splitter inside a block the prompt opened.
	inside                    bool
	wantContent, wantThinking string
}{
	{"empty", "", false, "", ""},
	{"plain", "Hello, world.", false, "Hello, world.", ""},
	{"plain with leading space", "  Hello", false, "  Hello", ""},
	{"whitespace only", "\n\n", false, "\n\n", ""},
	{"think then answer", "<think>\nLet me see.\n</think>\n\nThe answer is 4.", false, "The answer is 4.", "Let me see.\n"},
	{"leading whitespace before think", "\n <think>hmm</think>ok", false, "ok", "hmm"},
	{"empty think", "<think>\n\n</think>\n\nHi", false, "Hi", ""},
	{"unclosed think", "<think>still thinking", false, "", "still thinking"},
	{"unclosed think ending in partial close", "<think>abc</thi", false, "", "abc</thi"},
	{"partial open only", "<thi", false, "<thi", ""},
	{"not a think tag", "<thinking>x</thinking>", false, "<thinking>x</thinking>", ""},
	{"think later in content is content", "Hi <think>x</think>", false, "Hi <think>x</think>", ""},
	{"second think block is content", "<think>a</think>b<think>c</think>", false, "b<think>c</think>", "a"},
	{"nested open is reasoning", "<think>a<think>b</think>c", false, "c", "a<think>b"},
	{"lookalike close inside", "<think>a</thin>b</think>c", false, "c", "a</thin>b"},
	{"lt signs in reasoning", "<think>x < y << z </</think>done", false, "done", "x < y << z </"},
	{"unicode", "<think>réfléchis 🤔</think>Réponse: 42 ✓", false, "Réponse: 42 ✓", "réfléchis 🤔"},
	{"only tags", "<think></think>", false, "", ""},
	// Qwen3 may open a tool call inside its reasoning without closing it:
	// Ollama's qwen3 parser ends the reasoning there (ollama/ollama
	// model/parsers/qwen3.go: "If a tool call starts before </think>,
	// treat that as the end of thinking").
	{"call before close ends reasoning", "<think>\nI need the notes.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"notes.md\"}}\n</tool_call>", false,
		"<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"notes.md\"}}\n</tool_call>", "I need the notes.\n"},
	{"call array before close", "<think>two files<tool_call> [{", false, "<tool_call> [{", "two files"},
	{"call tag named in reasoning", "<think>Qwen writes <tool_call> tags.</think>ok", false, "ok", "Qwen writes <tool_call> tags."},
	{"call tag at the end of unclosed reasoning", "<think>a <tool_call>\n", false, "", "a <tool_call>\n"},
	{"call after close is content", "<think>a</think><tool_call>{}", false, "<tool_call>{}", "a"},

	// DeepSeek-R1's template ends the prompt with "<think>\n": its
	// content starts inside the block (deepseek-ai/DeepSeek-R1#352).
	{"close first", "Okay, so the user asks.\n</think>\n\nThe answer is 4.", false, "The answer is 4.", "Okay, so the user asks.\n"},
	{"close first after space", "\n Hmm.</think>\n4", false, "4", "Hmm."},
	{"close first, empty block", "\n\n</think>\n\nHi", false, "Hi", ""},
	{"close first, nothing after", "a</think>\n", false, "", "a"},
	{"close first, second close is content", "a</think>\nb</think>c", false, "b</think>c", "a"},
	{"open before close is content", "a <think> b </think> c", false, "a <think> b </think> c", ""},
	{"call before close is content", "Reading.\n<tool_call>\n{\"name\": \"read_file\"}\n</tool_call> </think>", false, "Reading.\n<tool_call>\n{\"name\": \"read_file\"}\n</tool_call> </think>", ""},
	{"call tag named before close", "Qwen writes <tool_call> tags.</think>\n\nok", false, "ok", "Qwen writes <tool_call> tags."},
	{"partial close only", "</thi", false, "</thi", ""},
	{"close only", "</think>", false, "", ""},
	{"inside, close only", "</think>", true, "", ""},
	{"less-than signs", "a < b, c <t d, <", false, "a < b, c <t d, <", ""},
	// A model that does not think, writing about the tag: named in
	// backticks or quotes, it closes nothing.
	{"tag named in backticks", "End it with `</think>` and go on.", false, "End it with `</think>` and go on.", ""},
	{"tag named in quotes", "It writes \"</think>\" then answers.</think>", false, "It writes \"</think>\" then answers.</think>", ""},
	// Code that strips the reasoning of DeepSeek-R1's answers, as models
	// write it for the user (split("\n</think>\n\n") is a common form:
	// e.g. LiveCodeBench's and TIGER-Lab's evaluation scripts): inside a
	// code block or span, the tag is text.
	{"tag in a code block", "Keep the answer:\n```python\nanswer = out.split(\"\\n</think>\\n\\n\", 1)[-1]\n```\nDone.", false, "Keep the answer:\n```python\nanswer = out.split(\"\\n</think>\\n\\n\", 1)[-1]\n```\nDone.", ""},
	{"tag in a code span", "Use `re.sub(r\".*?</think>\", \"\", s)` on it.", false, "Use `re.sub(r\".*?</think>\", \"\", s)` on it.", ""},
	{"close after a code block", "I try:\n```\nx = 1\n```\nfine.\n</think>\n\n1", false, "1", "I try:\n```\nx = 1\n```\nfine.\n"},

	{"inside", "Okay.\n</think>\n\nThe answer is 4.", true, "The answer is 4.", "Okay.\n"},
	{"inside, own open tag", "<think>\nhmm</think>ok", true, "ok", "hmm"},
	// Qwen3's /no_think: an empty block, then the answer.
	{"inside, empty block", "<think>\n\n</think>\n\nHi", true, "Hi", ""},
	{"inside, closed at once", "\n</think>\n\nHi", true, "Hi", ""},
	{"inside, unclosed", "\n\nstill thinking", true, "", "still thinking"},
	{"inside, whitespace only", "\n", true, "", ""},
	{"inside, partial open only", "<thi", true, "", "<thi"},
	{"inside, later open is reasoning", "a <think> b</think>c", true, "c", "a <think> b"},
	{"inside, call ends reasoning", "I need it.\n<tool_call>{\"name\": \"read_file\"}", true, "<tool_call>{\"name\": \"read_file\"}", "I need it.\n"},
	{"inside, nothing", "", true, "", ""},
}

func TestThinkSplitterWhole(t *testing.T) {
	for _, tc := range thinkCases {
		t.Run(tc.name, func(t *testing.T) {
			if got := feedAll(tc.inside, tc.in); got.content != tc.wantContent || got.reasoning != tc.wantThinking {
				t.Errorf("split(%q) = content %q, reasoning %q; want %q, %q", tc.in, got.content, got.reasoning, tc.wantContent, tc.wantThinking)
			}
			// The reference must agree with the table too, or the fuzz
			// target would check against the wrong oracle.
			if c, r := splitWhole(tc.in, tc.inside); c != tc.wantContent || r != tc.wantThinking {
				t.Errorf("splitWhole(%q) = %q, %q; want %q, %q", tc.in, c, r, tc.wantContent, tc.wantThinking)
			}
		})
	}
}

func TestThinkSplitterEveryOffset(t *testing.T) {
	for _, tc := range thinkCases {
		t.Run(tc.name, func(t *testing.T) {
			n := len(tc.in)
			for i := range n + 1 {
				for j := i; j <= n; j++ {
					checkPieces(t, tc.in, tc.inside, tc.in[:i], tc.in[i:j], tc.in[j:])
				}
			}
			bytes := make([]string, n)
			for i := range n {
				bytes[i] = tc.in[i : i+1]
			}
			checkPieces(t, tc.in, tc.inside, bytes...)
		})
	}
}

// checkPieces checks what a splitter gives for in cut into pieces against
// the reference. Where a </think> ends reasoning the prompt opened and the
// splitter did not start inside, the content it sent before that tag
// stays content: what it gave from there on must match.
func checkPieces(t *testing.T, in string, inside bool, pieces ...string) {
	t.Helper()
	got := feedAll(inside, pieces...)
	wc, wr := splitWhole(in, inside)
	if !inside && strayClose(in) {
		sent, ok := strings.CutSuffix(got.content, wc)
		if !ok || sent == "" && got.reasoning != wr || sent != "" && sent+got.reasoning != in[:strings.Index(in, thinkClose)] {
			t.Fatalf("split(%q) = content %q, reasoning %q; want content ending in %q after what the reasoning missed", pieces, got.content, got.reasoning, wc)
		}
	} else if got.content != wc || got.reasoning != wr {
		t.Fatalf("split(%q) = content %q, reasoning %q; want %q, %q", pieces, got.content, got.reasoning, wc, wr)
	}
	if whole := feedAll(inside, in); got.opened != whole.opened || got.known != whole.known {
		t.Fatalf("split(%q): PromptOpened = %v, %v; whole: %v, %v", pieces, got.opened, got.known, whole.opened, whole.known)
	}
}

func TestThinkSplitterPassesContentThrough(t *testing.T) {
	// Content that cannot open a think block must not be delayed: a client
	// sees each token as the upstream sends it.
	var s ThinkSplitter
	for _, p := range []string{"Hel", "lo ", "<think>", "x"} {
		if c, r := s.Feed(p); c != p || r != "" {
			t.Errorf("Feed(%q) = %q, %q; want %q, \"\"", p, c, r, p)
		}
	}
	// Reasoning flows as it arrives too, holding back only what could be
	// the start of </think>.
	s = ThinkSplitter{}
	steps := []struct{ in, content, reasoning string }{
		{"<th", "", ""},
		{"ink>", "", ""},
		{"step one", "", "step one"},
		{" </", "", " "},
		{"b>", "", "</b>"},
		{"</think", "", ""},
		{">", "", ""},
		{"\n\nAns", "Ans", ""},
		{"wer", "wer", ""},
	}
	for _, st := range steps {
		if c, r := s.Feed(st.in); c != st.content || r != st.reasoning {
			t.Errorf("Feed(%q) = %q, %q; want %q, %q", st.in, c, r, st.content, st.reasoning)
		}
	}
}

func TestThinkSplitterStrayCloseStreamed(t *testing.T) {
	// Started outside, content flows as it comes; a </think> before any
	// <think> makes what is not yet sent reasoning, and the tag is never
	// content.
	var s ThinkSplitter
	steps := []struct{ in, content, reasoning string }{
		{"Okay, the user", "Okay, the user", ""},
		{" asks <", " asks ", ""},
		{"/think>", "", ""},
		{"\n\n4", "4", ""},
		{" </think>", " </think>", ""},
	}
	for _, st := range steps {
		if c, r := s.Feed(st.in); c != st.content || r != st.reasoning {
			t.Errorf("Feed(%q) = %q, %q; want %q, %q", st.in, c, r, st.content, st.reasoning)
		}
	}
	if c, r := s.Feed("more"); c != "more" || r != "" {
		t.Errorf("after the block, Feed(%q) = %q, %q", "more", c, r)
	}
	s = ThinkSplitter{}
	if c, r := s.Feed("2+2 is"); c != "2+2 is" || r != "" {
		t.Errorf("Feed = %q, %q", c, r)
	}
	if c, r := s.Feed(" easy.\n</think>\n\n4"); c != "4" || r != " easy.\n" {
		t.Errorf("Feed = %q, %q; want the unsent part as reasoning", c, r)
	}
}

func TestThinkSplitterPromptOpened(t *testing.T) {
	tests := []struct {
		in            string
		inside        bool
		opened, known bool
	}{
		{"plain", false, false, false},
		{"a <think>b</think>", false, false, false},
		{"<think>a</think>b", false, false, true},
		{"<think>a", false, false, true},
		{"a</think>\nb", false, true, true},
		{"\n</think>\r\nb", false, true, true},
		{"a</think>b", false, false, false},
		{"the </think> tag", false, false, false},
		{"a <tool_call>{}</think>", false, false, false},
		{"a</think>b", true, true, true},
		{"a<tool_call>{}", true, true, true},
		{"<think>a</think>b", true, false, true},
		{"still inside", true, false, false},
		{"", true, false, false},
	}
	for _, tt := range tests {
		got := feedAll(tt.inside, tt.in)
		if got.opened != tt.opened || got.known != tt.known {
			t.Errorf("PromptOpened after %q (inside %v) = %v, %v; want %v, %v", tt.in, tt.inside, got.opened, got.known, tt.opened, tt.known)
		}
	}
}

func TestThinkSplitterFlushKeepsInside(t *testing.T) {
	s := ThinkSplitter{Inside: true}
	s.Feed("a</think>b")
	s.Flush()
	if c, r := s.Feed("x"); c != "" || r != "x" || !s.Inside {
		t.Errorf("after Flush, Feed(%q) = %q, %q, Inside %v; want reasoning", "x", c, r, s.Inside)
	}
}

func TestThinkSplitterFlushResets(t *testing.T) {
	var s ThinkSplitter
	s.Feed("<think>a")
	s.Flush()
	if c, r := s.Feed("plain"); c != "plain" || r != "" {
		t.Errorf("after Flush, Feed(%q) = %q, %q; want %q, \"\"", "plain", c, r, "plain")
	}
}

func FuzzThinkSplitter(f *testing.F) {
	for _, tc := range thinkCases {
		f.Add(tc.in, tc.inside, uint8(3), uint8(5))
	}
	f.Fuzz(func(t *testing.T, in string, inside bool, cut1, cut2 uint8) {
		// Cut the input into pieces of varying sizes derived from the seeds.
		var pieces []string
		rest := in
		for k := 0; rest != ""; k++ {
			n := int(cut1)
			if k%2 == 1 {
				n = int(cut2)
			}
			n = n%9 + 1
			n = min(n, len(rest))
			pieces = append(pieces, rest[:n])
			rest = rest[n:]
		}
		checkPieces(t, in, inside, pieces...)
		// In one piece, it is the reference exactly.
		whole := feedAll(inside, in)
		if wc, wr := splitWhole(in, inside); whole.content != wc || whole.reasoning != wr {
			t.Fatalf("split(%q) = %q, %q; want %q, %q", in, whole.content, whole.reasoning, wc, wr)
		}
		// Nothing but the two tags and whitespace next to them is lost.
		got := feedAll(inside, pieces...)
		out := got.reasoning + got.content
		kept := in
		if t := strings.TrimLeft(in, thinkSpace); strings.HasPrefix(t, thinkOpen) || inside || strayClose(in) {
			kept = strings.TrimPrefix(t, thinkOpen)
			if i := strings.Index(kept, thinkClose); i >= 0 && callBefore(kept, i) < 0 {
				kept = kept[:i] + kept[i+len(thinkClose):]
			}
			if !inside && !strings.HasPrefix(t, thinkOpen) {
				// Content sent before the </think> comes first.
				wc, _ := splitWhole(in, false)
				out = strings.TrimSuffix(got.content, wc) + got.reasoning + wc
			}
		}
		if got, want := strings.Map(dropSpace, out), strings.Map(dropSpace, kept); got != want {
			t.Fatalf("split(%q): reasoning and content without spaces = %q, want %q", in, got, want)
		}
	})
}

func dropSpace(r rune) rune {
	if strings.ContainsRune(thinkSpace, r) {
		return -1
	}
	return r
}

func BenchmarkThinkSplitter(b *testing.B) {
	pieces := strings.SplitAfter("<think> Let me think about this step by step. </think> The answer is forty-two, as everyone knows.", " ")
	b.Run("think", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var s ThinkSplitter
			for _, p := range pieces {
				s.Feed(p)
			}
			s.Flush()
		}
	})
	plain := strings.SplitAfter("The answer is forty-two, as everyone knows, and here is why in twenty words or so.", " ")
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var s ThinkSplitter
			for _, p := range plain {
				s.Feed(p)
			}
			s.Flush()
		}
	})
}
