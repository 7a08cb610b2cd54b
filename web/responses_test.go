package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"chainproxy/chain"
	"chainproxy/config"
	"chainproxy/internal/fakeollama"
	"chainproxy/internal/oaischema"
	"chainproxy/internal/redistest"
	"chainproxy/store"
)

// responsesPost posts a Responses request and returns the answer read
// whole: the response object, from the body or from the stream's last
// event, and the stream's events in order.
type responsesExchange struct {
	status int
	header http.Header
	raw    []byte
	obj    map[string]any
	events []map[string]any
	trace  *chain.Trace
}

func responsesPost(t *testing.T, url string, body any, hdr ...string) *responsesExchange {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url+"/v1/responses", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	x := &responsesExchange{status: resp.StatusCode, header: resp.Header, raw: raw}
	if resp.StatusCode != 200 {
		return x
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, f := range sseFrames(t, raw) {
			if strings.HasPrefix(f, ":") {
				continue
			}
			name, data, ok := strings.Cut(f, "\ndata: ")
			if !ok || !strings.HasPrefix(name, "event: ") {
				t.Fatalf("frame %q is not an event with data", f)
			}
			oaischema.Validate(t, "ResponseStreamEvent", []byte(data))
			var ev map[string]any
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatal(err)
			}
			if ev["type"] != strings.TrimPrefix(name, "event: ") {
				t.Errorf("event name %q, data type %v", name, ev["type"])
			}
			if n := int(ev["sequence_number"].(float64)); n != len(x.events) {
				t.Errorf("sequence_number %d at event %d", n, len(x.events))
			}
			x.events = append(x.events, ev)
			if r, ok := ev["response"].(map[string]any); ok {
				x.obj = r
			}
		}
	} else {
		oaischema.Validate(t, "Response", raw)
		if err := json.Unmarshal(raw, &x.obj); err != nil {
			t.Fatal(err)
		}
	}
	if c, ok := x.obj["chain"]; ok {
		b, _ := json.Marshal(c)
		x.trace = new(chain.Trace)
		_ = json.Unmarshal(b, x.trace)
	}
	return x
}

// output returns the response's output items of type typ.
func (x *responsesExchange) output(typ string) []map[string]any {
	var out []map[string]any
	items, _ := x.obj["output"].([]any)
	for _, it := range items {
		if m := it.(map[string]any); m["type"] == typ {
			out = append(out, m)
		}
	}
	return out
}

// text is the text of the response's message items.
func (x *responsesExchange) text() string {
	var b strings.Builder
	for _, m := range x.output("message") {
		for _, p := range m["content"].([]any) {
			b.WriteString(p.(map[string]any)["text"].(string))
		}
	}
	return b.String()
}

// eventTypes lists the stream's event types in order, a run of deltas
// of one type as one.
func (x *responsesExchange) eventTypes() string {
	var names []string
	for _, ev := range x.events {
		typ := ev["type"].(string)
		if n := len(names); n > 0 && names[n-1] == typ && strings.HasSuffix(typ, ".delta") {
			continue
		}
		names = append(names, typ)
	}
	return strings.Join(names, " ")
}

var timesRE = regexp.MustCompile(`"(created_at|completed_at)":\d+`)

// normalizeResponse blanks what changes from run to run: the trace id in
// every id, the times.
func normalizeResponse(t *testing.T, traceID string, b []byte) []byte {
	b = bytes.ReplaceAll(b, []byte(traceID), []byte("TRACE"))
	b = timesRE.ReplaceAll(b, []byte(`"$1":0`))
	return normalizeCompact(t, b)
}

