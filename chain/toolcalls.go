package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"chainproxy/antiloop"
	"chainproxy/chain/toolfit"
	chaintrace "chainproxy/chain/trace"
	"chainproxy/tools"

	"go.opentelemetry.io/otel/trace"
)

// execBatch runs the tool calls of one model response through the guards
// and returns the tool messages to feed back. The batch is judged as a
// whole: a repeat in it stops the stage after the batch, but the new calls
// around it still run, whatever their order. Every call gets a tool
// message, executed or not, so the conversation stays well-formed for the
// next call.
func (r *run) execBatch(ctx context.Context, s *stage, calls []ToolCall) ([]Message, error) {
	cfg := r.e.cfg
	out := make([]Message, 0, len(calls))
	b := batch{calls: calls, uses: make([]ToolUse, len(calls)), firstOf: map[uint64]int{}}
	for i, c := range calls {
		start := time.Now()
		u := &b.uses[i]
		*u = ToolUse{Name: c.Name, Args: r.traceArgs(c.Arguments), StartMS: start.Sub(r.t0).Milliseconds()}
		// The call's span is open from the start, guards included, and
		// the tool runs under it: its server continues the trace.
		cctx, span := ctx, trace.Span(nil)
		if s.span != nil {
			cctx, span = r.startToolSpan(ctx, s, c.ID, c.Name, start)
		}
		if err := r.judge(cctx, s, &b, i); err != nil {
			if span != nil {
				r.endToolSpan(span, u, err, time.Now())
			}
			return nil, err
		}
		u.DurationMS = time.Since(start).Milliseconds()
		// A tool server may echo the credentials it was sent: masked
		// before the model, the trace or a client sees the result.
		u.Result = r.e.redact.String(u.Result)
		model := tools.Truncate(u.Result, cfg.Tools.MaxResultBytes)
		u.Result = tools.Truncate(u.Result, cfg.Tools.TraceResultBytes)
		out = append(out, Message{Role: "tool", ToolCallID: c.ID, Name: c.Name, Content: model})
		s.st.ToolsUsed = append(s.st.ToolsUsed, *u)
		if span != nil {
			r.endToolSpan(span, u, nil, time.Now())
		}
		if c.Name != toolfit.FindTools || !s.finds {
			// What find_tools found is the stage's business: the later
			// stages need the facts, not the tool list.
			s.evidence = append(s.evidence, evidence{name: c.Name, args: string(u.Args), status: u.Status, result: model})
		}
		tu := *u
		if err := r.emit(Event{Kind: EventTool, Stage: s.idx, Node: s.node.Name, Turn: s.st.Turns, ToolUse: &tu}); err != nil {
			return nil, err
		}
	}
	if b.repeated && s.stop == "" {
		s.stop = StageStoppedRepeat
	}
	progress(s, b.uses)
	r.trace.Stages[s.idx] = s.st
	return out, nil
}

// judge decides the fate of call i of the batch and, when it may run, runs
// it; the outcome is written in b.uses[i].
func (r *run) judge(ctx context.Context, s *stage, b *batch, i int) error {
	cfg := r.e.cfg
	c, u := b.calls[i], &b.uses[i]
	if cfg.Tools.MaxArgsBytes > 0 && len(c.Arguments) > cfg.Tools.MaxArgsBytes {
		u.Status, u.Result = ToolError, argsTooLong(c.Name, cfg.Tools.MaxArgsBytes)
		s.fmtErrs++
		if s.fmtErrs >= cfg.Antiloop.MaxFormatErrors && s.stop == "" {
			s.stop = StageStoppedFormatErrors
		}
		return nil
	}
	args := []byte(c.Arguments)
	if c.Name == toolfit.FindTools && s.finds {
		r.judgeFind(ctx, s, b, i)
		return nil
	}
	err := r.e.runner.Check(c.Name, args)
	if err == nil && r.hiddenCall(c.Name) {
		// Not offered: the client's own tools stand in for it.
		err = fmt.Errorf("%w: %s", tools.ErrUnknownTool, c.Name)
	}
	if err != nil {
		u.Status = ToolError
		u.Result = checkNote(c.Name, err, s.tools, r.tv.names)
		s.fmtErrs++
		if s.fmtErrs >= cfg.Antiloop.MaxFormatErrors && s.stop == "" {
			s.stop = StageStoppedFormatErrors
		}
		return nil
	}
	s.fmtErrs = 0
	key, err := r.e.runner.Key(c.Name, args)
	if err != nil { // Check accepted it, so this is a bug
		return fmt.Errorf("identity of %s: %w", c.Name, err)
	}
	sig := antiloop.Hash(key.Identity)
	if j, ok := b.firstOf[sig]; ok && b.uses[j].Status != ToolError {
		u.Status, u.Result = ToolDuplicate, duplicateNote(b.calls[j].ID)+b.uses[j].Result
		return nil
	}
	// A duplicate of a call that failed is a retry: an error is no result
	// to hand on (it runs below, as a repeat after a failure does).
	b.firstOf[sig] = i
	stamp := r.stampOf(key)
	prev := s.seen[sig]
	switch {
	case prev != nil && key.Kind != tools.Volatile && prev.failed == "" && prev.stamp == stamp:
		u.Status, u.Result = ToolBlocked, repeatNote
		b.repeated = true
		return nil
	case prev != nil && prev.runs >= cfg.Antiloop.MaxPolls:
		u.Status, u.Result = ToolBlocked, pollsNote(prev.runs)
		b.repeated = true
		return nil
	}
	b.executed++
	if b.executed > cfg.Tools.MaxCallsPerTurn {
		// Not recorded as made: asked again next turn, it is a new call.
		u.Status, u.Result = ToolBlocked, capNote(cfg.Tools.MaxCallsPerTurn)
		return nil
	}
	if prev == nil {
		prev = &seenCall{kind: key.Kind, reads: key.Reads}
		if s.seen == nil {
			s.seen = map[uint64]*seenCall{}
		}
		s.seen[sig] = prev
	}
	prev.runs++
	prev.stamp = stamp
	if err := r.runTool(ctx, c, sig, key, stamp, u); err != nil {
		return err
	}
	if prev.ran(u) {
		b.repeated = true
		u.Result += failedNote
	}
	switch key.Kind {
	case tools.Volatile:
		if prev.runs > 1 && u.Status == ToolOK && u.Result == prev.last {
			b.repeated = true
			u.Result += sameResultNote
		}
		prev.last = u.Result
	case tools.Writing:
		r.invalidate(ctx, s, sig, key)
	}
	return nil
}

