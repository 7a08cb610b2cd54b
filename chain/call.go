package chain

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"chainproxy/chain/judge"
	"chainproxy/chain/node"
)

// One model call, by layer: turns is the stage's turn loop, call (or
// callNoTurn) accounts for one turn, fittedCall fits the prompt to the
// node's window (and refits once when the node refuses it), nodeCall
// makes the call to the node, and node.Caps.Chat applies the proxy's caps
// and masks to what the backend streams. nodeCall's steps each read alone:
// admit waits for the node's admission, stream collects the answer (and
// retries a batch request), recordCall writes the trace, and judgeCall
// turns what came back into the stage's message.

// contentRoom is what a call's content buffer starts with.
const contentRoom = 512

// callState is one model call's request and what its chunk callback fills
// in. It is pooled: a call's state is large (two loop detectors), and a
// chain makes one call per turn.
type callState struct {
	req                node.Request
	gate               judge.AnswerGate
	think              judge.ThinkGate
	content, reasoning strings.Builder
	calls              []ToolCall
	usage              *Usage
	finish, cut        string
	load               time.Duration // the node's node.Chunk.Load
	sent               bool          // whether this call's content reached the client
	shown              string        // the last answer text it streamed
	// live is whether the call answers the client (s.answers): its
	// content streams, held back while it may be a text tool call or a
	// copy of an earlier answer. parse is whether the node writes tool
	// calls as text.
	live, parse bool
}

var callStates = sync.Pool{New: func() any { return new(callState) }}

// free returns cs to the pool, keeping nothing the call's results hold:
// the builders' strings and the calls' slice are the caller's now.
func (cs *callState) free() {
	*cs = callState{}
	callStates.Put(cs)
}

// fittedCall is the fitted call: it fits s's messages to its node's
// window, calls the node, and refits, harder, when the node refuses a
// prompt the estimate said fits. The refit offers fewer tools if it must;
// when it is refused in turn, or weighs no less than the prompt refused,
// a last try offers find_tools alone: a stage is never skipped for its
// tools alone.
func (r *run) fittedCall(ctx context.Context, s *stage, offered []Tool) (Message, error) {
	f, err := r.fitShrinking(ctx, s, &offered, 1)
	if err != nil {
		return Message{}, err
	}
	msg, err := r.nodeCall(ctx, s, offered, f)
	if err == nil && r.e.set.FirstCall(s.node.Name) {
		// The model is loaded now: what window does it run with?
		r.e.learnWindow(ctx, s.node)
	}
	for refits := 0; !r.relay && !r.streamed; refits++ {
		detail, over := contextOverflow(err)
		if !over {
			break
		}
		// The node refused a prompt the estimate said fits: its window
		// is smaller, or its tokenizer denser, than known. Learn both,
		// for this request and the next ones to the model, and fit
		// harder.
		r.e.learnWindow(ctx, s.node)
		r.e.calibration.Refused(ctx, s.node.Model, f.chars, r.e.Window(s.node), refitFactor)
		refused := f.chars
		findOnly := refits > 0
		if !findOnly {
			r.refitTools(ctx, s, &offered)
			var ferr error
			if f, ferr = r.fitShrinking(ctx, s, &offered, refitFactor); ferr != nil {
				return Message{}, ferr
			}
			// No lighter than the prompt refused (the ratio was at its
			// floor already, or the window is unknown): the node would
			// refuse it as it did.
			findOnly = f.chars >= refused
		}
		if findOnly {
			why := "refused the prompt, and a refit makes it no lighter"
			if refits > 0 {
				why = "refused the refitted prompt too"
			}
			if !r.findOnly(s, &offered, why) {
				break
			}
			var ferr error
			if f, ferr = r.fit(ctx, s, offered, refitFactor); ferr != nil {
				return Message{}, ferr
			}
		}
		if ct := s.st.Context; ct != nil {
			ct.Actions = append(ct.Actions, ContextAction{Action: "refit", FromTurn: s.st.Turns, ToTurn: s.st.Turns, Detail: "the node refused the prompt: " + detail})
		}
		msg, err = r.nodeCall(ctx, s, offered, f)
	}
	if detail, over := contextOverflow(err); over {
		return Message{}, &ContextLengthError{Node: s.node.Name, Window: r.e.Window(s.node), Upstream: detail}
	}
	return msg, err
}

// offersStageTools reports whether offered is s.tools (a call with the
// stage's tools, not the final call without any).
func offersStageTools(s *stage, offered []Tool) bool {
	return len(offered) > 0 && len(s.tools) > 0 && &offered[0] == &s.tools[0]
}

// fitShrinking is fit, offering s fewer tools while its prompt does not
// fit with them (shrinkTools): a stage is never skipped for its tools
// alone. *offered follows s.tools when it was them.
func (r *run) fitShrinking(ctx context.Context, s *stage, offered *[]Tool, tighten float64) (fitted, error) {
	var est int
	if ct := s.st.Context; ct != nil {
		est = ct.EstimatedTokens
	}
	f, err := r.fit(ctx, s, *offered, tighten)
	for errors.Is(err, ErrContextLength) && offersStageTools(s, *offered) && r.shrinkTools(ctx, s) {
		// The trace's estimate is of the prompts sent (or the last
		// one tried), not of those the tools were shrunk from.
		s.st.Context.EstimatedTokens = est
		*offered = s.tools
		f, err = r.fit(ctx, s, *offered, tighten)
	}
	return f, err
}