func TestResponsesNonStreamGolden(t *testing.T) {
	s := newTestServer(t, testConfig)
	x := responsesPost(t, s.URL, map[string]any{"model": "chain/reflexive", "input": "compare things", "instructions": "Be brief."})
	if x.status != 200 {
		t.Fatalf("status %d: %s", x.status, x.raw)
	}
	if x.obj["status"] != "completed" || x.text() != "Final answer from M2." {
		t.Errorf("status %v, text %q", x.obj["status"], x.text())
	}
	if r := x.output("reasoning"); len(r) != 1 || r[0]["summary"].([]any)[0].(map[string]any)["text"] != "hidden M2 thoughts" {
		t.Errorf("reasoning items = %v", r)
	}
	if x.header.Get("X-Chain-Mode") != "reflexive" || x.trace == nil || len(x.trace.Stages) != 3 {
		t.Errorf("mode %q, trace %+v", x.header.Get("X-Chain-Mode"), x.trace)
	}
	u := x.obj["usage"].(map[string]any)
	if u["input_tokens"].(float64) <= 0 || u["output_tokens"].(float64) <= 0 {
		t.Errorf("usage = %v", u)
	}
	golden(t, "responses.json.golden", normalize(t, normalizeResponse(t, x.header.Get("X-Chain-Trace-Id"), x.raw)))
}

// TestResponsesStreamGolden pins a reflexive stream's whole transcript:
// stage keep-alives, created and in_progress, the reasoning summary item,
// the message item with its deltas, completed with the trace.
func TestResponsesStreamGolden(t *testing.T) {
	s := newTestServer(t, testConfig)
	s.Config.Handler = New(Options{Config: s.cfg, Engine: mustEngine(t, s.cfg), Traces: s.store, Keepalive: time.Hour})
	x := responsesPost(t, s.URL, map[string]any{"model": "chain/reflexive", "input": []any{
		map[string]any{"type": "message", "role": "developer", "content": "Be brief."},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": "compare"}}},
	}, "stream": true})
	if x.status != 200 {
		t.Fatalf("status %d: %s", x.status, x.raw)
	}
	want := "response.created response.in_progress " +
		"response.output_item.added response.reasoning_summary_part.added response.reasoning_summary_text.delta " +
		"response.reasoning_summary_text.done response.reasoning_summary_part.done response.output_item.done " +
		"response.output_item.added response.content_part.added response.output_text.delta " +
		"response.output_text.done response.content_part.done response.output_item.done response.completed"
	if got := x.eventTypes(); got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
	if x.text() != "Final answer from M2." || x.trace == nil || x.trace.Mode != "reflexive" {
		t.Errorf("text %q, trace %+v", x.text(), x.trace)
	}
	var out strings.Builder
	for _, f := range sseFrames(t, x.raw) {
		if name, data, ok := strings.Cut(f, "\ndata: "); ok {
			f = name + "\ndata: " + string(normalizeResponse(t, x.header.Get("X-Chain-Trace-Id"), normalizeCompact(t, []byte(data))))
		}
		out.WriteString(f + "\n\n")
	}
	golden(t, "responses_stream.sse.golden", []byte(out.String()))
}

// TestResponsesHostedToolsDropped: the hosted tools Codex always sends are
// left out of what the model sees, said once in the trace and a header,
// and the request goes on.
func TestResponsesHostedToolsDropped(t *testing.T) {
	s := newTestServer(t, testConfig)
	x := responsesPost(t, s.URL, map[string]any{"model": "chain/simple", "input": "hello", "tools": []any{
		map[string]any{"type": "function", "name": "exec_command", "parameters": map[string]any{"type": "object"}},
		map[string]any{"type": "web_search"},
		map[string]any{"type": "namespace", "name": "mcp__x"},
	}, "include": []string{"reasoning.encrypted_content"}, "reasoning": map[string]any{"summary": "auto"}, "store": false, "parallel_tool_calls": true, "prompt_cache_key": "conv-1"})
	if x.status != 200 {
		t.Fatalf("status %d: %s", x.status, x.raw)
	}
	if got, want := x.header.Get("X-Chain-Dropped-Tools"), "web_search, namespace mcp__x"; got != want {
		t.Errorf("X-Chain-Dropped-Tools = %q, want %q", got, want)
	}
	n := 0
	for _, r := range x.trace.Reasons {
		if strings.Contains(r, "hosted tools left out") && strings.Contains(r, "web_search, namespace mcp__x") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("reasons = %q, want the drop said once", x.trace.Reasons)
	}
	if tools := x.obj["tools"].([]any); len(tools) != 1 {
		t.Errorf("tools echoed = %v, want the function tool only", tools)
	}
}

