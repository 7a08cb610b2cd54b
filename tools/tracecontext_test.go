package tools

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"chainproxy/config"

	"go.opentelemetry.io/otel/trace"
)

// The W3C Trace Context example ids (https://www.w3.org/TR/trace-context/
// #examples-of-http-traceparent-headers), as the OpenTelemetry MCP
// conventions use them too.
const (
	exampleTraceID    = "4bf92f3577b34da6a3ce929d0e0e4736"
	exampleSpanID     = "00f067aa0ba902b7"
	exampleTraceState = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
)

// spanContext is the context of a tool call's span: what the chain puts in
// the context it runs a call under (chain/telemetry.go startToolSpan).
func spanContext(t *testing.T, flags trace.TraceFlags) context.Context {
	t.Helper()
	tid, err := trace.TraceIDFromHex(exampleTraceID)
	if err != nil {
		t.Fatal(err)
	}
	sid, err := trace.SpanIDFromHex(exampleSpanID)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := trace.ParseTraceState(exampleTraceState)
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, TraceState: ts})
	return trace.ContextWithSpanContext(t.Context(), sc)
}

// TestHTTPToolTraceContext: an HTTP tool's endpoint gets the W3C
// traceparent and tracestate of the call's span, as a node does for a
// model call (chain/bodycap.go), so a traced service behind the tool
// continues the proxy's trace; a call that is not traced sends none.
func TestHTTPToolTraceContext(t *testing.T) {
	for _, tc := range []struct {
		name            string
		ctx             func(*testing.T) context.Context
		parent, tracest string
	}{
		{"sampled", func(t *testing.T) context.Context { return spanContext(t, trace.FlagsSampled) },
			"00-" + exampleTraceID + "-" + exampleSpanID + "-01", exampleTraceState},
		{"not sampled", func(t *testing.T) context.Context { return spanContext(t, 0) },
			"00-" + exampleTraceID + "-" + exampleSpanID + "-00", exampleTraceState},
		{"telemetry off", func(t *testing.T) context.Context { return t.Context() }, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := make(chan http.Header, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got <- r.Header.Clone()
				w.Write([]byte("ok"))
			}))
			defer srv.Close()
			r := newHTTPRegistry(t, config.HTTPTool{Name: "probe", URL: srv.URL, ReadOnly: true, Headers: map[string]string{"X-Api-Key": "k-123"}})
			if _, err := r.Call(tc.ctx(t), "probe", []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
			h := <-got
			if p := h.Get("Traceparent"); p != tc.parent {
				t.Errorf("traceparent = %q, want %q", p, tc.parent)
			}
			if s := h.Get("Tracestate"); s != tc.tracest {
				t.Errorf("tracestate = %q, want %q", s, tc.tracest)
			}
			if h.Get("X-Api-Key") != "k-123" {
				t.Errorf("X-Api-Key = %q, want the configured header kept", h.Get("X-Api-Key"))
			}
		})
	}
}

// TestMCPToolTraceContext: an MCP tool's call carries the call's span in
// params._meta (traceparent, tracestate), over stdio as over streamable
// HTTP: the OpenTelemetry MCP conventions put trace context in the
// message, not the transport (open-telemetry/semantic-conventions
// docs/gen-ai/mcp.md "Context propagation", commit 04f1672). A call that
// is not traced sends none.
func TestMCPToolTraceContext(t *testing.T) {
	ts, _, _ := httpServer(t, nil)
	for _, srv := range []config.MCPServer{
		stdioServer("loc", nil),
		{Name: "web", URL: ts.URL, Headers: map[string]string{"X-Test": "yes"}},
	} {
		r := newMCPRegistry(t, 5*time.Second, srv)
		for _, tc := range []struct {
			name string
			ctx  context.Context
			want string
		}{
			{"traced", spanContext(t, trace.FlagsSampled), "traceparent=00-" + exampleTraceID + "-" + exampleSpanID + "-01\ntracestate=" + exampleTraceState},
			{"telemetry off", t.Context(), "traceparent=<nil>\ntracestate=<nil>"},
		} {
			t.Run(srv.Name+" "+tc.name, func(t *testing.T) {
				got, err := r.Call(tc.ctx, srv.Name+"__tracecontext", []byte(`{}`))
				if err != nil || got != tc.want {
					t.Errorf("Call(tracecontext) = %q, %v; want %q", got, err, tc.want)
				}
			})
		}
	}
}
