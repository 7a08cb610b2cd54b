package web

import (
	"encoding/json"
	"errors"
	"reflect"
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

// FuzzUnmarshalMatchesStd: the fast decoder of requests accepts exactly
// what encoding/json accepts, with the same result.
func FuzzUnmarshalMatchesStd(f *testing.F) {
	f.Add([]byte(`{"model":"chain/auto","messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"model":"x","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":[{"type":"text","text":"r"}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"auto"}`))
	f.Add([]byte(`{"MODEL":"x","Messages":[],"stop":["a"],"temperature":1e400,"seed":-1,"n":1.5}`))
	f.Add([]byte("{\"model\":\"\xff\\ud800\",\"messages\":null}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		var std chatRequest
		stdErr := json.Unmarshal(body, &std)
		var got chatRequest
		err := unmarshal(body, &got)
		if (err == nil) != (stdErr == nil) {
			t.Fatalf("unmarshal error = %v, encoding/json's = %v", err, stdErr)
		}
		if err == nil && !reflect.DeepEqual(got, std) {
			t.Fatalf("unmarshal = %+v\nencoding/json = %+v", got, std)
		}
	})
}
