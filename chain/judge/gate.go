package judge

import (
	"errors"
	"fmt"
	"strings"

	"chainproxy/antiloop"
)

// ErrLoop stops an upstream call whose answer (or reasoning) went into a
// repetition loop: what follows would be more of the same, at the price of
// tokens.
var ErrLoop = errors.New("repetition loop")

// AnswerGate decides, chunk by chunk, what of a model call's content may be
// shown to the client as it streams. It holds content back only while it
// may still turn out not to be an answer: the start of a text tool call, a
// copy of an earlier stage's answer, or the copy of a repeated segment that
// would make it a loop. It finds repetition loops in every call, shown or
// not, with the one detector the whole answer is judged by
// (antiloop.Repeats): a call streamed and the same call not streamed get
// the same verdict.
//
// The caller sets Calls, Bare, Copies and Quiet before the first chunk,
// in place: a gate is large, and one built and copied in would take its
// size on the stack of every streaming goroutine.
type AnswerGate struct {
	// Calls: text tool calls may come (hold them); Bare: as the whole
	// content too.
	Calls, Bare bool
	// Copies are the earlier stages' answers the content may still be
	// copying, trimmed (compared with whitespace collapsed: FoldPrefix).
	Copies []string
	// shown is how many bytes of the content were let through.
	shown int
	// Quiet: the content is not streamed to the client: nothing is shown,
	// loops are looked for only to stop the call and save its tokens.
	Quiet bool
	// judged is how much of a quiet call's content was judged.
	judged int
	// fast: Pass may take the content while it is shorter (0: it may not),
	// each new byte equal to the one per bytes before it when per is set.
	fast, per int
	stop      *[256]bool // the bytes Pass stops at
	rep       antiloop.Repeats
	// Loop is the repetition found, if any.
	Loop *antiloop.Loop
}

// The bytes the gate's fast path stops at: a line end, which the detector
// judges, and, where text tool calls may come, what starts one.
var lineEnds, callStarts = byteSet("\n"), byteSet("\n<[")

func byteSet(s string) (set [256]bool) {
	for i := range len(s) {
		set[s[i]] = true
	}
	return set
}

// Next takes the content so far and returns what more of it may be shown.
// It returns ErrLoop once the content holds a repetition loop: the call
// must stop, and its content is cut at g.Loop.Keep. While the content ends
// in a run one copy short of a loop, that copy is held back. The streaming
// path tries Pass first.
func (g *AnswerGate) Next(content string) (string, error) {
	if g.Quiet {
		// Nothing of a quiet call is shown: it is judged every quietBatch
		// bytes, which finds the same loop (the detector's verdict does
		// not depend on how the text is cut), at most that late.
		if len(content) < g.judged+quietBatch {
			return "", nil
		}
		g.judged = len(content)
	}
	if l, ok := g.rep.Scan(content); ok {
		return g.cut(content, l), ErrLoop
	}
	if g.Quiet {
		return "", nil
	}
	out := g.release(content, min(g.rep.Hold(), g.safe(content)))
	g.fast = 0
	if g.shown == len(content) {
		g.fast, g.per = g.rep.Plain()
		g.stop = &lineEnds
		if g.Calls {
			g.stop = &callStarts
		}
	}
	return out, nil
}

// Pass is Next for the usual chunk, on a path the compiler inlines, as the
// streaming path calls it for every chunk: all the content before it was
// shown, and its new bytes, short of g.fast, hold no line end for the
// detector and nothing that may start a text call. ok is false when Next
// must decide.
func (g *AnswerGate) Pass(content string) (out string, ok bool) {
	if len(content) >= g.fast {
		return "", false
	}
	for i, c := range []byte(content[g.shown:]) {
		if g.stop[c] || g.per != 0 && c != content[g.shown+i-g.per] {
			return "", false
		}
	}
	out = content[g.shown:]
	g.shown = len(content)
	g.rep.Took(len(content))
	return out, true
}

// Finish judges the complete content (its last line, which no newline
// ended) and reports whether it holds a loop; the content is then cut at
// g.Loop.Keep.
func (g *AnswerGate) Finish(content string) bool {
	if g.Loop != nil {
		return true
	}
	if l, ok := g.rep.End(content); ok {
		g.cut(content, l)
		return true
	}
	return false
}

// cut records loop l and returns what of the content before it may still
// be shown.
func (g *AnswerGate) cut(content string, l antiloop.Loop) string {
	g.Loop = &l
	if g.Quiet {
		return ""
	}
	content = content[:l.Keep]
	return g.release(content, g.safe(content))
}

