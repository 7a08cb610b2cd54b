package openai

import (
	"strings"
	"testing"

	gojson "github.com/goccy/go-json"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// chunkSeeds are events as servers send them, and look-alikes the fast
// path must hand to the general decoder.
var chunkSeeds = []struct {
	data string
	fast bool // decodeChunk reads it itself
}{
	{`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{"content":"token "},"logprobs":null,"finish_reason":null}],"usage":null}`, true},
	{`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]}`, true},
	{`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, true},
	{`{"choices":[{"index":0,"delta":{"reasoning_content":"Let me think"}}]}`, true},
	{`{"choices":[{"index":0,"delta":{"reasoning":"hmm","content":null}}]}`, true},
	{`{"choices":[{"index":0,"delta":{"content":"line\nnext \"quoted\" \u00e9 \ud83d\ude00"}}]}`, true},
	{` { "choices" : [ { "index" : 0 , "delta" : { "content" : "a" } } ] } `, true},
	{`{"choices":[{"index":0,"delta":{"content":"x"},"logprobs":{"content":[{"token":"x","logprob":-0.5,"bytes":[120],"top_logprobs":[]}]}}]}`, true},
	{`{"choices":[],"usage":null}`, true},
	{`{"choices":null}`, true},
	{`{"choices":[],"error":null,"Usage":null}`, true},
	{`{"id":"x","created":1.5e3,"flag":true,"other":false,"n":-0.25E-2}`, true},
	{"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"bad \xff\xfe utf-8\"}}]}", true},
	{`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30,"prompt_tokens_details":{"cached_tokens":0}}}`, true},
	{`{"choices":[],"usage":{"total_tokens":7}}`, true},
	{`{"usage":{"prompt_tokens":1},"choices":[],"usage":null}`, true},
	// Counts that are not small integers (count): OpenRouter's decimals
	// (BerriAI/litellm#28001), and others a server might write.
	{`{"id":"gen-1","object":"chat.completion.chunk","model":"m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":14417.92,"total_tokens":14429.92,"completion_tokens_details":{"image_tokens":14417.92},"cost":0.0387243}}`, true},
	{`{"choices":[],"usage":{"prompt_tokens":-1}}`, true},
	{`{"choices":[],"usage":{"prompt_tokens":1.5}}`, true},
	{`{"choices":[],"usage":{ "prompt_tokens" : 2.5e1 , "completion_tokens" : -0.0E-0 , "total_tokens" : 1e999 }}`, true},
	{`{"choices":[],"usage":{"prompt_tokens":1234567890123,"completion_tokens":"7","total_tokens":null}}`, true},
	{`{"choices":[],"usage":{"prompt_tokens":3,"prompt_tokens":"x","completion_tokens":4,"completion_tokens":null,"total_tokens":[7],"total_tokens":{"a":true}}}`, true},
	// Handed to the general decoder:
	{`{"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"length"}],"choices":[{"delta":{"reasoning":"b"}}]}`, false},
	{`{"choices":[],"usage":{"prompt_tokens":10},"usage":{"completion_tokens":20}}`, false},
	{`{"choices":[],"usage":{"Prompt_Tokens":10}}`, false},
	{`{"choices":[],"usage":{"prompt_tokens":01}}`, false},
	{`{"choices":[],"usage":{"prompt_tokens":1.}}`, false},
	{`{"choices":[],"usage":{"prompt_tokens":-}}`, false},
	{`{"choices":[],"usage":{"prompt_tokens":"\q"}}`, false},
	{`{"choices":[],"usage":[]}`, false},
	{`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{}"}}]}}]}`, false},
	{`{"error":{"message":"overloaded"}}`, false},
	{`{"Choices":[{"index":0,"delta":{"content":"x"}}]}`, false},
	{`{"choices":[{"index":0,"delta":{"Content":"x"}}]}`, false},
	{`{"choices":[{"index":1.0,"delta":{"content":"x"}}]}`, false},
	{`{"choices":[{"index":-1,"delta":{"content":"x"}}]}`, false},
	{`{"choices":[{"index":01,"delta":{"content":"x"}}]}`, false},
	{`{"id":01}`, false},
	{`{"id":tru}`, false},
	{`null`, false},
	{`[]`, false},
	{`{"choices":[{"index":0,"delta":{"content":"x"}}]} trailing`, false},
}

