package web

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"chainproxy/chain"
	"chainproxy/chain/spans"
	chaintrace "chainproxy/chain/trace"
)

// tracerScope names the web layer's spans in an exported trace.
const tracerScope = "chainproxy/web"

// begin opens a request that runs the chain and returns its trace id, the
// one of X-Chain-Trace-Id and the log lines. With telemetry on it starts
// the request's span, a child of the client's traceparent when it sent
// one, and the trace id is the span's: the chain trace and the exported
// trace are one. Off, no span is made and the id is random, as W3C's.
func (s *Server) begin(c *gin.Context, route string) string {
	if s.tracer == nil {
		id := newTraceID()
		c.Set("req_id", id)
		return id
	}
	ctx := c.Request.Context()
	if _, ok := c.Request.Header["Traceparent"]; ok {
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(c.Request.Header))
	}
	// url.path and url.scheme are required of an HTTP server span, and
	// given at its start, as the conventions ask, for samplers to see.
	scheme := "http"
	if c.Request.TLS != nil {
		scheme = "https"
	}
	ctx, span := s.tracer.Start(ctx, c.Request.Method+" "+route, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", c.Request.Method), attribute.String("http.route", route),
			attribute.String("url.path", c.Request.URL.Path), attribute.String("url.scheme", scheme)))
	c.Request = c.Request.WithContext(ctx)
	id := span.SpanContext().TraceID().String()
	c.Set("req_id", id)
	return id
}

// objectID is the base of the ids a request's answer names (chatcmpl-…,
// resp_… and its items): the trace id, unless it is a client's, which
// several requests may share (an agent's run sends one traceparent with
// all its calls); then the request span's id follows it, so that every
// answer's ids stay its own and previous_response_id finds the right one.
func (s *Server) objectID(c *gin.Context, traceID string) string {
	if _, ok := c.Request.Header["Traceparent"]; !ok || s.tracer == nil {
		return traceID
	}
	return traceID + "_" + trace.SpanContextFromContext(c.Request.Context()).SpanID().String()
}

// endSpan ends the request's span, if begin started one, with how the
// request ended: the HTTP status, the chain's attributes when it ran (tr;
// the tokens of this request's calls when it answered, res), error.type when it failed, and an error status when the failure is the
// proxy's (5xx). A 4xx is the client's (a bad body, an unknown model, a
// client gone, a rate limit it must wait out): the HTTP conventions leave
// a server span's status unset then, so that a backend's error rate
// counts the proxy's failures, not its clients' mistakes.
func (s *Server) endSpan(c *gin.Context, status int, res *chain.Result, tr *chain.Trace, err error) {
	span := trace.SpanFromContext(c.Request.Context())
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	if tr != nil {
		u := tr.Usage()
		if res != nil {
			u = res.Usage() // this request's calls, for a resumed chain
		}
		span.SetAttributes(
			attribute.String("chain.mode", tr.Mode),
			attribute.String("chain.status", chaintrace.TraceStatus(tr, err)),
			attribute.Int("chain.turns", tr.Turns),
			attribute.Int("chain.stages", len(tr.Stages)),
			attribute.Int("chain.loop_stops", tr.LoopStops()),
			attribute.StringSlice("chain.reasons", spans.Reasons(tr.Reasons, s.cfg.Telemetry.CaptureContent)),
			attribute.Int(spans.AttrChainInputTokens, u.PromptTokens),
			attribute.Int(spans.AttrChainOutputTokens, u.CompletionTokens),
		)
	}
	switch {
	case err != nil:
		span.SetAttributes(attribute.String("error.type", errorType(err, status)))
		if status >= http.StatusInternalServerError {
			span.SetStatus(codes.Error, s.redact.String(chain.SpanError(err, s.cfg.Telemetry.CaptureContent)))
		}
	case status >= http.StatusInternalServerError:
		span.SetAttributes(attribute.String("error.type", strconv.Itoa(status)))
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
}

// errorType is the error.type of a failed request: the error code of its
// answer, else its HTTP status.
func errorType(err error, status int) string {
	if _, obj := statusFor(err); obj.Code != nil && *obj.Code != "" {
		return *obj.Code
	}
	return strconv.Itoa(status)
}
