package web

import (
	"bytes"
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
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/redis/go-redis/v9"
	goopenai "github.com/sashabaranov/go-openai"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/config"
	"chainproxy/internal/fakeollama"
	"chainproxy/internal/fakeopenai"
	"chainproxy/internal/nodetest"
	"chainproxy/internal/oaischema"
	"chainproxy/internal/redistest"
	"chainproxy/store"
	"chainproxy/tools"
)

// The agent tests run the reflexive chain for a client that brings its own
// tools: OL1 on a fake Ollama, M1 and M2 on fake OpenAI servers, the proxy
// wired as cmd/proxy wires it, its resume state in a real store.

const agentChain = "chain:\n  stages: [{node: OL1, max_turns: 3, tools: true}, {node: M1, max_turns: 1}, {node: M2, max_turns: 1}]\n  simple_node: OL1\n"

// agentUpstreams are the three fakes of a chain; OL1 follows script.
type agentUpstreams struct {
	ol1    *fakeollama.Server
	m1, m2 *fakeopenai.Server
	nodes  []config.Node
}

func newAgentUpstreams(t *testing.T, script func(req *api.ChatRequest) fakeollama.Reply) *agentUpstreams {
	u := &agentUpstreams{
		ol1: fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply { return script(req) }),
		m1:  fakeopenai.New(t, fakeopenai.Reply{Content: []string{"analysis: it is sunny"}}),
		m2:  fakeopenai.New(t, fakeopenai.Reply{Content: []string{"It is sunny in Paris."}}),
	}
	u.nodes = []config.Node{ollamaNode("OL1", u.ol1.URL), openaiNode("M1", u.m1.BaseURL()), openaiNode("M2", u.m2.BaseURL())}
	return u
}

// agentProxy starts one proxy replica over the upstreams, keeping its
// anti-loop and resume state in st.
func agentProxy(t *testing.T, u *agentUpstreams, extra string, st store.Store) *httptest.Server {
	t.Helper()
	var y strings.Builder
	y.WriteString("nodes:\n")
	for _, n := range u.nodes {
		fmt.Fprintf(&y, "  - {name: %s, provider: %s, base_url: %q, model: %s, timeout: 10s, max_queue: 8, context_window: %d}\n", n.Name, n.Provider, n.BaseURL, n.Model, n.ContextWindow)
	}
	cfg, err := config.Parse([]byte(y.String() + agentChain + extra))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Root = t.TempDir()
	if err := os.WriteFile(filepath.Join(cfg.Tools.Root, "notes.md"), []byte("the notes say 42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	set := nodetest.Build(t, cfg, nil)
	eng, err := chain.New(cfg, chain.Deps{Nodes: set, Tools: reg, Resume: st,
		Guard: antiloop.NewGuard(st, cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL)})
	if err != nil {
		t.Fatal(err)
	}
	// No keepalive ticks: transcripts must not depend on timing.
	srv := httptest.NewServer(New(Options{Config: cfg, Engine: eng, Traces: st, Keepalive: time.Hour}))
	t.Cleanup(srv.Close)
	return srv
}

// weatherTool is the client's tool, in the request's wire form.
var weatherTool = map[string]any{"type": "function", "function": map[string]any{
	"name": "get_weather", "description": "Current weather of a city",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
}}

// weatherOnce asks the client's get_weather once, then writes its notes.
func weatherOnce(req *api.ChatRequest) fakeollama.Reply {
	if toolResults(req) == 0 {
		return fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{{Name: "get_weather", Args: map[string]any{"city": "Paris"}}}}
	}
	return fakeollama.Reply{Content: []string{"notes: the client says it is sunny"}}
}

func toolResults(req *api.ChatRequest) int {
	n := 0
	for _, m := range req.Messages {
		if m.Role == "tool" {
			n++
		}
	}
	return n
}

// exchange is one round trip as the client sees it.
type exchange struct {
	header http.Header
	// message is the assistant message, as the client echoes it back.
	message map[string]any
	finish  string
	trace   *chain.Trace
	raw     []byte
}

func (x *exchange) calls() []map[string]any {
	var out []map[string]any
	tcs, _ := x.message["tool_calls"].([]any)
	for _, c := range tcs {
		out = append(out, c.(map[string]any))
	}
	return out
}

// agentPost sends a chat completion with the client's tools, streamed or
// not, and reads the answer as an OpenAI client would.
func agentPost(t *testing.T, url string, msgs []any, stream bool) *exchange {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "chain/reflexive", "messages": msgs, "tools": []any{weatherTool}, "stream": stream})
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	x := &exchange{header: resp.Header, raw: raw}
	if !stream {
		oaischema.Validate(t, "CreateChatCompletionResponse", raw)
		var out struct {
			Choices []struct {
				Message      map[string]any `json:"message"`
				FinishReason string         `json:"finish_reason"`
			} `json:"choices"`
			Chain *chain.Trace `json:"chain"`
		}
		if err := json.Unmarshal(raw, &out); err != nil || len(out.Choices) != 1 {
			t.Fatalf("answer %s: %v", raw, err)
		}
		x.message, x.finish, x.trace = out.Choices[0].Message, out.Choices[0].FinishReason, out.Chain
		return x
	}
	// A stream: content and tool_call fragments assembled by index.
	var content strings.Builder
	var calls []map[string]any
	for _, f := range sseFrames(t, raw) {
		data, ok := strings.CutPrefix(f, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Type     string `json:"type"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Chain *chain.Trace `json:"chain"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		oaischema.Validate(t, "CreateChatCompletionStreamResponse", []byte(data))
		if ch.Chain != nil {
			x.trace = ch.Chain
		}
		for _, c := range ch.Choices {
			if c.Delta.Content != nil {
				content.WriteString(*c.Delta.Content)
			}
			for _, tc := range c.Delta.ToolCalls {
				for len(calls) <= tc.Index {
					calls = append(calls, map[string]any{"type": "function", "function": map[string]any{"name": "", "arguments": ""}})
				}
				call, fn := calls[tc.Index], calls[tc.Index]["function"].(map[string]any)
				if tc.ID != "" {
					call["id"] = tc.ID
				}
				fn["name"] = fn["name"].(string) + tc.Function.Name
				fn["arguments"] = fn["arguments"].(string) + tc.Function.Arguments
			}
			if c.FinishReason != nil {
				x.finish = *c.FinishReason
			}
		}
	}
	x.message = map[string]any{"role": "assistant", "content": content.String()}
	if len(calls) > 0 {
		tcs := make([]any, len(calls))
		for i, c := range calls {
			tcs[i] = c
		}
		x.message["tool_calls"] = tcs
	}
	return x
}

