package chain

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"chainproxy/antiloop"
	"chainproxy/tools"
)

// clientTurns answers a request that carries its own tools: the client
// executes them, so the proxy only offers them (honouring tool_choice),
// removes duplicate calls from a batch, and refuses to pass on a call the
// conversation shows going nowhere (see JudgeClientCalls).
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
	history := ClientHistoryOf(r.req.Messages, r.req.ClientTools)
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
func (r *run) filterClientCalls(s *stage, calls []ToolCall, history ClientHistory) (keep []ToolCall, looping []loopCall, tooLong []ToolCall) {
	limit := r.e.cfg.Tools.MaxArgsBytes
	for i, j := range JudgeClientCalls(calls, r.req.ClientTools, history, r.e.cfg.Antiloop.MaxPolls) {
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

// ClientJudgement is the anti-loop's verdict on one call to a client tool.
type ClientJudgement struct {
	// Status is ToolOK (pass it on), ToolDuplicate (the same call is
	// earlier in the batch) or ToolBlocked (a loop: do not pass it on).
	Status string
	// Reason says why, for the trace and the model.
	Reason string
	// Earlier are the tool_call_ids of the earlier results of a loop.
	Earlier []string
}

// ClientHistory is what a conversation shows of the client-tool calls
// already made: the results of each call identity, oldest first.
type ClientHistory map[uint64][]clientResult

type clientResult struct {
	id, content string
}

// ClientHistoryOf reads the answered tool calls of msgs, keyed as
// JudgeClientCalls keys them.
func ClientHistoryOf(msgs []Message, clientTools []Tool) ClientHistory {
	results := map[string]string{}
	for _, m := range msgs {
		if m.Role == "tool" && m.ToolCallID != "" {
			results[m.ToolCallID] = m.Content
		}
	}
	idf := clientIdentities(clientTools)
	out := ClientHistory{}
	for _, m := range msgs {
		if m.Role != "assistant" {
			continue
		}
		for _, c := range m.ToolCalls {
			res, ok := results[c.ID]
			if !ok {
				continue
			}
			if sig, ok := idf.hash(c); ok {
				out[sig] = append(out[sig], clientResult{id: c.ID, content: res})
			}
		}
	}
	return out
}

// JudgeClientCalls applies the anti-loop to a batch of calls the client
// will execute. Client tools are volatile: a call already made runs again
// while its result changes, and is a loop when its last two results were
// the same, or once it ran maxPolls times. Identities fill in the tool
// schema's defaults and drop null optional fields, as for server tools.
// Calls whose arguments do not parse are passed on: the client's own
// validation answers them.
func JudgeClientCalls(calls []ToolCall, clientTools []Tool, history ClientHistory, maxPolls int) []ClientJudgement {
	idf := clientIdentities(clientTools)
	out := make([]ClientJudgement, len(calls))
	first := map[uint64]string{}
	for i, c := range calls {
		out[i].Status = ToolOK
		sig, ok := idf.hash(c)
		if !ok {
			continue
		}
		if id, dup := first[sig]; dup {
			out[i] = ClientJudgement{Status: ToolDuplicate, Reason: "not passed on: same call as " + id + " earlier in this response"}
			continue
		}
		first[sig] = c.ID
		h := history[sig]
		ids := make([]string, len(h))
		for k, r := range h {
			ids[k] = r.id
		}
		switch n := len(h); {
		case n >= 2 && antiloop.ResultHash(h[n-1].content) == antiloop.ResultHash(h[n-2].content):
			// Compared as the chain compares client results: without the
			// lines that only name the run (Codex's chunk ID and wall
			// time, Qwen Code's PGID), which differ at every run.
			out[i] = ClientJudgement{Status: ToolBlocked, Earlier: ids,
				Reason: "not passed on: the conversation already holds this call's result twice in a row, unchanged (" + strings.Join(ids[n-2:], ", ") + ")"}
		case n >= maxPolls:
			out[i] = ClientJudgement{Status: ToolBlocked, Earlier: ids,
				Reason: "not passed on: this call already ran " + strconv.Itoa(n) + " times in this conversation (antiloop.max_polls)"}
		}
	}
	return out
}

// identities keys client-tool calls by tool name.
type identities map[string]func([]byte) ([]byte, error)

func clientIdentities(clientTools []Tool) identities {
	out := make(identities, len(clientTools))
	for _, t := range clientTools {
		out[t.Name] = tools.NewClientIdentity(t.Name, t.Parameters)
	}
	return out
}

func (idf identities) hash(c ToolCall) (uint64, bool) {
	f, ok := idf[c.Name]
	if !ok {
		f = tools.NewClientIdentity(c.Name, nil)
	}
	b, err := f([]byte(c.Arguments))
	if err != nil {
		return 0, false
	}
	return antiloop.Hash(b), true
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