// nodeCall is the node call: one call of s to its node with the fitted
// prompt f. When the request is traced it runs in the call's span, which
// is the context of the HTTP call, so the node's request carries its
// traceparent.
func (r *run) nodeCall(ctx context.Context, s *stage, offered []Tool, f fitted) (msg Message, err error) {
	ctx, span := r.startCall(ctx, s, s.node, "", f.msgs, len(offered))
	if span != nil {
		calls := len(s.st.Calls)
		s.model = ""
		// Deferred first, so it runs last: after the admission's release
		// and the call's accounting, as the span's end always did.
		defer func() {
			var mc *ModelCall
			if len(s.st.Calls) > calls {
				mc = &s.st.Calls[len(s.st.Calls)-1]
			}
			r.endCall(span, mc, s.model, &msg, err)
		}()
	}
	// What the call and its chunk callback fill in, in one pooled value:
	// the closure shares it, and a turn costs no allocation for it.
	cs := callStates.Get().(*callState)
	defer cs.free()
	cs.req = node.Request{Model: s.node.Model, Messages: f.msgs, Tools: offered, Params: r.req.Params, Whole: r.whole, Idle: r.req.Idle, KeepAlive: r.keepAlive(s), NumCtx: s.node.numCtx, Host: &s.host}
	req := s.node.caps.Apply(&cs.req)
	if !s.answers {
		req.Params.Format = nil
	}
	if r.req.Idle != nil {
		// What follows the call (tools, the next stage) may take time.
		defer r.req.Idle()
	}
	// Text tool calls and copies of earlier answers are held back while the
	// content may still be one; repetition loops are cut in every call.
	cs.live, cs.parse = s.answers, s.node.TextCalls()
	asked := time.Now()
	defer func() { r.upstream += time.Since(asked) }()
	mc := ModelCall{Turn: s.st.Turns, StartMS: asked.Sub(r.t0).Milliseconds()}
	if !r.relay {
		// A relay's prompt is the client's own: the stored trace need not
		// copy it, and the relay path pays nothing for the prompt view.
		mc.KeepPrompt(f.msgs, f.marks)
	}
	release, err := r.admit(ctx, s)
	if err != nil {
		return Message{}, err
	}
	if release != nil {
		defer release()
	}
	began := time.Now()
	mc.QueueMS = began.Sub(asked).Milliseconds()
	callErr, err := r.stream(ctx, s, cs, req, len(offered) > 0)
	if err != nil {
		return Message{}, err
	}
	r.recordCall(ctx, s, f, cs, &mc, began, callErr)
	if callErr != nil {
		return Message{}, callErr
	}
	return r.judgeCall(s, cs, len(offered) > 0)
}

// admit waits for the node's admission (local or shared) to take the
// call; the release it returns, nil without admission, ends the call's
// hold on the node.
func (r *run) admit(ctx context.Context, s *stage) (func(), error) {
	if r.e.admission == nil {
		return nil, nil
	}
	return r.e.admission.Acquire(ctx, s.node.Name, r.req.Batch)
}

