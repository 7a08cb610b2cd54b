//lint:file-ignore SA1019 this file drives the deprecated functions API on purpose: older clients still send it.

package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ollama/ollama/api"
	goopenai "github.com/sashabaranov/go-openai"

	"chainproxy/chain"
	"chainproxy/config"
	"chainproxy/internal/fakeollama"
	"chainproxy/internal/oaischema"
	"chainproxy/store"
)

// The deprecated functions API of Chat Completions, as OpenAI's reference
// still describes it (internal/oaischema/openai-chat.yaml:
// CreateChatCompletionRequest.functions and function_call,
// ChatCompletionFunctions, ChatCompletionRequestFunctionMessage, the
// response message's function_call and finish_reason "function_call") and
// as older clients send it: go-openai's ChatCompletionRequest.Functions and
// FunctionCall, LangChain's and AutoGen's function-calling agents.

// weatherFunction is get_weather in the legacy functions shape.
var weatherFunction = goopenai.FunctionDefinition{
	Name: "get_weather", Description: "Current weather of a city",
	Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
}

// weatherByFunction calls get_weather until the conversation holds its
// result, then answers with it.
func weatherByFunction(_ int, req *api.ChatRequest) fakeollama.Reply {
	for _, m := range req.Messages {
		if m.Role == "tool" {
			return fakeollama.Reply{Content: []string{"It is " + m.Content + " in Paris."}}
		}
	}
	return fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{{Name: "get_weather", Args: map[string]any{"city": "Paris"}}}}
}

// TestChatLegacyFunctions: a client of the deprecated functions API (the
// go-openai client's Functions and FunctionCall, in its own round trip)
// gets its functions offered to the model, the model's call back as
// message.function_call with finish_reason "function_call" (streamed as
// delta.function_call), and its function result, a "function" message
// after the assistant's function_call, reaches the model as a tool result.
// Before, functions were dropped unread: the model answered without them.
func TestChatLegacyFunctions(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "non-stream", true: "stream"}[stream], func(t *testing.T) {
			f := fakeollama.NewFunc(t, weatherByFunction)
			client, _ := wireProxy(t, []config.Node{ollamaNode("A", f.URL)}, oneStage)
			msgs := []goopenai.ChatCompletionMessage{{Role: goopenai.ChatMessageRoleUser, Content: "What is the weather in Paris?"}}
			req := goopenai.ChatCompletionRequest{Model: "A", Messages: msgs, Functions: []goopenai.FunctionDefinition{weatherFunction}, FunctionCall: "auto"}

			msg, finish := legacyRoundTrip(t, client, req, stream)
			if finish != goopenai.FinishReasonFunctionCall || msg.FunctionCall == nil || msg.FunctionCall.Name != "get_weather" || msg.FunctionCall.Arguments != `{"city":"Paris"}` || len(msg.ToolCalls) != 0 {
				t.Fatalf("answer = %+v (finish %q), want a function_call of get_weather and finish_reason function_call", msg, finish)
			}
			first := f.Requests()[0]
			if len(first.Tools) != 1 || first.Tools[0].Function.Name != "get_weather" || first.Tools[0].Function.Description != weatherFunction.Description {
				t.Errorf("the model was offered %+v, want the client's get_weather", first.Tools)
			}

			req.Messages = append(req.Messages, msg, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleFunction, Name: "get_weather", Content: "sunny"})
			msg, finish = legacyRoundTrip(t, client, req, stream)
			if finish != goopenai.FinishReasonStop || msg.Content != "It is sunny in Paris." || msg.FunctionCall != nil {
				t.Errorf("answer after the result = %+v (finish %q), want the model's text", msg, finish)
			}
			reqs := f.Requests()
			last := reqs[len(reqs)-1].Messages
			var call *api.ToolCall
			var result *api.Message
			for i, m := range last {
				if m.Role == "assistant" && len(m.ToolCalls) == 1 {
					call = &last[i].ToolCalls[0]
				}
				if m.Role == "tool" {
					result = &last[i]
				}
			}
			if call == nil || call.Function.Name != "get_weather" || call.Function.Arguments.String() != `{"city":"Paris"}` {
				t.Errorf("the model's history = %+v, want the assistant's get_weather call", last)
			}
			if result == nil || result.Content != "sunny" || result.ToolName != "get_weather" {
				t.Errorf("the model's history = %+v, want the function's result as a tool message", last)
			}
		})
	}
}

