package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/chain/node"
	"chainproxy/config"
	"chainproxy/internal/fakeollama"
	"chainproxy/internal/fakeopenai"
	"chainproxy/internal/nodetest"
	"chainproxy/internal/redistest"
	"chainproxy/store"
	"chainproxy/tools"
)

// The tests of issue 41's trace items: whose a chain is when two callers
// share a client trace id, a chain whose client went away, and a chain
// resumed with its client's tool results. Each runs the proxy as
// cmd/proxy wires it: config, real backends over protocol fakes, the
// store, telemetry on, two API keys.

// scopeKeys are the two callers.
const scopeKeyA, scopeKeyB = "key-a", "key-b"

// tracesProxy serves the proxy over nodes (protocol fakes) with the chain
// of chainYAML, keys A and B, its traces, resume state and anti-loop in a
// memory store, and telemetry recorded.
func tracesProxy(t *testing.T, nodes []config.Node, chainYAML string) (*httptest.Server, *Server, *tracetest.SpanRecorder) {
	t.Helper()
	var y strings.Builder
	y.WriteString("server:\n  api_keys: [" + scopeKeyA + ", " + scopeKeyB + "]\nnodes:\n")
	for _, n := range nodes {
		fmt.Fprintf(&y, "  - {name: %s, provider: %s, base_url: %q, model: %s, timeout: 30s, max_queue: 8, max_concurrency: 4}\n", n.Name, n.Provider, n.BaseURL, n.Model)
	}
	cfg, err := config.Parse([]byte(y.String() + chainYAML))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Root = t.TempDir()
	if err := os.WriteFile(filepath.Join(cfg.Tools.Root, "VICTIM-B-5521-payroll.md"), []byte("B's payroll\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	set := nodetest.Build(t, cfg, nil)
	mem := store.NewMemory(1000, 50)
	eng, err := chain.New(cfg, chain.Deps{Nodes: set, Tools: reg, Resume: mem, Admission: node.NewAdmission(cfg.Nodes),
		Guard: antiloop.NewGuard(mem, cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL)})
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	s := New(Options{Config: cfg, Engine: eng, Traces: mem, Tracing: tp, Keepalive: time.Hour})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv, s, rec
}

// postAs sends a chat completion as key, with hdr; it returns the response
// whose body the caller reads.
func postAs(t *testing.T, url, key string, body any, hdr ...string) *http.Response {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// traceBody is GET /v1/chain/traces/{id} as key: the status and the raw
// document.
func traceBody(t *testing.T, url, key, id string) (int, string) {
	t.Helper()
	resp := get(t, url+"/v1/chain/traces/"+id, "Authorization", "Bearer "+key)
	return resp.StatusCode, string(readAll(t, resp.Body))
}

// TestTraceSharedTraceparentStaysPerCaller (issue 41, item 1): callers A
// and B send the same client trace id. A's chain is still running when B's
// request, under that id, reads a file: A's trace never shows B's call,
// B's list holds B's chain, and B's chain is its own (its own id, the
// client's trace still its request span's parent).
func TestTraceSharedTraceparentStaysPerCaller(t *testing.T) {
	const clientTrace = "7bf92f3577b34da6a3ce929d0e0e47a1"
	const victim = "VICTIM-B-5521-payroll.md"
	release := make(chan struct{})
	aStarted := make(chan struct{}, 1)
	ol1 := fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply {
		switch {
		case mentions(req.Messages, "question of A"):
			// A's chain runs long: its first call waits for the test.
			select {
			case aStarted <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-time.After(time.Minute):
			}
			return fakeollama.Reply{Content: []string{"notes of A"}}
		case toolResults(req) == 0:
			return fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{{Name: "read_file", Args: map[string]any{"path": victim}}}}
		default:
			return fakeollama.Reply{Content: []string{"notes of B"}}
		}
	})
	m1 := fakeopenai.New(t, fakeopenai.Reply{Content: []string{"analysis"}})
	m2 := fakeopenai.New(t, fakeopenai.Reply{Content: []string{"the answer"}})
	srv, _, rec := tracesProxy(t, []config.Node{ollamaNode("OL1", ol1.URL), openaiNode("M1", m1.BaseURL()), openaiNode("M2", m2.BaseURL())},
		"chain:\n  stages: [{node: OL1, max_turns: 3, tools: true}, {node: M1, max_turns: 1}, {node: M2, max_turns: 1}]\n  simple_node: OL1\n")
	traceparent := func(span string) []string { return []string{"traceparent", "00-" + clientTrace + "-" + span + "-01"} }

	aDone := make(chan string, 1)
	go func() { // exits when A's request ends: the test releases OL1
		b, _ := json.Marshal(map[string]any{"model": "chain/reflexive", "messages": []any{map[string]any{"role": "user", "content": "the question of A"}}})
		req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+scopeKeyA)
		req.Header.Set("traceparent", "00-"+clientTrace+"-00f067aa0ba902b7-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			aDone <- "error: " + err.Error()
			return
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		aDone <- resp.Header.Get("X-Chain-Trace-Id")
	}()
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	select {
	case <-aStarted:
	case <-time.After(time.Minute):
		t.Fatal("A's chain never reached OL1")
	}

	resp := postAs(t, srv.URL, scopeKeyB, map[string]any{"model": "chain/reflexive", "messages": []any{map[string]any{"role": "user", "content": "B asks to read the payroll file"}}},
		traceparent("b7ad6b7169203331")...)
	readAll(t, resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("B's request: status %d", resp.StatusCode)
	}
	bID := resp.Header.Get("X-Chain-Trace-Id")

	check := func(when string) {
		t.Helper()
		if bID == clientTrace {
			t.Errorf("%s: B's chain id = the client's %s, which A's chain holds: want one of its own", when, clientTrace)
		}
		status, doc := traceBody(t, srv.URL, scopeKeyA, clientTrace)
		if status != http.StatusOK || strings.Contains(doc, victim) || strings.Contains(doc, "notes of B") {
			t.Errorf("%s: A's GET /v1/chain/traces/%s = %d %s, want A's chain without B's tool call", when, clientTrace, status, doc)
		}
		for _, tt := range []struct {
			key  string
			want string
		}{{scopeKeyA, clientTrace}, {scopeKeyB, bID}} {
			sums := listed(t, srv, tt.key)
			if len(sums) != 1 || sums[0].TraceID != tt.want {
				t.Errorf("%s: %s lists %+v, want its own chain %s alone", when, tt.key, sums, tt.want)
			}
		}
		status, doc = traceBody(t, srv.URL, scopeKeyB, bID)
		if status != http.StatusOK || !strings.Contains(doc, victim) {
			t.Errorf("%s: B's GET of its chain %s = %d %s, want B's chain with its read_file", when, bID, status, doc)
		}
		if status, _ := traceBody(t, srv.URL, scopeKeyB, clientTrace); status != http.StatusNotFound {
			t.Errorf("%s: B's GET of A's chain = %d, want 404", when, status)
		}
	}
	check("while A runs")

	close(release)
	if got := <-aDone; got != clientTrace {
		t.Errorf("A's chain id = %q, want the client's trace id %s", got, clientTrace)
	}
	check("after A ended")

	// B's request span is still in the client's trace.
	for _, sp := range endedNamed(rec, "POST /v1/chat/completions") {
		if got := sp.SpanContext().TraceID().String(); got != clientTrace {
			t.Errorf("request span in trace %s, want the client's %s", got, clientTrace)
		}
		if !sp.Parent().IsValid() || sp.Parent().TraceID().String() != clientTrace {
			t.Errorf("request span's parent = %v, want the client's span", sp.Parent())
		}
	}
}

// TestTraceClientGoneIsCancelled (issue 41, item 7): a client that goes
// away mid-chain (a dropped stream, curl --max-time, the cockpit's Esc)
// leaves a chain listed cancelled, every stage in a final state, whose
// trace opens with what it did so far.
func TestTraceClientGoneIsCancelled(t *testing.T) {
	for _, tt := range []struct{ name, path, body string }{
		{"chat completions streamed", "/v1/chat/completions", `{"model":"chain/reflexive","stream":true,"messages":[{"role":"user","content":"compare the two files"}]}`},
		{"chat completions whole", "/v1/chat/completions", `{"model":"chain/reflexive","messages":[{"role":"user","content":"compare the two files"}]}`},
		{"cockpit stopped", "/chat", `{"message":"compare the two files","mode":"reflexive","stream":true}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ol1 := fakeollama.New(t, fakeollama.Reply{Content: []string{"notes of OL1"}})
			m1 := fakeopenai.New(t, fakeopenai.Reply{Content: []string{"half an analy"}, Hang: true})
			m2 := fakeopenai.New(t, fakeopenai.Reply{Content: []string{"never asked"}})
			srv, _, _ := tracesProxy(t, []config.Node{ollamaNode("OL1", ol1.URL), openaiNode("M1", m1.BaseURL()), openaiNode("M2", m2.BaseURL())},
				"chain:\n  stages: [{node: OL1, max_turns: 2}, {node: M1, max_turns: 1}, {node: M2, max_turns: 1}]\n  simple_node: OL1\n")
			next := stream(t, srv, scopeKeyA)

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan struct{})
			go func() { // exits when the request ends: the test cancels it
				defer close(done)
				req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+tt.path, strings.NewReader(tt.body))
				req.Header.Set("Authorization", "Bearer "+scopeKeyA)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
			id := next().TraceID
			select {
			case <-m1.Hanging():
			case <-time.After(time.Minute):
				t.Fatal("M1 was never called")
			}
			cancel() // the client goes away
			<-done
			<-m1.Canceled()

			var sum traceSummary
			for sum = next(); sum.TraceID != id || sum.Status == traceRunning; sum = next() {
			}
			if sum.Status != traceCancelled {
				t.Errorf("listed status = %q, want %q", sum.Status, traceCancelled)
			}
			for _, b := range sum.Stages {
				if b.Status == traceRunning {
					t.Errorf("listed stage %s still %s", b.Node, b.Status)
				}
			}
			status, doc := openTrace(t, srv, scopeKeyA, id)
			if status != http.StatusOK {
				t.Fatalf("GET /v1/chain/traces/%s = %d, want the cancelled chain", id, status)
			}
			var got []string
			for _, st := range doc.Chain.Stages {
				got = append(got, st.Node+":"+st.Status)
			}
			if want := []string{"OL1:ok", "M1:cancelled"}; doc.Status != traceCancelled || strings.Join(got, " ") != strings.Join(want, " ") || doc.Chain.Stages[0].Output != "notes of OL1" {
				t.Errorf("stored trace = %s %q (OL1 output %q), want %s %q with OL1's notes", doc.Status, got, doc.Chain.Stages[0].Output, traceCancelled, want)
			}
		})
	}
}

// weatherTwice asks the client's get_weather for Paris, then for Lyon,
// then writes its notes: two client round trips in one chain.
func weatherTwice(req *api.ChatRequest) fakeollama.Reply {
	switch toolResults(req) {
	case 0:
		return fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{{Name: "get_weather", Args: map[string]any{"city": "Paris"}}}}
	case 1:
		return fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{{Name: "get_weather", Args: map[string]any{"city": "Lyon"}}}}
	}
	return fakeollama.Reply{Content: []string{"notes: sunny in both"}}
}

// agentQuestion is a user message as Claude Code and Qwen Code send it:
// the client's reminder block, then the user's words.
const agentQuestion = "<system-reminder>\nAs you answer the user's questions, you can use the following context.\n</system-reminder>\nWhat is the weather in Paris and Lyon?"

// roundTrip sends msgs with the client's get_weather as key A, streamed
// or not, and returns the answer's chain id and assistant message (its
// tool calls whole).
func roundTrip(t *testing.T, url string, msgs []any, stream bool) (string, map[string]any) {
	t.Helper()
	resp := postAs(t, url, scopeKeyA, map[string]any{"model": "chain/reflexive", "messages": msgs, "tools": []any{weatherTool}, "stream": stream})
	raw := readAll(t, resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("answer %d %s", resp.StatusCode, raw)
	}
	id := resp.Header.Get("X-Chain-Trace-Id")
	if !stream {
		var out struct {
			Choices []struct {
				Message map[string]any `json:"message"`
			} `json:"choices"`
		}
		if json.Unmarshal(raw, &out) != nil || len(out.Choices) != 1 {
			t.Fatalf("answer %s", raw)
		}
		return id, out.Choices[0].Message
	}
	// The proxy sends each tool call whole, in one chunk.
	msg := map[string]any{"role": "assistant", "content": ""}
	var calls []any
	for _, f := range sseFrames(t, raw) {
		data, ok := strings.CutPrefix(f, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					ToolCalls []map[string]any `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		for _, c := range ch.Choices {
			for _, tc := range c.Delta.ToolCalls {
				delete(tc, "index")
				calls = append(calls, tc)
			}
		}
	}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
	}
	return id, msg
}

// TestTraceResumedChainIsOne (issue 41, item 8): a chain that hands the
// client two tool calls and goes on with their results is one chain: one
// entry in the list, under the first request's id, ended ok, titled with
// the user's words (the client's reminder set aside), its trace holding
// both round trips.
func TestTraceResumedChainIsOne(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) { resumedChainIsOne(t, stream) })
	}
}

