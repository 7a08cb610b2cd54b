package chain

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"chainproxy/chain/judge"
	"chainproxy/chain/toolfit"
)

// clientTurns answers a request that carries its own tools: the client
// executes them, so the proxy only offers them (honouring tool_choice),
// removes duplicate calls from a batch, and refuses to pass on a call the
// conversation shows going nowhere (see judge.ClientCalls). Under
// tool_choice auto or required they are fitted to the node's window as a
// chain stage's tools are (chooseTools): whole, compact, or the most
// relevant beside find_tools, which the proxy answers (clientFinds). The
// client sees neither find_tools nor a compact schema: only calls to its
// own tools, named and with the arguments as the model made them, checked
// against the schemas it sent. A relay's tools go as they came.
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
	default:
		if !r.relay {
			r.clientOnly = true
			r.chooseTools(ctx, s, nil)
			r.trace.Stages[s.idx] = s.st
		}
	}
	mustCall := len(offered) > 0 && (tc.Mode == "function" || tc.Mode == "required")
	history := judge.ClientHistoryOf(r.req.Messages, r.req.ClientTools)
	reasked := false
	for {
		if r.clientOnly {
			// What find_tools found is offered from this turn.
			offered = s.tools
		}
		msg, err := r.call(ctx, s, offered)
		if err != nil {
			return nil, err
		}
		if r.clientOnly {
			// The call may have been offered fewer, to fit (fittedCall).
			offered = s.tools
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
		if s.finds && slices.ContainsFunc(msg.ToolCalls, isFind) {
			if !slices.ContainsFunc(msg.ToolCalls, func(c ToolCall) bool { return !isFind(c) }) {
				if err := r.clientFinds(ctx, s, msg); err != nil || s.stop != "" {
					return nil, err
				}
				continue
			}
			r.dropFinds(s, &msg)
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

// isFind reports whether c calls the run's own find_tools (when s.finds:
// a client tool of that name is the client's).
func isFind(c ToolCall) bool { return c.Name == toolfit.FindTools }

// clientFinds answers a turn of find_tools calls alone, msg, as a stage's
// are (judgeFind): the tools found are offered from the next turn, and
// the exchange stays in the stage's messages, never the client's. A
// repeated query stops the stage, which answers in one call without
// tools; so does a spent turn budget, without the call.
func (r *run) clientFinds(ctx context.Context, s *stage, msg Message) error {
	s.msgs = append(s.msgs, msg)
	results, err := r.execBatch(ctx, s, msg.ToolCalls)
	if err != nil {
		return err
	}
	s.msgs = append(s.msgs, results...)
	switch {
	case s.stop != "":
		return r.finalCall(ctx, s)
	case r.left <= 0:
		s.stop = StageStoppedBudget
	}
	return nil
}

// dropFinds removes the find_tools calls from a turn that also calls the
// client's tools, recording them in the trace: the turn's calls go to the
// client, which never sees find_tools, and end the request.
func (r *run) dropFinds(s *stage, msg *Message) {
	keep := msg.ToolCalls[:0:0]
	for _, c := range msg.ToolCalls {
		if !isFind(c) {
			keep = append(keep, c)
			continue
		}
		s.st.ToolsUsed = append(s.st.ToolsUsed, ToolUse{Name: c.Name, Args: r.traceArgs(c.Arguments), Status: ToolBlocked, Result: "not run: the turn's calls to the client's tools went to the client, which ends the request"})
	}
	msg.ToolCalls = keep
	r.trace.Stages[s.idx] = s.st
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
