package chain_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/config"
	"chainproxy/store"
	"chainproxy/tools"
	"chainproxy/tools/mcp"

	"chainproxy/internal/nodetest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// toolWork is what a tool's server saw of one call: the trace context it
// was sent, and when its work began and ended.
type toolWork struct {
	parent     trace.SpanContext
	start, end time.Time
}

// workLog collects the calls a test's tool servers served, by tool.
type workLog struct {
	mu    sync.Mutex
	calls map[string][]toolWork
}

func (l *workLog) add(tool string, w toolWork) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls == nil {
		l.calls = map[string][]toolWork{}
	}
	l.calls[tool] = append(l.calls[tool], w)
}

func (l *workLog) take() map[string][]toolWork {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.calls
	l.calls = nil
	return out
}

// toolWorkTime is how long each tool's work takes: long enough that a span
// ending before the work ended, or starting after it began, shows.
const toolWorkTime = 20 * time.Millisecond

// traceTools starts an HTTP tool endpoint that reads the traceparent and
// tracestate headers (W3C Trace Context, as an OpenTelemetry-instrumented
// service extracts them with propagation.TraceContext) and an MCP server
// built with the official Go SDK whose tool reads params._meta (the
// carrier the OpenTelemetry MCP conventions name:
// open-telemetry/semantic-conventions docs/gen-ai/mcp.md "Context
// propagation", commit 04f1672). It returns the registry offering both,
// as "lookup" and "kb__find".
func traceTools(t *testing.T, cfg *config.Config, log *workLog) *tools.Registry {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w0 := toolWork{start: time.Now()}
		w0.parent = trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(r.Header)))
		time.Sleep(toolWorkTime)
		w0.end = time.Now()
		log.add("lookup", w0)
		w.Write([]byte(`{"answer":"a"}`))
	}))
	t.Cleanup(hs.Close)

	srv := sdk.NewServer(&sdk.Implementation{Name: "kb", Version: "1"}, nil)
	srv.AddTool(&sdk.Tool{Name: "find", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`), Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			w0 := toolWork{start: time.Now()}
			carrier := propagation.MapCarrier{}
			for k, v := range req.Params.Meta {
				if s, ok := v.(string); ok {
					carrier[k] = s
				}
			}
			w0.parent = trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
			time.Sleep(toolWorkTime)
			w0.end = time.Now()
			log.add("kb__find", w0)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "found b"}}}, nil
		})
	ms := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(ms.Close)

	cfg.Tools.Root = t.TempDir()
	cfg.Tools.HTTP = []config.HTTPTool{{
		Name: "lookup", URL: hs.URL, ReadOnly: true,
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}, "required": []any{"q"}},
	}}
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg.StartMCP(t.Context(), []config.MCPServer{{Name: "kb", URL: ms.URL}}, mcp.Options{StartTimeout: 10 * time.Second})
	t.Cleanup(reg.Close)
	if _, ok := reg.Lookup("kb__find"); !ok {
		t.Fatalf("kb__find not offered: %v", reg.MCPStatus())
	}
	return reg
}

// TestToolSpanTraceContext: a tool call's execute_tool span is open while
// the tool runs, and the tool's server is sent its trace context: the
// HTTP tool's endpoint in traceparent, the MCP server in params._meta, so
// a traced tool service's spans are children of the tool call's, as a
// node's are of the model call's. Calls the schema check or the
// anti-loop refused still get their span, with their status. With
// telemetry off (no recording span in the request's context), no trace
// context is sent.
func TestToolSpanTraceContext(t *testing.T) {
	cfg, err := config.Parse([]byte(`
nodes:
  - name: OL1
    provider: mock
    mock:
      turns:
        - tool_calls: [{name: lookup, args: {q: a}}, {name: kb__find, args: {q: b}}, {name: lookup, args: {q: 5}}]
        - tool_calls: [{name: lookup, args: {q: a}}]
        - content: "never reached"
chain:
  stages: [{node: OL1, max_turns: 6, tools: true}]
  simple_node: OL1
`))
	if err != nil {
		t.Fatal(err)
	}
	var log workLog
	reg := traceTools(t, cfg, &log)
	eng, err := chain.New(cfg, chain.Deps{
		Nodes: nodetest.Build(t, cfg, nodetest.Mocks),
		Tools: reg,
		Guard: antiloop.NewGuard(store.NewMemory(1000, 10), cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL),
	})
	if err != nil {
		t.Fatal(err)
	}
	run := func(ctx context.Context, conv string) *chain.Result {
		t.Helper()
		res, err := eng.Run(ctx, &chain.RunRequest{TraceID: conv, Model: chain.ModelSimple, Conversation: conv,
			Messages: []chain.Message{{Role: "user", Content: "look it up"}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	t.Run("traced", func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		ctx, root := tp.Tracer("test").Start(t.Context(), "POST /v1/chat/completions")
		run(ctx, "traced")
		root.End()

		var stage sdktrace.ReadOnlySpan
		var toolSpans []sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			switch attrs := attrMap(s.Attributes()); {
			case s.Name() == "stage OL1":
				stage = s
			case attrs["gen_ai.operation.name"] == "execute_tool":
				toolSpans = append(toolSpans, s)
			}
		}
		if stage == nil {
			t.Fatal("no stage span")
		}
		var got []string
		for _, s := range toolSpans {
			a := attrMap(s.Attributes())
			got = append(got, s.Name()+":"+a["chain.tool.status"].(string))
			if s.Parent().SpanID() != stage.SpanContext().SpanID() {
				t.Errorf("%s: parent %s, want the stage span %s", s.Name(), s.Parent().SpanID(), stage.SpanContext().SpanID())
			}
			if a["gen_ai.tool.call.id"] == "" || a["gen_ai.tool.type"] != "function" || a["chain.tool.client"] != false || a["chain.stage"] != int64(0) {
				t.Errorf("%s: attributes %v", s.Name(), a)
			}
			if a["chain.tool.status"] == chain.ToolError && (s.Status().Code != codes.Error || a["error.type"] != "tool_error") {
				t.Errorf("%s: status %v, error.type %v, want an error span of type tool_error", s.Name(), s.Status(), a["error.type"])
			}
		}
		want := []string{"execute_tool lookup:ok", "execute_tool kb__find:ok", "execute_tool lookup:error", "execute_tool lookup:blocked"}
		if !slices.Equal(got, want) {
			t.Fatalf("tool spans = %v, want %v", got, want)
		}

		work := log.take()
		for i, tool := range []string{"lookup", "kb__find"} {
			span := toolSpans[i]
			if len(work[tool]) != 1 {
				t.Fatalf("%s ran %d times, want once", tool, len(work[tool]))
			}
			w := work[tool][0]
			if span.StartTime().After(w.start) || span.EndTime().Before(w.end) {
				t.Errorf("%s: span %s–%s does not enclose the tool's work %s–%s", tool,
					span.StartTime().Format(time.StampMicro), span.EndTime().Format(time.StampMicro),
					w.start.Format(time.StampMicro), w.end.Format(time.StampMicro))
			}
			if !w.parent.IsValid() {
				t.Errorf("%s: the server got no trace context", tool)
				continue
			}
			if w.parent.TraceID() != span.SpanContext().TraceID() || w.parent.SpanID() != span.SpanContext().SpanID() {
				t.Errorf("%s: server's parent %s/%s, want the execute_tool span %s/%s", tool,
					w.parent.TraceID(), w.parent.SpanID(), span.SpanContext().TraceID(), span.SpanContext().SpanID())
			}
			if !w.parent.IsSampled() {
				t.Errorf("%s: server's parent not sampled, want the span's sampled flag", tool)
			}
		}
	})

	t.Run("telemetry off", func(t *testing.T) {
		run(t.Context(), "untraced")
		work := log.take()
		for _, tool := range []string{"lookup", "kb__find"} {
			if len(work[tool]) != 1 {
				t.Fatalf("%s ran %d times, want once", tool, len(work[tool]))
			}
			if p := work[tool][0].parent; p.IsValid() {
				t.Errorf("%s: the server got trace context %s/%s with telemetry off, want none", tool, p.TraceID(), p.SpanID())
			}
		}
	})
}

// attrMap is a span's attributes by key, as plain values.
func attrMap(kvs []attribute.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

// TestToolSpanEndsWhenRequestEnds: the client goes away while a tool runs
// (its context is cancelled, as net/http cancels a request's context when
// the connection closes): the execute_tool span, open since the call
// started, still ends, with an error status, so that no span is left
// unexported.
func TestToolSpanEndsWhenRequestEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cancel()
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	defer hs.Close()
	defer close(done)
	cfg, err := config.Parse([]byte(`
nodes:
  - name: OL1
    provider: mock
    mock:
      turns:
        - tool_calls: [{name: slow, args: {}}]
        - content: "never reached"
chain:
  stages: [{node: OL1, max_turns: 6, tools: true}]
  simple_node: OL1
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Root = t.TempDir()
	cfg.Tools.HTTP = []config.HTTPTool{{Name: "slow", URL: hs.URL, ReadOnly: true}}
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := chain.New(cfg, chain.Deps{
		Nodes: nodetest.Build(t, cfg, nodetest.Mocks),
		Tools: reg,
		Guard: antiloop.NewGuard(store.NewMemory(1000, 10), cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL),
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, root := tp.Tracer("test").Start(ctx, "POST /v1/chat/completions")
	_, err = eng.Run(ctx, &chain.RunRequest{TraceID: "gone", Model: chain.ModelSimple, Conversation: "gone",
		Messages: []chain.Message{{Role: "user", Content: "look it up"}}}, nil)
	root.End()
	if err == nil {
		t.Fatal("Run succeeded, want the cancellation")
	}
	for _, s := range rec.Started() {
		if s.Name() != "execute_tool slow" {
			continue
		}
		if !s.EndTime().After(s.StartTime()) {
			t.Fatalf("execute_tool slow not ended")
		}
		if s.Status().Code != codes.Error {
			t.Errorf("execute_tool slow status = %v, want an error", s.Status())
		}
		return
	}
	t.Fatal("no execute_tool slow span")
}