// TestResponsesClientToolsResume runs the reflexive chain for a client
// with its own function tool, in the Responses shapes: the first answer
// asks for the call; the client's function_call_output resumes the chain,
// either after previous_response_id (store: true) or with the whole
// history resent (store: false, as Codex does).
func TestResponsesClientToolsResume(t *testing.T) {
	tool := map[string]any{"type": "function", "name": "get_weather", "description": "Current weather of a city",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}
	for _, tc := range []struct {
		name     string
		stream   bool
		previous bool
	}{
		{"stored non-stream", false, true},
		{"stored stream", true, true},
		{"history stream", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newAgentUpstreams(t, weatherOnce)
			srv := agentProxy(t, u, "", store.NewMemory(0, 10))
			user := map[string]any{"role": "user", "content": "What is the weather in Paris?"}
			first := responsesPost(t, srv.URL, map[string]any{"model": "chain/reflexive", "input": []any{user},
				"tools": []any{tool, map[string]any{"type": "web_search"}}, "stream": tc.stream, "store": tc.previous})
			calls := first.output("function_call")
			if first.status != 200 || len(calls) != 1 || calls[0]["name"] != "get_weather" || calls[0]["arguments"] != `{"city":"Paris"}` {
				t.Fatalf("first answer %d: %s", first.status, first.raw)
			}
			if got, want := stageSummary(first.trace), "OL1:awaiting_client:1[get_weather:client]"; got != want {
				t.Errorf("first trace = %s, want %s", got, want)
			}
			if tc.stream && !strings.Contains(first.eventTypes(), "response.output_item.added response.function_call_arguments.delta response.function_call_arguments.done response.output_item.done response.completed") {
				t.Errorf("events = %s", first.eventTypes())
			}
			output := map[string]any{"type": "function_call_output", "call_id": calls[0]["call_id"], "output": "sunny, 24°C"}
			next := map[string]any{"model": "chain/reflexive", "tools": []any{tool}, "stream": tc.stream}
			if tc.previous {
				next["previous_response_id"] = first.obj["id"]
				next["input"] = []any{output}
			} else {
				next["input"] = []any{user, map[string]any{"type": "reasoning", "id": "rs_1", "summary": []any{}, "encrypted_content": "opaque"},
					calls[0], output}
			}
			second := responsesPost(t, srv.URL, next)
			if second.status != 200 || second.text() != "It is sunny in Paris." {
				t.Fatalf("second answer %d: %s", second.status, second.raw)
			}
			if got, want := stageSummary(second.trace), "OL1:ok:2[get_weather:ok] M1:ok:1[] M2:ok:1[]"; got != want {
				t.Errorf("final trace = %s, want %s", got, want)
			}
			if tc.previous {
				if got := second.obj["previous_response_id"]; got != first.obj["id"] {
					t.Errorf("previous_response_id = %v", got)
				}
				// The stored response is served by id.
				resp, err := http.Get(srv.URL + "/v1/responses/" + first.obj["id"].(string))
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("GET stored response: %d %s", resp.StatusCode, b)
				}
				oaischema.Validate(t, "Response", b)
			}
		})
	}
}

func TestResponsesPreviousNotFound(t *testing.T) {
	s := newTestServer(t, testConfig)
	x := responsesPost(t, s.URL, map[string]any{"model": "chain/simple", "input": "hi", "previous_response_id": "resp_nope"})
	if x.status != 404 || !bytes.Contains(x.raw, []byte(`"code":"previous_response_not_found"`)) {
		t.Errorf("status %d: %s", x.status, x.raw)
	}
	oaischema.Validate(t, "ErrorResponse", x.raw)
	resp, err := http.Get(s.URL + "/v1/responses/resp_nope")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("GET unknown response: %d", resp.StatusCode)
	}
}

