package web

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"chainproxy/config"
)

// FuzzDecodeResponsesRequest: whatever a client sends to /v1/responses,
// decoding fails with a badRequest (a 400 with a message) or yields a
// request within the limits whose messages the chain takes.
func FuzzDecodeResponsesRequest(f *testing.F) {
	f.Add([]byte(`{"model":"chain/auto","input":"hi"}`))
	f.Add([]byte(`{"model":"x","instructions":"be brief","input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"a"}]},{"role":"user","content":"b"}],"stream":true,"store":false}`))
	f.Add([]byte(`{"model":"x","input":[{"role":"user","content":"w?"},{"type":"reasoning","id":"r","summary":[]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"r"}],"tools":[{"type":"function","name":"f","parameters":{"type":"object"}},{"type":"web_search"},{"type":"namespace","name":"n","tools":[]}],"tool_choice":{"type":"function","name":"f"}}`))
	f.Add([]byte(`{"model":"x","previous_response_id":"resp_1","input":[],"max_output_tokens":5,"temperature":0.5,"top_p":1,"reasoning":{"effort":"low","summary":"auto"},"include":["reasoning.encrypted_content"]}`))
	f.Add([]byte(`{"model":"x","input":[{"type":"item_reference","id":"i"}]}`))
	f.Add([]byte(`{"model":"x","input":[{"role":"user","content":[{"type":"input_text","text":"what?"},{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"},{"type":"input_image","image_url":"https://x/a.png"},{"type":"input_file","file_data":"data:application/pdf;base64,JVBERi0=","filename":"a.pdf"},{"type":"input_file","file_id":"file-1"}]}]}`))
	f.Add([]byte(`{"model":`))
	const maxMsgs = 2
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeResponsesRequest(body)
		if err == nil {
			err = checkResponsesLimits(req, maxMsgs)
		}
		if err != nil {
			var br *badRequest
			if !errors.As(err, &br) || br.msg == "" {
				t.Fatalf("decode error %T %v is not a badRequest with a message", err, err)
			}
			return
		}
		if req.Model == "" || len(req.items) == 0 && req.PreviousResponseID == "" {
			t.Fatalf("accepted a request without model or input: %s", body)
		}
		if len(req.items) > maxMsgs || len(req.Tools) > maxTools || len(req.PreviousResponseID) > maxIDBytes {
			t.Fatalf("accepted a request beyond the limits: %s", body)
		}
		rr := req.toRunRequest(nil)
		for i, m := range rr.Messages {
			if !validRoles[m.Role] {
				t.Fatalf("message %d has role %q", i, m.Role)
			}
			if m.Role == "tool" && m.ToolCallID == "" {
				t.Fatalf("tool message %d without a call id", i)
			}
		}
		if _, err := json.Marshal(rr); err != nil {
			t.Fatalf("run request does not encode: %v", err)
		}
	})
}

// FuzzDecodeOllamaRequest: the same for /api/chat and /api/generate.
func FuzzDecodeOllamaRequest(f *testing.F) {
	f.Add([]byte(`{"model":"chain/auto","messages":[{"role":"user","content":"hi"}]}`), false)
	f.Add([]byte(`{"model":"x","stream":false,"think":"high","keep_alive":"5m","options":{"temperature":0.2,"num_predict":9,"stop":["a"],"seed":1,"num_ctx":4096},"format":"json","messages":[{"role":"USER","content":"a"},{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":{"b":1,"a":2}}}]},{"role":"tool","tool_name":"f","content":"r"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`), false)
	f.Add([]byte(`{"model":"x","prompt":"p","system":"s","think":false}`), true)
	f.Add([]byte(`{"model":"x","messages":[{"role":"user","content":"what?","images":["iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg=="]}]}`), false)
	f.Add([]byte(`{"model":"x","prompt":"what?","images":["iVBORw0KGgo=","data:image/png;base64,iVBORw0KGgo="]}`), true)
	f.Add([]byte(`{"model":"x","messages":[{"role":"user","content":"a","images":["aGk="]}]}`), false)
	f.Add([]byte(`{"model":"x","keep_alive":-1,"options":{"temperature":"x"}}`), false)
	const maxMsgs = 2
	f.Fuzz(func(t *testing.T, body []byte, generate bool) {
		req, err := decodeOllamaRequest(body, generate)
		if err == nil {
			err = checkOllamaLimits(req, maxMsgs)
		}
		if err != nil {
			var br *badRequest
			if !errors.As(err, &br) || br.msg == "" {
				t.Fatalf("decode error %T %v is not a badRequest with a message", err, err)
			}
			return
		}
		if req.Model == "" || len(req.Messages) > maxMsgs || len(req.Tools) > maxTools || len(req.params.Stop) > maxStops {
			t.Fatalf("accepted a request beyond the limits: %s", body)
		}
		rr := req.toRunRequest()
		for i, m := range rr.Messages {
			if !ollamaRoles[m.Role] {
				t.Fatalf("message %d has role %q", i, m.Role)
			}
			if m.Role == "tool" && m.ToolCallID == "" {
				t.Fatalf("tool message %d without a call id", i)
			}
			for _, c := range m.ToolCalls {
				if !json.Valid([]byte(c.Arguments)) {
					t.Fatalf("call arguments %q are not JSON", c.Arguments)
				}
			}
		}
	})
}

