package chain

import (
	"errors"
	"fmt"
	"strings"

	"chainproxy/antiloop"
	"chainproxy/chain/judge"
)

// errLoop stops an upstream call whose answer (or reasoning) went into a
// repetition loop: what follows would be more of the same, at the price of
// tokens.
var errLoop = errors.New("repetition loop")

// answerGate decides, chunk by chunk, what of a model call's content may be
// shown to the client as it streams. It holds content back only while it
// may still turn out not to be an answer: the start of a text tool call, a
// copy of an earlier stage's answer, or the copy of a repeated segment that
// would make it a loop. It finds repetition loops in every call, shown or
// not, with the one detector the whole answer is judged by
// (antiloop.Repeats): a call streamed and the same call not streamed get
// the same verdict.
type answerGate struct {
	// calls: text tool calls may come (hold them); bare: as the whole
	// content too.
	calls, bare bool
	// copies are the earlier stages' answers the content may still be
	// copying, trimmed (compared with whitespace collapsed: foldPrefix).
	copies []string
	// shown is how many bytes of the content were let through.
	shown int
	// quiet: the content is not streamed to the client: nothing is shown,
	// loops are looked for only to stop the call and save its tokens.
	quiet bool
	// judged is how much of a quiet call's content was judged.
	judged int
	// fast: pass may take the content while it is shorter (0: it may not),
	// each new byte equal to the one per bytes before it when per is set.
	fast, per int
	stop      *[256]bool // the bytes pass stops at
	rep       antiloop.Repeats
	// loop is the repetition found, if any.
	loop *antiloop.Loop
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

// next takes the content so far and returns what more of it may be shown.
// It returns errLoop once the content holds a repetition loop: the call
// must stop, and its content is cut at g.loop.Keep. While the content ends
// in a run one copy short of a loop, that copy is held back. The streaming
// path tries pass first.
func (g *answerGate) next(content string) (string, error) {
	if g.quiet {
		// Nothing of a quiet call is shown: it is judged every quietBatch
		// bytes, which finds the same loop (the detector's verdict does
		// not depend on how the text is cut), at most that late.
		if len(content) < g.judged+quietBatch {
			return "", nil
		}
		g.judged = len(content)
	}
	if l, ok := g.rep.Scan(content); ok {
		return g.cut(content, l), errLoop
	}
	if g.quiet {
		return "", nil
	}
	out := g.release(content, min(g.rep.Hold(), g.safe(content)))
	g.fast = 0
	if g.shown == len(content) {
		g.fast, g.per = g.rep.Plain()
		g.stop = &lineEnds
		if g.calls {
			g.stop = &callStarts
		}
	}
	return out, nil
}

// pass is next for the usual chunk, on a path the compiler inlines, as the
// streaming path calls it for every chunk: all the content before it was
// shown, and its new bytes, short of g.fast, hold no line end for the
// detector and nothing that may start a text call. ok is false when next
// must decide.
func (g *answerGate) pass(content string) (out string, ok bool) {
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

// finish judges the complete content (its last line, which no newline
// ended) and reports whether it holds a loop; the content is then cut at
// g.loop.Keep.
func (g *answerGate) finish(content string) bool {
	if g.loop != nil {
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
func (g *answerGate) cut(content string, l antiloop.Loop) string {
	g.loop = &l
	if g.quiet {
		return ""
	}
	content = content[:l.Keep]
	return g.release(content, g.safe(content))
}

// safe is how much of content may be shown so far.
func (g *answerGate) safe(content string) int {
	if g.shown == 0 && len(g.copies) > 0 {
		for i := 0; i < len(g.copies); {
			if prefix, _ := foldPrefix(g.copies[i], content); prefix {
				i++
				continue
			}
			// A new array: the stage's list serves its next calls too.
			g.copies = append(g.copies[:i:i], g.copies[i+1:]...)
		}
		if len(g.copies) > 0 {
			return 0
		}
	}
	if g.calls {
		return judge.CallSafe(content, g.shown, g.bare)
	}
	return len(content)
}

func (g *answerGate) release(content string, upto int) string {
	if upto <= g.shown {
		return ""
	}
	out := content[g.shown:upto]
	g.shown = upto
	return out
}

// end returns what is left to show of a call's final content: nothing when
// it was a copy or only calls, else what was held back. tc is what the
// content held in text calls.
func (g *answerGate) end(content string, tc judge.TextCalls) string {
	for _, c := range g.copies {
		if _, same := foldPrefix(c, content); same {
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

// repeatNoteFor is the trace's error for a stage whose answer was cut.
func repeatNoteFor(l *antiloop.Loop) string {
	if l.Lines > 0 {
		return fmt.Sprintf("repetition loop: a block of %d line(s), %d characters without list markers, came %d times in a row; kept its first occurrence", l.Lines, l.Segment, l.Copies)
	}
	return fmt.Sprintf("repetition loop: a %d-character segment came %d times in a row; kept its first occurrence", l.Segment, l.Copies)
}

// foldPrefix compares two texts with their whitespace runs made one space
// and their ends trimmed, without building either (it runs on streamed
// chunks): prefix reports whether t so folded is the start of c so folded,
// and same whether they are equal. A copy of an earlier answer with blank
// lines and indentation added is still a copy (issue 25). t's trailing
// whitespace counts as a space when c goes on: "Same " starts "Same
// answer", "Sameness" does not. Whitespace is ASCII's.
func foldPrefix(c, t string) (prefix, same bool) {
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

// judgeAnswer marks a stage that ended ok degenerate (issues 10, 25) when
// its answer is empty, was cut out of a repetition loop, copies an earlier
// stage's answer (whitespace aside), or when its reasoning went into a
// loop. A stage stopped by a guard keeps its status: format errors and
// repeats say more than what the answer became. The answering stage's
// empty, copied or missing answer is replaced by the last good stage's;
// stopped without an answer, too (the call it made offered no tools was
// only a tool call, dropped): the client never gets an empty reply.
func (r *run) judgeAnswer(s *stage, earlier []*stage) {
	full := s.answer()
	answer := strings.TrimSpace(full)
	why := ""
	replace := false
	switch {
	case s.stop == StageFailed || s.stop == StageSkippedOffline:
		return // no answer was asked of it: the stages before answer
	case s.stop != "" && (answer != "" || !s.answers):
		return
	case s.stop != "":
		why, replace = "no answer", true
	case s.thinkLoop != nil:
		why, replace = "reasoning: "+repeatNoteFor(s.thinkLoop), true
	case s.loop != nil:
		why = repeatNoteFor(s.loop)
	case answer == "":
		why, replace = "empty answer", true
	default:
		for _, e := range earlier {
			if _, same := foldPrefix(e.answer(), full); same {
				why, replace = "verbatim copy of "+e.node.Name+"'s answer", true
				break
			}
		}
	}
	if why == "" {
		return
	}
	if s.stop == "" {
		s.stop = StageDegenerate
	}
	if replace && s.answers {
		s.instead = lastGood(earlier)
		if s.instead != nil {
			why += "; answered with " + s.instead.node.Name + "'s answer"
		} else {
			why += "; no earlier stage had an answer to give instead"
		}
	}
	if s.st.Error != "" {
		why = s.st.Error + "; " + why
	}
	s.st.Error = why
}

// noAnswer is the reply when the answering stage has none and no earlier
// stage has one to give instead: an explanation, never an empty reply.
func noAnswer(s *stage) string {
	return "No answer: the model (" + s.node.Name + ") stopped without writing one (" + s.stop +
		"; see the trace). Ask again, or rephrase the request."
}

// thinkGate watches a call's reasoning (reasoning_content, Ollama's
// thinking, a <think> block) for a repetition loop: a reasoning model that
// loops there would otherwise run until max_tokens and give no answer.
// Its detector is made at the first reasoning chunk: most calls have none.
type thinkGate struct {
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

// next takes the reasoning so far and returns errLoop once it holds a loop.
func (g *thinkGate) next(reasoning string) error {
	g.on = true
	if len(reasoning) < g.judged+quietBatch {
		return nil
	}
	g.judged = len(reasoning)
	if _, ok := g.rep.Scan(reasoning); ok {
		return errLoop
	}
	return nil
}

// thinkLooped judges a call's complete reasoning and reports whether it
// went into a loop: the stage then records the loop, keeps the reasoning
// up to its first copy, and the call's answer and calls count for nothing.
func (r *run) thinkLooped(s *stage, g *thinkGate, reasoning string) bool {
	if !g.on {
		return false
	}
	l, ok := g.rep.End(reasoning)
	if !ok {
		return false
	}
	s.thinkLoop, s.reason = &l, reasoning[:l.Keep]
	r.logger().Info("repetition loop in reasoning", "stage", s.idx, "node", s.node.Name, "segment", l.Segment, "copies", l.Copies)
	return true
}

// lastGood is the last of stages whose answer can stand for a degenerate
// one: not failed, skipped or degenerate itself, and not empty.
func lastGood(stages []*stage) *stage {
	for i := len(stages) - 1; i >= 0; i-- {
		e := stages[i]
		switch e.st.Status {
		case StageFailed, StageSkippedOffline, StageDegenerate:
			continue
		}
		if strings.TrimSpace(e.answer()) != "" {
			return e
		}
	}
	return nil
}

// earlierAnswers are the trimmed, non-empty answers of stages, which a
// streamed answer is held back from the client while it may be copying.
func earlierAnswers(stages []*stage) []string {
	var out []string
	for _, e := range stages {
		if a := strings.TrimSpace(e.answer()); a != "" {
			out = append(out, a)
		}
	}
	return out
}
