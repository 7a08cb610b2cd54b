package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ollama/ollama/api"
	goopenai "github.com/sashabaranov/go-openai"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"chainproxy/config"
	"chainproxy/internal/fakeollama"
	"chainproxy/internal/fakeopenai"
)

// otlpReceiver is a collector's trace intake, built on the collector's own
// protobuf types: TraceService over gRPC and POST /v1/traces (protobuf)
// over HTTP. It keeps every span with its resource's service.name, and the
// Authorization each export came with.
type otlpReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string
	auth     []string
}

func (o *otlpReceiver) add(req *coltracepb.ExportTraceServiceRequest, auth string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.auth = append(o.auth, auth)
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				o.services = append(o.services, kv.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			o.spans = append(o.spans, ss.GetSpans()...)
		}
	}
}

// Export implements the gRPC TraceService.
func (o *otlpReceiver) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	o.add(req, strings.Join(md.Get("authorization"), ","))
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// ServeHTTP is OTLP/HTTP's /v1/traces in its protobuf encoding.
func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want POST /v1/traces, application/x-protobuf", http.StatusNotFound)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.add(&req, r.Header.Get("Authorization"))
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func (o *otlpReceiver) snapshot() []*tracepb.Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.spans)
}

// startReceiver serves a receiver for protocol and returns its endpoint.
func startReceiver(t *testing.T, protocol string) (string, *otlpReceiver) {
	t.Helper()
	rec := &otlpReceiver{}
	if protocol == config.ProtocolHTTP {
		ts := httptest.NewServer(rec)
		t.Cleanup(ts.Close)
		return ts.URL, rec
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, rec)
	go srv.Serve(ln) // exits when Stop closes the listener
	t.Cleanup(srv.Stop)
	return "http://" + ln.Addr().String(), rec
}

// attrs is a span's attributes as Go values: string, int64, bool, or a
// []string for an array.
func attrs(s *tracepb.Span) map[string]any {
	out := map[string]any{}
	for _, kv := range s.GetAttributes() {
		out[kv.GetKey()] = value(kv.GetValue())
	}
	return out
}

func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_ArrayValue:
		var out []string
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, e.GetStringValue())
		}
		return out
	}
	return nil
}

// Secrets and words the content checks look for.
const (
	nodeSecret = "sk-node-secret-7f3a9"
	question   = "What do the zebra notes say? My key is " + nodeSecret
	clientTP   = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	clientTID  = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSID  = "00f067aa0ba902b7"
)

