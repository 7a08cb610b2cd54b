package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"chainproxy/config"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"
)

// TestCallTraceContext: a tools/call carries the call's W3C trace context
// in params._meta (traceparent, tracestate), as the OpenTelemetry MCP
// conventions recommend (open-telemetry/semantic-conventions
// docs/gen-ai/mcp.md "Context propagation", commit 04f1672; MCP SEP-414),
// so that a traced MCP server's span is the child of the tool call's. The
// server here is the official Go SDK's, which hands a tool handler the
// request's _meta as req.Params.Meta. A call that is not traced sends no
// trace keys.
func TestCallTraceContext(t *testing.T) {
	metas := make(chan map[string]any, 1)
	srv := sdk.NewServer(&sdk.Implementation{Name: "traced", Version: "1"}, nil)
	srv.AddTool(&sdk.Tool{Name: "probe", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			metas <- req.Params.Meta
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ok"}}}, nil
		})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	m := Start(t.Context(), []config.MCPServer{{Name: "kb", URL: ts.URL}}, Options{StartTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	t.Cleanup(m.Close)
	if st := m.Status(); st[0].Err != nil {
		t.Fatalf("Status() = %v, want connected", st[0].Err)
	}

	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	state, err := trace.ParseTraceState("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
	if err != nil {
		t.Fatal(err)
	}
	traced := trace.ContextWithSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: state,
	}))
	for _, tc := range []struct {
		name            string
		ctx             context.Context
		parent, tracest any
	}{
		{"traced", traced, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"},
		{"telemetry off", t.Context(), nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := m.Call(tc.ctx, "kb", "probe", json.RawMessage(`{}`)); err != nil {
				t.Fatal(err)
			}
			meta := <-metas
			if p := meta["traceparent"]; p != tc.parent {
				t.Errorf("_meta.traceparent = %v, want %v (whole _meta: %v)", p, tc.parent, meta)
			}
			if s := meta["tracestate"]; s != tc.tracest {
				t.Errorf("_meta.tracestate = %v, want %v", s, tc.tracest)
			}
		})
	}
}
