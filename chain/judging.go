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
