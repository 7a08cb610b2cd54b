package chain

import (
	"fmt"
	"unicode/utf8"
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
	for i, s := range t.Stages {
		if len(s.Output) <= n && len(s.Reasoning) <= n {
			continue
		}
		if !cut {
			out.Stages = append([]StageTrace(nil), t.Stages...)
			cut = true
		}
		c := &out.Stages[i]
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
	}
	return out, cut
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