func resumedChainIsOne(t *testing.T, streamed bool) {
	ol1 := fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply { return weatherTwice(req) })
	m1 := fakeopenai.New(t, fakeopenai.Reply{Content: []string{"analysis: sunny"}})
	m2 := fakeopenai.New(t, fakeopenai.Reply{Content: []string{"Sunny in Paris and Lyon."}})
	srv, _, _ := tracesProxy(t, []config.Node{ollamaNode("OL1", ol1.URL), openaiNode("M1", m1.BaseURL()), openaiNode("M2", m2.BaseURL())}, agentChain)
	next := stream(t, srv, scopeKeyA)

	msgs := []any{map[string]any{"role": "user", "content": agentQuestion}}
	var ids []string
	for range 3 {
		id, msg := roundTrip(t, srv.URL, msgs, streamed)
		ids = append(ids, id)
		calls, _ := msg["tool_calls"].([]any)
		if len(calls) == 0 {
			break
		}
		msgs = append(msgs, msg)
		for _, c := range calls {
			msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": c.(map[string]any)["id"], "content": "sunny, 24°C"})
		}
	}
	if len(ids) != 3 || ids[1] != ids[0] || ids[2] != ids[0] {
		t.Fatalf("chain ids of the three requests = %q, want two round trips, all under the first's id", ids)
	}
	// The answer leaves before its trace is stored.
	for sum := next(); sum.TraceID != ids[0] || sum.Status != chain.StageOK; sum = next() {
	}
	sums := listed(t, srv, scopeKeyA)
	if len(sums) != 1 {
		t.Fatalf("list = %+v, want one chain", sums)
	}
	if s := sums[0]; s.TraceID != ids[0] || s.Status != chain.StageOK || !s.Resumed || s.Question != "What is the weather in Paris and Lyon?" {
		t.Errorf("listed %s %s resumed=%v titled %q, want %s ok, resumed, titled with the user's question", s.TraceID, s.Status, s.Resumed, s.Question, ids[0])
	}
	resp := get(t, srv.URL+"/v1/chain/traces/"+ids[0], "Authorization", "Bearer "+scopeKeyA)
	var doc struct {
		traceSummary
		Chain chain.Trace `json:"chain"`
	}
	if err := json.Unmarshal(readAll(t, resp.Body), &doc); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET its trace: %d %v", resp.StatusCode, err)
	}
	var client []string
	for _, u := range doc.Chain.ToolsUsed() {
		if u.Client {
			client = append(client, string(u.Args))
		}
	}
	if got := stageSummary(&doc.Chain); doc.Status != chain.StageOK || len(client) != 2 || !strings.HasPrefix(got, "OL1:ok") {
		t.Errorf("stored trace %s, stages %s, client calls %q; want ok, OL1 ok with both round trips", doc.Status, got, client)
	}
}

