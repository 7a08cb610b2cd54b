package chain

import (
	"strings"
	"testing"
)

// splitWhole is the reference: what ThinkSplitter must produce for s
// however s is cut into pieces.
func splitWhole(s string) (content, reasoning string) {
	t := strings.TrimLeft(s, thinkSpace)
	if !strings.HasPrefix(t, thinkOpen) {
		return s, ""
	}
	t = strings.TrimLeft(t[len(thinkOpen):], thinkSpace)
	i := strings.Index(t, thinkClose)
	// A tool call (the tag, then a JSON body) before </think> ends the
	// reasoning and is content.
	for from := 0; ; {
		k := strings.Index(t[from:], callOpen)
		if k < 0 || i >= 0 && from+k > i {
			break
		}
		k += from
		if body := strings.TrimLeft(t[k+len(callOpen):], jsonSpace); body != "" && (body[0] == '{' || body[0] == '[') {
			return t[k:], t[:k]
		}
		from = k + 1
	}
	if i < 0 {
		return "", t
	}
	return strings.TrimLeft(t[i+len(thinkClose):], thinkSpace), t[:i]
}

// feedAll runs pieces through a fresh splitter and joins its outputs.
func feedAll(pieces ...string) (content, reasoning string) {
	var s ThinkSplitter
	var c, r strings.Builder
	for _, p := range pieces {
		pc, pr := s.Feed(p)
		c.WriteString(pc)
		r.WriteString(pr)
	}
	pc, pr := s.Flush()
	c.WriteString(pc)
	r.WriteString(pr)
	return c.String(), r.String()
}

var thinkCases = []struct {
	name                      string
	in                        string
	wantContent, wantThinking string
}{
	{"empty", "", "", ""},
	{"plain", "Hello, world.", "Hello, world.", ""},
	{"plain with leading space", "  Hello", "  Hello", ""},
	{"whitespace only", "\n\n", "\n\n", ""},
	{"think then answer", "<think>\nLet me see.\n</think>\n\nThe answer is 4.", "The answer is 4.", "Let me see.\n"},
	{"leading whitespace before think", "\n <think>hmm</think>ok", "ok", "hmm"},
	{"empty think", "<think>\n\n</think>\n\nHi", "Hi", ""},
	{"unclosed think", "<think>still thinking", "", "still thinking"},
	{"unclosed think ending in partial close", "<think>abc</thi", "", "abc</thi"},
	{"partial open only", "<thi", "<thi", ""},
	{"not a think tag", "<thinking>x</thinking>", "<thinking>x</thinking>", ""},
	{"think later in content is content", "Hi <think>x</think>", "Hi <think>x</think>", ""},
	{"second think block is content", "<think>a</think>b<think>c</think>", "b<think>c</think>", "a"},
	{"nested open is reasoning", "<think>a<think>b</think>c", "c", "a<think>b"},
	{"lookalike close inside", "<think>a</thin>b</think>c", "c", "a</thin>b"},
	{"lt signs in reasoning", "<think>x < y << z </</think>done", "done", "x < y << z </"},
	{"unicode", "<think>réfléchis 🤔</think>Réponse: 42 ✓", "Réponse: 42 ✓", "réfléchis 🤔"},
	{"only tags", "<think></think>", "", ""},
	// Qwen3 may open a tool call inside its reasoning without closing it:
	// Ollama's qwen3 parser ends the reasoning there (ollama/ollama
	// model/parsers/qwen3.go: "If a tool call starts before </think>,
	// treat that as the end of thinking").
	{"call before close ends reasoning", "<think>\nI need the notes.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"notes.md\"}}\n</tool_call>",
		"<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"notes.md\"}}\n</tool_call>", "I need the notes.\n"},
	{"call array before close", "<think>two files<tool_call> [{", "<tool_call> [{", "two files"},
	{"call tag named in reasoning", "<think>Qwen writes <tool_call> tags.</think>ok", "ok", "Qwen writes <tool_call> tags."},
	{"call tag at the end of unclosed reasoning", "<think>a <tool_call>\n", "", "a <tool_call>\n"},
	{"call after close is content", "<think>a</think><tool_call>{}", "<tool_call>{}", "a"},
}

func TestThinkSplitterWhole(t *testing.T) {
	for _, tc := range thinkCases {
		t.Run(tc.name, func(t *testing.T) {
			c, r := feedAll(tc.in)
			if c != tc.wantContent || r != tc.wantThinking {
				t.Errorf("split(%q) = content %q, reasoning %q; want %q, %q", tc.in, c, r, tc.wantContent, tc.wantThinking)
			}
			// The reference must agree with the table too, or the fuzz
			// target would check against the wrong oracle.
			if c, r := splitWhole(tc.in); c != tc.wantContent || r != tc.wantThinking {
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
					c, r := feedAll(tc.in[:i], tc.in[i:j], tc.in[j:])
					if c != tc.wantContent || r != tc.wantThinking {
						t.Fatalf("split(%q | %q | %q) = content %q, reasoning %q; want %q, %q",
							tc.in[:i], tc.in[i:j], tc.in[j:], c, r, tc.wantContent, tc.wantThinking)
					}
				}
			}
			bytes := make([]string, n)
			for i := range n {
				bytes[i] = tc.in[i : i+1]
			}
			if c, r := feedAll(bytes...); c != tc.wantContent || r != tc.wantThinking {
				t.Errorf("byte by byte %q = content %q, reasoning %q; want %q, %q", tc.in, c, r, tc.wantContent, tc.wantThinking)
			}
		})
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
		f.Add(tc.in, uint8(3), uint8(5))
	}
	f.Fuzz(func(t *testing.T, in string, cut1, cut2 uint8) {
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
		c, r := feedAll(pieces...)
		wc, wr := splitWhole(in)
		if c != wc || r != wr {
			t.Fatalf("split(%q) = %q, %q; want %q, %q", pieces, c, r, wc, wr)
		}
		// Nothing but the two tags and whitespace next to them is lost.
		kept := in
		if t := strings.TrimLeft(in, thinkSpace); strings.HasPrefix(t, thinkOpen) {
			kept = t[len(thinkOpen):]
			if i := strings.Index(kept, thinkClose); i >= 0 {
				kept = kept[:i] + kept[i+len(thinkClose):]
			}
		}
		want := strings.Map(dropSpace, kept)
		if got := strings.Map(dropSpace, r+c); got != want {
			t.Fatalf("split(%q): reasoning+content without spaces = %q, want %q", in, got, want)
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
