package oaischema

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// recorder is a testing.TB that records failures instead of failing, so a
// test can check that Validate does fail.
type recorder struct {
	testing.TB
	errors []string
	fatal  string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// Fatalf records and then stops the calling goroutine, as the real one does;
// callers run Validate on their own goroutine through run.
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	panic(errFatal)
}

var errFatal = errors.New("fatal")

// run calls Validate with a recorder and returns it once Validate is done.
func run(t *testing.T, schema string, body string) *recorder {
	t.Helper()
	r := &recorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != nil && p != errFatal {
				panic(p)
			}
		}()
		Validate(r, schema, []byte(body))
	}()
	return r
}

const validCompletion = `{
  "id": "chatcmpl-123",
  "object": "chat.completion",
  "created": 1741570283,
  "model": "chain/auto",
  "choices": [{
    "index": 0,
    "message": {"role": "assistant", "content": "Hello.", "refusal": null, "reasoning_content": "hidden"},
    "logprobs": null,
    "finish_reason": "stop"
  }],
  "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
  "chain": {"mode": "reflexive", "reasons": ["keyword: compare"], "stages": []}
}`

const validToolCalls = `{
  "id": "chatcmpl-124",
  "object": "chat.completion",
  "created": 1741570283,
  "model": "OL1",
  "choices": [{
    "index": 0,
    "message": {
      "role": "assistant", "content": null, "refusal": null,
      "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": "list_dir", "arguments": "{\"path\":\".\"}"}}]
    },
    "logprobs": null,
    "finish_reason": "tool_calls"
  }]
}`