// legacyRoundTrip sends req with go-openai and returns the answer's message
// as the client assembles it, and its finish reason.
func legacyRoundTrip(t *testing.T, client *goopenai.Client, req goopenai.ChatCompletionRequest, stream bool) (goopenai.ChatCompletionMessage, goopenai.FinishReason) {
	t.Helper()
	ctx := context.Background()
	if !stream {
		resp, err := client.CreateChatCompletion(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Choices[0].Message, resp.Choices[0].FinishReason
	}
	s, err := client.CreateChatCompletionStream(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	msg := goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleAssistant}
	var finish goopenai.FinishReason
	for {
		ch, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(ch.Choices) == 0 {
			continue
		}
		d := ch.Choices[0].Delta
		msg.Content += d.Content
		if fc := d.FunctionCall; fc != nil {
			// Fragments add up, as the SDKs accumulate them.
			if msg.FunctionCall == nil {
				msg.FunctionCall = &goopenai.FunctionCall{}
			}
			msg.FunctionCall.Name += fc.Name
			msg.FunctionCall.Arguments += fc.Arguments
		}
		msg.ToolCalls = append(msg.ToolCalls, d.ToolCalls...)
		if ch.Choices[0].FinishReason != "" {
			finish = ch.Choices[0].FinishReason
		}
	}
	return msg, finish
}

// TestChatLegacyFunctionsWire: the legacy answer in OpenAI's own schemas,
// with function_call in place of tool_calls, and the request the test sends
// is one OpenAI's schema accepts.
func TestChatLegacyFunctionsWire(t *testing.T) {
	f := fakeollama.NewFunc(t, weatherByFunction)
	_, srv := wireProxy(t, []config.Node{ollamaNode("A", f.URL)}, oneStage)
	for _, stream := range []bool{false, true} {
		body, _ := json.Marshal(map[string]any{
			"model": "A", "stream": stream, "function_call": map[string]string{"name": "get_weather"},
			"messages":  []any{map[string]string{"role": "user", "content": "Weather in Paris?"}},
			"functions": []any{weatherFunction},
		})
		oaischema.Validate(t, "CreateChatCompletionRequest", body)
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, raw)
		}
		if !stream {
			oaischema.Validate(t, "CreateChatCompletionResponse", raw)
			if !bytes.Contains(raw, []byte(`"function_call":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}`)) || bytes.Contains(raw, []byte(`"tool_calls":[`)) || !bytes.Contains(raw, []byte(`"finish_reason":"function_call"`)) {
				t.Errorf("answer %s: want message.function_call, no tool_calls, finish_reason function_call", raw)
			}
			continue
		}
		var calls, finishes int
		for _, fr := range sseFrames(t, raw) {
			data, ok := strings.CutPrefix(fr, "data: ")
			if !ok || data == "[DONE]" {
				continue
			}
			oaischema.Validate(t, "CreateChatCompletionStreamResponse", []byte(data))
			if strings.Contains(data, `"tool_calls":[`) {
				t.Errorf("chunk %s: tool_calls in a legacy stream", data)
			}
			if strings.Contains(data, `"delta":{"function_call":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}`) {
				calls++
			}
			if strings.Contains(data, `"finish_reason":"function_call"`) {
				finishes++
			}
		}
		if calls != 1 || finishes != 1 {
			t.Errorf("stream %s: %d function_call deltas and %d function_call finishes, want 1 and 1", raw, calls, finishes)
		}
	}
}

