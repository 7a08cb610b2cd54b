package chain

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"chainproxy/chain/node"
	"chainproxy/classify"
)

// The chain's spans, exported when the request's own span records (the web
// layer starts it when telemetry is on): a span per stage, under it one per
// model call and one per tool call, named and attributed after the GenAI
// semantic conventions, with the chain's own attributes under "chain.".
// A request without a recording span costs a context lookup per stage and
// per model call: nothing is built for spans nobody exports.

// tracerScope names the chain's spans in an exported trace.
const tracerScope = "chainproxy/chain"

// Semantic convention keys (GenAI, development status).
const (
	attrOperation     = "gen_ai.operation.name"
	attrProvider      = "gen_ai.provider.name"
	attrRequestModel  = "gen_ai.request.model"
	attrResponseModel = "gen_ai.response.model"
	attrInputTokens   = "gen_ai.usage.input_tokens"
	attrOutputTokens  = "gen_ai.usage.output_tokens"
	attrFinish        = "gen_ai.response.finish_reasons"
	attrToolName      = "gen_ai.tool.name"
	attrToolCallID    = "gen_ai.tool.call.id"
	attrToolType      = "gen_ai.tool.type"
	attrToolArgs      = "gen_ai.tool.call.arguments"
	attrToolResult    = "gen_ai.tool.call.result"
	attrInput         = "gen_ai.input.messages"
	attrOutput        = "gen_ai.output.messages"
	attrErrorType     = "error.type"
	attrServerAddress = "server.address"
	attrServerPort    = "server.port"
)

// The tokens of a stage or of a whole chain, the sums of its model calls'.
// They are not gen_ai.usage.*: backends add those up over a trace's spans
// (Langfuse prices every span with a model and usage), so a total under
// the same name as the calls' would count every token twice or thrice.
const (
	// AttrChainInputTokens is the prompt tokens of a stage's or a chain's calls.
	AttrChainInputTokens = "chain.usage.input_tokens"
	// AttrChainOutputTokens is the completion tokens of a stage's or a chain's calls.
	AttrChainOutputTokens = "chain.usage.output_tokens"
)

// stageSpan starts s's span when the request is traced (its context holds a
// recording span); s.span stays nil otherwise, and every span under the
// stage is skipped with it.
func (r *run) stageSpan(ctx context.Context, s *stage, resumed bool) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return
	}
	_, s.span = parent.TracerProvider().Tracer(tracerScope).Start(ctx, "stage "+s.node.Name,
		trace.WithAttributes(
			attribute.Int("chain.stage", s.idx),
			attribute.String("chain.node", s.node.Name),
			attribute.String("chain.mode", r.trace.Mode),
			attribute.Int("chain.max_turns", s.allowed),
			attribute.Bool("chain.tools", s.cfg.tools),
			attribute.Bool("chain.resumed", resumed),
			attribute.String(attrProvider, s.node.Provider),
			attribute.String(attrRequestModel, s.node.Model),
		))
	r.spanned = append(r.spanned, s)
}

// endStageSpan ends s's span with how the stage ended.
func (r *run) endStageSpan(s *stage) {
	if s.span == nil {
		return
	}
	st := &s.st
	s.span.SetAttributes(
		attribute.String("chain.status", st.Status),
		attribute.Int("chain.turns", st.Turns),
		attribute.Int("chain.tool_calls", len(st.ToolsUsed)),
		attribute.Int(AttrChainInputTokens, st.Usage.PromptTokens),
		attribute.Int(AttrChainOutputTokens, st.Usage.CompletionTokens),
	)
	if st.Status == StageFailed || st.Status == StageSkippedOffline || st.Status == StageSkippedContext {
		msg := st.Error
		if s.failure != nil && !r.e.cfg.Telemetry.CaptureContent {
			msg = r.e.redact.String(SpanError(s.failure, false))
		}
		s.span.SetStatus(codes.Error, msg)
	}
	s.span.End()
	s.span = nil
}

// endSpans ends the stage spans a run left open: it ended with an error
// that no stage caught (the client went away, a full queue, an error
// from emit).
func (r *run) endSpans(ctx context.Context) {
	for _, s := range r.spanned {
		if s.span == nil {
			continue
		}
		msg := "the request ended before the stage"
		if err := context.Cause(ctx); err != nil {
			msg += ": " + err.Error()
		}
		s.span.SetStatus(codes.Error, msg)
		s.span.End()
		s.span = nil
	}
}

