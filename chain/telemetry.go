package chain

import (
	"context"
	"errors"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	"chainproxy/chain/node"
	"chainproxy/chain/spans"
)

// Where the chain's spans start and end (package spans makes them, after
// the GenAI semantic conventions): a span per stage, under it one per
// model call and one per tool call, when the request's own span records.

// spans is what the run's spans may carry of content.
func (r *run) spans() spans.Recorder {
	return spans.Recorder{Capture: r.e.cfg.Telemetry.CaptureContent, Redact: r.e.redact}
}

// stageSpan starts s's span when the request is traced (its context holds a
// recording span); s.span stays nil otherwise, and every span under the
// stage is skipped with it.
func (r *run) stageSpan(ctx context.Context, s *stage, resumed bool) {
	s.span = spans.StartStage(ctx, spans.Stage{Index: s.idx, Node: s.node.Name, Provider: s.node.Provider, Model: s.node.Model,
		Mode: r.trace.Mode, MaxTurns: s.allowed, Tools: s.cfg.tools, Resumed: resumed})
	if s.span != nil {
		r.spanned = append(r.spanned, s)
	}
}

// endStageSpan ends s's span with how the stage ended.
func (r *run) endStageSpan(s *stage) {
	if s.span == nil {
		return
	}
	st := &s.st
	failure := ""
	if st.Status == StageFailed || st.Status == StageSkippedOffline || st.Status == StageSkippedContext {
		failure = st.Error
		if s.failure != nil && !r.e.cfg.Telemetry.CaptureContent {
			failure = r.e.redact.String(SpanError(s.failure, false))
		}
	}
	spans.EndStage(s.span, st, failure)
	s.span = nil
}

// endSpans ends the stage spans a run left open: it ended with an error
// that no stage caught (the client went away, a full queue, an error
// from emit).
func (r *run) endSpans(ctx context.Context) {
	for _, s := range r.spanned {
		if s.span != nil {
			spans.EndUnfinished(ctx, s.span)
			s.span = nil
		}
	}
}

// startCall starts the span of a model call of stage s to node n: a child
// of the stage's span, or of the request's for a call made after the stage
// ended. kind names a call that is not one of the stage's turns
// ("summary"). It returns ctx and a nil span when the request is not
// traced.
func (r *run) startCall(ctx context.Context, s *stage, n *Node, kind string, sent []Message, offered int) (context.Context, trace.Span) {
	return r.spans().StartCall(ctx, s.span, spans.Call{Node: &n.Node, Stage: s.idx, Turn: s.st.Turns, Offered: offered, Kind: kind}, sent)
}

// endCall ends a model call's span with what the call reported (mc, nil
// when it failed before it was made: no slot), the model the upstream
// said answered, and its answer.
func (r *run) endCall(span trace.Span, mc *ModelCall, model string, out *Message, err error) {
	var fail *spans.Failure
	if err != nil {
		fail = &spans.Failure{Type: callErrorType(err), Description: SpanError(err, r.e.cfg.Telemetry.CaptureContent)}
	}
	r.spans().EndCall(span, mc, model, out, fail)
}

// toolSpan records one call of a client tool, which the proxy does not
// run, from start to end: its hand-over (status client) or the anti-loop's
// refusal, or, in the request that brought its result back, the round trip
// from start. A server tool's span is opened before it runs instead
// (startToolSpan), so that the tool runs inside it.
func (r *run) toolSpan(s *stage, id string, u *ToolUse, start, end time.Time) {
	if s.span == nil {
		return
	}
	_, span := r.startToolSpan(context.Background(), s, id, u.Name, start)
	r.endToolSpan(span, u, nil, end)
}

// startToolSpan starts the span of a tool call under stage s's span, which
// must be open, and returns ctx carrying it, for the tool to run under.
func (r *run) startToolSpan(ctx context.Context, s *stage, id, name string, start time.Time) (context.Context, trace.Span) {
	return spans.StartTool(ctx, s.span, s.idx, id, name, start)
}

// endToolSpan ends a tool call's span with what became of it, or with err
// when the request ended during the call.
func (r *run) endToolSpan(span trace.Span, u *ToolUse, err error, end time.Time) {
	r.spans().EndTool(span, u, err, end)
}

// SpanError is the description of a span that failed with err, before
// redaction. With telemetry.capture_content it is the error's text; without,
// it is the proxy's own words only: what a node said (an upstream's error
// message, the node's refusal of a long prompt) is left out, since a
// server may quote the request in it (vLLM's validation errors quote the
// input), and so are the stage errors a chain's failure names. The trace
// and the logs keep the whole text.
func SpanError(err error, capture bool) string {
	if capture {
		return err.Error()
	}
	var (
		ce *ContextLengthError
		ue *node.UpstreamError
	)
	switch {
	case errors.As(err, &ce):
		if ce.Upstream != "" {
			return "node " + ce.Node + " refused the prompt as longer than its context window"
		}
	case errors.As(err, &ue):
		return spans.UpstreamError(ue)
	case errors.Is(err, ErrAllStagesFailed):
		return ErrAllStagesFailed.Error()
	}
	return err.Error()
}

// callErrorType is the error.type of a failed model call: the upstream
// error's kind (connect, timeout, status, …), its HTTP status when it has
// one.
func callErrorType(err error) string {
	var ue *node.UpstreamError
	if errors.As(err, &ue) {
		if ue.Status != 0 {
			return strconv.Itoa(ue.Status)
		}
		return ue.Kind
	}
	if errors.Is(err, ErrContextLength) {
		return "context_length"
	}
	return "_OTHER"
}