// answerCalls is what a client sends back: the assistant message, then one
// tool message per call with result(name, arguments).
func answerCalls(msgs []any, x *exchange, result func(name, args string) string) []any {
	msgs = append(msgs, x.message)
	for _, c := range x.calls() {
		fn := c["function"].(map[string]any)
		msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": c["id"], "content": result(fn["name"].(string), fn["arguments"].(string))})
	}
	return msgs
}

func sunny(string, string) string { return "sunny, 24°C" }

func statuses(st chain.StageTrace) string {
	var b []string
	for _, u := range st.ToolsUsed {
		b = append(b, u.Name+":"+u.Status)
	}
	return strings.Join(b, ",")
}

func stageSummary(tr *chain.Trace) string {
	var b []string
	for _, s := range tr.Stages {
		b = append(b, fmt.Sprintf("%s:%s:%d[%s]", s.Node, s.Status, s.Turns, statuses(s)))
	}
	return strings.Join(b, " ")
}

// TestAgentClientToolsResume: the first request ends at OL1's client call
// (awaiting_client); the follow-up resumes inside OL1, whose upstream sees
// its next turn, then M1 and M2 answer with the whole trace.
func TestAgentClientToolsResume(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "non-stream", true: "stream"}[stream], func(t *testing.T) {
			u := newAgentUpstreams(t, weatherOnce)
			srv := agentProxy(t, u, "", store.NewMemory(0, 10))
			msgs := []any{map[string]any{"role": "user", "content": "What is the weather in Paris?"}}

			first := agentPost(t, srv.URL, msgs, stream)
			if first.finish != "tool_calls" || len(first.calls()) != 1 {
				t.Fatalf("first answer: finish %q, message %v", first.finish, first.message)
			}
			if m := first.header.Get("X-Chain-Mode"); m != "reflexive" {
				t.Errorf("X-Chain-Mode = %q, want reflexive", m)
			}
			call := first.calls()[0]
			if fn := call["function"].(map[string]any); fn["name"] != "get_weather" || fn["arguments"] != `{"city":"Paris"}` || !strings.HasPrefix(call["id"].(string), "call_") {
				t.Errorf("client call = %v", call)
			}
			if got, want := stageSummary(first.trace), "OL1:awaiting_client:1[get_weather:client]"; got != want {
				t.Errorf("first trace = %s, want %s", got, want)
			}
			if !strings.Contains(strings.Join(first.trace.Reasons, "|"), "client tools offered to the stages with tools: get_weather") {
				t.Errorf("reasons = %q", first.trace.Reasons)
			}
			if stream {
				var out strings.Builder
				for _, f := range sseFrames(t, first.raw) {
					if payload, ok := strings.CutPrefix(f, "data: {"); ok {
						f = "data: " + strings.TrimSpace(string(normalizeCompact(t, []byte("{"+payload))))
					}
					out.WriteString(f + "\n\n")
				}
				golden(t, "agent_awaiting.sse.golden", []byte(out.String()))
			} else {
				golden(t, "agent_awaiting.json.golden", normalize(t, first.raw))
			}

			// The intermediate trace is served by id, the stage waiting.
			tr, err := http.Get(srv.URL + "/v1/chain/traces/" + first.header.Get("X-Chain-Trace-Id"))
			if err != nil {
				t.Fatal(err)
			}
			trBody, _ := io.ReadAll(tr.Body)
			tr.Body.Close()
			if tr.StatusCode != 200 || !bytes.Contains(trBody, []byte(`"status":"awaiting_client"`)) || !bytes.Contains(trBody, []byte(`"status":"client"`)) {
				t.Errorf("GET trace: %d %s", tr.StatusCode, trBody)
			}

			second := agentPost(t, srv.URL, answerCalls(msgs, first, sunny), stream)
			if second.finish != "stop" || second.message["content"] != "It is sunny in Paris." {
				t.Fatalf("second answer: finish %q, message %v", second.finish, second.message)
			}
			if got, want := stageSummary(second.trace), "OL1:ok:2[get_weather:ok] M1:ok:1[] M2:ok:1[]"; got != want {
				t.Errorf("final trace = %s, want %s", got, want)
			}
			if second.trace.Turns != 4 {
				t.Errorf("trace turns = %d, want 4 (2 of OL1 across the requests, M1, M2)", second.trace.Turns)
			}
			if r := second.trace.Stages[0].ToolsUsed[0].Result; r != "sunny, 24°C" {
				t.Errorf("client call's result in the trace = %q", r)
			}
			if !strings.Contains(strings.Join(second.trace.Reasons, "|"), "resumed in stage OL1") {
				t.Errorf("reasons = %q", second.trace.Reasons)
			}
			if !stream {
				golden(t, "agent_resumed.json.golden", normalize(t, second.raw))
			}

			// OL1's upstream saw its next turn: the same system prompt and
			// conversation, its own call, the client's result.
			reqs := u.ol1.Requests()
			if len(reqs) != 2 {
				t.Fatalf("OL1 calls = %d, want 2", len(reqs))
			}
			turn1, turn2 := reqs[0].Messages, reqs[1].Messages
			if len(turn2) != len(turn1)+2 || turn2[0].Content != turn1[0].Content {
				t.Fatalf("OL1's second turn is not its first continued: %d then %d messages", len(turn1), len(turn2))
			}
			if a, r := turn2[len(turn1)], turn2[len(turn1)+1]; len(a.ToolCalls) != 1 || a.ToolCalls[0].Function.Name != "get_weather" || r.Role != "tool" || r.Content != "sunny, 24°C" {
				t.Errorf("OL1's second turn ends with %+v, %+v", a, r)
			}
			if len(reqs[1].Tools) != 4 {
				t.Errorf("OL1 offered %d tools, want 4 (3 server, the client's)", len(reqs[1].Tools))
			}
			// M1 received OL1's client call with its result; M1 and M2 no tools.
			m1, _ := json.Marshal(u.m1.Bodies()[0]["messages"])
			if !bytes.Contains(m1, []byte("get_weather")) || !bytes.Contains(m1, []byte("sunny, 24°C")) {
				t.Errorf("M1 got %s", m1)
			}
			for _, b := range append(u.m1.Bodies(), u.m2.Bodies()...) {
				if _, ok := b["tools"]; ok {
					t.Error("a stage without tools was offered tools")
				}
			}
		})
	}
}

