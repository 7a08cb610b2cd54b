package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"chainproxy/antiloop"
	"chainproxy/tools"
)

// execBatch runs the tool calls of one model response through the guards,
// in order, and returns the tool messages to feed back. It sets s.stop when a
// guard ends the stage. Every call gets a tool message, executed or not, so
// the conversation stays well-formed for the next call.
func (r *run) execBatch(ctx context.Context, s *stage, calls []ToolCall) ([]Message, error) {
	cfg := r.e.cfg
	out := make([]Message, 0, len(calls))
	uses := make([]ToolUse, len(calls))
	firstOf := map[uint64]int{} // signature → index of its first call in the batch
	executed := 0
	for i, c := range calls {
		start := time.Now()
		u := &uses[i]
		*u = ToolUse{Name: c.Name, Args: argsJSON(c.Arguments)}
		args := []byte(c.Arguments)
		var checkErr error
		if s.stop == "" {
			checkErr = r.e.runner.Check(c.Name, args)
		}
		switch {
		case s.stop != "":
			u.Status, u.Result = ToolBlocked, "not executed: the stage stopped ("+s.stop+")"
		case checkErr != nil:
			u.Status = ToolError
			u.Result = fmt.Sprintf("error: %v. Available tools: %s. Call one of them with JSON arguments that match its schema.", checkErr, strings.Join(r.tv.names, ", "))
			s.fmtErrs++
			if s.fmtErrs >= cfg.Antiloop.MaxFormatErrors {
				s.stop = StageStoppedFormatErrors
			}
		default:
			s.fmtErrs = 0
			sig, err := antiloop.Signature(c.Name, args)
			if err != nil { // Check accepted it, so this is a bug
				return nil, fmt.Errorf("signature of %s: %w", c.Name, err)
			}
			if j, ok := firstOf[sig]; ok {
				u.Status, u.Result = ToolDuplicate, uses[j].Result
				break
			}
			firstOf[sig] = i
			if _, ok := s.seen[sig]; ok {
				u.Status = ToolBlocked
				u.Result = "not executed: this exact call was already made in this stage; the stage stops here"
				s.stop = StageStoppedRepeat
				break
			}
			s.seen[sig] = struct{}{}
			executed++
			if executed > cfg.Tools.MaxCallsPerTurn {
				u.Status = ToolBlocked
				u.Result = "not executed: more than " + strconv.Itoa(cfg.Tools.MaxCallsPerTurn) + " calls in one turn"
				break
			}
			if err := r.runTool(ctx, c, sig, u); err != nil {
				return nil, err
			}
		}
		u.DurationMS = time.Since(start).Milliseconds()
		model := tools.Truncate(u.Result, cfg.Tools.MaxResultBytes)
		u.Result = tools.Truncate(u.Result, cfg.Tools.TraceResultBytes)
		out = append(out, Message{Role: "tool", ToolCallID: c.ID, Name: c.Name, Content: model})
		s.st.ToolsUsed = append(s.st.ToolsUsed, *u)
		s.evidence = append(s.evidence, evidence{name: c.Name, args: string(u.Args), status: u.Status, result: model})
		tu := *u
		if err := r.emit(Event{Kind: EventTool, Stage: s.idx, Node: s.node.Name, Turn: s.st.Turns, ToolUse: &tu}); err != nil {
			return nil, err
		}
	}
	r.trace.Stages[s.idx] = s.st
	return out, nil
}

// releaseTimeout bounds giving back a cancelled call's claims, which
// outlives the request that made them.
const releaseTimeout = 2 * time.Second

// runTool asks the cross-request guards, then executes the call.
func (r *run) runTool(ctx context.Context, c ToolCall, sig uint64, u *ToolUse) error {
	readOnly := r.tv.readOnly[c.Name]
	d, err := r.e.guard.Admit(ctx, r.req.Conversation, c.ID, sig, readOnly)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The store degrades to memory by itself; an error here means even
		// that failed, and the call is safer not run than run twice.
		u.Status, u.Result = ToolBlocked, "not executed: anti-loop state unavailable: "+err.Error()
		return nil
	}
	switch d.Verdict {
	case antiloop.Cached:
		u.Status, u.Result = ToolCached, string(d.Result)
		return nil
	case antiloop.Blocked:
		u.Status, u.Result = ToolBlocked, d.Reason
		return nil
	}
	res, err := r.e.runner.Call(ctx, c.Name, []byte(c.Arguments))
	switch {
	case err == nil:
		u.Status, u.Result = ToolOK, res
	case ctx.Err() != nil:
		// The client went away mid-call: give the claims back, so that
		// its retry may run the call rather than find it "pending".
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		if rerr := r.e.guard.Release(rctx, r.req.Conversation, c.ID, sig); rerr != nil {
			r.logger().Warn("anti-loop release failed", "tool", c.Name, "err", rerr)
		}
		cancel()
		return ctx.Err()
	case errors.Is(err, tools.ErrBlocked):
		u.Status, u.Result = ToolBlocked, "blocked: "+err.Error()
	default:
		u.Status, u.Result = ToolError, "error: "+err.Error()
	}
	if rerr := r.e.guard.Record(ctx, r.req.Conversation, c.ID, sig, []byte(u.Result)); rerr != nil {
		r.logger().Warn("anti-loop record failed", "tool", c.Name, "err", rerr)
	}
	return nil
}

// argsJSON is the trace form of arguments: the object when it parses, else
// the raw text as a JSON string, so a malformed call is still shown.
func argsJSON(args string) json.RawMessage {
	if strings.TrimSpace(args) == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(args)) {
		return json.RawMessage(args)
	}
	b, _ := json.Marshal(args)
	return b
}

// parseTextCalls turns [TOOL:name:{json}] written in content into calls.
func parseTextCalls(m Message) Message {
	calls, rest := tools.ParseTextCalls(m.Content)
	if len(calls) == 0 {
		return m
	}
	m.Content = rest
	for _, c := range calls {
		m.ToolCalls = append(m.ToolCalls, ToolCall{Name: c.Name, Arguments: c.Arguments})
	}
	return m
}