func TestValidatePasses(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		body   string
	}{
		{"chat completion", "CreateChatCompletionResponse", validCompletion},
		{"chat completion with tool calls", "CreateChatCompletionResponse", validToolCalls},
		{"first stream chunk", "CreateChatCompletionStreamResponse", `{
			"id": "chatcmpl-123", "object": "chat.completion.chunk", "created": 1741570283, "model": "chain/auto",
			"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null}]}`},
		{"content chunk", "CreateChatCompletionStreamResponse", `{
			"id": "chatcmpl-123", "object": "chat.completion.chunk", "created": 1741570283, "model": "chain/auto",
			"choices": [{"index": 0, "delta": {"content": "Hel", "reasoning_content": "r"}, "finish_reason": null}]}`},
		{"tool call delta", "CreateChatCompletionStreamResponse", `{
			"id": "chatcmpl-123", "object": "chat.completion.chunk", "created": 1741570283, "model": "OL1",
			"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_0", "type": "function", "function": {"name": "list_dir", "arguments": ""}}]}, "finish_reason": null}]}`},
		{"final chunk with usage null and chain", "CreateChatCompletionStreamResponse", `{
			"id": "chatcmpl-123", "object": "chat.completion.chunk", "created": 1741570283, "model": "chain/auto",
			"choices": [{"index": 0, "delta": {}, "logprobs": null, "finish_reason": "stop"}], "usage": null,
			"chain": {"mode": "simple"}}`},
		{"usage chunk with empty choices", "CreateChatCompletionStreamResponse", `{
			"id": "chatcmpl-123", "object": "chat.completion.chunk", "created": 1741570283, "model": "chain/auto",
			"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}}`},
		{"error", "ErrorResponse", `{"error": {"message": "messages: must not be empty", "type": "invalid_request_error", "param": "messages", "code": null}}`},
		{"error with code", "ErrorResponse", `{"error": {"message": "model \"x\" does not exist", "type": "invalid_request_error", "param": null, "code": "model_not_found"}}`},
		{"models", "ListModelsResponse", `{"object": "list", "data": [
			{"id": "chain/auto", "object": "model", "created": 1741570283, "owned_by": "chainproxy"},
			{"id": "OL1", "object": "model", "created": 1741570283, "owned_by": "ollama"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // Validate is called from parallel tests; -race checks the cache
			r := run(t, tt.schema, tt.body)
			if len(r.errors) > 0 || r.fatal != "" {
				t.Errorf("Validate(%s) failed, want it to pass:\n%s%s", tt.schema, strings.Join(r.errors, "\n"), r.fatal)
			}
		})
	}
}

func TestValidateFails(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		body   string
		want   []string // substrings of the reported failure
	}{
		{"missing choices and wrong object", "CreateChatCompletionResponse",
			`{"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m"}`,
			[]string{"choices", "chat.completion"}},
		{"refusal missing", "CreateChatCompletionResponse",
			strings.Replace(validCompletion, `, "refusal": null`, "", 1), []string{"refusal"}},
		{"logprobs missing", "CreateChatCompletionResponse",
			strings.Replace(validCompletion, `"logprobs": null,`, "", 1), []string{"logprobs"}},
		{"unknown finish_reason", "CreateChatCompletionResponse",
			strings.Replace(validCompletion, `"stop"`, `"done"`, 1), []string{"finish_reason"}},
		{"chunk without finish_reason", "CreateChatCompletionStreamResponse", `{
			"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
			"choices": [{"index": 0, "delta": {"content": "x"}}]}`, []string{"finish_reason"}},
		{"chunk finish_reason not a string", "CreateChatCompletionStreamResponse", `{
			"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
			"choices": [{"index": 0, "delta": {}, "finish_reason": 5}]}`, []string{"finish_reason"}},
		{"error without param", "ErrorResponse", `{"error": {"message": "m", "type": "t", "code": null}}`, []string{"param"}},
		{"not JSON", "ErrorResponse", `{"error":`, []string{"invalid JSON"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, tt.schema, tt.body)
			if len(r.errors) == 0 {
				if r.fatal != "" {
					t.Fatalf("Validate(%s) was fatal: %s; want a validation error", tt.schema, r.fatal)
				}
				t.Fatalf("Validate(%s) passed, want a failure", tt.schema)
			}
			// Only the report, not the body that Validate echoes after it.
			got, _, _ := strings.Cut(strings.Join(r.errors, "\n"), "\nbody: ")
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("Validate(%s) reported %q, want it to mention %q", tt.schema, got, w)
				}
			}
		})
	}
}

func TestValidateUnknownSchemaIsFatal(t *testing.T) {
	r := run(t, "NoSuchSchema", `{}`)
	if !strings.Contains(r.fatal, `unknown schema "NoSuchSchema"`) {
		t.Errorf("Validate(NoSuchSchema) fatal = %q, want an unknown schema message", r.fatal)
	}
}

func TestCheckReturnsValidationError(t *testing.T) {
	err := Check("ErrorResponse", []byte(`{}`))
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("Check(ErrorResponse, {}) = %v, want a *jsonschema.ValidationError", err)
	}
}

func TestSpecUsesNullable(t *testing.T) {
	// Guards the reason rewriteNullable exists: if a new spec drops the 3.0
	// keyword from these schemas, this test says the rewrite may go.
	if got := strings.Count(string(spec), "nullable: true"); got == 0 {
		t.Errorf("spec has %d nullable: true, want some (else drop rewriteNullable)", got)
	}
}

func TestRewriteNullable(t *testing.T) {
	null := map[string]any{"type": "null"}
	tests := []struct {
		name string
		in   string
		want any
	}{
		{"typed", `{"type": "string", "nullable": true}`,
			map[string]any{"anyOf": []any{map[string]any{"type": "string"}, null}}},
		{"enum", `{"type": "string", "enum": ["stop"], "nullable": true}`,
			map[string]any{"anyOf": []any{map[string]any{"type": "string", "enum": []any{"stop"}}, null}}},
		{"ref sibling", `{"$ref": "#/components/schemas/U", "nullable": true, "description": "d"}`,
			map[string]any{"anyOf": []any{map[string]any{"$ref": "#/components/schemas/U", "description": "d"}, null}}},
		{"allOf marker", `{"allOf": [{"$ref": "#/components/schemas/T"}, {"nullable": true}]}`,
			map[string]any{"anyOf": []any{map[string]any{"allOf": []any{map[string]any{"$ref": "#/components/schemas/T"}}}, null}}},
		{"false dropped", `{"type": "integer", "nullable": false}`, map[string]any{"type": "integer"}},
		{"nested property and items", `{"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer", "nullable": true}}}}`,
			map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{
				"type": "array", "items": map[string]any{"anyOf": []any{map[string]any{"type": "integer"}, null}}}}}},
		{"property named nullable untouched", `{"properties": {"nullable": {"type": "boolean"}}}`,
			map[string]any{"properties": map[string]any{"nullable": map[string]any{"type": "boolean"}}}},
		{"data untouched", `{"example": {"nullable": true}, "default": {"nullable": true}, "x-oaiMeta": {"nullable": true}}`,
			map[string]any{"example": map[string]any{"nullable": true}, "default": map[string]any{"nullable": true}, "x-oaiMeta": map[string]any{"nullable": true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in any
			if err := json.Unmarshal([]byte(tt.in), &in); err != nil {
				t.Fatal(err)
			}
			got := rewriteNullable(in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("rewriteNullable(%s) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func BenchmarkValidateChunk(b *testing.B) {
	body := []byte(`{"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
		"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": null}]}`)
	if err := Check("CreateChatCompletionStreamResponse", body); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := Check("CreateChatCompletionStreamResponse", body); err != nil {
			b.Fatal(err)
		}
	}
}