// TestAgentClientToolLoop: OL1 asks for a client tool every turn. The
// repeat guard and the stage budget count across the round trips, and the
// chain still answers from M1 and M2.
func TestAgentClientToolLoop(t *testing.T) {
	tests := []struct {
		name   string
		script func(req *api.ChatRequest) fakeollama.Reply
		// result is the client's tool; nil: sunny.
		result func(name, args string) string
		// trips is how many answers end with tool calls.
		trips int
		want  string
	}{
		{
			name:   "same call, same result",
			script: samePlace,
			// Client tools are volatile: the repeat goes to the client, and
			// its unchanged result stops the stage.
			trips: 2,
			want:  "OL1:stopped_repeat:2[get_weather:ok,get_weather:ok] M1:ok:1[] M2:ok:1[]",
		},
		{
			name:   "same call, new result every time",
			script: samePlace,
			result: func() func(string, string) string {
				n := 0
				return func(string, string) string { n++; return fmt.Sprintf("sunny, %d°C", 20+n) }
			}(),
			// max_turns 3, counted across the requests.
			trips: 3,
			want:  "OL1:stopped_budget:3[get_weather:ok,get_weather:ok,get_weather:ok] M1:ok:1[] M2:ok:1[]",
		},
		{
			name: "new arguments every turn",
			script: func(req *api.ChatRequest) fakeollama.Reply {
				city := fmt.Sprintf("Paris-%d", toolResults(req))
				return fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{{Name: "get_weather", Args: map[string]any{"city": city}}}}
			},
			// max_turns 3, counted across the requests.
			trips: 3,
			want:  "OL1:stopped_budget:3[get_weather:ok,get_weather:ok,get_weather:ok] M1:ok:1[] M2:ok:1[]",
		},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", tt.name, stream), func(t *testing.T) {
				u := newAgentUpstreams(t, tt.script)
				srv := agentProxy(t, u, "", store.NewMemory(0, 10))
				msgs := []any{map[string]any{"role": "user", "content": "What is the weather in Paris?"}}
				var x *exchange
				for trip := 1; ; trip++ {
					x = agentPost(t, srv.URL, msgs, stream)
					if x.finish != "tool_calls" {
						break
					}
					if trip > tt.trips {
						t.Fatalf("round trip %d still asks for tools: %s", trip, stageSummary(x.trace))
					}
					result := tt.result
					if result == nil {
						result = sunny
					}
					msgs = answerCalls(msgs, x, result)
				}
				if got := len(msgs); got != 1+2*tt.trips {
					t.Errorf("round trips with tool calls = %d, want %d", (got-1)/2, tt.trips)
				}
				if x.finish != "stop" || x.message["content"] != "It is sunny in Paris." {
					t.Errorf("final answer: finish %q, message %v", x.finish, x.message)
				}
				if got := stageSummary(x.trace); got != tt.want {
					t.Errorf("trace = %s, want %s", got, tt.want)
				}
				if got := len(u.ol1.Requests()); got > 3 {
					t.Errorf("OL1 called %d times, over its budget of 3", got)
				}
			})
		}
	}
}

