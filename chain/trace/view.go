package trace

import (
	"fmt"
	"unicode/utf8"

	"chainproxy/chain/node"
)

// OutputCap is how many bytes of a stage's output and reasoning a response
// carries. Answers go to chat clients on every request; the whole text stays
// in the stored trace (GET /v1/chain/traces/{id}).
const OutputCap = 4 << 10

// Capped returns t with each stage's Output and Reasoning cut to at most n
// bytes (on a rune boundary), each cut stage saying in Cut what it lost, and
// whether anything was cut. t is not modified.
func (t *Trace) Capped(n int) (Trace, bool) {
	out := *t
	cut := false
	for i := range t.Stages {
		c, ok := t.Stages[i].Capped(n)
		if !ok {
			continue
		}
		if !cut {
			out.Stages = append([]StageTrace(nil), t.Stages...)
			cut = true
		}
		out.Stages[i] = c
	}
	return out, cut
}

// Capped returns s with its output and reasoning cut to at most n bytes
// each, Cut saying so; false, and s as it is, when neither is longer.
func (s *StageTrace) Capped(n int) (StageTrace, bool) {
	c := *s
	if len(s.Output) <= n && len(s.Reasoning) <= n {
		return c, false
	}
	var note string
	if len(s.Output) > n {
		c.Output = truncate(s.Output, n)
		note = fmt.Sprintf("output: %d of %d bytes cut", len(s.Output)-len(c.Output), len(s.Output))
	}
	if len(s.Reasoning) > n {
		c.Reasoning = truncate(s.Reasoning, n)
		if note != "" {
			note += "; "
		}
		note += fmt.Sprintf("reasoning: %d of %d bytes cut", len(s.Reasoning)-len(c.Reasoning), len(s.Reasoning))
	}
	c.Cut = note + "; the whole text is in GET /v1/chain/traces/{id}"
	return c, true
}

// truncate cuts s to at most n bytes without splitting a rune.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// PromptCap is how many bytes of each message a stored trace keeps of what
// a model call sent: enough to read a prompt, bounded so that a long
// conversation's trace does not grow with every call's whole history.
const PromptCap = 4 << 10

// maxPromptMessages bounds the messages kept per call in a stored trace:
// the first and the most recent, the middle elided.
const maxPromptMessages = 256

// HasPrompts reports whether t recorded the messages of its model calls
// (every run but a relay does), for WithPrompts.
func (t *Trace) HasPrompts() bool {
	for _, s := range t.Stages {
		for _, c := range s.Calls {
			if c.sent != nil {
				return true
			}
		}
	}
	return false
}

// WithPrompts returns t with each model call's Messages: what the call
// sent, each message cut to PromptCap bytes and passed through redact (the
// server's secrets), fitted parts marked. It is for the stored trace (GET
// /v1/chain/traces/{id}); responses carry no prompts. t is not modified.
func (t *Trace) WithPrompts(redact func(string) string) Trace {
	out := *t
	out.Stages = append([]StageTrace(nil), t.Stages...)
	// A stage's calls resend the same messages: each text is cut and
	// redacted once.
	done := map[string]string{}
	clean := func(s string) string {
		if s == "" {
			return s
		}
		if c, ok := done[s]; ok {
			return c
		}
		c := s
		if len(c) > PromptCap {
			c = truncate(c, PromptCap) + fmt.Sprintf("\n[… %d more bytes not kept in the trace]", len(s)-len(truncate(c, PromptCap)))
		}
		c = redact(c)
		done[s] = c
		return c
	}
	for i := range out.Stages {
		st := &out.Stages[i]
		if len(st.Calls) == 0 {
			continue
		}
		st.Calls = append([]ModelCall(nil), st.Calls...)
		for j := range st.Calls {
			c := &st.Calls[j]
			if c.sent == nil {
				continue
			}
			c.Messages = promptMessages(c.sent, c.marks, clean)
		}
	}
	return out
}

func promptMessages(sent []node.Message, marks []string, clean func(string) string) []PromptMessage {
	keep := func(i int) bool {
		return len(sent) <= maxPromptMessages || i < 16 || i >= len(sent)-(maxPromptMessages-16)
	}
	out := make([]PromptMessage, 0, min(len(sent), maxPromptMessages+1))
	for i, m := range sent {
		if !keep(i) {
			if keep(i - 1) {
				out = append(out, PromptMessage{Role: "system", Content: fmt.Sprintf("[%d messages not kept in the trace]", len(sent)-maxPromptMessages), Fit: FitOmitted})
			}
			continue
		}
		pm := PromptMessage{Role: m.Role, Content: clean(m.Content), Name: m.Name, ToolCallID: m.ToolCallID}
		if len(m.Parts) > 0 {
			// The trace keeps no image or file bytes: it says they were sent.
			pm.Content += "\n[sent with " + PartsOf(m.Parts) + "]"
		}
		for _, tc := range m.ToolCalls {
			pm.ToolCalls = append(pm.ToolCalls, PromptToolCall{ID: tc.ID, Name: tc.Name, Arguments: clean(tc.Arguments)})
		}
		if marks != nil {
			pm.Fit = marks[i]
		}
		out = append(out, pm)
	}
	return out
}

// PartsOf counts parts as PartsCount says them.
func PartsOf(parts []node.Part) string {
	images, files := 0, 0
	for _, p := range parts {
		if p.Kind == node.PartFile {
			files++
		} else {
			images++
		}
	}
	return PartsCount(images, files)
}

// PartsCount says "1 image part", "2 file parts", "1 image part and 1
// file part": the trace's words for the parts a message sent, or was not
// shown (a stage's reasons, the line in their place).
func PartsCount(images, files int) string {
	say := func(n int, kind string) string {
		s := fmt.Sprintf("%d %s part", n, kind)
		if n != 1 {
			s += "s"
		}
		return s
	}
	switch {
	case files == 0:
		return say(images, "image")
	case images == 0:
		return say(files, "file")
	}
	return say(images, "image") + " and " + say(files, "file")
}