func TestDecodeChunk(t *testing.T) {
	for _, tc := range chunkSeeds {
		var got streamChunk
		if ok := decodeChunk([]byte(tc.data), &got, nil); ok != tc.fast {
			t.Errorf("decodeChunk(%s) = %v, want %v", tc.data, ok, tc.fast)
			continue
		}
		if tc.fast {
			checkSameAsGeneral(t, []byte(tc.data), got)
		}
	}
}

// checkSameAsGeneral fails when the general decoder reads data otherwise
// than decodeChunk did, or refuses it.
func checkSameAsGeneral(t *testing.T, data []byte, got streamChunk) {
	t.Helper()
	var want streamChunk
	if err := gojson.UnmarshalNoEscape(data, &want); err != nil {
		t.Fatalf("decodeChunk read %q, which the general decoder refuses: %v", data, err)
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("decodeChunk(%q) differs from the general decoder (-general +fast):\n%s", data, diff)
	}
}

// FuzzDecodeChunk: whatever the upstream sends, an event decodeChunk reads
// is one the general decoder reads the same.
func FuzzDecodeChunk(f *testing.F) {
	for _, tc := range chunkSeeds {
		f.Add([]byte(tc.data))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got streamChunk
		if decodeChunk(data, &got, nil) {
			checkSameAsGeneral(t, data, got)
		}
	})
}

// BenchmarkDecodeChunk is the fast path alone on a typical content chunk.
func BenchmarkDecodeChunk(b *testing.B) {
	data := []byte(chunkSeeds[0].data)
	b.ReportAllocs()
	for b.Loop() {
		var sc streamChunk
		if !decodeChunk(data, &sc, nil) {
			b.Fatal("not decoded")
		}
	}
}