func samePlace(*api.ChatRequest) fakeollama.Reply {
	return fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{{Name: "get_weather", Args: map[string]any{"city": "Paris"}}}}
}

// TestAgentMixedServerAndClientCalls: in one turn OL1 calls a server tool
// and a client tool. The server call runs before the answer, which carries
// only the client's call; the resumed turn sees both results.
func TestAgentMixedServerAndClientCalls(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			u := newAgentUpstreams(t, func(req *api.ChatRequest) fakeollama.Reply {
				if toolResults(req) == 0 {
					return fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{
						{Name: "read_file", Args: map[string]any{"path": "notes.md"}},
						{Name: "get_weather", Args: map[string]any{"city": "Paris"}},
					}}
				}
				return fakeollama.Reply{Content: []string{"notes: 42, sunny"}}
			})
			srv := agentProxy(t, u, "", store.NewMemory(0, 10))
			msgs := []any{map[string]any{"role": "user", "content": "Read my notes and check the weather"}}
			first := agentPost(t, srv.URL, msgs, stream)
			if len(first.calls()) != 1 || first.calls()[0]["function"].(map[string]any)["name"] != "get_weather" {
				t.Fatalf("first answer's calls = %v, want get_weather only", first.calls())
			}
			if got, want := stageSummary(first.trace), "OL1:awaiting_client:1[read_file:ok,get_weather:client]"; got != want {
				t.Errorf("first trace = %s, want %s", got, want)
			}
			second := agentPost(t, srv.URL, answerCalls(msgs, first, sunny), stream)
			if got, want := stageSummary(second.trace), "OL1:ok:2[read_file:ok,get_weather:ok] M1:ok:1[] M2:ok:1[]"; got != want {
				t.Errorf("final trace = %s, want %s", got, want)
			}
			reqs := u.ol1.Requests()
			if len(reqs) != 2 {
				t.Fatalf("OL1 calls = %d, want 2", len(reqs))
			}
			var results []string
			for _, m := range reqs[1].Messages {
				if m.Role == "tool" {
					results = append(results, strings.TrimSpace(m.Content))
				}
			}
			if len(results) != 2 || !strings.Contains(results[0], "the notes say 42") || results[1] != "sunny, 24°C" {
				t.Errorf("OL1's resumed turn got tool results %q, want the server's then the client's", results)
			}
			m1, _ := json.Marshal(u.m1.Bodies()[0]["messages"])
			if !bytes.Contains(m1, []byte("the notes say 42")) || !bytes.Contains(m1, []byte("sunny, 24°C")) {
				t.Errorf("M1 got %s", m1)
			}
		})
	}
}

