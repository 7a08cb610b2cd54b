package web

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzDecodeChatRequest: whatever a client sends, decoding either fails
// with a badRequest (a 400 with a message) or yields a request the chain can
// run: a model, at least one message, valid roles.
func FuzzDecodeChatRequest(f *testing.F) {
	f.Add([]byte(`{"model":"chain/auto","messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"model":"OL1","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":[{"type":"text","text":"a"}]},{"role":"user","content":"b"}]}`))
	f.Add([]byte(`{"model":"x","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"r"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`))
	f.Add([]byte(`{"model":"x","messages":[{"role":"user","content":null}],"stop":["a","b"],"temperature":0.2,"top_p":1,"seed":3,"n":1}`))
	f.Add([]byte(`{"model":`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeChatRequest(body)
		if err != nil {
			var br *badRequest
			if !errors.As(err, &br) || br.msg == "" {
				t.Fatalf("decode error %T %v is not a badRequest with a message", err, err)
			}
			return
		}
		if req.Model == "" || len(req.Messages) == 0 {
			t.Fatalf("accepted a request without model or messages: %s", body)
		}
		rr := req.toRunRequest()
		for i, m := range rr.Messages {
			if !validRoles[m.Role] {
				t.Fatalf("message %d has role %q", i, m.Role)
			}
		}
		if _, err := json.Marshal(rr); err != nil {
			t.Fatalf("run request does not encode: %v", err)
		}
	})
}

// FuzzAppendJSONString: the fast content framing encodes exactly as
// encoding/json does, so the chunks it writes are the chunks json.Marshal
// would write.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "hello", "a\"b\\c", "<script>&", "\n\r\t\x00\x1f", "é😀", "\xff\xfe", "\u2028\u2029"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); string(got) != string(want) {
			t.Errorf("appendJSONString(%q) = %s, want %s", s, got, want)
		}
	})
}

func TestContentFrame(t *testing.T) {
	prefix, suffix := contentFrame("chatcmpl-1", "m\"x", 42)
	got := string(prefix) + `"hi"` + string(suffix)
	want, _ := json.Marshal(newChunk("chatcmpl-1", "m\"x", 42, delta{Content: strptr("hi")}, nil))
	if got != string(want) {
		t.Errorf("frame = %s, want %s", got, want)
	}
}