// releaseTimeout bounds giving back a cancelled call's claims, which
// outlives the request that made them.
const releaseTimeout = 2 * time.Second

// runTool asks the cross-request guards, then executes the call. Volatile
// calls skip the guards: their result changes by itself, so a stored one
// would be stale, and repeating them is what they are for.
func (r *run) runTool(ctx context.Context, c ToolCall, sig uint64, key tools.Key, stamp string, u *ToolUse) error {
	guarded := key.Kind != tools.Volatile
	if guarded {
		d, err := r.e.guard.AdmitStamped(ctx, r.req.Conversation, c.ID, sig, key.Kind == tools.Deterministic, key.Reads, stamp)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// The store degrades to memory by itself; an error here means
			// even that failed, and the call is safer not run than run twice.
			u.Status, u.Result = ToolBlocked, "not executed: anti-loop state unavailable: "+err.Error()
			return nil
		}
		switch d.Verdict {
		case antiloop.Cached:
			u.Status, u.Result = ToolCached, cachedNote(d)+string(d.Result)
			return nil
		case antiloop.Blocked:
			u.Status, u.Result = ToolBlocked, d.Reason+blockedAdvice
			return nil
		}
	}
	res, err := r.e.runner.Call(ctx, c.Name, []byte(c.Arguments))
	switch {
	case err == nil:
		u.Status, u.Result = ToolOK, res
	case ctx.Err() != nil:
		if guarded {
			// The client went away mid-call: give the claims back, so
			// that its retry may run the call rather than find it
			// "pending".
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
			if rerr := r.e.guard.Release(rctx, r.req.Conversation, c.ID, sig); rerr != nil {
				r.logger().Warn("anti-loop release failed", "tool", c.Name, "err", rerr)
			}
			cancel()
		}
		return ctx.Err()
	case errors.Is(err, tools.ErrBlocked):
		u.Status, u.Result = ToolBlocked, "blocked: "+err.Error()
	default:
		u.Status, u.Result = ToolError, "error: "+err.Error()
	}
	if !guarded {
		return nil
	}
	if u.Status == ToolError {
		// An error is not a result: nothing is stored, and the same call,
		// asked again here or in a later request, runs again.
		if rerr := r.e.guard.Release(ctx, r.req.Conversation, c.ID, sig); rerr != nil {
			r.logger().Warn("anti-loop release failed", "tool", c.Name, "err", rerr)
		}
		return nil
	}
	if rerr := r.e.guard.RecordStamped(ctx, r.req.Conversation, c.ID, sig, stamp, []byte(u.Result)); rerr != nil {
		r.logger().Warn("anti-loop record failed", "tool", c.Name, "err", rerr)
	}
	return nil
}

// traceArgs is the trace form of arguments (trace.Args), capped at
// tools.trace_result_bytes, as results are.
func (r *run) traceArgs(args string) json.RawMessage {
	return chaintrace.Args(args, r.e.cfg.Tools.TraceResultBytes)
}

// argsTooLong is what the model is told of a call whose arguments went
// over tools.max_args_bytes: they were not read, let alone run.
func argsTooLong(name string, limit int) string {
	return fmt.Sprintf("error: the arguments of %s are longer than %d bytes (tools.max_args_bytes) and were not read. Call %s again with shorter arguments, or do the work in smaller steps.", name, limit, name)
}

// checkNote is what the model is told of a call the runner refused. An
// unknown name gets the list of the tools this stage is offered, the
// client's included, each once (the runner's own message lists only the
// server's); bad arguments get the runner's message alone.
func checkNote(name string, err error, offered []Tool, server []string) string {
	if !errors.Is(err, tools.ErrUnknownTool) {
		return fmt.Sprintf("error: %v. Call %s with JSON arguments that match its schema.", err, name)
	}
	names := server
	if len(offered) > 0 {
		names = make([]string, len(offered))
		for i, t := range offered {
			names[i] = t.Name
		}
	}
	return fmt.Sprintf("error: unknown tool %q. Available tools: %s. Call one of them with JSON arguments that match its schema.", name, strings.Join(names, ", "))
}
