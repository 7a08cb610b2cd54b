package web

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/chain/node"
	"chainproxy/config"
	"chainproxy/internal/fakeollama"
	"chainproxy/internal/fakeopenai"
	"chainproxy/internal/nodetest"
	"chainproxy/store"
	"chainproxy/tools"
)

// tracedProxy serves the proxy over real backends for nodes (protocol
// fakes), with a tracer provider that records every span it starts and
// ends: what an OTLP exporter would be handed.
func tracedProxy(t *testing.T, nodes []config.Node, chainYAML string) (*httptest.Server, *tracetest.SpanRecorder) {
	t.Helper()
	var y strings.Builder
	y.WriteString("nodes:\n")
	for _, n := range nodes {
		fmt.Fprintf(&y, "  - {name: %s, provider: %s, base_url: %q, model: %s, timeout: 10s, max_queue: 8}\n", n.Name, n.Provider, n.BaseURL, n.Model)
	}
	cfg, err := config.Parse([]byte(y.String() + chainYAML))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Root = t.TempDir()
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	set := nodetest.Build(t, cfg, nil)
	mem := store.NewMemory(1000, 10)
	eng, err := chain.New(cfg, chain.Deps{Nodes: set, Tools: reg, Admission: node.NewAdmission(cfg.Nodes), Guard: antiloop.NewGuard(mem, cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL)})
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	srv := httptest.NewServer(New(Options{Config: cfg, Engine: eng, Traces: mem, Tracing: tp, Keepalive: time.Hour}))
	t.Cleanup(srv.Close)
	return srv, rec
}

// spanAttrs is a span's attributes by key.
func spanAttrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value
	}
	return out
}

// endedNamed is the ended spans named name.
func endedNamed(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// TestTelemetryRequestSpanStatus: the request span is the proxy's HTTP
// server span, so its status follows the HTTP conventions
// (open-telemetry/semantic-conventions docs/http/http-spans.md, "Status"):
// a 4xx answer is the client's doing and MUST leave the status unset, so
// that a backend's error rate (Tempo's span metrics, Jaeger's SPM,
// Datadog's) counts the proxy's failures only; error.type still says what
// was refused. A 5xx is an error. The model call is a client span: an
// upstream's 4xx is an error there (SHOULD be set to Error for CLIENT).
// Whatever the outcome, every span started is ended, a client that goes
// away mid-stream included.
func TestTelemetryRequestSpanStatus(t *testing.T) {
	for _, tt := range []struct {
		name      string
		reply     fakeopenai.Reply
		body      string
		leave     bool // the client goes away after the first bytes
		status    int  // the request span's http.response.status_code
		errorType string
		spanCode  codes.Code
		callCode  codes.Code // the model call's span; Unset when none is made
	}{
		{name: "ok", reply: fakeopenai.Reply{Content: []string{"hi"}}, body: `{"model":"A","messages":[{"role":"user","content":"hi"}]}`,
			status: 200, spanCode: codes.Unset, callCode: codes.Unset},
		{name: "broken body", body: `{"model":"A","messages":`,
			status: 400, errorType: "invalid_request", spanCode: codes.Unset},
		{name: "unknown model", body: `{"model":"nope","messages":[{"role":"user","content":"hi"}]}`,
			status: 404, errorType: "model_not_found", spanCode: codes.Unset},
		{name: "upstream rate limit", reply: fakeopenai.Reply{Status: 429, Error: "slow down", ErrorType: "rate_limit_error"}, body: `{"model":"A","messages":[{"role":"user","content":"hi"}]}`,
			status: 429, errorType: "upstream_rate_limited", spanCode: codes.Unset, callCode: codes.Error},
		{name: "client gone", reply: fakeopenai.Reply{Content: []string{"partial "}, Hang: true}, body: `{"model":"A","stream":true,"messages":[{"role":"user","content":"hi"}]}`, leave: true,
			status: StatusClientClosed, errorType: "client_closed", spanCode: codes.Unset, callCode: codes.Error},
		{name: "upstream failure", reply: fakeopenai.Reply{Status: 500, Error: "model crashed"}, body: `{"model":"A","messages":[{"role":"user","content":"hi"}]}`,
			status: 502, errorType: "upstream_error", spanCode: codes.Error, callCode: codes.Error},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := fakeopenai.New(t, tt.reply)
			srv, rec := tracedProxy(t, []config.Node{openaiNode("A", f.BaseURL())}, oneStage)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if tt.leave {
				resp.Body.Read(make([]byte, 64))
				cancel()
				<-f.Canceled()
			} else {
				io.Copy(io.Discard, resp.Body)
			}
			resp.Body.Close()
			var server sdktrace.ReadOnlySpan
			waitFor(t, func() bool {
				if s := endedNamed(rec, "POST /v1/chat/completions"); len(s) == 1 {
					server = s[0]
				}
				return server != nil
			})
			a := spanAttrs(server)
			if got := a["http.response.status_code"].AsInt64(); got != int64(tt.status) {
				t.Errorf("http.response.status_code = %d, want %d", got, tt.status)
			}
			if got := a["error.type"].AsString(); got != tt.errorType {
				t.Errorf("error.type = %q, want %q", got, tt.errorType)
			}
			if got := server.Status().Code; got != tt.spanCode {
				t.Errorf("request span status %v (%q), want %v", got, server.Status().Description, tt.spanCode)
			}
			calls := endedNamed(rec, "chat a-model")
			if tt.callCode != codes.Unset || tt.status == 200 {
				if len(calls) != 1 || calls[0].Status().Code != tt.callCode {
					t.Errorf("model call spans %v, want one of status %v", calls, tt.callCode)
				}
			}
			if started, ended := len(rec.Started()), len(rec.Ended()); started != ended {
				t.Errorf("%d spans started, %d ended: every span must end", started, ended)
			}
		})
	}
}

