package web

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"chainproxy/config"
	"chainproxy/internal/fakeollama"
	"chainproxy/internal/fakeopenai"
	"chainproxy/internal/oaischema"
)

// chatPost posts body to /v1/chat/completions and returns the status and
// the answer, the content of a stream joined.
func chatPost(t *testing.T, url, body string) (int, []byte, string) {
	t.Helper()
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var out struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		_ = json.Unmarshal(raw, &out)
		if len(out.Choices) == 1 {
			return resp.StatusCode, raw, out.Choices[0].Message.Content
		}
		return resp.StatusCode, raw, ""
	}
	var content strings.Builder
	for _, f := range sseFrames(t, raw) {
		data, ok := strings.CutPrefix(f, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		oaischema.Validate(t, "CreateChatCompletionStreamResponse", []byte(data))
		var ch struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		for _, c := range ch.Choices {
			content.WriteString(c.Delta.Content)
		}
	}
	return resp.StatusCode, raw, content.String()
}

// equalJSON reports whether a and b are the same JSON value, members in
// any order ("" for none).
func equalJSON(t *testing.T, a, b string) bool {
	t.Helper()
	if a == "" || b == "" {
		return a == b
	}
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

// TestChatResponseFormat: response_format asks for structured output.
// openai-python's chat.completions.parse sends a Pydantic model as
// {"type": "json_schema", "json_schema": {"schema", "name", "strict":
// true}} (src/openai/lib/_parsing/_completions.py,
// type_to_response_format_param) and openai-node's parse the same
// (lib/parser.js), then both parse message.content as JSON; JSON mode is
// {"type": "json_object"} (OpenAPI ResponseFormatJsonObject). The
// answering node must get it, as Ollama's format (the schema, or "json")
// or an OpenAI-compatible server's response_format, streamed or not:
// ignored, a model answers in prose and the client's parse fails.
func TestChatResponseFormat(t *testing.T) {
	schema := `{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"],"additionalProperties":false}`
	for _, tc := range []struct {
		name, format string
		// ollama is the format an Ollama node gets, openai the
		// response_format an OpenAI-compatible one gets ("" for none).
		ollama, openai string
	}{
		{"json_schema", `{"type":"json_schema","json_schema":{"schema":` + schema + `,"name":"Answer","strict":true}}`,
			schema, `{"type":"json_schema","json_schema":{"name":"format","schema":` + schema + `}}`},
		{"json_object", `{"type":"json_object"}`, `"json"`, `{"type":"json_object"}`},
		{"text", `{"type":"text"}`, "", ""},
		{"null", `null`, "", ""},
	} {
		for _, stream := range []bool{false, true} {
			name := tc.name
			if stream {
				name += "/stream"
			}
			t.Run(name, func(t *testing.T) {
				fo := fakeollama.New(t, fakeollama.Reply{Content: []string{`{"answer":`, `"4"}`}})
				fa := fakeopenai.New(t, fakeopenai.Reply{Content: []string{`{"answer":`, `"4"}`}})
				_, srv := wireProxy(t, []config.Node{ollamaNode("A", fo.URL), openaiNode("B", fa.BaseURL())}, oneStage)
				for _, model := range []string{"A", "B"} {
					body := `{"model":"` + model + `","messages":[{"role":"user","content":"2+2?"}],"stream":` + map[bool]string{false: "false", true: "true"}[stream] + `,"response_format":` + tc.format + `}`
					status, raw, content := chatPost(t, srv.URL, body)
					if status != http.StatusOK {
						t.Fatalf("%s: status %d: %s", model, status, raw)
					}
					if content != `{"answer":"4"}` {
						t.Errorf("%s: content %q", model, content)
					}
				}
				if reqs := fo.Requests(); len(reqs) != 1 {
					t.Errorf("%d Ollama calls, want 1", len(reqs))
				} else if got := string(reqs[0].Format); !equalJSON(t, got, tc.ollama) {
					t.Errorf("the Ollama node got format %s, want %s", got, tc.ollama)
				}
				if bodies := fa.Bodies(); len(bodies) != 1 {
					t.Errorf("%d OpenAI calls, want 1", len(bodies))
				} else {
					var got string
					if rf, ok := bodies[0]["response_format"]; ok {
						b, _ := json.Marshal(rf)
						got = string(b)
					}
					if !equalJSON(t, got, tc.openai) {
						t.Errorf("the OpenAI node got response_format %s, want %s", got, tc.openai)
					}
				}
			})
		}
	}
}

// TestChatResponseFormatRefused: a response_format the proxy cannot
// honour is a 400 naming the field, as OpenAI's is, not an answer in
// prose the client then fails to parse.
func TestChatResponseFormatRefused(t *testing.T) {
	for _, tc := range []struct{ format, param string }{
		{`"json"`, "response_format"},
		{`{"type":"grammar","grammar":"root ::= x"}`, "response_format.type"},
		{`{"type":"json_schema"}`, "response_format.json_schema"},
		{`{"type":"json_schema","json_schema":{"schema":{"type":"object"}}}`, "response_format.json_schema.name"},
		{`{"type":"json_schema","json_schema":{"name":"x","schema":"{}"}}`, "response_format.json_schema.schema"},
	} {
		body := `{"model":"chain/auto","messages":[{"role":"user","content":"hi"}],"response_format":` + tc.format + `}`
		if _, err := decodeChatRequest([]byte(body)); err == nil {
			t.Errorf("%s: accepted", tc.format)
		} else if br, ok := err.(*badRequest); !ok || br.param != tc.param {
			t.Errorf("%s: %v, want a bad request on %s", tc.format, err, tc.param)
		}
	}
}

// TestChatResponseFormatDetails: with chain.render: details, the setting
// README suggests for Open WebUI, every answer opens with the stages'
// <details> blocks; an answer asked in JSON must be the JSON alone, or
// the client's parse (JSON.parse in openai-node's lib/parser.js) fails
// on the first "<". A plain answer keeps its blocks.
func TestChatResponseFormatDetails(t *testing.T) {
	for _, stream := range []bool{false, true} {
		f := fakeollama.New(t, fakeollama.Reply{Content: []string{`{"answer":"4"}`}})
		_, srv := wireProxy(t, []config.Node{ollamaNode("A", f.URL)}, oneStage+"  render: details\n")
		s := map[bool]string{false: "false", true: "true"}[stream]
		for _, tc := range []struct {
			format string
			json   bool
		}{
			{`{"type":"json_schema","json_schema":{"name":"Answer","schema":{"type":"object"}}}`, true},
			{`{"type":"json_object"}`, true},
			{`{"type":"text"}`, false},
		} {
			status, raw, content := chatPost(t, srv.URL, `{"model":"A","messages":[{"role":"user","content":"2+2?"}],"stream":`+s+`,"response_format":`+tc.format+`}`)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, raw)
			}
			if tc.json && content != `{"answer":"4"}` {
				t.Errorf("stream %v, %s: content %q, want the JSON alone", stream, tc.format, content)
			}
			if !tc.json && !strings.HasPrefix(content, "<details") {
				t.Errorf("stream %v, %s: content %q, want the details blocks", stream, tc.format, content)
			}
		}
	}
}
