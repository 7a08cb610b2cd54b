package web

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/ollama/ollama/types/model"

	"chainproxy/config"
	"chainproxy/internal/fakeollama"
	"chainproxy/store"
)

// The Ollama front's tests talk to the proxy with Ollama's own Go client
// (github.com/ollama/ollama/api), which decodes every line as its server's
// types.

func ollamaClient(t *testing.T, base string) *api.Client {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	return api.NewClient(u, http.DefaultClient)
}

func TestOllamaChatGoClient(t *testing.T) {
	s := newTestServer(t, testConfig)
	cl := ollamaClient(t, s.URL)
	for _, stream := range []bool{true, false} {
		t.Run(map[bool]string{true: "stream", false: "non-stream"}[stream], func(t *testing.T) {
			var content, thinking strings.Builder
			var last api.ChatResponse
			n := 0
			err := cl.Chat(context.Background(), &api.ChatRequest{Model: "chain/reflexive", Stream: &stream, Think: &api.ThinkValue{Value: true},
				Messages: []api.Message{{Role: "user", Content: "compare things"}}}, func(r api.ChatResponse) error {
				content.WriteString(r.Message.Content)
				thinking.WriteString(r.Message.Thinking)
				last = r
				n++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if content.String() != "Final answer from M2." || thinking.String() != "hidden M2 thoughts" {
				t.Errorf("content %q, thinking %q", content.String(), thinking.String())
			}
			if !last.Done || last.DoneReason != "stop" || last.PromptEvalCount == 0 || last.EvalCount == 0 || last.TotalDuration == 0 || last.Model != "chain/reflexive" {
				t.Errorf("last object = %+v", last)
			}
			if !stream && n != 1 {
				t.Errorf("non-stream answer came in %d objects", n)
			}
		})
	}
}

func TestOllamaThinkOff(t *testing.T) {
	s := newTestServer(t, testConfig)
	resp := s.post(t, "/api/chat", `{"model":"chain/simple","stream":false,"think":false,"messages":[{"role":"user","content":"hi"}]}`)
	b := readAll(t, resp.Body)
	if resp.StatusCode != 200 || bytes.Contains(b, []byte("thinking")) || !bytes.Contains(b, []byte(`"chain":{`)) {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
}

var ollamaTimesRE = regexp.MustCompile(`"(created_at)":"[^"]*"|"(total_duration)":\d+`)

// evalDurationRE matches eval_duration, which is left out when every call
// took under a millisecond: the golden file leaves it out always.
var evalDurationRE = regexp.MustCompile(`,"eval_duration":\d+`)

// TestOllamaStreamGolden pins a reflexive NDJSON stream: an empty object
// per stage (the keep-alive), the thinking and content deltas, the done
// object with the counters and the trace.
func TestOllamaStreamGolden(t *testing.T) {
	s := newTestServer(t, testConfig)
	s.Config.Handler = New(Options{Config: s.cfg, Engine: mustEngine(t, s.cfg), Traces: s.store, Keepalive: time.Hour})
	resp := s.post(t, "/api/chat", `{"model":"chain/reflexive","messages":[{"role":"user","content":"compare"}]}`)
	if ct := resp.Header.Get("Content-Type"); ct != ndjson {
		t.Errorf("Content-Type = %q", ct)
	}
	var out strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := ollamaTimesRE.ReplaceAll(evalDurationRE.ReplaceAll(sc.Bytes(), nil), []byte(`"$1$2":"X"`))
		out.Write(normalizeCompact(t, line))
		out.WriteByte('\n')
	}
	golden(t, "ollama_stream.ndjson.golden", []byte(out.String()))
}

func TestOllamaGenerate(t *testing.T) {
	s := newTestServer(t, testConfig)
	cl := ollamaClient(t, s.URL)
	var text strings.Builder
	var last api.GenerateResponse
	err := cl.Generate(context.Background(), &api.GenerateRequest{Model: "chain/simple", Prompt: "hello", System: "be nice"}, func(r api.GenerateResponse) error {
		text.WriteString(r.Response)
		last = r
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if text.String() != "Final answer from M2." || !last.Done || last.DoneReason != "stop" {
		t.Errorf("text %q, last %+v", text.String(), last)
	}
	// An empty prompt loads the model, as ollama run does first.
	err = cl.Generate(context.Background(), &api.GenerateRequest{Model: "chain/reflexive:latest"}, func(r api.GenerateResponse) error {
		last = r
		return nil
	})
	if err != nil || !last.Done || last.DoneReason != "load" {
		t.Errorf("load: %v %+v", err, last)
	}
}

// TestOllamaClientTools: the chain asks the client for its tool in
// Ollama's shape, and the client's tool message (with only tool_name, as
// older clients send it) resumes the chain.
func TestOllamaClientTools(t *testing.T) {
	u := newAgentUpstreams(t, weatherOnce)
	srv := agentProxy(t, u, "", store.NewMemory(0, 10))
	cl := ollamaClient(t, srv.URL)
	var tools api.Tools
	if err := json.Unmarshal([]byte(`[{"type":"function","function":{"name":"get_weather","description":"Current weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`), &tools); err != nil {
		t.Fatal(err)
	}
	msgs := []api.Message{{Role: "user", Content: "What is the weather in Paris?"}}
	var calls []api.ToolCall
	err := cl.Chat(context.Background(), &api.ChatRequest{Model: "chain/reflexive", Messages: msgs, Tools: tools}, func(r api.ChatResponse) error {
		calls = append(calls, r.Message.ToolCalls...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0].Function.Name != "get_weather" {
		t.Fatalf("calls = %+v", calls)
	}
	if city, _ := calls[0].Function.Arguments.Get("city"); city != "Paris" {
		t.Errorf("arguments = %v", calls[0].Function.Arguments)
	}
	msgs = append(msgs, api.Message{Role: "assistant", ToolCalls: calls}, api.Message{Role: "tool", ToolName: "get_weather", Content: "sunny, 24°C"})
	var answer strings.Builder
	err = cl.Chat(context.Background(), &api.ChatRequest{Model: "chain/reflexive", Messages: msgs, Tools: tools}, func(r api.ChatResponse) error {
		answer.WriteString(r.Message.Content)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if answer.String() != "It is sunny in Paris." {
		t.Errorf("answer = %q", answer.String())
	}
}

// TestOllamaPs: /api/ps lists every model as Ollama lists one kept with
// keep_alive -1 (an expiry more than twenty years away, which the ollama
// CLI prints as "Forever"), and a node's model with the window its prompts
// are fitted to, which /api/show gives too.
func TestOllamaPs(t *testing.T) {
	s := newTestServer(t, strings.Replace(testConfig, "    model: big-1\n", "    model: big-1\n    context_window: 8192\n", 1))
	ps, err := ollamaClient(t, s.URL).ListRunning(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	windows := map[string]int{}
	for _, m := range ps.Models {
		if until := time.Until(m.ExpiresAt); until < 20*365*24*time.Hour {
			t.Errorf("%s expires in %v, as if it were unloading", m.Name, until)
		}
		windows[m.Name] = m.ContextLength
	}
	want := map[string]int{"M1:latest": 8192, "big-1:latest": 8192, "OL1:latest": 0, "chain/auto:latest": 0}
	for name, w := range want {
		if got, ok := windows[name]; !ok || got != w {
			t.Errorf("%s: context_length %d (listed %v), want %d", name, got, ok, w)
		}
		// /api/show says it where Ollama does, and ollama show prints it.
		show, err := ollamaClient(t, s.URL).Show(context.Background(), &api.ShowRequest{Model: name})
		if err != nil {
			t.Fatal(err)
		}
		got, ok := show.ModelInfo["chain.context_length"].(float64)
		if ok != (w > 0) || int(got) != w {
			t.Errorf("%s: /api/show model_info %v, want chain.context_length %d", name, show.ModelInfo, w)
		}
	}
}

func TestOllamaListing(t *testing.T) {
	s := newTestServer(t, testConfig)
	cl := ollamaClient(t, s.URL)
	ctx := context.Background()
	if err := cl.Heartbeat(ctx); err != nil {
		t.Errorf("heartbeat: %v", err)
	}
	if v, err := cl.Version(ctx); err != nil || v != ollamaVersion {
		t.Errorf("version = %q, %v", v, err)
	}
	list, err := cl.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range list.Models {
		names = append(names, m.Name)
	}
	for _, want := range []string{"chain/auto:latest", "chain/simple:latest", "chain/reflexive:latest", "OL1:latest", "M2:latest", "small-1:latest"} {
		if !slices.Contains(names, want) {
			t.Errorf("tags %v lack %s", names, want)
		}
	}
	if ps, err := cl.ListRunning(ctx); err != nil || len(ps.Models) != len(list.Models) {
		t.Errorf("ps = %+v, %v", ps, err)
	}
	//lint:ignore SA1019 the name field older Ollama clients send, which /api/show still reads
	show, err := cl.Show(ctx, &api.ShowRequest{Name: "chain/reflexive"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(show.Capabilities, model.CapabilityTools) || !slices.Contains(show.Capabilities, model.CapabilityCompletion) || show.Details.Family != "chain" {
		t.Errorf("show = %+v", show)
	}
	_, err = cl.Show(ctx, &api.ShowRequest{Model: "llama9"})
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != 404 || !strings.Contains(se.ErrorMessage, "llama9") {
		t.Errorf("show unknown: %#v", err)
	}
	var status string
	if err := cl.Pull(ctx, &api.PullRequest{Model: "chain/auto"}, func(p api.ProgressResponse) error { status = p.Status; return nil }); err != nil || status != "success" {
		t.Errorf("pull chain/auto: %q %v", status, err)
	}
	err = cl.Pull(ctx, &api.PullRequest{Model: "llama9"}, func(api.ProgressResponse) error { return nil })
	if !errors.As(err, &se) || se.StatusCode != 400 || !strings.Contains(se.ErrorMessage, "does not manage models") {
		t.Errorf("pull llama9: %#v", err)
	}
}

// TestOllamaErrors: every refusal on /api/ is in Ollama's shape, which its
// client turns into a StatusError with the message.
func TestOllamaErrors(t *testing.T) {
	s := newTestServer(t, testConfig)
	for _, tc := range []struct {
		name, path, body string
		status           int
		msg              string
	}{
		{"bad json", "/api/chat", `{"model":`, 400, "invalid JSON"},
		{"no model", "/api/chat", `{"messages":[]}`, 400, "model is required"},
		{"unknown model", "/api/chat", `{"model":"llama9","messages":[{"role":"user","content":"hi"}]}`, 404, "llama9"},
		{"bad role", "/api/chat", `{"model":"chain/auto","messages":[{"role":"wizard","content":"hi"}]}`, 400, "invalid role"},
		{"image not an image", "/api/chat", `{"model":"chain/auto","messages":[{"role":"user","content":"hi","images":["aGk="]}]}`, 400, "messages[0].images[0] is not an image"},
		{"image not base64", "/api/chat", `{"model":"chain/auto","messages":[{"role":"user","content":"hi","images":["%%%"]}]}`, 400, "messages[0].images[0] is not a base64 image"},
		{"image on assistant", "/api/chat", `{"model":"chain/auto","messages":[{"role":"assistant","content":"hi","images":["aGk="]}]}`, 400, "only user messages take images"},
		{"generate image not an image", "/api/generate", `{"model":"chain/auto","prompt":"hi","images":["aGk="]}`, 400, "images[0] is not an image"},
		{"think", "/api/chat", `{"model":"chain/auto","think":"max","messages":[{"role":"user","content":"hi"}]}`, 400, "think must be"},
		{"options", "/api/chat", `{"model":"chain/auto","options":{"temperature":"hot"},"messages":[{"role":"user","content":"hi"}]}`, 400, "options.temperature"},
		{"keep_alive", "/api/chat", `{"model":"chain/auto","keep_alive":"forever","messages":[{"role":"user","content":"hi"}]}`, 400, "keep_alive"},
		{"too large", "/api/chat", `{"model":"chain/auto","messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`, 413, "larger than"},
		{"fill in the middle", "/api/generate", `{"model":"chain/auto","prompt":"func add(","suffix":"}\n"}`, 400, "fill-in-the-middle completion is not served"},
		{"raw prompt", "/api/generate", `{"model":"chain/auto","prompt":"<|fim_prefix|>x","raw":true}`, 400, "raw: a prompt already in the model's template"},
		{"no route", "/api/nope", `{}`, 404, "no such endpoint"},
		{"embeddings", "/api/embed", `{}`, 404, "does not serve embeddings (/api/embed)"},
		{"old embeddings", "/api/embeddings", `{}`, 404, "does not serve embeddings (/api/embeddings)"},
		{"model management", "/api/delete", `{}`, 404, "does not manage models (/api/delete)"},
		{"blobs", "/api/blobs/sha256:0a", `{}`, 404, "does not manage models (/api/blobs)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := s.post(t, tc.path, tc.body)
			b := readAll(t, resp.Body)
			var e struct {
				Error string `json:"error"`
			}
			if resp.StatusCode != tc.status || json.Unmarshal(b, &e) != nil || !strings.Contains(e.Error, tc.msg) {
				t.Errorf("%d %s, want %d with %q", resp.StatusCode, b, tc.status, tc.msg)
			}
		})
	}
}

// TestOllamaStreamFailure: a node failing once the stream is under way
// ends it with Ollama's {"error"} line, which its client returns.
func TestOllamaStreamFailure(t *testing.T) {
	node := ollamaNode("A", fakeollama.New(t, fakeollama.Reply{Content: []string{"half "}, Error: "runner died"}).URL)
	_, srv := wireProxy(t, []config.Node{node}, oneStage)
	var got strings.Builder
	err := ollamaClient(t, srv.URL).Chat(context.Background(), &api.ChatRequest{Model: "A", Messages: []api.Message{{Role: "user", Content: "hi"}}},
		func(r api.ChatResponse) error { got.WriteString(r.Message.Content); return nil })
	if err == nil || !strings.Contains(err.Error(), "runner died") || got.String() != "half " {
		t.Errorf("err = %v after %q, want the node's failure after its half answer", err, got.String())
	}
}

// TestOllamaFormat: format goes to the answering stage's node only, as
// response_format to an OpenAI node; the earlier stages write notes.
func TestOllamaFormat(t *testing.T) {
	u := newAgentUpstreams(t, weatherOnce)
	srv := agentProxy(t, u, "", store.NewMemory(0, 10))
	resp, err := http.Post(srv.URL+"/api/chat", "application/json", strings.NewReader(
		`{"model":"chain/reflexive","stream":false,"format":{"type":"object","properties":{"answer":{"type":"string"}}},"messages":[{"role":"user","content":"compare a and b"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for _, r := range u.ol1.Requests() {
		if len(r.Format) != 0 {
			t.Errorf("OL1, an earlier stage, got format %s", r.Format)
		}
	}
	if b := u.m1.Bodies(); len(b) == 0 || b[0]["response_format"] != nil {
		t.Errorf("M1, an earlier stage, got %v", b)
	}
	b := u.m2.Bodies()
	rf, _ := json.Marshal(b[len(b)-1]["response_format"])
	if want := `{"json_schema":{"name":"format","schema":{"properties":{"answer":{"type":"string"}},"type":"object"}},"type":"json_schema"}`; string(rf) != want {
		t.Errorf("M2's response_format = %s, want %s", rf, want)
	}
	bad := ollamaClient(t, srv.URL).Chat(context.Background(), &api.ChatRequest{Model: "chain/auto", Format: json.RawMessage(`7`), Messages: []api.Message{{Role: "user", Content: "hi"}}}, func(api.ChatResponse) error { return nil })
	if bad == nil || !strings.Contains(bad.Error(), "format must be") {
		t.Errorf("format 7: %v", bad)
	}
}
