package ollama

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// bodyTransport answers every request with a fixed NDJSON body, so the
// fuzzer feeds the stream reader directly, with no server.
type bodyTransport []byte

func (b bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: 200, Header: http.Header{"Content-Type": {"application/x-ndjson"}},
		Body: io.NopCloser(bytes.NewReader(b)), Request: r,
	}, nil
}

// FuzzChatNDJSON: whatever an upstream streams, Chat returns an error or a
// complete answer (one with a finish reason), and never panics.
func FuzzChatNDJSON(f *testing.F) {
	f.Add([]byte(`{"message":{"role":"assistant","content":"hi"},"done":false}` + "\n" + `{"done":true,"done_reason":"stop","eval_count":1}` + "\n"))
	f.Add([]byte(`{"message":{"role":"assistant","content":"<think>x</th"},"done":false}` + "\n" + `{"message":{"content":"ink>y"},"done":true}` + "\n"))
	f.Add([]byte(`{"message":{"tool_calls":[{"function":{"name":"list_dir","arguments":{"path":"."}}}]},"done":true}` + "\n"))
	f.Add([]byte(`{"error":"boom"}` + "\n"))
	f.Add([]byte(`{"message":{"content":"cut`))
	f.Fuzz(func(t *testing.T, body []byte) {
		b := New(nodeAt("http://127.0.0.1:1"), &http.Client{Transport: bodyTransport(body)})
		res, err := collect(t.Context(), b, userRequest("hi"))
		if err != nil {
			return
		}
		if res.finish == "" {
			t.Errorf("Chat succeeded without a finish reason on %q", body)
		}
	})
}

// FuzzInlineRefs: whatever schema a tool server publishes, inlining its
// references ends (a type that holds itself included), never panics, and
// gives valid JSON for valid JSON.
func FuzzInlineRefs(f *testing.F) {
	f.Add([]byte(pydanticPerson))
	f.Add([]byte(`{"$defs":{"N":{"properties":{"c":{"$ref":"#/$defs/N"}}}},"properties":{"r":{"$ref":"#/$defs/N"}}}`))
	f.Add([]byte(`{"definitions":{"A":{"$ref":"#/definitions/B"},"B":{"$ref":"#/definitions/A"}},"$ref":"#/definitions/A"}`))
	f.Add([]byte(`{"$ref":1}`))
	f.Fuzz(func(t *testing.T, schema []byte) {
		out := inlineRefs(schema)
		if json.Valid(schema) && !json.Valid(out) {
			t.Errorf("inlineRefs(%s) = %s: not JSON", schema, out)
		}
	})
}
