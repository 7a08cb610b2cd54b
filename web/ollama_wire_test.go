package web

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"

	"chainproxy/config"
	"chainproxy/internal/fakeollama"
	"chainproxy/internal/fakeopenai"
)

// TestOllamaToolCallArguments: a tool call the chain hands to an Ollama
// client has its arguments as an object, whatever the node wrote. Ollama's
// clients decode them into a map: the Go client's
// api.ToolCallFunctionArguments.UnmarshalJSON (ollama/ollama v0.17.4,
// api/types.go) into an ordered map, ollama-python's Message.ToolCall
// into Mapping[str, Any] (ollama/_types.py); a string, an array or null
// made the whole answer fail to decode. Some OpenAI-compatible servers
// send "" for a call of a tool without parameters (sigoden/aichat#1217),
// and a call cut at the token limit is not JSON.
func TestOllamaToolCallArguments(t *testing.T) {
	var tools api.Tools
	if err := json.Unmarshal([]byte(`[{"type":"function","function":{"name":"get_time","description":"The time now","parameters":{"type":"object","properties":{"zone":{"type":"string"}}}}}]`), &tools); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, args string
		want       string // the arguments the client decodes, as JSON
	}{
		{"object", `{"zone":"UTC"}`, `{"zone":"UTC"}`},
		{"empty", ``, `{}`},
		{"cut", `{"zone": "UT`, `{}`},
		{"null", `null`, `{}`},
		{"array", `[]`, `{}`},
		{"string", `"UTC"`, `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := fakeopenai.New(t, fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{{Name: "get_time", Arguments: tc.args}}})
			_, srv := wireProxy(t, []config.Node{openaiNode("A", up.BaseURL())}, oneStage)
			for _, stream := range []bool{true, false} {
				var calls []api.ToolCall
				err := ollamaClient(t, srv.URL).Chat(context.Background(), &api.ChatRequest{Model: "A", Stream: &stream, Tools: tools,
					Messages: []api.Message{{Role: "user", Content: "What time is it?"}}},
					func(r api.ChatResponse) error { calls = append(calls, r.Message.ToolCalls...); return nil })
				if err != nil {
					t.Fatalf("stream %v: %v", stream, err)
				}
				if len(calls) != 1 || calls[0].Function.Name != "get_time" {
					t.Fatalf("stream %v: calls %+v", stream, calls)
				}
				if got, _ := json.Marshal(calls[0].Function.Arguments); string(got) != tc.want {
					t.Errorf("stream %v: arguments %s, want %s", stream, got, tc.want)
				}
			}
		})
	}
}

// TestOllamaLoadUnload: a request with nothing to answer is a load, or an
// unload with keep_alive 0, answered at once with the done_reason Ollama
// gives (server/routes.go v0.17.4, GenerateHandler and ChatHandler: an
// unload when keep_alive is 0 and there is no prompt, or no messages; a
// load otherwise). `ollama stop` sends the unload to /api/generate (cmd/
// cmd.go StopHandler), and scripts that free a model check done_reason
// "unload". /api/generate decides on the prompt alone: a system prompt or
// images without a prompt are a load too, not a question for the chain.
func TestOllamaLoadUnload(t *testing.T) {
	s := newTestServer(t, testConfig)
	for _, tc := range []struct {
		name, path, body string
		want             string
	}{
		{"generate unload", "/api/generate", `{"model":"chain/auto","keep_alive":0}`, "unload"},
		{"generate unload empty prompt", "/api/generate", `{"model":"chain/auto","prompt":"","keep_alive":0,"stream":false}`, "unload"},
		{"generate unload duration", "/api/generate", `{"model":"M1:latest","keep_alive":"0s"}`, "unload"},
		{"chat unload", "/api/chat", `{"model":"chain/auto","messages":[],"keep_alive":0}`, "unload"},
		{"chat unload no messages", "/api/chat", `{"model":"OL1","keep_alive":"0"}`, "unload"},
		{"generate load", "/api/generate", `{"model":"chain/auto"}`, "load"},
		{"generate load keep", "/api/generate", `{"model":"chain/auto","keep_alive":"30m"}`, "load"},
		{"generate load system", "/api/generate", `{"model":"chain/simple","system":"be brief"}`, "load"},
		{"generate unload system", "/api/generate", `{"model":"chain/simple","system":"be brief","keep_alive":0}`, "unload"},
		{"generate load images", "/api/generate", `{"model":"chain/simple","images":["aGk="]}`, "load"},
		{"chat load", "/api/chat", `{"model":"chain/reflexive","messages":[]}`, "load"},
		{"chat load keep forever", "/api/chat", `{"model":"chain/reflexive","keep_alive":-1}`, "load"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := s.post(t, tc.path, tc.body)
			b := readAll(t, resp.Body)
			var got struct {
				api.ChatResponse
				Response *string `json:"response"`
			}
			if resp.StatusCode != 200 || json.Unmarshal(b, &got) != nil {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			if !got.Done || got.DoneReason != tc.want || strings.Contains(string(b), `"chain"`) {
				t.Errorf("%s, want done_reason %q and no run", b, tc.want)
			}
			if generate := tc.path == "/api/generate"; generate != (got.Response != nil) || !generate && got.Message.Role != "assistant" {
				t.Errorf("%s: not the shape of %s's answer", b, tc.path)
			}
		})
	}
	// The Go client, as `ollama stop` sends it.
	var last api.GenerateResponse
	err := ollamaClient(t, s.URL).Generate(context.Background(), &api.GenerateRequest{Model: "chain/auto", KeepAlive: &api.Duration{}},
		func(r api.GenerateResponse) error { last = r; return nil })
	if err != nil || last.DoneReason != "unload" || last.Model != "chain/auto" {
		t.Errorf("ollama stop: %v %+v", err, last)
	}
}

// TestOllamaTopK: options.top_k reaches an Ollama node as it does from
// Anthropic's top_k. Open WebUI sends it in options when a model's
// parameters set it (backend/open_webui/utils/payload.py,
// apply_model_params_to_body_ollama), and Continue from its completion
// options; Ollama's Options takes it as an integer (api/types.go
// FromMap).
func TestOllamaTopK(t *testing.T) {
	up := fakeollama.New(t)
	_, srv := wireProxy(t, []config.Node{ollamaNode("A", up.URL)}, oneStage)
	err := ollamaClient(t, srv.URL).Chat(context.Background(), &api.ChatRequest{Model: "A",
		Options:  map[string]any{"top_k": 40, "temperature": 0.8, "num_ctx": 8192},
		Messages: []api.Message{{Role: "user", Content: "hi"}}}, func(api.ChatResponse) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	b := up.Bodies()
	if len(b) != 1 {
		t.Fatalf("node got %d requests", len(b))
	}
	opts, _ := b[0]["options"].(map[string]any)
	if opts["top_k"] != 40.0 || opts["temperature"] != 0.8 {
		t.Errorf("node's options = %v, want top_k 40 and temperature 0.8", opts)
	}
	resp, err := httpPost(srv.URL+"/api/chat", `{"model":"A","options":{"top_k":"many"},"messages":[{"role":"user","content":"hi"}]}`)
	if err != nil || resp.status != 400 || !strings.Contains(string(resp.body), "options.top_k") {
		t.Errorf("top_k \"many\": %d %s %v", resp.status, resp.body, err)
	}
}