// TestFrontsHostileBodies: bodies built to hurt each front get a 400 in
// that front's own error shape, and the server keeps serving.
func TestFrontsHostileBodies(t *testing.T) {
	s := newTestServer(t, testConfig, func(c *config.Config) { c.Server.MaxMessages = 50 })
	deep := strings.Repeat("[", 1000) + strings.Repeat("]", 1000)
	for _, tc := range []struct {
		path, body string
		ollama     bool
	}{
		{"/v1/messages", `{"model":"chain/auto","messages":` + deep + `}`, false},
		{"/v1/messages", `{"model":"chain/auto","messages":[` + strings.Repeat(`{"role":"user","content":"a"},`, 60) + `{"role":"user","content":"a"}]}`, false},
		{"/v1/messages", `{"model":"chain/auto","messages":[{"role":"user","content":"a"}],"tools":[` + strings.Repeat(`{"type":"bash_1"},`, 129) + `{"type":"bash_1"}]}`, false},
		{"/v1/messages", "{\"model\":\"chain/auto\",\"messages\":\"\xff\xfe\"", false},
		{"/v1/messages", `{"model":"chain/auto","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":` + deep + `}]}]}`, false},
		{"/v1/messages/count_tokens", `{"model":"chain/auto","system":{"a":1},"messages":[{"role":"user","content":"a"}]}`, false},
		{"/v1/responses", `{"model":"chain/auto","input":` + deep + `}`, false},
		{"/v1/responses", `{"model":"chain/auto","input":[` + strings.Repeat(`{"role":"user","content":"a"},`, 60) + `{"role":"user","content":"a"}]}`, false},
		{"/v1/responses", `{"model":"chain/auto","input":"hi","tools":[` + strings.Repeat(`{"type":"web_search"},`, 129) + `{"type":"web_search"}]}`, false},
		{"/v1/responses", "{\"model\":\"chain/auto\",\"input\":\"\xff\xfe\"", false},
		{"/api/chat", `{"model":"chain/auto","messages":` + deep + `}`, true},
		{"/api/chat", `{"model":"chain/auto","messages":[` + strings.Repeat(`{"role":"user","content":"a"},`, 60) + `{"role":"user","content":"a"}]}`, true},
		{"/api/generate", `{"model":"chain/auto","prompt":{"x":1}}`, true},
		{"/api/show", `[`, true},
		{"/api/pull", `{"model":7}`, true},
	} {
		resp := s.post(t, tc.path, tc.body)
		b := readAll(t, resp.Body)
		if resp.StatusCode != 400 {
			t.Errorf("%s %.60s: %d %s, want 400", tc.path, tc.body, resp.StatusCode, b)
			continue
		}
		var shape map[string]any
		if err := json.Unmarshal(b, &shape); err != nil {
			t.Errorf("%s: error body %s is not JSON", tc.path, b)
			continue
		}
		_, isString := shape["error"].(string)
		if isString != tc.ollama {
			t.Errorf("%s: error body %s is not in the front's shape", tc.path, b)
		}
		if anthropicPath(tc.path) {
			if e, _ := shape["error"].(map[string]any); shape["type"] != "error" || e["type"] != "invalid_request_error" {
				t.Errorf("%s: error body %s is not in Anthropic's shape", tc.path, b)
			}
		}
	}
	if resp := s.post(t, "/api/chat", `{"model":"chain/simple","stream":false,"messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != 200 {
		t.Errorf("after the hostile bodies: %d", resp.StatusCode)
	}
}

// FuzzDecodeMessagesRequest: the same for /v1/messages: a badRequest, or
// a request within the limits whose messages the chain takes, with the
// system text first and every tool call's arguments a JSON object.
func FuzzDecodeMessagesRequest(f *testing.F) {
	f.Add([]byte(`{"model":"chain/auto","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"model":"x","system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{}}]},{"role":"system","content":"env"}],"thinking":{"type":"adaptive","display":"omitted"},"metadata":{"user_id":"u"},"stream":true}`))
	f.Add([]byte(`{"model":"x","messages":[{"role":"user","content":"w?"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"t1","name":"f","input":{"a":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"r"}],"is_error":true}]}],"tools":[{"name":"f","input_schema":{"type":"object"}},{"type":"web_search_20250305","name":"web_search"},{"name":"d","input_schema":{},"defer_loading":true}],"tool_choice":{"type":"tool","name":"f"},"stop_sequences":["x"],"temperature":0.5,"top_p":1,"top_k":5}`))
	f.Add([]byte(`{"model":"x","messages":[{"role":"user","content":[{"type":"tool_result","content":"x"}]}],"thinking":{"type":"enabled","budget_tokens":0}}`))
	f.Add([]byte(`{"model":`))
	const maxMsgs = 2
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeMessagesRequest(body)
		if err == nil {
			err = checkMessagesLimits(req, maxMsgs)
		}
		if err != nil {
			var br *badRequest
			if !errors.As(err, &br) || br.msg == "" {
				t.Fatalf("decode error %T %v is not a badRequest with a message", err, err)
			}
			return
		}
		if req.Model == "" || len(req.Messages) == 0 || len(req.Messages) > maxMsgs || len(req.Tools) > maxTools || len(req.StopSequences) > maxStops {
			t.Fatalf("accepted a request beyond the limits: %s", body)
		}
		rr := req.toRunRequest()
		for i, m := range rr.Messages {
			if !validRoles[m.Role] || m.Role == "system" && i > 0 {
				t.Fatalf("message %d has role %q", i, m.Role)
			}
			if m.Role == "tool" && m.ToolCallID == "" {
				t.Fatalf("tool message %d without a call id", i)
			}
			for _, c := range m.ToolCalls {
				if a := strings.TrimSpace(c.Arguments); !json.Valid([]byte(a)) || a[0] != '{' {
					t.Fatalf("call arguments %q are not a JSON object", c.Arguments)
				}
			}
		}
		if _, err := json.Marshal(rr); err != nil {
			t.Fatalf("run request does not encode: %v", err)
		}
	})
}