// testClock is a clock a test moves on, read by the server at any time.
type testClock struct{ ahead atomic.Int64 }

func (c *testClock) now() time.Time { return time.Now().Add(time.Duration(c.ahead.Load())) }

// TestTracePauseNeverResumedIsAbandoned (issue 41, item 8): a chain that
// waited for its client longer than chain.resume_ttl, never resumed, is
// listed and opens abandoned, its waiting stage too.
func TestTracePauseNeverResumedIsAbandoned(t *testing.T) {
	ol1 := fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply { return weatherTwice(req) })
	m := fakeopenai.New(t, fakeopenai.Reply{Content: []string{"unused"}})
	srv, s, _ := tracesProxy(t, []config.Node{ollamaNode("OL1", ol1.URL), openaiNode("M1", m.BaseURL()), openaiNode("M2", m.BaseURL())}, agentChain)
	var clock testClock
	s.hub.now = clock.now
	next := stream(t, srv, scopeKeyA)

	id, _ := roundTrip(t, srv.URL, []any{map[string]any{"role": "user", "content": agentQuestion}}, false)
	// The answer leaves before its trace is stored: the clock moves on
	// once the list says the chain paused.
	for sum := next(); sum.TraceID != id || sum.Status != chain.StageAwaitingClient; sum = next() {
	}
	ttl := s.cfg.Chain.ResumeTTL
	for _, tt := range []struct {
		after time.Duration
		want  string
	}{
		{ttl - time.Minute, chain.StageAwaitingClient},
		{ttl + time.Minute, traceAbandoned},
	} {
		clock.ahead.Store(int64(tt.after))
		sums := listed(t, srv, scopeKeyA)
		if len(sums) != 1 || sums[0].Status != tt.want || len(sums[0].Stages) != 1 || sums[0].Stages[0].Status != tt.want {
			t.Errorf("%s after the pause: list = %+v, want the chain and its stage %s", tt.after, sums, tt.want)
		}
		status, doc := openTrace(t, srv, scopeKeyA, id)
		if status != http.StatusOK || doc.Status != tt.want || len(doc.Chain.Stages) != 1 || doc.Chain.Stages[0].Status != tt.want {
			t.Errorf("%s after the pause: GET its trace = %d %+v, want it and its stage %s", tt.after, status, doc, tt.want)
		}
	}
}

