package web

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestChatRequestKeys: unmarshal decodes a request as encoding/json does,
// keys matched without regard to case. goccy/go-json does so only for a
// struct of at most 16 JSON fields (internal/decoder/struct.go,
// allowOptimizeMaxFieldLen; past it, decodeKey looks the key up as
// written), so chatRequest must stay within them: with a 17th,
// {"Messages": […]} decodes to no messages on the fast path and to the
// messages through encoding/json, which FuzzUnmarshalMatchesStd finds.
func TestChatRequestKeys(t *testing.T) {
	var n int
	rt := reflect.TypeFor[chatRequest]()
	for i := range rt.NumField() {
		if tag := rt.Field(i).Tag.Get("json"); tag != "" && tag != "-" {
			n++
		}
	}
	if n > 16 {
		t.Errorf("chatRequest has %d JSON fields, at most 16", n)
	}
	body := []byte(`{"Model":"m","MESSAGES":[{"role":"user","content":"hi"}],"Response_Format":{"type":"json_object"}}`)
	var std, got chatRequest
	if err := json.Unmarshal(body, &std); err != nil {
		t.Fatal(err)
	}
	if err := unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, std) || len(got.Messages) != 1 || len(got.ResponseFormat) == 0 {
		t.Errorf("unmarshal = %+v\nencoding/json = %+v", got, std)
	}
}

// TestChatMaxTokensParam: a token limit below 1 is refused on the field
// the client sent: max_completion_tokens, which the openai SDKs send for
// reasoning models and OpenAI's reference marks as replacing max_tokens
// (OpenAPI CreateChatCompletionRequest), or max_tokens.
func TestChatMaxTokensParam(t *testing.T) {
	for _, tc := range []struct{ field, param string }{
		{`"max_completion_tokens":0`, "max_completion_tokens"},
		{`"max_tokens":0`, "max_tokens"},
		{`"max_tokens":100,"max_completion_tokens":0`, "max_completion_tokens"},
	} {
		_, err := decodeChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],` + tc.field + `}`))
		br, ok := err.(*badRequest)
		if !ok || br.param != tc.param || !strings.HasPrefix(br.msg, tc.param+" ") {
			t.Errorf("%s: %v, want a bad request on %s", tc.field, err, tc.param)
		}
	}
}
