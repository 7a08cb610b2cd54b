// Package spans makes the chain's OpenTelemetry spans, exported when the
// request's own span records (the web layer starts it when telemetry is
// on): a span per stage, under it one per model call and one per tool call,
// named and attributed after the GenAI semantic conventions, with the
// chain's own attributes under "chain.". A request without a recording span
// costs a context lookup per stage and per model call: nothing is built for
// spans nobody exports.
//
// It is a package of its own because it is the one place that knows the
// conventions (the attribute names, the message form of
// gen_ai.input.messages, what a span may carry of content): the engine
// says what happened, in its trace's terms, and where a span starts and
// ends (chain/telemetry.go); how that reads in an exported trace is here.
// It imports OpenTelemetry's API, the node layer's and the trace's
// vocabulary, config's Node, the classifier's quoting and the redactor,
// nothing of the engine.
package spans

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"chainproxy/chain/node"
	chaintrace "chainproxy/chain/trace"
	"chainproxy/classify"
	"chainproxy/config"
	"chainproxy/internal/redact"
)

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

// Reasons are a chain's reasons as its request span exports them: the
// words judged are content, quoted only with telemetry.capture_content
// (classify.Unquoted).
func Reasons(reasons []string, capture bool) []string {
	if capture {
		return reasons
	}
	out := make([]string, len(reasons))
	for i, r := range reasons {
		out[i] = classify.Unquoted(r)
	}
	return out
}

// UpstreamError is what a span says of e: not what the node said (a
// server may quote the request in it), but its node, kind and status, and
// for a node that could not be reached or did not answer in time, the
// transport's error (a refused connection, a timeout), which holds
// nothing of the request.
func UpstreamError(e *node.UpstreamError) string {
	s := "node " + e.Node + ": upstream " + e.Kind + " error"
	if e.Status != 0 {
		s += " (HTTP " + strconv.Itoa(e.Status) + ")"
	}
	if e.Message == "" && e.Err != nil && (e.Kind == node.KindConnect || e.Kind == node.KindTimeout) {
		s += ": " + e.Err.Error()
	}
	return s
}

// Recorder is what a span may carry of content: the messages, arguments
// and results only with Capture (telemetry.capture_content), and then
// through Redact (the server's secrets masked), as every error description.
type Recorder struct {
	Capture bool
	Redact  redact.Redactor
}

// Stage is what a stage's span says of it at its start.
type Stage struct {
	Index          int
	Node, Provider string
	Model, Mode    string
	MaxTurns       int
	Tools, Resumed bool
}

// StartStage starts a stage's span when the request is traced (ctx holds a
// recording span); nil otherwise, and every span under the stage is
// skipped with it.
func StartStage(ctx context.Context, st Stage) trace.Span {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return nil
	}
	_, span := parent.TracerProvider().Tracer(tracerScope).Start(ctx, "stage "+st.Node,
		trace.WithAttributes(
			attribute.Int("chain.stage", st.Index),
			attribute.String("chain.node", st.Node),
			attribute.String("chain.mode", st.Mode),
			attribute.Int("chain.max_turns", st.MaxTurns),
			attribute.Bool("chain.tools", st.Tools),
			attribute.Bool("chain.resumed", st.Resumed),
			attribute.String(attrProvider, st.Provider),
			attribute.String(attrRequestModel, st.Model),
		))
	return span
}

// EndStage ends a stage's span with how the stage ended (st); failure,
// when not "", is the span's error description (a stage that failed or was
// skipped).
func EndStage(span trace.Span, st *chaintrace.StageTrace, failure string) {
	span.SetAttributes(
		attribute.String("chain.status", st.Status),
		attribute.Int("chain.turns", st.Turns),
		attribute.Int("chain.tool_calls", len(st.ToolsUsed)),
		attribute.Int(AttrChainInputTokens, st.Usage.PromptTokens),
		attribute.Int(AttrChainOutputTokens, st.Usage.CompletionTokens),
	)
	if failure != "" {
		span.SetStatus(codes.Error, failure)
	}
	span.End()
}

// EndUnfinished ends the span of a stage the request ended before: it
// ended with an error that no stage caught (the client went away, a full
// queue, an error from emit).
func EndUnfinished(ctx context.Context, span trace.Span) {
	msg := "the request ended before the stage"
	if err := context.Cause(ctx); err != nil {
		msg += ": " + err.Error()
	}
	span.SetStatus(codes.Error, msg)
	span.End()
}

// Call is what a model call's span says of it at its start.
type Call struct {
	// Node is the node called; Stage, Turn and Offered the stage, its
	// turn and the number of tools offered.
	Node                 *config.Node
	Stage, Turn, Offered int
	// Kind names a call that is not one of the stage's turns ("summary").
	Kind string
}

