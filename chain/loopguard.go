package chain

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"chainproxy/antiloop"
	"chainproxy/tools"
)

// noProgressTurns consecutive turns without progress end a stage
// stopped_no_progress.
const noProgressTurns = 3

// failRepeats identical call+error pairs in a stage stop it
// stopped_repeat: an error is no result to reuse, so a failed call may be
// asked again (a tool that answered 503 "busy" is worth a retry), but a
// model that keeps getting the same error is not retrying, it is looping.
// OpenHands' StuckDetector and Roo Code / Cline's mistake limits stop at
// three too.
const failRepeats = 3

// seenCall is what a stage remembers of one call identity.
type seenCall struct {
	kind  tools.Kind
	reads string
	runs  int    // times it ran in the stage
	last  string // its last result, for volatile calls
	// stamp is the state of what it read when it last ran (stampOf): a
	// file changed since makes the call new.
	stamp string
	// failed is the error its last run ended in ("" when it succeeded),
	// and fails how many runs in a row ended in that same error.
	failed string
	fails  int
}

// stamper is the tool runner's optional capability to stamp the present
// state of what a built-in read depends on (tools.Registry.Stamp).
type stamper interface {
	Stamp(reads string) (stamp string, ok bool)
}

// stampOf is the stamp of what a deterministic read depends on, taken
// before it runs: the guard serves a stored result, and the stage calls a
// repeat, only while it is unchanged, so that a file edited by hand between
// two reads is read again (issue 25). It is empty for a call that cannot
// say what it reads (HTTP and MCP reads, writes, volatile calls), and
// antiloop.Unstamped when the state could not be stamped.
func (r *run) stampOf(key tools.Key) string {
	st, ok := r.e.runner.(stamper)
	if key.Kind != tools.Deterministic || key.Reads == "" || !ok {
		return ""
	}
	if stamp, ok := st.Stamp(key.Reads); ok {
		return stamp
	}
	return antiloop.Unstamped
}

// ran records the outcome of a run of the call and reports whether it was
// the failRepeats-th identical failure in a row.
func (c *seenCall) ran(u *ToolUse) bool {
	if u.Status != ToolError {
		c.failed, c.fails = "", 0
		return false
	}
	if u.Result == c.failed {
		c.fails++
	} else {
		c.failed, c.fails = u.Result, 1
	}
	return c.fails >= failRepeats
}

// batch is the state of one model response's calls being judged.
type batch struct {
	calls    []ToolCall
	uses     []ToolUse
	firstOf  map[uint64]int // identity hash → index of its first call
	executed int            // calls let through, for the per-turn cap
	repeated bool           // a repeat was found: the stage stops after the batch
}

// Texts the model receives in place of, or ahead of, a result. Each says
// what happened and what to do instead, because a small model told only
// "blocked" tends to ask again.
const (
	repeatNote = "not executed: this call repeats one already made in this stage (same tool, same arguments however written) " +
		"and nothing was written since, so it would return the same result. Use the result you already have, call something different, or answer."
	sameResultNote = "\n[anti-loop: this is the same result as the previous run of this call; polling stops here. Answer with it.]"
	blockedAdvice  = ". Do not ask for it again: use the results you have, call something different, or answer."
	failedNote     = "\n[anti-loop: this call failed the same way 3 times in a row; it will not be retried. Answer with what you have, or say what failed.]"
)

func duplicateNote(firstID string) string {
	return "[duplicate: the same call appears earlier in this response (" + firstID + "); it ran once, and this is its result]\n"
}

func cachedNote(d antiloop.Decision) string {
	return "[cached: this call repeats one made " + antiloop.FormatAge(d.Age) +
		" ago in this conversation and nothing it reads was written since; it was not run again, this is the earlier result]\n"
}

func pollsNote(runs int) string {
	return "not executed: this call already ran " + strconv.Itoa(runs) +
		" times in this stage (the most antiloop.max_polls allows). Answer with the latest result, or say the work is still under way."
}

func capNote(max int) string {
	return "not executed: only " + strconv.Itoa(max) + " calls run per turn and this one came after them. " +
		"It was not made and not recorded: ask for it again in your next turn if you still need it."
}

// invalidate makes what the write key touched stale: in the stage (the
// entries it read, and earlier writes, so that writing back an old value is
// not a "repeat"), and in the guard's store, which later stages and later
// requests consult. A write of unknown reach touches everything; any write
// touches the reads that do not say what they depend on.
func (r *run) invalidate(ctx context.Context, s *stage, self uint64, key tools.Key) {
	for sig, e := range s.seen {
		switch {
		case sig == self:
		case e.kind == tools.Writing, len(key.Writes) == 0, e.reads == "":
			// Earlier writes, everything for a write of unknown reach, and
			// the reads whose dependencies are unknown (HTTP, MCP).
			delete(s.seen, sig)
		case e.reads != "" && slices.Contains(key.Writes, e.reads):
			delete(s.seen, sig)
		}
	}
	if err := r.e.guard.Invalidate(ctx, r.req.Conversation, self, key.Writes); err != nil {
		r.logger().Warn("anti-loop invalidation failed", "err", err)
	}
}

// progress counts the turns whose calls all failed, were refused, were
// repeats or returned nothing, and stops the stage at noProgressTurns in a
// row: a model that keeps trying variants of a missing file is going
// nowhere, though no two of its calls are the same.
func progress(s *stage, uses []ToolUse) {
	for _, u := range uses {
		if u.Status == ToolOK && !emptyResult(u.Result) {
			s.idle = 0
			return
		}
	}
	s.idle++
	if s.idle >= noProgressTurns && s.stop == "" {
		s.stop = StageStoppedNoProgress
	}
}

// emptyResult reports a result that holds nothing: blank, or the built-ins'
// and HTTP tools' words for nothing.
func emptyResult(res string) bool {
	switch strings.TrimSpace(res) {
	case "", "(empty file)", "(empty directory)", "(empty response)":
		return true
	}
	return false
}