// TestResponsesStoredScopedToKey: a stored response is its caller's only.
func TestResponsesStoredScopedToKey(t *testing.T) {
	s := newTestServer(t, testConfig+"\n", func(c *config.Config) { c.Server.APIKeys = []string{"key-a", "key-b"} })
	x := responsesPost(t, s.URL, map[string]any{"model": "chain/simple", "input": "hi", "store": true}, "Authorization", "Bearer key-a")
	if x.status != 200 {
		t.Fatalf("status %d: %s", x.status, x.raw)
	}
	id := x.obj["id"].(string)
	for _, tc := range []struct {
		key  string
		want int
	}{{"key-a", 200}, {"key-b", 404}} {
		y := responsesPost(t, s.URL, map[string]any{"model": "chain/simple", "input": "again", "previous_response_id": id}, "Authorization", "Bearer "+tc.key)
		if y.status != tc.want {
			t.Errorf("previous_response_id with %s: %d, want %d: %s", tc.key, y.status, tc.want, y.raw)
		}
	}
}

func TestResponsesBadRequests(t *testing.T) {
	s := newTestServer(t, testConfig)
	for _, tc := range []struct {
		name, body, param string
	}{
		{"no model", `{"input":"hi"}`, "model"},
		{"no input", `{"model":"chain/auto"}`, "input"},
		{"input not string or array", `{"model":"chain/auto","input":42}`, "input"},
		{"bad role", `{"model":"chain/auto","input":[{"role":"tool","content":"x"}]}`, "input[0].role"},
		{"message without content", `{"model":"chain/auto","input":[{"type":"message","role":"user"}]}`, "input[0].content"},
		{"message with null content", `{"model":"chain/auto","input":[{"role":"user","content":null}]}`, "input[0].content"},
		{"image part over http", `{"model":"chain/auto","input":[{"role":"user","content":[{"type":"input_image","image_url":"http://x"}]}]}`, "input[0].content[0].image_url"},
		{"image part by file id", `{"model":"chain/auto","input":[{"role":"user","content":[{"type":"input_image","file_id":"file-1"}]}]}`, "input[0].content[0].file_id"},
		{"file part by url", `{"model":"chain/auto","input":[{"role":"user","content":[{"type":"input_file","file_url":"https://x/a.pdf"}]}]}`, "input[0].content[0].file_url"},
		{"image in a tool output no node takes", `{"model":"chain/auto","input":[{"type":"function_call_output","call_id":"c1","output":[{"type":"input_image","image_url":"data:image/png;base64,aGk="}]}]}`, "input[0].output[0].image_url"},
		{"audio part", `{"model":"chain/auto","input":[{"role":"user","content":[{"type":"input_audio"}]}]}`, "input[0].content[0].type"},
		{"unknown item", `{"model":"chain/auto","input":[{"type":"teleport"}]}`, "input[0].type"},
		{"item reference", `{"model":"chain/auto","input":[{"type":"item_reference","id":"x"}]}`, "input[0]"},
		{"output without call id", `{"model":"chain/auto","input":[{"type":"function_call_output","output":"x"}]}`, "input[0].call_id"},
		{"function without name", `{"model":"chain/auto","input":"hi","tools":[{"type":"function"}]}`, "tools[0].name"},
		{"temperature", `{"model":"chain/auto","input":"hi","temperature":3}`, "temperature"},
		{"max_output_tokens", `{"model":"chain/auto","input":"hi","max_output_tokens":0}`, "max_output_tokens"},
		{"tool_choice unknown function", `{"model":"chain/auto","input":"hi","tool_choice":{"type":"function","name":"nope"}}`, "tool_choice"},
		{"instructions not string", `{"model":"chain/auto","input":"hi","instructions":7}`, "instructions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := s.post(t, "/v1/responses", tc.body)
			b := readAll(t, resp.Body)
			if resp.StatusCode != 400 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			oaischema.Validate(t, "ErrorResponse", b)
			var e errorBody
			_ = json.Unmarshal(b, &e)
			if e.Error.Param == nil || *e.Error.Param != tc.param {
				t.Errorf("param = %v, want %s (%s)", e.Error.Param, tc.param, b)
			}
		})
	}
}

