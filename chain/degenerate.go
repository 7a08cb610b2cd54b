package chain

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A repetition loop is one segment of loopMinRunes characters or more
// repeated loopMinCopies times or more in a row (issue 10). Shorter
// periods are not loops: a rule of "=====" or a table's "|---|---|" repeats
// a few bytes, as real answers do.
const (
	loopMinRunes  = 20
	loopMinCopies = 5
	// loopMaxPeriod bounds the segment searched for, in bytes, so that the
	// check of each streamed chunk costs a bounded scan.
	loopMaxPeriod = 2048
	// loopTail is how much of the end of the content is looked for earlier.
	loopTail = 20
)

// errLoop stops an upstream call whose answer went into a repetition loop:
// what follows would be more of the same, at the price of tokens.
var errLoop = errors.New("repetition loop")

// repetition is a run of copies of one segment at the end of a text.
type repetition struct {
	// keep is where the text is cut if it is a loop: after the first copy.
	keep int
	// hold is where the fifth copy starts: a streamed answer is held back
	// from there while it may be one, so that the client never sees five.
	hold int
	// seg is the segment's length in characters, copies how many times it
	// came, whole.
	seg, copies int
}

// loop reports whether the run is long enough to be a repetition loop.
func (rep repetition) loop() bool { return rep.copies >= loopMinCopies }

// findRun reports whether s ends in two copies or more of a segment of
// loopMinRunes characters or more: two copies announce a loop (see
// answerGate.next). It looks for the last loopTail bytes earlier in s:
// a text that ends p-periodic has them p bytes back. The nearest
// occurrences are tried first, so the period found is the shortest; a
// shortest period under loopMinRunes is no loop. It scans at most
// loopMaxPeriod bytes and allocates nothing, so it can run on streamed
// chunks.
func findRun(s string) (repetition, bool) {
	const least = 2
	n := len(s)
	if n < loopMinRunes*least {
		return repetition{}, false
	}
	tail := s[n-loopTail:]
	// least copies of p bytes need least·p bytes: a longer period cannot
	// have them yet.
	lo := max(0, n-loopTail-min(loopMaxPeriod, n/least))
	// The last few occurrences of the tail that start from lo up to
	// n-loopTail-1 (periods from 1), found forward from its rarest byte:
	// IndexByte skips prose at vector speed when the byte is rare, where
	// strings.Index stops at every common first byte (and LastIndex is a
	// byte loop).
	at := rarest(tail)
	c := tail[at]
	var near [4]int
	found := 0
	for i := lo + at; ; {
		j := strings.IndexByte(s[i:n-loopTail+at], c)
		if j < 0 {
			break
		}
		i += j
		if start := i - at; s[start:start+loopTail] == tail {
			near[found%len(near)] = start
			found++
		}
		i++
	}
	for k := 0; k < min(found, len(near)); k++ {
		at := near[(found-1-k)%len(near)] // nearest first
		p := n - loopTail - at
		if least*p > n {
			return repetition{}, false
		}
		if s[n-least*p:n-p] == s[n-(least-1)*p:] {
			seg := s[n-p:]
			if p < loopMinRunes || utf8.RuneCountInString(seg) < loopMinRunes || !hasLetter(seg) {
				return repetition{}, false
			}
			start := n - least*p
			for start > 0 && s[start-1] == s[start-1+p] {
				start--
			}
			return repetition{keep: start + p, hold: start + (loopMinCopies-1)*p, seg: utf8.RuneCountInString(seg), copies: (n - start) / p}, true
		}
	}
	return repetition{}, false
}

// rarest is the index of the byte of s that is least common in text, by
// byteRank, the first of them on a tie. Without a branch on the ranks,
// which are random to the branch predictor.
func rarest(s string) int {
	best := uint(byteRank[s[0]]) << 16
	for i := 1; i < len(s); i++ {
		best = min(best, uint(byteRank[s[i]])<<16|uint(i))
	}
	return int(best & 0xffff)
}

// byteRank orders bytes by how common they are in prose, the most common
// highest: the space, then lower-case letters by their frequency in
// English and French. Every other byte (capitals, digits, punctuation,
// UTF-8 continuation bytes) ranks 0: they are rare enough.
var byteRank = func() (r [256]uint8) {
	const common = "zqxjkvbpygfwmucldhrsnioate " // least common first
	for i := range len(common) {
		r[common[i]] = uint8(i + 1)
	}
	return r
}()

// hasLetter reports whether s has a letter: a repeated run of digits,
// spaces and punctuation is a table or a drawing, not a model chanting.
func hasLetter(s string) bool {
	for _, r := range s {
		if unicode.IsLetter(r) {
			return true
		}
	}
	return false
}

// quietStep is how often, in bytes, the content of a call that is not
// streamed is checked for a repetition loop: a loop found a few hundred
// bytes late is cut at its first copy all the same.
const quietStep = 256