// startCall starts the span of a model call of stage s to node n
// ("chat {model}", a client span): a child of the stage's span, or of the
// request's for a call made after the stage ended (the answer of the last
// stage that worked). kind names a call that is not one of the stage's
// turns ("summary"). It returns ctx and a nil span when the request is
// not traced.
func (r *run) startCall(ctx context.Context, s *stage, n *Node, kind string, sent []Message, offered int) (context.Context, trace.Span) {
	var parent trace.Span = s.span
	if parent == nil {
		if parent = trace.SpanFromContext(ctx); !parent.IsRecording() {
			return ctx, nil
		}
	}
	attrs := []attribute.KeyValue{
		attribute.String(attrOperation, "chat"),
		attribute.String(attrProvider, n.Provider),
		attribute.String(attrRequestModel, n.Model),
		attribute.String("chain.node", n.Name),
		attribute.Int("chain.stage", s.idx),
		attribute.Int("chain.turn", s.st.Turns),
		attribute.Int("chain.tools_offered", offered),
	}
	// The conventions ask for the server at the span's start, with the
	// model and provider: what a sampler may decide on.
	if host, port := serverOf(n.BaseURL); host != "" {
		attrs = append(attrs, attribute.String(attrServerAddress, host), attribute.Int(attrServerPort, port))
	}
	ctx, span := parent.TracerProvider().Tracer(tracerScope).Start(trace.ContextWithSpan(ctx, parent), "chat "+n.Model,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	if kind != "" {
		span.SetAttributes(attribute.String("chain.call.kind", kind))
	}
	if r.e.cfg.Telemetry.CaptureContent {
		span.SetAttributes(attribute.String(attrInput, r.inputMessages(sent)))
	}
	return ctx, span
}

// serverOf is the host and port a node's base URL calls, the port its
// scheme implies when it names none; "" when it names no host (a mock
// node). They are the model call's server.address and server.port, which
// the GenAI conventions recommend: where the call went, in the terms
// every backend reads, not only the proxy's own chain.node.
func serverOf(baseURL string) (string, int) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Hostname() == "" {
		return "", 0
	}
	if p, err := strconv.Atoi(u.Port()); err == nil {
		return u.Hostname(), p
	}
	if u.Scheme == "https" {
		return u.Hostname(), 443
	}
	return u.Hostname(), 80
}

// endCall ends a model call's span with what the call reported (mc, nil
// when it failed before it was made: no slot), the model the upstream
// said answered, and its answer.
func (r *run) endCall(span trace.Span, mc *ModelCall, model string, out *Message, err error) {
	if mc != nil {
		span.SetAttributes(attribute.Int64("chain.queue_ms", mc.QueueMS))
		if mc.Usage != (Usage{}) {
			// Only what the upstream reported: none is not zero tokens.
			span.SetAttributes(attribute.Int(attrInputTokens, mc.Usage.PromptTokens), attribute.Int(attrOutputTokens, mc.Usage.CompletionTokens))
		}
		if mc.FinishReason != "" {
			span.SetAttributes(attribute.StringSlice(attrFinish, []string{mc.FinishReason}))
		}
		if mc.Cut != "" {
			span.SetAttributes(attribute.String("chain.cut", mc.Cut))
		}
	}
	if model != "" {
		span.SetAttributes(attribute.String(attrResponseModel, model))
	}
	if err != nil {
		span.SetAttributes(attribute.String(attrErrorType, callErrorType(err)))
		span.SetStatus(codes.Error, r.e.redact.String(SpanError(err, r.e.cfg.Telemetry.CaptureContent)))
	} else if r.e.cfg.Telemetry.CaptureContent {
		finish := ""
		if mc != nil {
			finish = mc.FinishReason
		}
		span.SetAttributes(attribute.String(attrOutput, r.outputMessages(*out, finish)))
	}
	span.End()
}

// SpanReasons are a chain's reasons as its request span exports them: the
// words judged are content, quoted only with telemetry.capture_content
// (classify.Unquoted).
func SpanReasons(reasons []string, capture bool) []string {
	if capture {
		return reasons
	}
	out := make([]string, len(reasons))
	for i, r := range reasons {
		out[i] = classify.Unquoted(r)
	}
	return out
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
		return upstreamSummary(ue)
	case errors.Is(err, ErrAllStagesFailed):
		return ErrAllStagesFailed.Error()
	}
	return err.Error()
}