// TestDecodeLegacyFunctions: functions and function_call become tools and
// a tool choice, and the legacy history becomes tool calls and tool
// results; what cannot be read so is refused on its own param.
func TestDecodeLegacyFunctions(t *testing.T) {
	const fn = `{"name":"get_weather","parameters":{"type":"object"}}`
	const user = `{"role":"user","content":"hi"}`
	for _, tc := range []struct {
		name, body string
		mode, call string // the tool choice
		param      string // the refused param, when refused
	}{
		{name: "functions alone", body: `"functions":[` + fn + `]`, mode: "auto"},
		{name: "auto", body: `"functions":[` + fn + `],"function_call":"auto"`, mode: "auto"},
		{name: "none", body: `"functions":[` + fn + `],"function_call":"none"`, mode: "none"},
		{name: "named", body: `"functions":[` + fn + `],"function_call":{"name":"get_weather"}`, mode: "function", call: "get_weather"},
		// encoding/json, whose reading the proxy keeps, matches keys
		// without regard to case.
		{name: "keys in capitals", body: `"Functions":[` + fn + `],"FUNCTION_CALL":{"name":"get_weather"}`, mode: "function", call: "get_weather"},
		{name: "spaced", body: "\"functions\" :\n[" + fn + "] , \"function_call\"\t: \"none\"", mode: "none"},
		{name: "unknown function", body: `"functions":[` + fn + `],"function_call":{"name":"nope"}`, param: "function_call"},
		{name: "required", body: `"functions":[` + fn + `],"function_call":"required"`, param: "function_call"},
		{name: "unnamed", body: `"functions":[{"description":"x"}]`, param: "functions[0].name"},
		{name: "with tools", body: `"functions":[` + fn + `],"tools":[{"type":"function","function":` + fn + `}]`, param: "functions"},
		{name: "with tool_choice", body: `"functions":[` + fn + `],"function_call":"auto","tool_choice":"auto"`, param: "function_call"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := decodeChatRequest([]byte(`{"model":"m","messages":[` + user + `],` + tc.body + `}`))
			if tc.param != "" {
				var br *badRequest
				if !errors.As(err, &br) || br.param != tc.param {
					t.Fatalf("err = %v, want a bad request on %s", err, tc.param)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !req.legacy || len(req.Tools) != 1 || req.Tools[0].Type != "function" || req.Tools[0].Function.Name != "get_weather" || string(req.Tools[0].Function.Parameters) != `{"type":"object"}` {
				t.Errorf("tools = %+v (legacy %v), want get_weather from functions", req.Tools, req.legacy)
			}
			if req.choice.Mode != tc.mode || req.choice.Name != tc.call {
				t.Errorf("choice = %+v, want %s %s", req.choice, tc.mode, tc.call)
			}
		})
	}

	t.Run("history", func(t *testing.T) {
		req, err := decodeChatRequest([]byte(`{"model":"m","functions":[` + fn + `],"messages":[` + user + `,
			{"role":"assistant","content":null,"function_call":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
			{"role":"function","name":"get_weather","content":"sunny"},
			{"role":"assistant","content":"Sunny. And Rome?"},
			{"role":"assistant","content":null,"function_call":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}},
			{"role":"function","name":"get_weather","content":"rain"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		rr := req.toRunRequest()
		m := rr.Messages
		if len(m) != 6 || len(m[1].ToolCalls) != 1 || len(m[4].ToolCalls) != 1 {
			t.Fatalf("messages = %+v, want the function calls as tool calls", m)
		}
		if c := m[1].ToolCalls[0]; c.Name != "get_weather" || c.Arguments != `{"city":"Paris"}` || c.ID == "" {
			t.Errorf("call = %+v", c)
		}
		for _, i := range []int{2, 5} {
			if m[i].Role != "tool" || m[i].Name != "get_weather" || m[i].ToolCallID != m[i-1].ToolCalls[0].ID {
				t.Errorf("messages[%d] = %+v, want the tool result of %+v", i, m[i], m[i-1].ToolCalls[0])
			}
		}
		if m[1].ToolCalls[0].ID == m[4].ToolCalls[0].ID {
			t.Errorf("two calls share the ID %q", m[1].ToolCalls[0].ID)
		}
	})

	t.Run("function message without a name", func(t *testing.T) {
		_, err := decodeChatRequest([]byte(`{"model":"m","messages":[` + user + `,{"role":"function","content":"x"}]}`))
		var br *badRequest
		if !errors.As(err, &br) || br.param != "messages[1].name" {
			t.Errorf("err = %v, want a bad request on messages[1].name", err)
		}
	})
}

// TestChatUnsupportedOutputs: what the chain cannot give is refused with a
// 400 in OpenAI's error shape that names the param, as OpenAI refuses a
// parameter a model does not take ("Unsupported parameter", code
// unsupported_parameter), rather than answered without it: logprobs (a
// client reading choices[].logprobs.content would find null) and audio
// output. Their absent or off forms, which SDKs and LangChain send by
// default, keep working.
func TestChatUnsupportedOutputs(t *testing.T) {
	f := fakeollama.New(t)
	client, srv := wireProxy(t, []config.Node{ollamaNode("A", f.URL)}, oneStage)
	for _, tc := range []struct {
		extra, param, code string
	}{
		{`"logprobs":true`, "logprobs", "unsupported_parameter"},
		{`"logprobs":true,"top_logprobs":5`, "logprobs", "unsupported_parameter"},
		{`"top_logprobs":2`, "top_logprobs", "unsupported_parameter"},
		{`"modalities":["text","audio"],"audio":{"voice":"alloy","format":"wav"}`, "modalities", "unsupported_value"},
		{`"audio":{"voice":"alloy","format":"wav"}`, "audio", "unsupported_parameter"},
		{`"logprobs":false`, "", ""},
		{`"logprobs":null,"top_logprobs":null`, "", ""},
		{`"logprobs":false,"top_logprobs":0`, "", ""},
		{`"modalities":["text"],"audio":null`, "", ""},
	} {
		body := []byte(`{"model":"A","messages":[{"role":"user","content":"hi"}],` + tc.extra + `}`)
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if tc.param == "" {
			if resp.StatusCode != 200 {
				t.Errorf("%s: status %d: %s, want an answer", tc.extra, resp.StatusCode, raw)
			}
			continue
		}
		oaischema.Validate(t, "ErrorResponse", raw)
		var e errorBody
		_ = json.Unmarshal(raw, &e)
		if resp.StatusCode != 400 || e.Error.Param == nil || *e.Error.Param != tc.param || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, tc.param) {
			t.Errorf("%s: %d %s, want a 400 invalid_request_error on %s", tc.extra, resp.StatusCode, raw, tc.param)
		}
		// The code OpenAI gives, which web/errors.go passes on once it
		// reads badRequest.code.
		_, err = decodeChatRequest(body)
		if br, ok := err.(*badRequest); !ok || br.code != tc.code {
			t.Errorf("%s: %v, want code %s", tc.extra, err, tc.code)
		}
	}
	// go-openai's LogProbs, as a client sets it.
	_, err := client.CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{Model: "A", LogProbs: true, TopLogProbs: 3,
		Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "hi"}}})
	var apiErr *goopenai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 400 || apiErr.Param == nil || *apiErr.Param != "logprobs" {
		t.Errorf("go-openai with LogProbs: %v, want a 400 on logprobs", err)
	}
	if n := len(f.Requests()); n != 4 {
		t.Errorf("the node got %d requests, want the 4 accepted ones only", n)
	}
}

// TestChatExtrasScan: the scan that decides whether a body is read a second
// time for the fields chatRequest has no room for finds their keys however
// a client spaces or capitalizes them, and none in the requests of the
// agent clients in testdata, which then pay the scan only.
func TestChatExtrasScan(t *testing.T) {
	for _, body := range []string{
		`{"functions":[]}`, `{"model":"m", "function_call" : "auto"}`, "{\"logprobs\"\n:true}", `{"Top_LogProbs":1}`,
		`{"modalities":["audio"]}`, `{"AUDIO":{}}`, `{"a":{"functions":1}}`,
	} {
		if !mayHaveExtras([]byte(body)) {
			t.Errorf("%s: not found", body)
		}
	}
	for _, body := range []string{
		`{"model":"m"}`, `{"x":"functions"}`, `{"xfunctions":1}`, `{"audio_x":1}`, `{"input_audio":1}`, `"logprobs"`, `{"messages":[{"content":"logprobs: functions"}]}`,
	} {
		if mayHaveExtras([]byte(body)) {
			t.Errorf("%s: found", body)
		}
	}
	files, _ := filepath.Glob("testdata/agents/*.json")
	for _, name := range files {
		if strings.HasSuffix(name, ".responses.json") {
			continue
		}
		body, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if mayHaveExtras(body) {
			t.Errorf("%s: read twice", name)
		}
	}
}

// TestChatLegacyFunctionsReflexive: in the chain, a stage's call of a
// legacy client's function goes back as function_call, and the client's
// "function" result (go-openai's FunctionCall and a ChatMessageRoleFunction
// message, which carry no call ID) resumes the chain in the stage that
// waited, round trip after round trip: OL1 goes on from each result, it
// does not start over. Before, web named the call from its place and the
// chain its own random ID: the two never met, and the chain ran OL1 again
// with the results as evidence.
func TestChatLegacyFunctionsReflexive(t *testing.T) {
	// OL1 asks for Paris, then Lyon, then writes its notes.
	cities := []string{"Paris", "Lyon"}
	script := func(req *api.ChatRequest) fakeollama.Reply {
		if n := toolResults(req); n < len(cities) {
			return fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{{Name: "get_weather", Args: map[string]any{"city": cities[n]}}}}
		}
		return fakeollama.Reply{Content: []string{"notes: the client says it is sunny"}}
	}
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "non-stream", true: "stream"}[stream], func(t *testing.T) {
			u := newAgentUpstreams(t, script)
			srv := agentProxy(t, u, "", store.NewMemory(0, 10))
			client, tap := tappedClient(srv.URL)
			req := goopenai.ChatCompletionRequest{Model: "chain/reflexive", Functions: []goopenai.FunctionDefinition{weatherFunction},
				Messages: []goopenai.ChatCompletionMessage{{Role: goopenai.ChatMessageRoleUser, Content: "weather: what is the weather in Paris and Lyon?"}}}
			for trip, city := range cities {
				msg, finish := legacyRoundTrip(t, client, req, stream)
				if finish != goopenai.FinishReasonFunctionCall || msg.FunctionCall == nil || msg.FunctionCall.Arguments != `{"city":"`+city+`"}` || len(msg.ToolCalls) != 0 {
					t.Fatalf("answer %d = %+v (finish %q), want a function_call of get_weather for %s", trip, msg, finish, city)
				}
				tr := tap.trace(t, stream)
				if st := tr.Stages[0]; st.Node != "OL1" || st.Status != chain.StageAwaitingClient || len(st.Calls) != trip+1 {
					t.Fatalf("trace %d: OL1 %s after %d calls, want it awaiting the client after %d", trip, st.Status, len(st.Calls), trip+1)
				}
				if r := strings.Join(tr.Reasons, "|"); trip > 0 && !strings.Contains(r, "resumed in stage OL1") {
					t.Errorf("reasons %q: the chain started over instead of resuming", tr.Reasons)
				}
				req.Messages = append(req.Messages, msg, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleFunction, Name: "get_weather", Content: "sunny in " + city})
			}
			msg, finish := legacyRoundTrip(t, client, req, stream)
			if finish != goopenai.FinishReasonStop || msg.Content != "It is sunny in Paris." {
				t.Errorf("last answer = %+v (finish %q), want M2's answer", msg, finish)
			}
			tr := tap.trace(t, stream)
			if r := strings.Join(tr.Reasons, "|"); !strings.Contains(r, "resumed in stage OL1") {
				t.Errorf("reasons %q: the chain started over instead of resuming", tr.Reasons)
			}
			ol1 := tr.Stages[0]
			var got []string
			for _, u := range ol1.ToolsUsed {
				got = append(got, u.Status+":"+u.Result)
			}
			if strings.Join(got, "|") != "ok:sunny in Paris|ok:sunny in Lyon" || len(ol1.Calls) != 3 || ol1.Status != "ok" {
				t.Errorf("OL1 = %s, %q in %d calls; want the resumed stage: both results in its 3 calls", ol1.Status, got, len(ol1.Calls))
			}
			if n := len(u.ol1.Requests()); n != 3 {
				t.Errorf("OL1 got %d requests, want 3: two calls, then the turn after the results", n)
			}
		})
	}
}

// TestChatLegacyFunctionsOtherConversation: a legacy call's ID depends on
// the conversation before it, so a chain paused in one conversation is not
// resumed by another that shares its conversation key (the same user field)
// and has a function result at the same place.
func TestChatLegacyFunctionsOtherConversation(t *testing.T) {
	u := newAgentUpstreams(t, weatherOnce)
	srv := agentProxy(t, u, "", store.NewMemory(0, 10))
	client, tap := tappedClient(srv.URL)
	req := goopenai.ChatCompletionRequest{Model: "chain/reflexive", User: "alice", Functions: []goopenai.FunctionDefinition{weatherFunction},
		Messages: []goopenai.ChatCompletionMessage{{Role: goopenai.ChatMessageRoleUser, Content: "weather: what is the weather in Paris?"}}}
	if _, finish := legacyRoundTrip(t, client, req, false); finish != goopenai.FinishReasonFunctionCall {
		t.Fatalf("first answer: finish %q, want the chain waiting for the client", finish)
	}
	req.Messages = []goopenai.ChatCompletionMessage{
		{Role: goopenai.ChatMessageRoleUser, Content: "weather: and in Rome?"},
		{Role: goopenai.ChatMessageRoleAssistant, FunctionCall: &goopenai.FunctionCall{Name: "get_weather", Arguments: `{"city":"Rome"}`}},
		{Role: goopenai.ChatMessageRoleFunction, Name: "get_weather", Content: "rain"},
	}
	legacyRoundTrip(t, client, req, false)
	if r := strings.Join(tap.trace(t, false).Reasons, "|"); strings.Contains(r, "resumed") {
		t.Errorf("reasons %q: another conversation's chain was resumed", r)
	}
}

// traceTap keeps the body of the last answer a client read.
type traceTap struct {
	mu   sync.Mutex
	body []byte
}

func (tt *traceTap) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	tt.mu.Lock()
	tt.body = b
	tt.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, err
}

// trace is the chain trace of the last answer, whole or streamed.
func (tt *traceTap) trace(t *testing.T, stream bool) chain.Trace {
	t.Helper()
	tt.mu.Lock()
	body := tt.body
	tt.mu.Unlock()
	if stream {
		for _, f := range sseFrames(t, body) {
			if data, ok := strings.CutPrefix(f, "data: "); ok && strings.Contains(data, `"chain":`) {
				body = []byte(data)
			}
		}
	}
	var out struct {
		Chain *chain.Trace `json:"chain"`
	}
	if err := json.Unmarshal(body, &out); err != nil || out.Chain == nil {
		t.Fatalf("no trace in %s: %v", body, err)
	}
	return *out.Chain
}

// tappedClient is a go-openai client of the proxy at url whose answers'
// bodies the returned tap keeps, for their chain trace.
func tappedClient(url string) (*goopenai.Client, *traceTap) {
	tap := &traceTap{}
	cc := goopenai.DefaultConfig("unused")
	cc.BaseURL = url + "/v1"
	cc.HTTPClient = &http.Client{Transport: tap}
	return goopenai.NewClientWithConfig(cc), tap
}