// TestTelemetryAddresses: the attributes the HTTP and GenAI conventions
// require or recommend to say where a request went, read by backends to
// draw the services a trace crosses. The request span (HTTP server,
// open-telemetry/semantic-conventions docs/http/http-spans.md) requires
// url.path and url.scheme; a model call span (GenAI inference,
// docs/gen-ai/gen-ai-spans.md) recommends server.address, with server.port
// then conditionally required: the node called, from its base_url, the
// port the scheme implies when it names none.
func TestTelemetryAddresses(t *testing.T) {
	ol := fakeollama.New(t, fakeollama.Reply{Content: []string{"hi"}})
	oa := fakeopenai.New(t, fakeopenai.Reply{Content: []string{"hi"}})
	for _, tt := range []struct {
		name string
		node config.Node
		path string
		body string
		host string
		port int64
	}{
		{"ollama", ollamaNode("A", ol.URL), "/api/chat", `{"model":"A","stream":false,"messages":[{"role":"user","content":"hi"}]}`, "127.0.0.1", port(t, ol.URL)},
		{"openai", openaiNode("A", oa.BaseURL()), "/v1/messages", `{"model":"A","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, "127.0.0.1", port(t, oa.URL)},
		{"default port", openaiNode("A", "https://localhost/v1"), "/v1/chat/completions", `{"model":"A","messages":[{"role":"user","content":"hi"}]}`, "localhost", 443},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, rec := tracedProxy(t, []config.Node{tt.node}, oneStage)
			resp, err := http.Post(srv.URL+tt.path+"?beta=true", "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			var server sdktrace.ReadOnlySpan
			waitFor(t, func() bool {
				if s := endedNamed(rec, "POST "+tt.path); len(s) == 1 {
					server = s[0]
				}
				return server != nil
			})
			a := spanAttrs(server)
			if a["url.path"].AsString() != tt.path || a["url.scheme"].AsString() != "http" {
				t.Errorf("request span url.path %q url.scheme %q, want %q, http", a["url.path"].AsString(), a["url.scheme"].AsString(), tt.path)
			}
			calls := endedNamed(rec, "chat a-model")
			if len(calls) != 1 {
				t.Fatalf("%d model call spans, want 1", len(calls))
			}
			ca := spanAttrs(calls[0])
			if ca["server.address"].AsString() != tt.host || ca["server.port"].AsInt64() != tt.port {
				t.Errorf("model call server.address %q server.port %d, want %s:%d", ca["server.address"].AsString(), ca["server.port"].AsInt64(), tt.host, tt.port)
			}
		})
	}
}

// port is the port of a test server's URL.
func port(t *testing.T, raw string) int64 {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.ParseInt(u.Port(), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTelemetryUsageCountedOnce: the tokens of a chain are on its model
// call spans, once. Backends that read the GenAI attributes add up
// gen_ai.usage.* over a trace's spans: Langfuse takes usage from every span
// that has it and prices every span that names a model
// (langfuse/langfuse packages/shared/src/server/otel/OtelIngestionProcessor.ts
// extractGenericGenAiUsageDetails; ObservationTypeMapper.ts "ModelBased"
// makes such a span a generation), and the same totals on the stage and
// request spans would double and triple the trace's tokens and cost
// (langfuse/langfuse#14754, strands-agents/harness-sdk#1267). The stage's
// and the request's totals are under chain.usage.* instead.
func TestTelemetryUsageCountedOnce(t *testing.T) {
	ol := fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply {
		if !slices.ContainsFunc(req.Messages, func(m api.Message) bool { return m.Role == "tool" }) {
			return fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{{Name: "list_dir", Args: map[string]any{"path": "."}}}, PromptEvalCount: 40, EvalCount: 7}
		}
		return fakeollama.Reply{Content: []string{"one file"}, PromptEvalCount: 60, EvalCount: 9}
	})
	oa := fakeopenai.New(t, fakeopenai.Reply{Content: []string{"one file, per OL1"}, PromptTokens: 80, CompletionTokens: 5})
	srv, rec := tracedProxy(t, []config.Node{ollamaNode("OL1", ol.URL), openaiNode("M1", oa.BaseURL())},
		"chain:\n  stages: [{node: OL1, max_turns: 3, tools: true}, {node: M1, max_turns: 1}]\n  simple_node: OL1\n")
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"chain/reflexive","messages":[{"role":"user","content":"what is in the folder?"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	waitFor(t, func() bool { return len(endedNamed(rec, "POST /v1/chat/completions")) == 1 })

	const in, out = 40 + 60 + 80, 7 + 9 + 5 // what the nodes reported
	var sumIn, sumOut int64
	for _, s := range rec.Ended() {
		a := spanAttrs(s)
		sumIn += a["gen_ai.usage.input_tokens"].AsInt64()
		sumOut += a["gen_ai.usage.output_tokens"].AsInt64()
	}
	if sumIn != in || sumOut != out {
		t.Errorf("gen_ai.usage over the trace's spans: %d in, %d out; want the nodes' %d, %d, counted once", sumIn, sumOut, in, out)
	}
	for _, tt := range []struct {
		span    string
		in, out int64
	}{
		{"POST /v1/chat/completions", in, out},
		{"stage OL1", 40 + 60, 7 + 9},
		{"stage M1", 80, 5},
	} {
		s := endedNamed(rec, tt.span)
		if len(s) != 1 {
			t.Fatalf("%d spans %q, want 1", len(s), tt.span)
		}
		a := spanAttrs(s[0])
		if a["chain.usage.input_tokens"].AsInt64() != tt.in || a["chain.usage.output_tokens"].AsInt64() != tt.out {
			t.Errorf("%s chain.usage %d in, %d out; want %d, %d", tt.span, a["chain.usage.input_tokens"].AsInt64(), a["chain.usage.output_tokens"].AsInt64(), tt.in, tt.out)
		}
	}
}
