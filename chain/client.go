package chain

import (
	"context"
	"fmt"
	"strings"

	"chainproxy/antiloop"
)

// clientTurns answers a request that carries its own tools: the client
// executes them, so the proxy only offers them (honouring tool_choice),
// removes duplicate calls from a batch, and refuses to pass on a call the
// conversation already shows made twice (a client agent stuck in a loop).
func (r *run) clientTurns(ctx context.Context, s *stage) (*Message, error) {
	offered := r.req.ClientTools
	tc := r.req.ToolChoice
	switch tc.Mode {
	case "none":
		offered = nil
	case "function":
		offered = nil
		for _, t := range r.req.ClientTools {
			if t.Name == tc.Name {
				offered = []Tool{t}
			}
		}
	}
	mustCall := len(offered) > 0 && (tc.Mode == "function" || tc.Mode == "required")
	history := historySignatures(r.req.Messages)
	reasked := false
	for {
		msg, err := r.call(ctx, s, offered)
		if err != nil {
			return nil, err
		}
		if dropped := r.dropUnoffered(s, &msg, offered); len(dropped) > 0 && len(msg.ToolCalls) == 0 && msg.Content == "" {
			// Only calls the client cannot execute: ask once more, then
			// answer in one call offering no tools.
			s.msgs = append(s.msgs, Message{Role: "assistant"}, Message{Role: "user", Content: unofferedNote(dropped, offered)})
			if !reasked && r.left > 0 {
				reasked = true
				continue
			}
			if r.left > 0 {
				s.msgs[len(s.msgs)-1].Content = unofferedNote(dropped, nil)
				if _, err := r.callNoTurn(ctx, s); err != nil {
					return nil, err
				}
			}
			return nil, nil
		}
		if len(msg.ToolCalls) == 0 {
			if mustCall && !reasked && r.left > 0 {
				// tool_choice demanded a call: ask once more, plainly.
				reasked = true
				s.content = nil
				s.msgs = append(s.msgs, msg, Message{Role: "user", Content: mustCallNote(tc, offered)})
				continue
			}
			return nil, nil
		}
		calls, looping := r.filterClientCalls(s, msg.ToolCalls, history)
		if len(looping) == 0 {
			msg.ToolCalls = calls
			msg.Reasoning = s.reason
			return &msg, nil
		}
		if !reasked && r.left > 0 {
			reasked = true
			s.content = nil
			s.msgs = append(s.msgs, Message{Role: "assistant", Content: msg.Content}, Message{Role: "user", Content: loopNote(looping)})
			continue
		}
		// The model insists: explain the loop instead of passing it on.
		s.content = []string{loopExplanation(looping)}
		if err := r.emit(Event{Kind: EventDelta, Stage: s.idx, Node: s.node.Name, Content: s.content[0]}); err != nil {
			return nil, err
		}
		r.streamed = true
		return nil, nil
	}
}

// loopCall is a requested call that the history already shows made twice.
type loopCall struct {
	call ToolCall
	ids  []string // tool_call_ids of the earlier results
}

// filterClientCalls drops batch duplicates and separates the looping calls,
// recording both in the trace.
func (r *run) filterClientCalls(s *stage, calls []ToolCall, history map[uint64][]string) ([]ToolCall, []loopCall) {
	var keep []ToolCall
	var looping []loopCall
	seen := map[uint64]bool{}
	for _, c := range calls {
		u := ToolUse{Name: c.Name, Args: argsJSON(c.Arguments), Status: ToolOK, Result: "returned to the client to execute"}
		sig, err := antiloop.Signature(c.Name, []byte(c.Arguments))
		switch {
		case err != nil:
			// Malformed arguments: the client's own validation answers it.
			keep = append(keep, c)
		case seen[sig]:
			u.Status, u.Result = ToolDuplicate, "not passed on: same call twice in one response"
		case len(history[sig]) >= 2:
			u.Status = ToolBlocked
			u.Result = "not passed on: the conversation already holds this call's result twice (" + strings.Join(history[sig], ", ") + ")"
			looping = append(looping, loopCall{call: c, ids: history[sig]})
		default:
			keep = append(keep, c)
		}
		if err == nil {
			seen[sig] = true
		}
		s.st.ToolsUsed = append(s.st.ToolsUsed, u)
	}
	r.trace.Stages[s.idx] = s.st
	return keep, looping
}

// historySignatures maps each call signature in the conversation that has a
// result to the IDs of its results.
func historySignatures(msgs []Message) map[uint64][]string {
	answered := map[string]bool{}
	for _, m := range msgs {
		if m.Role == "tool" && m.ToolCallID != "" {
			answered[m.ToolCallID] = true
		}
	}
	out := map[uint64][]string{}
	for _, m := range msgs {
		if m.Role != "assistant" {
			continue
		}
		for _, c := range m.ToolCalls {
			if !answered[c.ID] {
				continue
			}
			if sig, err := antiloop.Signature(c.Name, []byte(c.Arguments)); err == nil {
				out[sig] = append(out[sig], c.ID)
			}
		}
	}
	return out
}

func mustCallNote(tc ToolChoice, offered []Tool) string {
	if tc.Mode == "function" {
		return fmt.Sprintf("You must answer by calling the function %s.", tc.Name)
	}
	names := make([]string, len(offered))
	for i, t := range offered {
		names[i] = t.Name
	}
	return "You must answer by calling one of these functions: " + strings.Join(names, ", ") + "."
}

func loopNote(looping []loopCall) string {
	var b strings.Builder
	for _, l := range looping {
		fmt.Fprintf(&b, "The call %s %s was already made %d times; its result is in the tool messages %s above. Do not call it again: use that result, call something else, or answer.\n",
			l.call.Name, l.call.Arguments, len(l.ids), strings.Join(l.ids, ", "))
	}
	return b.String()
}

func loopExplanation(looping []loopCall) string {
	l := looping[0]
	return fmt.Sprintf("I stopped here to avoid a loop: I kept asking for %s %s, which was already run %d times in this conversation (results %s). Its result will not change; please check it, or tell me what to do differently.",
		l.call.Name, l.call.Arguments, len(l.ids), strings.Join(l.ids, ", "))
}