// stream makes the call and collects what the node streams into cs: the
// content, passed through the answer gate and streamed to the client when
// the call is live; the reasoning, watched by the think gate; the tool
// calls, usage and finish. A loop the gates cut ends the call without an
// error. A batch request rides out a node restarting (design 001: retry
// with backoff); an interactive one fails fast, and no call is retried
// once the client has seen part of its answer: a retry would repeat it.
// callErr is how the call ended, which the trace records; err is the
// request's end while it waited to retry, which it does not.
func (r *run) stream(ctx context.Context, s *stage, cs *callState, req *node.Request, tools bool) (callErr, err error) {
	for attempt := 0; ; attempt++ {
		cs.content.Reset()
		cs.reasoning.Reset()
		// Reset in place: a fresh gate built first and copied in would
		// take its size on the stack of every streaming goroutine.
		cs.gate = judge.AnswerGate{}
		cs.think = judge.ThinkGate{}
		cs.gate.Calls, cs.gate.Bare, cs.gate.Quiet = cs.live && cs.parse, tools, !cs.live
		if cs.live {
			cs.gate.Copies = s.earlier
		}
		cs.calls, cs.usage, cs.finish, cs.cut, cs.load = nil, nil, "", "", 0
		callErr = s.node.caps.Chat(ctx, s.node.Backend, req, func(c node.Chunk) error {
			if cs.content.Cap() == 0 && c.Content != "" {
				// An answer streams in token-sized chunks: room for a
				// short one at once spares the first six doublings.
				cs.content.Grow(contentRoom)
			}
			cs.content.WriteString(c.Content)
			if c.FinishReason != "" {
				cs.finish, cs.cut, cs.load = c.FinishReason, c.Cut, c.Load
				s.model = c.Model
			}
			// Most chunks carry content only: skipping the empty fields
			// spares a write barrier each while the GC runs.
			if c.Reasoning != "" {
				cs.reasoning.WriteString(c.Reasoning)
			}
			if len(c.ToolCalls) > 0 {
				cs.calls = append(cs.calls, c.ToolCalls...)
			}
			if c.Usage != nil {
				cs.usage = c.Usage
			}
			var show string
			var loopErr error
			if c.Content != "" {
				content := cs.content.String()
				ok := false
				if show, ok = cs.gate.Pass(content); !ok {
					show, loopErr = cs.gate.Next(content)
				}
			}
			if c.Reasoning != "" {
				loopErr = cmp.Or(loopErr, cs.think.Next(cs.reasoning.String()))
			}
			if cs.live && (show != "" || c.Reasoning != "") {
				cs.sent = true
				if show != "" {
					show = r.breakTurn(show)
					r.streamed, cs.shown = true, show
				}
				if err := r.emit(Event{Kind: EventDelta, Stage: s.idx, Node: s.node.Name, Content: show, Reasoning: c.Reasoning}); err != nil {
					return err
				}
			}
			return loopErr
		})
		if errors.Is(callErr, judge.ErrLoop) {
			// Stopped on purpose: the answer is what came before the loop.
			callErr = nil
		}
		if callErr == nil || !r.req.Batch || cs.sent || attempt >= len(s.node.RetryBackoff) || !retryable(callErr) {
			return callErr, nil
		}
		r.logger().Info("retrying upstream call", "node", s.node.Name, "attempt", attempt+1, "err", callErr)
		if err := wait(ctx, s.node.RetryBackoff[attempt]); err != nil {
			return nil, err
		}
	}
}

// recordCall completes the trace's record of the call mc, which began
// (was admitted) at began and ended with err, and adds its usage to the
// stage's.
func (r *run) recordCall(ctx context.Context, s *stage, f fitted, cs *callState, mc *ModelCall, began time.Time, err error) {
	mc.DurationMS = time.Since(began).Milliseconds()
	mc.SplitLoad(cs.load)
	mc.FinishReason, mc.Cut = cs.finish, cs.cut
	if cs.usage != nil {
		s.st.Usage = s.st.Usage.Add(*cs.usage)
		mc.Usage = *cs.usage
		r.observe(ctx, s, f, cs.usage)
	}
	if err != nil {
		mc.Error = r.e.redact.String(err.Error())
	}
	s.st.Calls = append(s.st.Calls, *mc)
}

// judgeCall turns what a call collected into the stage's message: a
// repetition loop cut off, a looping reasoning's answer dropped, tool
// calls written as text parsed out of the content, and what the answer
// gate held back streamed now that the answer is whole.
func (r *run) judgeCall(s *stage, cs *callState, tools bool) (Message, error) {
	text := cs.content.String()
	if cs.gate.Finish(text) {
		text = text[:cs.gate.Loop.Keep]
		s.loop = cs.gate.Loop
		r.logger().Info("repetition loop cut", "stage", s.idx, "node", s.node.Name, "segment", cs.gate.Loop.Segment, "copies", cs.gate.Loop.Copies)
	}
	if r.thinkLooped(s, &cs.think, cs.reasoning.String()) {
		text, cs.calls = "", nil
	}
	msg := Message{Role: "assistant", Content: text, ToolCalls: cs.calls}
	var tc judge.TextCalls
	if cs.parse {
		// Without tools offered a call cannot run, but its raw text is no
		// answer either: it is dropped.
		tc = judge.ParseTextCalls(text, tools)
		msg.Content = tc.Rest
		if tools {
			msg.ToolCalls = append(msg.ToolCalls, tc.Calls...)
		} else {
			tc.Bad = ""
		}
	}
	s.badCall = tc
	if show := cs.gate.End(text, tc); cs.live && show != "" {
		r.streamed = true
		cs.shown = r.breakTurn(show)
		if err := r.emit(Event{Kind: EventDelta, Stage: s.idx, Node: s.node.Name, Content: cs.shown}); err != nil {
			return Message{}, err
		}
	}
	switch {
	case cs.shown == "", strings.HasSuffix(cs.shown, "\n\n"):
	case strings.HasSuffix(cs.shown, "\n"):
		r.turnBreak = "\n"
	default:
		r.turnBreak = "\n\n"
	}
	ensureIDs(msg.ToolCalls, r.trace.Turns)
	s.st.FinishReason = cs.finish
	if cs.reasoning.Len() > 0 && s.thinkLoop == nil {
		s.reason = cs.reasoning.String()
	}
	if msg.Content != "" {
		s.content = append(s.content, msg.Content)
	}
	return msg, nil
}

// breakTurn puts the paragraph break owed to an earlier turn's streamed
// text before show.
func (r *run) breakTurn(show string) string {
	if r.turnBreak == "" {
		return show
	}
	show = r.turnBreak + show
	r.turnBreak = ""
	return show
}