// safe is how much of content may be shown so far.
func (g *AnswerGate) safe(content string) int {
	if g.shown == 0 && len(g.Copies) > 0 {
		for i := 0; i < len(g.Copies); {
			if prefix, _ := FoldPrefix(g.Copies[i], content); prefix {
				i++
				continue
			}
			// A new array: the stage's list serves its next calls too.
			g.Copies = append(g.Copies[:i:i], g.Copies[i+1:]...)
		}
		if len(g.Copies) > 0 {
			return 0
		}
	}
	if g.Calls {
		return callSafe(content, g.shown, g.Bare)
	}
	return len(content)
}

func (g *AnswerGate) release(content string, upto int) string {
	if upto <= g.shown {
		return ""
	}
	out := content[g.shown:upto]
	g.shown = upto
	return out
}

// End returns what is left to show of a call's final content: nothing when
// it was a copy or only calls, else what was held back. tc is what the
// content held in text calls.
func (g *AnswerGate) End(content string, tc TextCalls) string {
	for _, c := range g.Copies {
		if _, same := FoldPrefix(c, content); same {
			return ""
		}
	}
	if tc.Calls == nil && tc.Bad == "" {
		return g.release(content, len(content))
	}
	// Calls were taken out: show the text around them that is left, when
	// what was shown is its start.
	shown := strings.TrimSpace(content[:g.shown])
	if !strings.HasPrefix(tc.Rest, shown) {
		return ""
	}
	out := tc.Rest[len(shown):]
	g.shown = len(content)
	return out
}

// RepeatNote is the trace's error for a stage whose answer was cut.
func RepeatNote(l *antiloop.Loop) string {
	if l.Lines > 0 {
		return fmt.Sprintf("repetition loop: a block of %d line(s), %d characters without list markers, came %d times in a row; kept its first occurrence", l.Lines, l.Segment, l.Copies)
	}
	return fmt.Sprintf("repetition loop: a %d-character segment came %d times in a row; kept its first occurrence", l.Segment, l.Copies)
}

// FoldPrefix compares two texts with their whitespace runs made one space
// and their ends trimmed, without building either (it runs on streamed
// chunks): prefix reports whether t so folded is the start of c so folded,
// and same whether they are equal. A copy of an earlier answer with blank
// lines and indentation added is still a copy (issue 25). t's trailing
// whitespace counts as a space when c goes on: "Same " starts "Same
// answer", "Sameness" does not. Whitespace is ASCII's.
func FoldPrefix(c, t string) (prefix, same bool) {
	i, j := skipSpace(c, 0), skipSpace(t, 0)
	for j < len(t) {
		if isSpace(t[j]) {
			j = skipSpace(t, j)
			switch {
			case i == len(c) && j == len(t):
				return true, true
			case i == len(c) || !isSpace(c[i]):
				return false, false
			}
			i = skipSpace(c, i)
			if j == len(t) {
				return true, i == len(c)
			}
			continue
		}
		if i == len(c) || c[i] != t[j] {
			return false, false
		}
		i++
		j++
	}
	return true, skipSpace(c, i) == len(c)
}

func isSpace(b byte) bool {
	switch b {
	case ' ', '\t', '\n', '\r', '\v', '\f':
		return true
	}
	return false
}

func skipSpace(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

// ThinkGate watches a call's reasoning (reasoning_content, Ollama's
// thinking, a <think> block) for a repetition loop: a reasoning model that
// loops there would otherwise run until max_tokens and give no answer.
// Its detector is made at the first reasoning chunk: most calls have none.
type ThinkGate struct {
	rep antiloop.Repeats
	// on: some reasoning came; a call with none is not judged at its end.
	on bool
	// judged is how much of the reasoning was judged.
	judged int
}

// quietBatch is how many new bytes of a text nobody waits on (a quiet
// call's content, a reasoning) wait to be judged together: the loop found
// is the same, and a call that loops is stopped at most that late.
const quietBatch = 256

// Next takes the reasoning so far and returns ErrLoop once it holds a loop.
func (g *ThinkGate) Next(reasoning string) error {
	g.on = true
	if len(reasoning) < g.judged+quietBatch {
		return nil
	}
	g.judged = len(reasoning)
	if _, ok := g.rep.Scan(reasoning); ok {
		return ErrLoop
	}
	return nil
}

// End judges the complete reasoning and returns the loop it went into, if
// any: the reasoning is to be kept up to l.Keep.
func (g *ThinkGate) End(reasoning string) (l antiloop.Loop, ok bool) {
	if !g.on {
		return antiloop.Loop{}, false
	}
	return g.rep.End(reasoning)
}
