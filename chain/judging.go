package chain

import (
	"encoding/json"
	"fmt"
	"strings"

	"chainproxy/chain/judge"
)

// This file is the engine's side of the answer judges (package judge):
// what a stage does with their verdicts.

// badTextCall feeds back content that looked like a tool call but could not
// be read. It counts as a format error, like a call to an unknown tool, and
// is in the trace as a failed call so that the stop is explained.
func (r *run) badTextCall(s *stage, tc judge.TextCalls) error {
	names := make([]string, len(s.tools)) // what this stage is offered, client tools included
	for i, t := range s.tools {
		names[i] = t.Name
	}
	example := "list_dir"
	if len(names) > 0 {
		example = names[0]
	}
	note := fmt.Sprintf("error: your tool call could not be read (%s). You wrote: %s\nWrite each call as <tool_call>{\"name\": %q, \"arguments\": {…}}</tool_call> with valid JSON, or answer in plain text. Available tools: %s.",
		tc.Bad, tc.BadText, example, strings.Join(names, ", "))
	s.msgs = append(s.msgs, Message{Role: "user", Content: note})
	s.fmtErrs++
	if s.fmtErrs >= r.e.cfg.Antiloop.MaxFormatErrors {
		s.stop = StageStoppedFormatErrors
	}
	name := tc.BadName
	if name == "" {
		name = "(unreadable)"
	}
	u := ToolUse{Name: name, Args: json.RawMessage("{}"), Status: ToolError, Result: note}
	s.st.ToolsUsed = append(s.st.ToolsUsed, u)
	r.trace.Stages[s.idx] = s.st
	return r.emit(Event{Kind: EventTool, Stage: s.idx, Node: s.node.Name, Turn: s.st.Turns, ToolUse: &u})
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
		why, replace = "reasoning: "+judge.RepeatNote(s.thinkLoop), true
	case s.loop != nil:
		why = judge.RepeatNote(s.loop)
	case answer == "":
		why, replace = "empty answer", true
	default:
		for _, e := range earlier {
			if _, same := judge.FoldPrefix(e.answer(), full); same {
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

// thinkLooped judges a call's complete reasoning and reports whether it
// went into a loop: the stage then records the loop, keeps the reasoning
// up to its first copy, and the call's answer and calls count for nothing.
func (r *run) thinkLooped(s *stage, g *judge.ThinkGate, reasoning string) bool {
	l, ok := g.End(reasoning)
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