// answerGate decides, chunk by chunk, what of a model call's content may be
// shown to the client as it streams. It holds content back only while it
// may still turn out not to be an answer: the start of a text tool call,
// or a verbatim copy of an earlier stage's answer. It finds repetition
// loops in every call, shown or not.
type answerGate struct {
	// calls: text tool calls may come (hold them); bare: as the whole
	// content too.
	calls, bare bool
	// copies are the earlier stages' answers the content may still be
	// copying, trimmed.
	copies []string
	// shown is how many bytes of the content were let through.
	shown int
	// check is the content length from which runs must be looked for
	// again (see next).
	check int
	// quiet: the content is not streamed to the client, so no copy needs
	// holding back; runs are looked for every quietStep bytes, only to stop
	// the call and save its tokens.
	quiet bool
	// loop is the repetition found, if any.
	loop *repetition
}

// next takes the content so far and returns what more of it may be shown.
// It returns errLoop once the content ends in a repetition loop: the call
// must stop, and its content is cut at g.loop.keep. It holds back the
// content from where a fifth copy would start while the content ends in
// four. It looks for loops only every 40 bytes until two copies show up:
// see pass, which the streaming path tries first.
func (g *answerGate) next(content string) (string, error) {
	if len(content) >= g.check {
		return g.look(content)
	}
	// No two copies ended at the last check: four copies of p ≥ 20 bytes
	// cannot end within the next 40 bytes (at the last check, 2p of them
	// would have been there already), and the fifth starts later still.
	// A look every 40 bytes or so is enough.
	if g.quiet {
		return "", nil // nothing of a quiet call is shown
	}
	return g.release(content, g.safe(content)), nil
}

// pass is next for the usual chunk, on a path the compiler inlines, as
// the streaming path calls it for every chunk: between two looks for a
// loop, with the start of the answer out (so it is no copy of an earlier
// one) and nothing held, the new bytes go out unless one of them may
// start a text call. ok is false when next must decide.
func (g *answerGate) pass(content string) (out string, ok bool) {
	switch {
	case len(content) >= g.check:
		return "", false
	case g.quiet:
		return "", true // nothing of a quiet call is shown
	case g.shown == 0:
		return "", false
	}
	if g.calls {
		for i := g.shown; i < len(content); i++ {
			if c := content[i]; c == '<' || c == '[' {
				return "", false
			}
		}
	}
	out = content[g.shown:]
	g.shown = len(content)
	return out, true
}

// look is next when the content must be looked at for a loop.
func (g *answerGate) look(content string) (string, error) {
	rep, ok := findRun(content)
	g.check = 0
	switch {
	case !ok && g.quiet:
		g.check = len(content) + quietStep
	case !ok:
		g.check = len(content) + 2*loopMinRunes
	}
	switch {
	case ok && rep.loop():
		found := rep // copied here: taking rep's address would move every check's result to the heap
		g.loop = &found
		content = content[:rep.keep]
		return g.release(content, g.safe(content)), errLoop
	case ok:
		// Two to four copies so far: from now on every chunk is looked
		// at, and the fifth copy, once it may come, waits until it is
		// known not to be one (the run is no longer at the text's end).
		return g.release(content, min(rep.hold, g.safe(content))), nil
	}
	if out, ok := g.pass(content); ok {
		return out, nil
	}
	return g.release(content, g.safe(content)), nil
}

// safe is how much of content may be shown so far.
func (g *answerGate) safe(content string) int {
	if g.shown == 0 && len(g.copies) > 0 {
		t := strings.TrimSpace(content)
		for i := 0; i < len(g.copies); {
			if strings.HasPrefix(g.copies[i], t) {
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
		return callSafe(content, g.shown, g.bare)
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
func (g *answerGate) end(content string, tc textCalls) string {
	t := strings.TrimSpace(content)
	for _, c := range g.copies {
		if c == t {
			return ""
		}
	}
	if tc.calls == nil && tc.bad == "" {
		return g.release(content, len(content))
	}
	// Calls were taken out: show the text around them that is left, when
	// what was shown is its start.
	shown := strings.TrimSpace(content[:g.shown])
	if !strings.HasPrefix(tc.rest, shown) {
		return ""
	}
	out := tc.rest[len(shown):]
	g.shown = len(content)
	return out
}

// note is the trace's error for a stage whose answer was cut.
func (rep *repetition) note() string {
	return fmt.Sprintf("repetition loop: a %d-character segment came %d times in a row; kept its first occurrence", rep.seg, rep.copies)
}

// judgeAnswer marks a stage that ended ok degenerate (issue 10) when its answer
// is empty, was cut out of a repetition loop, or copies an earlier stage's
// answer word for word. A stage stopped by a guard keeps its status: format
// errors and repeats say more than what the answer became. The answering
// stage's empty or copied answer is replaced by the last good stage's.
func (r *run) judgeAnswer(s *stage, earlier []*stage) {
	if s.stop != "" {
		return
	}
	answer := strings.TrimSpace(s.answer())
	why := ""
	replace := false
	switch {
	case s.loop != nil:
		why = s.loop.note()
	case answer == "":
		why, replace = "empty answer", true
	default:
		for _, e := range earlier {
			if strings.TrimSpace(e.answer()) == answer {
				why, replace = "verbatim copy of "+e.node.Name+"'s answer", true
				break
			}
		}
	}
	if why == "" {
		return
	}
	s.stop = StageDegenerate
	if replace && s.answers {
		s.instead = lastGood(earlier)
		if s.instead != nil {
			why += "; answered with " + s.instead.node.Name + "'s answer"
		} else {
			why += "; no earlier stage had an answer to give instead"
		}
	}
	s.st.Error = why
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
