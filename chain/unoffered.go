package chain

import (
	"slices"
	"strings"

	"chainproxy/chain/toolfit"
)

// dropUnoffered removes from msg the calls of tools the client did not
// offer, records them in the trace as blocked, and returns their names. A
// model may name a tool it saw elsewhere (its training, an earlier system
// prompt); passing such a call on would leave the client with a call it
// cannot execute.
func (r *run) dropUnoffered(s *stage, msg *Message, offered []Tool) []string {
	var dropped []string
	keep := msg.ToolCalls[:0:0]
	for _, c := range msg.ToolCalls {
		if slices.ContainsFunc(offered, func(t Tool) bool { return t.Name == c.Name }) {
			keep = append(keep, c)
			continue
		}
		dropped = append(dropped, c.Name)
		why := "not passed on: the client did not offer this tool"
		if r.clientOnly && r.clientNames()[c.Name] {
			why = "not passed on: the client's tool was withheld from this turn to fit the node's window (tool_fit)"
		}
		s.st.ToolsUsed = append(s.st.ToolsUsed, ToolUse{Name: c.Name, Args: r.traceArgs(c.Arguments), Status: ToolBlocked, Result: why})
	}
	if len(dropped) > 0 {
		msg.ToolCalls = keep
		r.trace.Stages[s.idx] = s.st
	}
	return dropped
}

// unofferedNote tells the model which of its calls cannot be made and what
// it may do instead.
func unofferedNote(dropped []string, offered []Tool) string {
	note := "These tools are not available: " + strings.Join(dropped, ", ") + "."
	if len(offered) == 0 {
		return note + " Answer the user directly, without tools."
	}
	names := make([]string, len(offered))
	find := false
	for i, t := range offered {
		names[i] = t.Name
		find = find || t.Name == toolfit.FindTools
	}
	note += " You may call only: " + strings.Join(names, ", ") + ", or answer directly."
	if find {
		// The client's tools were withheld to fit the window: the one
		// the model named may be among them.
		note += " To use a tool not offered yet, call find_tools first: the tools it finds are offered from your next turn."
	}
	return note
}