// tracedReplica is listReplica with telemetry on: a client's traceparent
// names its chain.
func tracedReplica(t *testing.T, redisURL, delay string) *httptest.Server {
	t.Helper()
	cfg, err := config.Parse([]byte(strings.ReplaceAll(sharedListConfig, "%DELAY%", delay)))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Root = t.TempDir()
	st, err := store.Open(t.Context(), redisURL, 50, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	srv := httptest.NewServer(New(Options{Config: cfg, Engine: mustEngine(t, cfg), Traces: st, Tracing: tp, Keepalive: 50 * time.Millisecond}))
	t.Cleanup(srv.Close)
	return srv
}

// TestReplicasSharedTraceparentStaysPerCaller (issue 41, item 1, across
// replicas): A's chain runs on replica 1 under a client trace id; B sends
// the same one to replica 2. The shared list keeps the two chains apart:
// on both replicas each key lists and opens its own, B's chain under an
// id of its own.
func TestReplicasSharedTraceparentStaysPerCaller(t *testing.T) {
	const clientTrace = "7bf92f3577b34da6a3ce929d0e0e47a1"
	rs := redistest.Start(t)
	r1 := tracedReplica(t, rs.URL(), "1h") // A's chain stays running
	r2 := tracedReplica(t, rs.URL(), "0s")
	waitSubscribed(t, rs, 2)
	adminOn2 := stream(t, r2, "key-admin")
	bOn1 := stream(t, r1, "key-b")

	ctx, cancel := context.WithCancel(t.Context())
	aDone := make(chan struct{})
	go func() { // exits when A's request ends: the test cancels it
		defer close(aDone)
		req, _ := http.NewRequestWithContext(ctx, "POST", r1.URL+"/v1/chat/completions", strings.NewReader(`{"model":"chain/reflexive","messages":[{"role":"user","content":"the question of A"}]}`))
		req.Header.Set("Authorization", "Bearer key-a")
		req.Header.Set("traceparent", "00-"+clientTrace+"-00f067aa0ba902b7-01")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	defer func() { cancel(); <-aDone }()
	if sum := adminOn2(); sum.TraceID != clientTrace || sum.Question != "the question of A" {
		t.Fatalf("replica 2 heard %+v, want A's chain %s", sum, clientTrace)
	}

	resp := postAs(t, r2.URL, "key-b", map[string]any{"model": "chain/reflexive", "messages": []any{map[string]any{"role": "user", "content": "the question of B"}}},
		"traceparent", "00-"+clientTrace+"-b7ad6b7169203331-01")
	readAll(t, resp.Body)
	bID := resp.Header.Get("X-Chain-Trace-Id")
	if resp.StatusCode != http.StatusOK || bID == clientTrace {
		t.Fatalf("B's request: %d under %s, want 200 under an id of its own", resp.StatusCode, bID)
	}
	for sum := bOn1(); sum.TraceID != bID || sum.Status == traceRunning; sum = bOn1() {
	}

	for _, r := range []*httptest.Server{r1, r2} {
		for _, tt := range []struct{ key, id, question string }{
			{"key-a", clientTrace, "the question of A"},
			{"key-b", bID, "the question of B"},
		} {
			sums := listed(t, r, tt.key)
			if len(sums) != 1 || sums[0].TraceID != tt.id || sums[0].Question != tt.question {
				t.Errorf("%s lists %+v on %s, want its own chain %s alone", tt.key, sums, r.URL, tt.id)
			}
			if code, doc := openTrace(t, r, tt.key, tt.id); code != http.StatusOK || doc.Question != tt.question {
				t.Errorf("%s opens %s on %s: %d %+v, want its own chain", tt.key, tt.id, r.URL, code, doc.traceSummary)
			}
		}
		if code, _ := openTrace(t, r, "key-b", clientTrace); code != http.StatusNotFound {
			t.Errorf("key-b opens A's chain on %s: %d, want 404", r.URL, code)
		}
	}
}

// TestTraceHubSweepTellsAbandoned: the list's live readers hear of a
// paused chain once it is abandoned (the stream's keep-alive sweeps), and
// once only.
func TestTraceHubSweepTellsAbandoned(t *testing.T) {
	var clock testClock
	h := newTraceHub(30 * time.Minute)
	h.now = clock.now
	req := &chain.RunRequest{TraceID: "t1", Caller: "o", Messages: []chain.Message{{Role: "user", Content: "q"}}}
	h.Watch(req, chain.Event{Kind: chain.EventClassified, Mode: chain.ModeReflexive})
	paused := &chain.Trace{Mode: chain.ModeReflexive, Stages: []chain.StageTrace{{Node: "OL1", Status: chain.StageAwaitingClient}}}
	h.end(req, "o", "t1", paused, nil)
	h.stored("o", "t1")
	sub := h.subscribe("o", false)
	defer h.unsubscribe(sub)
	for _, tt := range []struct {
		ahead time.Duration
		want  []string
	}{
		{29 * time.Minute, nil},
		{31 * time.Minute, []string{traceAbandoned}},
		{32 * time.Minute, nil},
	} {
		clock.ahead.Store(int64(tt.ahead))
		h.sweep()
		var got []string
		for _, s := range h.take(sub) {
			got = append(got, s.Status)
		}
		if strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("%s after: readers told %q, want %q", tt.ahead, got, tt.want)
		}
	}
}

// TestReplicasResumedChainIsOne (issue 41, item 8, across replicas): a
// chain paused on one replica and resumed on another is one entry on
// both, ended ok under its first id.
func TestReplicasResumedChainIsOne(t *testing.T) {
	rs := redistest.Start(t)
	u := newAgentUpstreams(t, weatherOnce)
	r1 := agentProxy(t, u, "", openAgentStore(t, rs.URL()))
	r2 := agentProxy(t, u, "", openAgentStore(t, rs.URL()))
	waitSubscribed(t, rs, 2)
	on1 := stream(t, r1, "")

	msgs := []any{map[string]any{"role": "user", "content": agentQuestion}}
	first := agentPost(t, r1.URL, msgs, false)
	id := first.header.Get("X-Chain-Trace-Id")
	second := agentPost(t, r2.URL, answerCalls(msgs, first, sunny), false)
	if got := second.header.Get("X-Chain-Trace-Id"); got != id || second.finish != "stop" {
		t.Fatalf("resumed on replica 2: chain %s finish %s, want the first's %s, stop", got, second.finish, id)
	}
	for sum := on1(); sum.TraceID != id || sum.Status != chain.StageOK; sum = on1() {
	}
	for _, r := range []*httptest.Server{r1, r2} {
		sums := listed(t, r, "")
		if len(sums) != 1 || sums[0].TraceID != id || sums[0].Status != chain.StageOK || !sums[0].Resumed ||
			sums[0].Question != "What is the weather in Paris and Lyon?" {
			t.Errorf("%s lists %+v, want the one chain %s, resumed, ok, titled with the user's question", r.URL, sums, id)
		}
	}
}

// TestTraceHubMergesAResumption: a chain paused here and resumed on
// another replica is listed as the other's news, which says it started
// when it did here (or a moment before, from an older replica).
func TestTraceHubMergesAResumption(t *testing.T) {
	h := newTraceHub(30 * time.Minute)
	req := &chain.RunRequest{TraceID: "t1", Caller: "o", Messages: []chain.Message{{Role: "user", Content: "q"}}}
	h.Watch(req, chain.Event{Kind: chain.EventClassified, Mode: chain.ModeReflexive})
	h.end(req, "o", "t1", &chain.Trace{Mode: chain.ModeReflexive, Stages: []chain.StageTrace{{Node: "OL1", Status: chain.StageAwaitingClient}}}, nil)
	h.stored("o", "t1")
	started := h.list("o", false)[0].Started
	for _, tt := range []struct {
		name    string
		resumed bool
		at      int64
		want    string
	}{
		{"older news of another chain under its id", false, time.Now().UnixMilli() + 1000, chain.StageAwaitingClient},
		{"its resumption, sent before it paused here", true, started - 1000, chain.StageAwaitingClient},
		{"its resumption elsewhere", true, time.Now().UnixMilli() + 1000, chain.StageOK},
	} {
		// The news says the chain ended ok there.
		data, err := json.Marshal(sharedSummary{Replica: "r2", Seq: 1, Owner: "o", At: tt.at,
			Summary: traceSummary{TraceID: "t1", Started: started - 5, Status: chain.StageOK, Resumed: tt.resumed, Stages: []stageBadge{}}})
		if err != nil {
			t.Fatal(err)
		}
		h.heard(data)
		if got := h.list("o", false); len(got) != 1 || got[0].Status != tt.want {
			t.Errorf("%s: list = %+v, want the chain %s", tt.name, got, tt.want)
		}
	}
}

// TestTraceHubEndsOnlyItsRun: a request under a running chain's id that
// fails before its own chain is listed (the same client trace sent twice
// at once) does not end the running one.
func TestTraceHubEndsOnlyItsRun(t *testing.T) {
	h := newTraceHub(30 * time.Minute)
	running := &chain.RunRequest{TraceID: "t1", Caller: "o", Messages: []chain.Message{{Role: "user", Content: "q"}}}
	h.Watch(running, chain.Event{Kind: chain.EventClassified, Mode: chain.ModeSimple})
	failed := &chain.RunRequest{TraceID: "t1", Caller: "o"}
	if _, _, listed := h.end(failed, "o", "t1", nil, errors.New("refused before it ran")); listed {
		t.Error("the failed request ended the running chain")
	}
	if got := h.list("o", false); len(got) != 1 || got[0].Status != traceRunning {
		t.Errorf("list = %+v, want the chain still running", got)
	}
	if _, _, listed := h.end(running, "o", "t1", &chain.Trace{Mode: chain.ModeSimple, Stages: []chain.StageTrace{{Node: "OL1", Status: chain.StageOK}}}, nil); !listed {
		t.Error("the running chain's own end was not its end")
	}
}