// TestResponsesCodexRequest replays the request Codex CLI 0.169 sent on
// `codex exec "say hi"` (captured on 2026-11-25 against a logging server;
// testdata/codex_request.json): its developer messages, function tools,
// namespace and web_search tools, include, reasoning and client_metadata
// are taken, the hosted tools left out.
func TestResponsesCodexRequest(t *testing.T) {
	s := newTestServer(t, testConfig, func(c *config.Config) { c.Server.MaxBodyBytes = 1 << 20 })
	body, err := os.ReadFile("testdata/codex_request.json")
	if err != nil {
		t.Fatal(err)
	}
	resp := s.post(t, "/v1/responses", strings.Replace(string(body), `"model":"chain/reflexive"`, `"model":"chain/simple"`, 1))
	raw := readAll(t, resp.Body)
	if resp.StatusCode != 200 || !bytes.Contains(raw, []byte("event: response.completed")) {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	if got, want := resp.Header.Get("X-Chain-Dropped-Tools"), "namespace multi_agent_v1, web_search"; got != want {
		t.Errorf("X-Chain-Dropped-Tools = %q, want %q", got, want)
	}
}

// TestResponsesPreviousAcrossReplicas: a response stored by one replica is
// continued on another through the Redis they share, and served by id
// there; a replica with its own memory store does not know it.
func TestResponsesPreviousAcrossReplicas(t *testing.T) {
	rs := redistest.Start(t)
	cfg := mustConfig(t, testConfig)
	a, _ := replica(t, cfg, rs.URL())
	b, _ := replica(t, cfg, rs.URL())
	lone, _ := replica(t, cfg, "")
	first := responsesPost(t, a.URL, map[string]any{"model": "chain/simple", "input": "remember the word kiwi", "store": true})
	if first.status != 200 {
		t.Fatalf("first: %d %s", first.status, first.raw)
	}
	id := first.obj["id"].(string)
	second := responsesPost(t, b.URL, map[string]any{"model": "chain/simple", "input": "what was the word?", "previous_response_id": id})
	if second.status != 200 {
		t.Fatalf("second on the other replica: %d %s", second.status, second.raw)
	}
	resp, err := http.Get(b.URL + "/v1/responses/" + id)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(got, []byte(id)) {
		t.Errorf("GET on the other replica: %d %s", resp.StatusCode, got)
	}
	if x := responsesPost(t, lone.URL, map[string]any{"model": "chain/simple", "input": "and?", "previous_response_id": id}); x.status != 404 {
		t.Errorf("replica without the shared store: %d, want 404", x.status)
	}
}

// TestResponsesStreamFailure: a node failing before any output gets its
// status; failing once the stream is under way, the stream ends with
// response.failed, carrying the error and the trace.
func TestResponsesStreamFailure(t *testing.T) {
	s := newTestServer(t, testConfig)
	x := responsesPost(t, s.URL, map[string]any{"model": "chain/simple", "input": "boom", "stream": true})
	if x.status != 502 {
		t.Fatalf("a run failing before any output: %d %s, want 502", x.status, x.raw)
	}
	oaischema.Validate(t, "ErrorResponse", x.raw)
	node := ollamaNode("A", fakeollama.New(t, fakeollama.Reply{Content: []string{"half "}, Error: "runner died"}).URL)
	_, srv := wireProxy(t, []config.Node{node}, oneStage)
	x = responsesPost(t, srv.URL, map[string]any{"model": "A", "input": "hi", "stream": true})
	if x.status != 200 {
		t.Fatalf("status %d: %s", x.status, x.raw)
	}
	last := x.events[len(x.events)-1]
	r, _ := last["response"].(map[string]any)
	if last["type"] != "response.failed" || r["status"] != "failed" || !strings.Contains(fmt.Sprint(r["error"]), "runner died") || r["chain"] == nil {
		t.Errorf("last event = %v", last)
	}
}