// upstreamSummary is e without what the node said: its node, kind and status, and
// for a node that could not be reached or did not answer in time, the
// transport's error (a refused connection, a timeout), which holds
// nothing of the request.
func upstreamSummary(e *node.UpstreamError) string {
	s := "node " + e.Node + ": upstream " + e.Kind + " error"
	if e.Status != 0 {
		s += " (HTTP " + strconv.Itoa(e.Status) + ")"
	}
	if e.Message == "" && e.Err != nil && (e.Kind == node.KindConnect || e.Kind == node.KindTimeout) {
		s += ": " + e.Err.Error()
	}
	return s
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

// startToolSpan starts the span of a tool call ("execute_tool {tool}") under
// stage s's span, which must be open, and returns ctx carrying it: the
// server tool runs under that context, so that its HTTP endpoint or MCP
// server is sent the span as the parent of its own (tools/http.go,
// tools/mcp). What became of the call is known at its end (endToolSpan).
func (r *run) startToolSpan(ctx context.Context, s *stage, id, name string, start time.Time) (context.Context, trace.Span) {
	return s.span.TracerProvider().Tracer(tracerScope).Start(trace.ContextWithSpan(ctx, s.span), "execute_tool "+name,
		trace.WithTimestamp(start),
		trace.WithAttributes(
			attribute.String(attrOperation, "execute_tool"),
			attribute.String(attrToolName, name),
			attribute.String(attrToolCallID, id),
			attribute.String(attrToolType, "function"),
			attribute.Int("chain.stage", s.idx),
		))
}

// endToolSpan ends a tool call's span with what became of it (u.Status:
// ok, cached, blocked, duplicate, error, client), or with err when the
// request ended during the call, which then has no outcome.
func (r *run) endToolSpan(span trace.Span, u *ToolUse, err error, end time.Time) {
	if err != nil {
		span.SetStatus(codes.Error, r.e.redact.String(err.Error()))
		span.End(trace.WithTimestamp(end))
		return
	}
	span.SetAttributes(
		attribute.String("chain.tool.status", u.Status),
		attribute.Bool("chain.tool.client", u.Client),
	)
	if r.e.cfg.Telemetry.CaptureContent {
		span.SetAttributes(attribute.String(attrToolArgs, r.e.redact.String(string(u.Args))))
		if u.Status != ToolClient {
			span.SetAttributes(attribute.String(attrToolResult, r.e.redact.String(u.Result)))
		}
	}
	if u.Status == ToolError {
		span.SetAttributes(attribute.String(attrErrorType, "tool_error"))
		span.SetStatus(codes.Error, "the tool call failed")
	}
	span.End(trace.WithTimestamp(end))
}

// The message forms of gen_ai.input.messages and gen_ai.output.messages:
// a role and its parts.
type (
	otelMessage struct {
		Role         string     `json:"role"`
		Parts        []otelPart `json:"parts"`
		FinishReason string     `json:"finish_reason,omitempty"`
	}
	otelPart struct {
		Type      string          `json:"type"`
		Content   string          `json:"content,omitempty"`
		ID        string          `json:"id,omitempty"`
		Name      string          `json:"name,omitempty"`
		Arguments json.RawMessage `json:"arguments,omitempty"`
		Response  string          `json:"response,omitempty"`
	}
)

// inputMessages is what a model call was sent, as gen_ai.input.messages,
// redacted.
func (r *run) inputMessages(msgs []Message) string {
	out := make([]otelMessage, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, toOtel(m, ""))
	}
	return r.encodeContent(out)
}

// outputMessages is a model call's answer, as gen_ai.output.messages,
// redacted.
func (r *run) outputMessages(m Message, finish string) string {
	return r.encodeContent([]otelMessage{toOtel(m, finish)})
}

func toOtel(m Message, finish string) otelMessage {
	om := otelMessage{Role: m.Role, FinishReason: finish, Parts: []otelPart{}}
	switch {
	case m.Role == "tool":
		om.Parts = append(om.Parts, otelPart{Type: "tool_call_response", ID: m.ToolCallID, Response: m.Content})
	case m.Content != "":
		om.Parts = append(om.Parts, otelPart{Type: "text", Content: m.Content})
	}
	if m.Reasoning != "" {
		om.Parts = append(om.Parts, otelPart{Type: "reasoning", Content: m.Reasoning})
	}
	for _, c := range m.ToolCalls {
		om.Parts = append(om.Parts, otelPart{Type: "tool_call", ID: c.ID, Name: c.Name, Arguments: argsJSON(c.Arguments, 0)})
	}
	return om
}

// encodeContent is v in JSON through the redactor: content leaves the
// proxy only with the configured secrets masked.
func (r *run) encodeContent(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return r.e.redact.String(string(b))
}