// openStore opens the store a replica would, over a shared Redis.
func openAgentStore(t *testing.T, url string) store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), url, 50, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if st.Status() != store.StatusRedis {
		t.Fatalf("store status %q, want redis", st.Status())
	}
	return st
}

// TestAgentResumeAcrossReplicas: the follow-up reaches another replica
// sharing a real Redis, or a replica started after the first one stopped;
// either resumes inside OL1. When the resume state has expired, the chain
// starts again with the client's result as OL1's evidence.
func TestAgentResumeAcrossReplicas(t *testing.T) {
	rs := redistest.Start(t)
	msgs := []any{map[string]any{"role": "user", "content": "What is the weather in Paris?"}}
	resumed := func(t *testing.T, x *exchange) {
		t.Helper()
		if got, want := stageSummary(x.trace), "OL1:ok:2[get_weather:ok] M1:ok:1[] M2:ok:1[]"; got != want {
			t.Errorf("final trace = %s, want %s", got, want)
		}
		if !strings.Contains(strings.Join(x.trace.Reasons, "|"), "resumed in stage OL1") {
			t.Errorf("reasons = %q, want resumed", x.trace.Reasons)
		}
	}

	t.Run("second replica", func(t *testing.T) {
		u := newAgentUpstreams(t, weatherOnce)
		a := agentProxy(t, u, "", openAgentStore(t, rs.URL()))
		b := agentProxy(t, u, "", openAgentStore(t, rs.URL()))
		first := agentPost(t, a.URL, msgs, false)
		resumed(t, agentPost(t, b.URL, answerCalls(msgs, first, sunny), true))
	})

	t.Run("after a restart", func(t *testing.T) {
		u := newAgentUpstreams(t, weatherOnce)
		a := agentProxy(t, u, "", openAgentStore(t, rs.URL()))
		first := agentPost(t, a.URL, msgs, false)
		a.Close()
		restarted := agentProxy(t, u, "", openAgentStore(t, rs.URL()))
		resumed(t, agentPost(t, restarted.URL, answerCalls(msgs, first, sunny), false))
	})

	t.Run("state expired", func(t *testing.T) {
		u := newAgentUpstreams(t, weatherOnce)
		st := openAgentStore(t, rs.URL())
		a := agentProxy(t, u, "  resume_ttl: 100ms\n", st)
		rc := redis.NewClient(&redis.Options{Addr: rs.Addr()})
		defer rc.Close()
		resumeKeys := func() map[string]bool {
			keys, err := rc.Keys(t.Context(), "chainproxy:resume:*").Result()
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]bool{}
			for _, k := range keys {
				out[k] = true
			}
			return out
		}
		before := resumeKeys()
		other := []any{map[string]any{"role": "user", "content": "Weather in Paris, please?"}}
		first := agentPost(t, a.URL, other, false)
		if first.finish != "tool_calls" {
			t.Fatalf("first answer: %s", first.raw)
		}
		var saved string
		for k := range resumeKeys() {
			if !before[k] {
				saved = k
			}
		}
		if saved == "" {
			t.Fatal("no resume state in Redis after the first answer")
		}
		// Wait for Redis to drop the state (its own TTL, no clock here).
		waitFor(t, func() bool { return !resumeKeys()[saved] })
		x := agentPost(t, a.URL, answerCalls(other, first, sunny), false)
		if x.finish != "stop" || x.message["content"] != "It is sunny in Paris." {
			t.Fatalf("answer after expiry: %s", x.raw)
		}
		if got, want := stageSummary(x.trace), "OL1:ok:1[] M1:ok:1[] M2:ok:1[]"; got != want {
			t.Errorf("trace = %s, want %s (a new chain)", got, want)
		}
		if !strings.Contains(strings.Join(x.trace.Reasons, "|"), "nothing to resume") {
			t.Errorf("reasons = %q", x.trace.Reasons)
		}
		// The restarted OL1 had the client's result in its conversation.
		reqs := u.ol1.Requests()
		last := reqs[len(reqs)-1].Messages
		if m := last[len(last)-1]; m.Role != "tool" || m.Content != "sunny, 24°C" {
			t.Errorf("restarted OL1's conversation ends with %+v", m)
		}
	})
}