// TestTelemetryExportsTheChain runs the real wiring against a receiver of
// each protocol: a reflexive chain over two fake Ollama models and a fake
// OpenAI one, with a server tool call, exports the request span (a child of
// the client's traceparent, with the trace id of X-Chain-Trace-Id), a span
// per stage, per model call and per tool call, with the GenAI attributes.
// Prompts and answers leave the proxy only with capture_content, redacted.
// The spans are batched for an hour: they arrive at shutdown, flushed.
func TestTelemetryExportsTheChain(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000")
	for _, tt := range []struct {
		protocol string
		capture  bool
	}{
		{config.ProtocolHTTP, false},
		{config.ProtocolGRPC, false},
		{config.ProtocolHTTP, true},
		{config.ProtocolGRPC, true},
	} {
		t.Run(fmt.Sprintf("%s/capture=%v", tt.protocol, tt.capture), func(t *testing.T) {
			endpoint, rec := startReceiver(t, tt.protocol)
			ol := fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply {
				if req.Model == "small" && !slices.ContainsFunc(req.Messages, func(m api.Message) bool { return m.Role == "tool" }) {
					return fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{{Name: "list_dir", Args: map[string]any{"path": "."}}}, PromptEvalCount: 40, EvalCount: 7}
				}
				if req.Model == "big" {
					return fakeollama.Reply{Content: []string{"In short: stripes, in one file."}, PromptEvalCount: 90, EvalCount: 8}
				}
				return fakeollama.Reply{Content: []string{"the notes are about zebras"}, PromptEvalCount: 60, EvalCount: 9}
			})
			oa := fakeopenai.New(t, fakeopenai.Reply{Content: []string{"zebras, per the notes"}, PromptTokens: 80, CompletionTokens: 5})
			root := t.TempDir()
			if err := os.WriteFile(filepath.Join(root, "zebra-notes.md"), []byte("stripes\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			proxy := startWiredStop(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, base_url: %q, model: small}
  - {name: M1, provider: openai, base_url: %q, model: mid, api_key: %q}
  - {name: M2, provider: ollama, base_url: %q, model: big}
chain:
  stages: [{node: OL1, max_turns: 3, tools: true}, {node: M1, max_turns: 1}, {node: M2, max_turns: 1}]
  simple_node: OL1
tools: {root: %q}
telemetry:
  endpoint: %q
  protocol: %s
  headers: {Authorization: "Bearer otel-token"}
  capture_content: %v
`, ol.URL, oa.BaseURL(), nodeSecret, ol.URL, root, endpoint, tt.protocol, tt.capture))

			body, _ := json.Marshal(map[string]any{"model": "chain/reflexive", "messages": []map[string]string{{"role": "user", "content": question}}})
			req, _ := http.NewRequest(http.MethodPost, proxy.url+"/v1/chat/completions", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Traceparent", clientTP)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			answer, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, answer)
			}
			if id := resp.Header.Get("X-Chain-Trace-Id"); id != clientTID {
				t.Errorf("X-Chain-Trace-Id = %q, want the client's trace id %s", id, clientTID)
			}
			if got := rec.snapshot(); len(got) != 0 {
				t.Errorf("%d spans exported before shutdown, want them batched (OTEL_BSP_SCHEDULE_DELAY)", len(got))
			}
			proxy.stop()
			spans := rec.snapshot()

			byName := map[string][]*tracepb.Span{}
			byID := map[string]*tracepb.Span{}
			for _, s := range spans {
				byName[s.GetName()] = append(byName[s.GetName()], s)
				byID[hex.EncodeToString(s.GetSpanId())] = s
				if tid := hex.EncodeToString(s.GetTraceId()); tid != clientTID {
					t.Errorf("span %q trace id %s, want %s", s.GetName(), tid, clientTID)
				}
			}
			one := func(name string) *tracepb.Span {
				t.Helper()
				if len(byName[name]) != 1 {
					names := make([]string, 0, len(spans))
					for _, s := range spans {
						names = append(names, s.GetName())
					}
					t.Fatalf("%d spans %q, want 1; spans: %q", len(byName[name]), name, names)
				}
				return byName[name][0]
			}
			parentOf := func(s *tracepb.Span) *tracepb.Span { return byID[hex.EncodeToString(s.GetParentSpanId())] }

			request := one("POST /v1/chat/completions")
			if p := hex.EncodeToString(request.GetParentSpanId()); p != clientSID || request.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
				t.Errorf("request span parent %s kind %v, want the client's span %s, server", p, request.GetKind(), clientSID)
			}
			ra := attrs(request)
			for k, want := range map[string]any{"chain.mode": "reflexive", "chain.status": "ok", "chain.turns": int64(4), "chain.loop_stops": int64(0), "chain.stages": int64(3), "http.response.status_code": int64(200)} {
				if ra[k] != want {
					t.Errorf("request span %s = %v, want %v", k, ra[k], want)
				}
			}

			for i, st := range []struct{ node, model, provider string }{{"OL1", "small", "ollama"}, {"M1", "mid", "openai"}, {"M2", "big", "ollama"}} {
				stage := one("stage " + st.node)
				if parentOf(stage) != request {
					t.Errorf("stage %s is not a child of the request span", st.node)
				}
				sa := attrs(stage)
				if sa["chain.stage"] != int64(i) || sa["chain.status"] != "ok" || sa["gen_ai.request.model"] != st.model {
					t.Errorf("stage %s attributes %v", st.node, sa)
				}
				for _, call := range byName["chat "+st.model] {
					if parentOf(call) != stage || call.GetKind() != tracepb.Span_SPAN_KIND_CLIENT {
						t.Errorf("chat %s: parent %v kind %v, want stage %s, client", st.model, parentOf(call).GetName(), call.GetKind(), st.node)
					}
					ca := attrs(call)
					if ca["gen_ai.operation.name"] != "chat" || ca["gen_ai.provider.name"] != st.provider || ca["gen_ai.request.model"] != st.model {
						t.Errorf("chat %s attributes %v", st.model, ca)
					}
					if ca["gen_ai.usage.input_tokens"].(int64) <= 0 || ca["gen_ai.usage.output_tokens"].(int64) <= 0 {
						t.Errorf("chat %s usage %v / %v, want the upstream's", st.model, ca["gen_ai.usage.input_tokens"], ca["gen_ai.usage.output_tokens"])
					}
					if fr, _ := ca["gen_ai.response.finish_reasons"].([]string); len(fr) != 1 {
						t.Errorf("chat %s finish reasons %v", st.model, ca["gen_ai.response.finish_reasons"])
					}
					if ca["gen_ai.response.model"] != st.model {
						t.Errorf("chat %s response model %v, want the one the upstream names", st.model, ca["gen_ai.response.model"])
					}
				}
			}
			if n := len(byName["chat small"]); n != 2 {
				t.Errorf("%d model calls of OL1, want 2 (the tool call, the answer)", n)
			}
			if fr := attrs(byName["chat small"][0])["gen_ai.response.finish_reasons"]; !slices.Equal(fr.([]string), []string{"tool_calls"}) {
				t.Errorf("OL1's first call finish reasons %v, want [tool_calls]", fr)
			}

			tool := one("execute_tool list_dir")
			ta := attrs(tool)
			if parentOf(tool) != one("stage OL1") || ta["gen_ai.operation.name"] != "execute_tool" || ta["gen_ai.tool.name"] != "list_dir" || ta["gen_ai.tool.call.id"] == "" || ta["chain.tool.status"] != "ok" {
				t.Errorf("tool span parent %q attributes %v", parentOf(tool).GetName(), ta)
			}

			// The node's request carries the model call's traceparent.
			m1 := one("chat mid")
			if h := oa.Headers(); len(h) != 1 || h[0].Get("Traceparent") != "00-"+clientTID+"-"+hex.EncodeToString(m1.GetSpanId())+"-01" {
				t.Errorf("M1's request traceparent %q, want the chat span's", h[0].Get("Traceparent"))
			}

			rec.mu.Lock()
			if len(rec.auth) == 0 || rec.auth[0] != "Bearer otel-token" || rec.services[0] != "chainproxy" {
				t.Errorf("exports came with Authorization %q, service %q", rec.auth, rec.services)
			}
			rec.mu.Unlock()

			content := []string{"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"}
			for _, s := range spans {
				for k, v := range attrs(s) {
					str := fmt.Sprint(v)
					if strings.Contains(str, nodeSecret) {
						t.Errorf("span %q %s carries the node's key: %s", s.GetName(), k, str)
					}
					if !tt.capture && (slices.Contains(content, k) || strings.Contains(str, "zebra")) {
						t.Errorf("span %q exports content without capture_content: %s = %s", s.GetName(), k, str)
					}
				}
			}
			if tt.capture {
				in, _ := attrs(byName["chat small"][0])["gen_ai.input.messages"].(string)
				var msgs []struct {
					Role  string `json:"role"`
					Parts []struct{ Type, Content string }
				}
				if err := json.Unmarshal([]byte(in), &msgs); err != nil || !strings.Contains(in, "zebra notes") || !strings.Contains(in, "My key is ***") {
					t.Errorf("OL1's input messages %s (%v): want the question, its key masked", in, err)
				}
				if out, _ := attrs(byName["chat small"][0])["gen_ai.output.messages"].(string); !strings.Contains(out, `"type":"tool_call"`) || !strings.Contains(out, "list_dir") {
					t.Errorf("OL1's first output messages %s, want the tool call", out)
				}
				if out, _ := attrs(m1)["gen_ai.output.messages"].(string); !strings.Contains(out, "zebras, per the notes") {
					t.Errorf("M1's output messages %s", out)
				}
				if res, _ := ta["gen_ai.tool.call.result"].(string); !strings.Contains(res, "zebra-notes.md") || ta["gen_ai.tool.call.arguments"] != `{"path":"."}` {
					t.Errorf("tool span arguments %v result %v", ta["gen_ai.tool.call.arguments"], ta["gen_ai.tool.call.result"])
				}
			}
		})
	}
}

// TestTelemetryClientToolRoundTrip: a client tool call of the chain is a
// span when it goes to the client (status client) and another when its
// result comes back, in the follow-up request's trace; without a client
// traceparent each request has a trace id of its own, a W3C one.
func TestTelemetryClientToolRoundTrip(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000")
	endpoint, rec := startReceiver(t, config.ProtocolHTTP)
	ol := fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply {
		if req.Model == "small" && !slices.ContainsFunc(req.Messages, func(m api.Message) bool { return m.Role == "tool" }) {
			return fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{{Name: "get_weather", Args: map[string]any{"city": "Paris"}}}, PromptEvalCount: 10, EvalCount: 3}
		}
		return fakeollama.Reply{Content: []string{"sunny in Paris"}, PromptEvalCount: 20, EvalCount: 4}
	})
	base := startWiredStop(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, base_url: %q, model: small}
  - {name: M1, provider: ollama, base_url: %q, model: big}
chain:
  stages: [{node: OL1, max_turns: 3, tools: true}, {node: M1, max_turns: 1}]
  simple_node: OL1
tools: {root: ""}
telemetry: {endpoint: %q}
`, ol.URL, ol.URL, endpoint))
	client := goopenai.NewClientWithConfig(func() goopenai.ClientConfig {
		c := goopenai.DefaultConfig("")
		c.BaseURL = base.url + "/v1"
		return c
	}())
	weather := goopenai.Tool{Type: goopenai.ToolTypeFunction, Function: &goopenai.FunctionDefinition{Name: "get_weather",
		Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}}
	msgs := []goopenai.ChatCompletionMessage{{Role: "user", Content: "weather in Paris?"}}
	first, err := client.CreateChatCompletion(t.Context(), goopenai.ChatCompletionRequest{Model: "chain/reflexive", Messages: msgs, Tools: []goopenai.Tool{weather}})
	if err != nil {
		t.Fatal(err)
	}
	calls := first.Choices[0].Message.ToolCalls
	if len(calls) != 1 || calls[0].Function.Name != "get_weather" {
		t.Fatalf("first answer %+v, want a get_weather call", first.Choices[0].Message)
	}
	msgs = append(msgs, first.Choices[0].Message, goopenai.ChatCompletionMessage{Role: "tool", ToolCallID: calls[0].ID, Content: "sunny, 24°C"})
	second, err := client.CreateChatCompletion(t.Context(), goopenai.ChatCompletionRequest{Model: "chain/reflexive", Messages: msgs, Tools: []goopenai.Tool{weather}})
	if err != nil {
		t.Fatal(err)
	}
	if second.Choices[0].Message.Content == "" {
		t.Fatalf("second answer %+v, want the chain's answer", second.Choices[0].Message)
	}
	base.stop()

	var handed, returned *tracepb.Span
	traces := map[string]bool{}
	for _, s := range rec.snapshot() {
		if s.GetName() == "POST /v1/chat/completions" {
			traces[hex.EncodeToString(s.GetTraceId())] = true
			if len(s.GetParentSpanId()) != 0 {
				t.Errorf("request span has a parent %x without a client traceparent", s.GetParentSpanId())
			}
		}
		if s.GetName() != "execute_tool get_weather" {
			continue
		}
		switch a := attrs(s); {
		case a["chain.tool.status"] == "client":
			handed = s
		case a["chain.tool.status"] == "ok":
			returned = s
		}
	}
	if len(traces) != 2 {
		t.Errorf("%d traces, want one per request", len(traces))
	}
	for _, s := range []*tracepb.Span{handed, returned} {
		if s == nil {
			t.Fatalf("client tool spans: handed %v, returned %v; want both", handed, returned)
		}
		a := attrs(s)
		if a["gen_ai.tool.call.id"] != calls[0].ID || a["chain.tool.client"] != true || a["gen_ai.operation.name"] != "execute_tool" {
			t.Errorf("client tool span attributes %v, want the call id %s", a, calls[0].ID)
		}
	}
	if hex.EncodeToString(handed.GetTraceId()) == hex.EncodeToString(returned.GetTraceId()) {
		t.Errorf("the hand-over and the result share a trace: want each in its request's")
	}
}

// wiredProxy is a proxy run by startWiredStop.
type wiredProxy struct {
	url  string
	stop func()
}

// startWiredStop is startWired with a stop the test calls itself (to read
// what shutdown flushed); the cleanup stops it if the test did not.
func startWiredStop(t *testing.T, cfgText string) wiredProxy {
	t.Helper()
	cfgPath := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	base, stop := startRun(t, "-config", cfgPath)
	var once sync.Once
	p := wiredProxy{url: base, stop: func() {
		once.Do(func() {
			if c := stop(); c != 0 {
				t.Errorf("exit code %d, want 0", c)
			}
		})
	}}
	t.Cleanup(p.stop)
	return p
}

// TestTelemetryFromTheVariables: with no telemetry section, the standard
// variables turn the export on and pick its protocol and headers; without
// an endpoint, or with the SDK disabled, it is off and gives no provider.
func TestTelemetryFromTheVariables(t *testing.T) {
	for _, tt := range []struct {
		name     string
		protocol string // receiver's; "" runs none
		env      map[string]string
		on       bool
	}{
		{name: "no endpoint", env: map[string]string{}},
		{name: "http by default", protocol: config.ProtocolHTTP, env: map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer from-env"}, on: true},
		{name: "grpc", protocol: config.ProtocolGRPC, env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer from-env"}, on: true},
		{name: "traces protocol wins", protocol: config.ProtocolGRPC, env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer from-env"}, on: true},
		{name: "sdk disabled", protocol: config.ProtocolHTTP, env: map[string]string{"OTEL_SDK_DISABLED": "true"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER"} {
				t.Setenv(k, tt.env[k])
			}
			var rec *otlpReceiver
			if tt.protocol != "" {
				var endpoint string
				endpoint, rec = startReceiver(t, tt.protocol)
				t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
			}
			tel, err := startTelemetry(t.Context(), config.Telemetry{}, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			if (tel.provider != nil) != tt.on {
				t.Fatalf("provider %v, want on = %v", tel.provider, tt.on)
			}
			if !tt.on {
				return
			}
			_, span := tel.provider.Tracer("test").Start(t.Context(), "probe")
			span.End()
			if err := tel.shutdown(t.Context()); err != nil {
				t.Fatal(err)
			}
			got := rec.snapshot()
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(got) != 1 || got[0].GetName() != "probe" || len(rec.auth) != 1 || rec.auth[0] != "Bearer from-env" {
				t.Errorf("received %d spans, Authorization %q; want the probe, with the variables' header", len(got), rec.auth)
			}
		})
	}
}

// TestTelemetryEveryFront: each API front starts its request span, with
// the trace id it answers in X-Chain-Trace-Id; a request refused before
// the chain runs is a span with its error code, its status unset (a 4xx).
func TestTelemetryEveryFront(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000")
	endpoint, rec := startReceiver(t, config.ProtocolGRPC)
	ol := fakeollama.NewFunc(t, func(int, *api.ChatRequest) fakeollama.Reply {
		return fakeollama.Reply{Content: []string{"hello"}, PromptEvalCount: 5, EvalCount: 1}
	})
	proxy := startWiredStop(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, base_url: %q, model: small}
chain:
  stages: [{node: OL1, max_turns: 1}]
  simple_node: OL1
tools: {root: ""}
telemetry: {endpoint: %q, protocol: grpc}
`, ol.URL, endpoint))
	fronts := []struct{ path, body, span string }{
		{"/v1/chat/completions", `{"model":"chain/simple","messages":[{"role":"user","content":"hi"}]}`, "POST /v1/chat/completions"},
		{"/v1/responses", `{"model":"chain/simple","input":"hi"}`, "POST /v1/responses"},
		{"/api/chat", `{"model":"chain/simple","stream":false,"messages":[{"role":"user","content":"hi"}]}`, "POST /api/chat"},
		{"/api/generate", `{"model":"chain/simple","stream":false,"prompt":"hi"}`, "POST /api/generate"},
		{"/chat", `{"message":"hi","mode":"simple"}`, "POST /chat"},
		{"/v1/messages", `{"model":"chain/simple","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, "POST /v1/messages"},
		{"/v1/chat/completions", `{"model":"chain/simple","messages":`, "POST /v1/chat/completions"},
	}
	ids := map[string]string{} // trace id → span name
	var refused string
	for i, f := range fronts {
		resp, err := http.Post(proxy.url+f.path, "application/json", strings.NewReader(f.body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		id := resp.Header.Get("X-Chain-Trace-Id")
		if i == len(fronts)-1 {
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("broken body: status %d, want 400", resp.StatusCode)
			}
			continue
		}
		if resp.StatusCode != http.StatusOK || len(id) != 32 {
			t.Fatalf("POST %s: status %d, X-Chain-Trace-Id %q", f.path, resp.StatusCode, id)
		}
		ids[id] = f.span
	}
	proxy.stop()
	for _, s := range rec.snapshot() {
		if !strings.HasPrefix(s.GetName(), "POST ") {
			continue
		}
		tid := hex.EncodeToString(s.GetTraceId())
		if name, ok := ids[tid]; ok {
			if name != s.GetName() || s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR {
				t.Errorf("trace %s: span %q status %v, want %q, not an error", tid, s.GetName(), s.GetStatus(), name)
			}
			delete(ids, tid)
			continue
		}
		a := attrs(s)
		// A 4xx is the client's: the HTTP conventions leave a server
		// span's status unset, and error.type says what was wrong.
		if s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR || a["http.response.status_code"] != int64(400) || a["error.type"] != "invalid_request" {
			t.Errorf("span %q status %v attributes %v: want the refused request, its status unset", s.GetName(), s.GetStatus(), a)
		}
		refused = s.GetName()
	}
	if len(ids) != 0 || refused == "" {
		t.Errorf("no request span for %v; refused request's span %q", ids, refused)
	}
}

// TestTelemetryErrorsSetStatus: a node that fails makes its model call,
// its stage and the request error spans, each saying why: in the proxy's
// words (the node, the HTTP status) without capture_content, with what the
// node said only with it, since a node's message may quote the request.
func TestTelemetryErrorsSetStatus(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000")
	for _, capture := range []bool{false, true} {
		t.Run(fmt.Sprintf("capture=%v", capture), func(t *testing.T) {
			endpoint, rec := startReceiver(t, config.ProtocolHTTP)
			oa := fakeopenai.New(t, fakeopenai.Reply{Status: http.StatusInternalServerError, Error: "model crashed"})
			proxy := startWiredStop(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: openai, base_url: %q, model: small}
chain:
  stages: [{node: OL1, max_turns: 1}]
  simple_node: OL1
tools: {root: ""}
telemetry: {endpoint: %q, capture_content: %v}
`, oa.BaseURL(), endpoint, capture))
			resp, err := http.Post(proxy.url+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"chain/simple","messages":[{"role":"user","content":"hi"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode < 500 {
				t.Fatalf("status %d, want the node's failure", resp.StatusCode)
			}
			proxy.stop()
			errored := map[string]string{}
			for _, s := range rec.snapshot() {
				if s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR {
					errored[s.GetName()] = s.GetStatus().GetMessage()
				}
				if s.GetName() == "chat small" && attrs(s)["error.type"] != "500" {
					t.Errorf("model call error.type %v, want the upstream's status", attrs(s)["error.type"])
				}
			}
			for _, name := range []string{"POST /v1/chat/completions", "stage OL1", "chat small"} {
				msg := errored[name]
				if !strings.Contains(msg, "node OL1: upstream status error (HTTP 500)") || strings.Contains(msg, "model crashed") != capture {
					t.Errorf("span %q status message %q, want an error naming the node and status, and the node's message only with capture_content", name, msg)
				}
			}
		})
	}
}

// TestTelemetrySharedClientTrace: two Responses requests sent under one
// client trace share the chain's trace id, yet each response keeps ids of
// its own, and each is found again by its id.
func TestTelemetrySharedClientTrace(t *testing.T) {
	endpoint, _ := startReceiver(t, config.ProtocolHTTP)
	ol := fakeollama.NewFunc(t, func(call int, _ *api.ChatRequest) fakeollama.Reply {
		return fakeollama.Reply{Content: []string{fmt.Sprintf("answer %d", call)}}
	})
	proxy := startWiredStop(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, base_url: %q, model: small}
chain:
  stages: [{node: OL1, max_turns: 1}]
  simple_node: OL1
tools: {root: ""}
telemetry: {endpoint: %q}
`, ol.URL, endpoint))
	var ids []string
	for _, input := range []string{"first", "second"} {
		req, _ := http.NewRequest(http.MethodPost, proxy.url+"/v1/responses", strings.NewReader(`{"model":"chain/simple","store":true,"input":"`+input+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Traceparent", clientTP)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var obj struct{ ID string }
		err = json.NewDecoder(resp.Body).Decode(&obj)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("X-Chain-Trace-Id") != clientTID {
			t.Fatalf("POST /v1/responses: status %d, trace id %q, %v", resp.StatusCode, resp.Header.Get("X-Chain-Trace-Id"), err)
		}
		ids = append(ids, obj.ID)
	}
	if ids[0] == ids[1] || !strings.HasPrefix(ids[0], "resp_"+clientTID+"_") {
		t.Fatalf("response ids %q: want two of their own under the client's trace id", ids)
	}
	for i, id := range ids {
		resp, err := http.Get(proxy.url + "/v1/responses/" + id)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), fmt.Sprintf("answer %d", i)) {
			t.Errorf("GET %s: status %d, %s; want response %d", id, resp.StatusCode, body, i)
		}
	}
}
