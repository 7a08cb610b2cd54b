package openai

import (
	"net/http"
	"strings"
	"testing"

	gojson "github.com/goccy/go-json"
	"github.com/google/go-cmp/cmp"

	"chainproxy/chain/node"
)

// openRouterImageUsage is the usage OpenRouter reports for an image model
// answering on /chat/completions: cost-weighted counts with decimals.
// BerriAI/litellm#28001 (and #28023, #28024) logged total_tokens 14429.92
// and completion_tokens_details.image_tokens 14417.92 for
// black-forest-labs/flux.2-klein-4b, whose prompt was 12 tokens; litellm
// fixed its reader by truncating them (BerriAI/litellm#28070).
const openRouterImageUsage = `{"prompt_tokens":12,"completion_tokens":14417.92,"total_tokens":14429.92,"completion_tokens_details":{"image_tokens":14417.92},"cost":0.0387243}`

// TestChatUsageCounts: counts a server writes in another shape than a
// small integer do not fail the answer, streamed or whole: decimals are
// truncated, negatives read as 0, anything not a number is left out.
func TestChatUsageCounts(t *testing.T) {
	tests := []struct {
		name, usage string
		want        node.Usage
	}{
		{"OpenRouter's decimals", openRouterImageUsage, node.Usage{PromptTokens: 12, CompletionTokens: 14417, TotalTokens: 14429}},
		{"exponent", `{"prompt_tokens":1.2e3,"completion_tokens":5E0,"total_tokens":1205}`, node.Usage{PromptTokens: 1200, CompletionTokens: 5, TotalTokens: 1205}},
		{"negative", `{"prompt_tokens":-3,"completion_tokens":-0.5,"total_tokens":4}`, node.Usage{TotalTokens: 4}},
		{"nulls and strings", `{"prompt_tokens":null,"completion_tokens":"7","total_tokens":{"n":1}}`, node.Usage{}},
		{"beyond any count", `{"prompt_tokens":1e300,"completion_tokens":99999999999999999999999,"total_tokens":3}`, node.Usage{PromptTokens: maxCount, CompletionTokens: maxCount, TotalTokens: 3}},
	}
	for _, tt := range tests {
		for _, whole := range []bool{false, true} {
			name := tt.name + "/stream"
			body := `data: {"id":"gen-1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"a picture"},"finish_reason":null}]}` + "\n\n" +
				`data: {"id":"gen-1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
				`data: {"id":"gen-1","object":"chat.completion.chunk","model":"m","choices":[],"usage":` + tt.usage + "}\n\n" +
				"data: [DONE]\n\n"
			ct := "text/event-stream"
			if whole {
				name = tt.name + "/whole"
				body = `{"id":"gen-1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"a picture"},"finish_reason":"stop"}],"usage":` + tt.usage + "}"
				ct = "application/json"
			}
			t.Run(name, func(t *testing.T) {
				b := New(nodeAt("http://upstream.invalid/v1"), &http.Client{Transport: memTransport{body: body, contentType: ct}})
				req := userRequest("draw")
				req.Whole = whole
				got, err := collect(t.Context(), b, req)
				if err != nil {
					t.Fatalf("Chat() error = %v", err)
				}
				if got.content != "a picture" || got.finish != "stop" {
					t.Errorf("content %q finish %q", got.content, got.finish)
				}
				if got.usage == nil || *got.usage != tt.want {
					t.Errorf("usage = %+v, want %+v", got.usage, tt.want)
				}
			})
		}
	}
}

// TestDecodeUsageCounts: the chunk decoder reads counts itself, as the
// general decoder does, and keeps to its fast path for integers.
func TestDecodeUsageCounts(t *testing.T) {
	for _, tc := range []struct {
		usage string
		want  usage
	}{
		{`{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}`, usage{10, 20, 30}},
		{openRouterImageUsage, usage{12, 14417, 14429}},
		{`{"prompt_tokens":0.999,"completion_tokens":-0,"total_tokens":-1e2}`, usage{0, 0, 0}},
		{`{"prompt_tokens":123456789,"completion_tokens":1234567890,"total_tokens":2147483648}`, usage{123456789, 1234567890, maxCount}},
		{`{"prompt_tokens":5,"prompt_tokens":null,"completion_tokens":true,"total_tokens":[1]}`, usage{5, 0, 0}},
	} {
		data := `{"choices":[],"usage":` + tc.usage + `}`
		var fast streamChunk
		if !decodeChunk([]byte(data), &fast, nil) {
			t.Errorf("decodeChunk(%s) handed it to the general decoder", data)
			continue
		}
		var general streamChunk
		if err := gojson.UnmarshalNoEscape([]byte(data), &general); err != nil {
			t.Errorf("general decoder: %v", err)
			continue
		}
		if diff := cmp.Diff(&tc.want, fast.Usage); diff != "" {
			t.Errorf("decodeChunk(%s) usage (-want +got):\n%s", data, diff)
		}
		if diff := cmp.Diff(&tc.want, general.Usage); diff != "" {
			t.Errorf("general decoder(%s) usage (-want +got):\n%s", data, diff)
		}
		var whole streamChunk
		var model string
		if !decodeWhole([]byte(strings.Replace(data, `"choices":[]`, `"model":"m","choices":[]`, 1)), &whole, &model) || !cmp.Equal(&tc.want, whole.Usage) {
			t.Errorf("decodeWhole(%s) usage = %+v, want %+v", data, whole.Usage, tc.want)
		}
	}
}