// TestAgentLoopGoOpenAI is an agent as users write it with go-openai: call
// the model with its tools, run the tools it asks for, send the results,
// until finish_reason is "stop". Streamed, the tool calls arrive as
// ordinary deltas that the client assembles.
func TestAgentLoopGoOpenAI(t *testing.T) {
	tool := goopenai.Tool{Type: goopenai.ToolTypeFunction, Function: &goopenai.FunctionDefinition{
		Name: "get_weather", Description: "Current weather of a city",
		Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
	}}
	runTool := func(c goopenai.ToolCall) string {
		var args struct{ City string }
		if err := json.Unmarshal([]byte(c.Function.Arguments), &args); err != nil {
			return "Error: " + err.Error()
		}
		return "sunny in " + args.City
	}
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			u := newAgentUpstreams(t, weatherOnce)
			srv := agentProxy(t, u, "", store.NewMemory(0, 10))
			cc := goopenai.DefaultConfig("unused")
			cc.BaseURL = srv.URL + "/v1"
			client := goopenai.NewClientWithConfig(cc)
			msgs := []goopenai.ChatCompletionMessage{{Role: goopenai.ChatMessageRoleUser, Content: "What is the weather in Paris?"}}
			executed := 0
			for round := 0; ; round++ {
				if round == 5 {
					t.Fatal("the agent loop did not end in 5 rounds")
				}
				req := goopenai.ChatCompletionRequest{Model: "chain/reflexive", Messages: msgs, Tools: []goopenai.Tool{tool}}
				msg, finish := agentCall(t, client, req, stream)
				msgs = append(msgs, msg)
				if finish == goopenai.FinishReasonStop {
					break
				}
				if finish != goopenai.FinishReasonToolCalls || len(msg.ToolCalls) == 0 {
					t.Fatalf("round %d: finish %q with %d calls", round, finish, len(msg.ToolCalls))
				}
				for _, c := range msg.ToolCalls {
					executed++
					msgs = append(msgs, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleTool, ToolCallID: c.ID, Content: runTool(c)})
				}
			}
			if got := msgs[len(msgs)-1].Content; got != "It is sunny in Paris." {
				t.Errorf("final answer = %q", got)
			}
			if executed != 1 {
				t.Errorf("client executed %d tools, want 1", executed)
			}
			if len(u.ol1.Requests()) != 2 || len(u.m1.Requests()) != 1 || len(u.m2.Requests()) != 1 {
				t.Errorf("upstream calls OL1 %d, M1 %d, M2 %d, want 2, 1, 1", len(u.ol1.Requests()), len(u.m1.Requests()), len(u.m2.Requests()))
			}
		})
	}
}

// agentCall makes one call of the agent loop and returns the assistant
// message and finish reason, assembling a stream as go-openai's users do.
func agentCall(t *testing.T, client *goopenai.Client, req goopenai.ChatCompletionRequest, stream bool) (goopenai.ChatCompletionMessage, goopenai.FinishReason) {
	t.Helper()
	if !stream {
		resp, err := client.CreateChatCompletion(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Choices[0].Message, resp.Choices[0].FinishReason
	}
	req.Stream = true
	s, err := client.CreateChatCompletionStream(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	msg := goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleAssistant}
	var finish goopenai.FinishReason
	for {
		chunk, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return msg, finish
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range chunk.Choices {
			msg.Content += ch.Delta.Content
			for _, tc := range ch.Delta.ToolCalls {
				i := 0
				if tc.Index != nil {
					i = *tc.Index
				}
				for len(msg.ToolCalls) <= i {
					msg.ToolCalls = append(msg.ToolCalls, goopenai.ToolCall{Type: goopenai.ToolTypeFunction})
				}
				if tc.ID != "" {
					msg.ToolCalls[i].ID = tc.ID
				}
				msg.ToolCalls[i].Function.Name += tc.Function.Name
				msg.ToolCalls[i].Function.Arguments += tc.Function.Arguments
			}
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
	}
}
