package chain

import (
	"context"
	"fmt"
	"strings"
	"time"

	"chainproxy/chain/judge"
)

// clientTurns answers a request that carries its own tools: the client
// executes them, so the proxy only offers them (honouring tool_choice),
// removes duplicate calls from a batch, and refuses to pass on a call the
// conversation shows going nowhere (see judge.ClientCalls).
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
	history := judge.ClientHistoryOf(r.req.Messages, r.req.ClientTools)
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
		calls, looping, tooLong := r.filterClientCalls(s, msg.ToolCalls, history)
		if len(calls) == 0 && len(looping) == 0 && len(tooLong) > 0 {
			// Nothing the client could run: say why once, then answer.
			if !reasked && r.left > 0 {
				reasked = true
				s.content = nil
				s.msgs = append(s.msgs, Message{Role: "assistant", Content: msg.Content}, Message{Role: "user", Content: argsTooLong(tooLong[0].Name, r.e.cfg.Tools.MaxArgsBytes)})
				continue
			}
			return nil, nil
		}
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
		// The model insists: explain the loop instead of passing it on,
		// and mark the stop in the trace as any stage's.
		s.stop = StageStoppedRepeat
		s.content = []string{loopExplanation(looping)}
		if err := r.emit(Event{Kind: EventDelta, Stage: s.idx, Node: s.node.Name, Content: s.content[0]}); err != nil {
			return nil, err
		}
		r.streamed = true
		return nil, nil
	}
}

// loopCall is a requested call that the history shows going nowhere.
type loopCall struct {
	call ToolCall
	ids  []string // tool_call_ids of the earlier results
}

// filterClientCalls drops batch duplicates and calls whose arguments went
// over tools.max_args_bytes (cut short, they are no call to pass on), and
// separates the looping calls, recording all in the trace.
func (r *run) filterClientCalls(s *stage, calls []ToolCall, history judge.ClientHistory) (keep []ToolCall, looping []loopCall, tooLong []ToolCall) {
	limit := r.e.cfg.Tools.MaxArgsBytes
	for i, j := range judge.ClientCalls(calls, r.req.ClientTools, history, r.e.cfg.Antiloop.MaxPolls) {
		c := calls[i]
		u := ToolUse{Name: c.Name, Args: r.traceArgs(c.Arguments), Status: j.Status, Result: j.Reason, Client: true, StartMS: time.Since(r.t0).Milliseconds()}
		switch {
		case limit > 0 && len(c.Arguments) > limit:
			u.Status, u.Result = ToolError, argsTooLong(c.Name, limit)
			tooLong = append(tooLong, c)
		case j.Status == ToolOK:
			// Recorded as the chain records its client calls: passed on,
			// not run (the result is the next request's).
			u.Status, u.Result = ToolClient, clientPassed
			keep = append(keep, c)
		case j.Status == ToolBlocked:
			looping = append(looping, loopCall{call: c, ids: j.Earlier})
		}
		if s.span != nil {
			// The client runs what passes: its span is the hand-over.
			now := time.Now()
			r.toolSpan(s, c.ID, &u, now, now)
		}
		s.st.ToolsUsed = append(s.st.ToolsUsed, u)
	}
	r.trace.Stages[s.idx] = s.st
	return keep, looping, tooLong
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