// TestChunkTemplate: after a content event read whole, the next one is
// read through the template only when it is that event with another plain
// text, and then as the general decoder reads it.
func TestChunkTemplate(t *testing.T) {
	const first = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"m","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]}`
	for _, tc := range []struct {
		name, learned, next string
		match               bool
	}{
		{"another word", first, `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"m","choices":[{"index":0,"delta":{"content":" world, again"},"logprobs":null,"finish_reason":null}]}`, true},
		{"empty text", first, `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"m","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":null}]}`, true},
		{"unicode text", first, `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"m","choices":[{"index":0,"delta":{"content":"été ☀"},"logprobs":null,"finish_reason":null}]}`, true},
		{"spaces around", ` {"choices" : [ {"index":0, "delta": {"content" : "a" } } ] } `, ` {"choices" : [ {"index":0, "delta": {"content" : "bcd" } } ] } `, true},
		{"an escape", first, `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"m","choices":[{"index":0,"delta":{"content":"line\n"},"logprobs":null,"finish_reason":null}]}`, false},
		{"a second key between", first, `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"m","choices":[{"index":0,"delta":{"content":"a","content":"b"},"logprobs":null,"finish_reason":null}]}`, false},
		{"null text", first, `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"m","choices":[{"index":0,"delta":{"content":null},"logprobs":null,"finish_reason":null}]}`, false},
		{"finish reason", first, `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"m","choices":[{"index":0,"delta":{"content":"x"},"logprobs":null,"finish_reason":"stop"}]}`, false},
		{"new created", first, `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689601,"model":"m","choices":[{"index":0,"delta":{"content":"x"},"logprobs":null,"finish_reason":null}]}`, false},
		{"learned from an escaped text", `{"choices":[{"index":0,"delta":{"content":"\n"}}]}`, `{"choices":[{"index":0,"delta":{"content":"x"}}]}`, false},
		{"learned from reasoning", `{"choices":[{"index":0,"delta":{"reasoning":"hmm"}}]}`, `{"choices":[{"index":0,"delta":{"reasoning":"hmm"}}]}`, false},
		{"learned from two choices", `{"choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{}}]}`, `{"choices":[{"index":0,"delta":{"content":"b"}},{"index":1,"delta":{}}]}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Stream{model: "m"}
			var sc streamChunk
			if !s.decode([]byte(tc.learned), &sc, nil) {
				t.Fatalf("the learned event was not decoded: %s", tc.learned)
			}
			var got streamChunk
			if match := s.tmpl.match([]byte(tc.next), &got); match != tc.match {
				t.Fatalf("template match = %v, want %v", match, tc.match)
			}
			got = streamChunk{}
			if s.decode([]byte(tc.next), &got, nil) {
				checkSameAsGeneral(t, []byte(tc.next), got)
			}
		})
	}
}

// FuzzChunkTemplate: whatever two events the upstream sends in a row, the
// second is read as the general decoder reads it, template or not.
func FuzzChunkTemplate(f *testing.F) {
	for _, a := range chunkSeeds {
		for _, b := range chunkSeeds[:6] {
			f.Add([]byte(a.data), []byte(b.data))
		}
	}
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"content":"a"}}]}`), []byte(`{"choices":[{"index":0,"delta":{"content":"b\"}},{\"x"}}]}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		// a is the stream's first event, read for the model too.
		var s Stream
		var sc streamChunk
		s.decode(a, &sc, &s.model)
		s.model = "m"
		var got streamChunk
		if s.decode(b, &got, nil) {
			checkSameAsGeneral(t, b, got)
		}
	})
}

// wholeSeeds are unstreamed answers as servers write them.
var wholeSeeds = []struct {
	data string
	fast bool // decodeWhole reads it itself
}{
	{`{"id":"chatcmpl-1","object":"chat.completion","created":1735689600,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":0}},"service_tier":"default","system_fingerprint":"fp"}`, true},
	{`{"model":"qwen3","choices":[{"index":0,"message":{"role":"assistant","content":"line one\nline \"two\"","reasoning_content":"hmm"},"finish_reason":"length"}]}`, true},
	{`{"model":"m","choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`, false},
	{`{"error":{"message":"overloaded"}}`, false},
	{`{"MODEL":"m","choices":[{"message":{"content":"x"}}]}`, false},
	{`{"model":"m","choices":[{"Message":{"content":"x"}}]}`, false},
	{`{"model":"m","choices":[]}`, true},
	// OpenRouter's image model, its counts cost-weighted (BerriAI/litellm#28001).
	{`{"id":"gen-1","object":"chat.completion","model":"black-forest-labs/flux.2-klein-4b","choices":[{"index":0,"message":{"role":"assistant","content":"Here it is","images":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="},"index":0}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":14417.92,"total_tokens":14429.92,"completion_tokens_details":{"image_tokens":14417.92},"cost":0.0387243}}`, true},
}

// FuzzDecodeWhole: whatever the upstream answers, an answer decodeWhole
// reads is one goccy/go-json reads the same into wholeResponse.
func FuzzDecodeWhole(f *testing.F) {
	for _, tc := range wholeSeeds {
		f.Add([]byte(tc.data))
	}
	for _, tc := range chunkSeeds {
		f.Add([]byte(strings.ReplaceAll(tc.data, `"delta"`, `"message"`)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got streamChunk
		var model string
		if !decodeWhole(data, &got, &model) {
			return
		}
		var want wholeResponse
		if err := gojson.Unmarshal(data, &want); err != nil {
			t.Fatalf("decodeWhole read %q, which the general decoder refuses: %v", data, err)
		}
		if model != want.Model || len(got.Choices) != len(want.Choices) {
			t.Fatalf("decodeWhole(%q): model %q, %d choices; general: %q, %d", data, model, len(got.Choices), want.Model, len(want.Choices))
		}
		if diff := cmp.Diff(want.Usage, got.Usage); diff != "" {
			t.Fatalf("decodeWhole(%q) usage differs (-general +fast):\n%s", data, diff)
		}
		for i := range got.Choices {
			if diff := cmp.Diff(want.Choices[i].Message, got.Choices[i].Delta, cmpopts.EquateEmpty()); diff != "" || want.Choices[i].FinishReason != got.Choices[i].FinishReason {
				t.Fatalf("decodeWhole(%q) choice %d differs (-general +fast):\n%s finish %q %q", data, i, diff, want.Choices[i].FinishReason, got.Choices[i].FinishReason)
			}
		}
	})
}

// TestDecodeWhole: the usual answers are read by the fast path.
func TestDecodeWhole(t *testing.T) {
	for _, tc := range wholeSeeds {
		var sc streamChunk
		var model string
		if got := decodeWhole([]byte(tc.data), &sc, &model); got != tc.fast {
			t.Errorf("decodeWhole(%.60s…) = %v, want %v", tc.data, got, tc.fast)
		}
	}
}

// decodeChunk is decodeChunkSpan without the span.
func decodeChunk(data []byte, sc *streamChunk, model *string) bool {
	_, ok := decodeChunkSpan(data, sc, model)
	return ok
}