// StartCall starts the span of a model call ("chat {model}", a client
// span) as a child of parent (the stage's span), or of the request's for
// a call made after the stage ended (the answer of the last stage that
// worked), with sent, the messages it sends. It returns ctx and a nil
// span when the request is not traced.
func (r Recorder) StartCall(ctx context.Context, parent trace.Span, c Call, sent []node.Message) (context.Context, trace.Span) {
	if parent == nil {
		if parent = trace.SpanFromContext(ctx); !parent.IsRecording() {
			return ctx, nil
		}
	}
	n := c.Node
	attrs := []attribute.KeyValue{
		attribute.String(attrOperation, "chat"),
		attribute.String(attrProvider, n.Provider),
		attribute.String(attrRequestModel, n.Model),
		attribute.String("chain.node", n.Name),
		attribute.Int("chain.stage", c.Stage),
		attribute.Int("chain.turn", c.Turn),
		attribute.Int("chain.tools_offered", c.Offered),
	}
	// The conventions ask for the server at the span's start, with the
	// model and provider: what a sampler may decide on.
	if host, port := serverOf(n.BaseURL); host != "" {
		attrs = append(attrs, attribute.String(attrServerAddress, host), attribute.Int(attrServerPort, port))
	}
	ctx, span := parent.TracerProvider().Tracer(tracerScope).Start(trace.ContextWithSpan(ctx, parent), "chat "+n.Model,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	if c.Kind != "" {
		span.SetAttributes(attribute.String("chain.call.kind", c.Kind))
	}
	if r.Capture {
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

// Failure is how a failed call's span describes its error: its
// error.type, and its description before redaction.
type Failure struct {
	Type, Description string
}

// EndCall ends a model call's span with what the call reported (mc, nil
// when it failed before it was made: no slot), the model the upstream
// said answered, and its answer out; or, when fail is set, how it failed.
func (r Recorder) EndCall(span trace.Span, mc *chaintrace.ModelCall, model string, out *node.Message, fail *Failure) {
	if mc != nil {
		span.SetAttributes(attribute.Int64("chain.queue_ms", mc.QueueMS))
		if mc.Usage != (node.Usage{}) {
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
	if fail != nil {
		span.SetAttributes(attribute.String(attrErrorType, fail.Type))
		span.SetStatus(codes.Error, r.Redact.String(fail.Description))
	} else if r.Capture {
		finish := ""
		if mc != nil {
			finish = mc.FinishReason
		}
		span.SetAttributes(attribute.String(attrOutput, r.outputMessages(*out, finish)))
	}
	span.End()
}

// StartTool starts the span of a tool call ("execute_tool {tool}") under
// stage's span, which must be open, and returns ctx carrying it: a server
// tool runs under that context, so that its HTTP endpoint or MCP server is
// sent the span as the parent of its own (tools/http.go, tools/mcp). What
// became of the call is known at its end (EndTool).
func StartTool(ctx context.Context, stage trace.Span, index int, id, name string, start time.Time) (context.Context, trace.Span) {
	return stage.TracerProvider().Tracer(tracerScope).Start(trace.ContextWithSpan(ctx, stage), "execute_tool "+name,
		trace.WithTimestamp(start),
		trace.WithAttributes(
			attribute.String(attrOperation, "execute_tool"),
			attribute.String(attrToolName, name),
			attribute.String(attrToolCallID, id),
			attribute.String(attrToolType, "function"),
			attribute.Int("chain.stage", index),
		))
}

// EndTool ends a tool call's span with what became of it (u.Status: ok,
// cached, blocked, duplicate, error, client), or with err when the request
// ended during the call, which then has no outcome.
func (r Recorder) EndTool(span trace.Span, u *chaintrace.ToolUse, err error, end time.Time) {
	if err != nil {
		span.SetStatus(codes.Error, r.Redact.String(err.Error()))
		span.End(trace.WithTimestamp(end))
		return
	}
	span.SetAttributes(
		attribute.String("chain.tool.status", u.Status),
		attribute.Bool("chain.tool.client", u.Client),
	)
	if r.Capture {
		span.SetAttributes(attribute.String(attrToolArgs, r.Redact.String(string(u.Args))))
		if u.Status != chaintrace.ToolClient {
			span.SetAttributes(attribute.String(attrToolResult, r.Redact.String(u.Result)))
		}
	}
	if u.Status == chaintrace.ToolError {
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
func (r Recorder) inputMessages(msgs []node.Message) string {
	out := make([]otelMessage, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, toOtel(m, ""))
	}
	return r.encodeContent(out)
}

// outputMessages is a model call's answer, as gen_ai.output.messages,
// redacted.
func (r Recorder) outputMessages(m node.Message, finish string) string {
	return r.encodeContent([]otelMessage{toOtel(m, finish)})
}

func toOtel(m node.Message, finish string) otelMessage {
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
		om.Parts = append(om.Parts, otelPart{Type: "tool_call", ID: c.ID, Name: c.Name, Arguments: chaintrace.Args(c.Arguments, 0)})
	}
	return om
}

// encodeContent is v in JSON through the redactor: content leaves the
// proxy only with the configured secrets masked.
func (r Recorder) encodeContent(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return r.Redact.String(string(b))
}
