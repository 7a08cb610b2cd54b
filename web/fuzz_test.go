package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"chainproxy/chain"
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
	f.Add([]byte(`{"model":"x","messages":[{"role":"user","content":[{"type":"text","text":"what?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"high"}},{"type":"image_url","image_url":{"url":"https://x/a.png"}},{"type":"file","file":{"file_data":"JVBERi0=","filename":"a.pdf"}},{"type":"file","file":{"file_id":"file-1"}}]}]}`))
	f.Add([]byte(`{"model":"x","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"user","content":"c"}],"stop":["1","2","3","4","5"],"user":"u"}`))
	f.Add([]byte(`{"model":"x","messages":[{"role":"user","content":"a"}],"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"g"}}]}`))
	// The limits are scaled down so that the fuzzer reaches them.
	const maxMsgs = 2
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeChatRequest(body)
		if err == nil {
			err = checkLimits(req, maxMsgs)
		}
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
		if len(req.Messages) > maxMsgs || len(req.Tools) > maxTools || len(req.stops) > maxStops || len(req.User) > maxIDBytes {
			t.Fatalf("accepted a request beyond the limits: %d messages, %d tools, %d stops, %d-byte user", len(req.Messages), len(req.Tools), len(req.stops), len(req.User))
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

// TestChunkFrames: each chunk a stream writes from its parts is the
// encoding of the chunk it stands for.
func TestChunkFrames(t *testing.T) {
	head := string(chunkHead("chatcmpl-1", "m\"x<y>", 42))
	usage := chain.Usage{PromptTokens: 12, CompletionTokens: 3, TotalTokens: 15}
	for _, tc := range []struct {
		name string
		got  string
		want *chunk
	}{
		{"content", head + contentOpen + `"hi"` + contentClose, newChunk("chatcmpl-1", "m\"x<y>", 42, delta{Content: strptr("hi")}, nil)},
		{"role and content", head + roleContentOpen + `""` + contentClose, newChunk("chatcmpl-1", "m\"x<y>", 42, delta{Role: "assistant", Content: strptr("")}, nil)},
		{"finish", head + finishOpen + `"stop"}]}`, newChunk("chatcmpl-1", "m\"x<y>", 42, delta{}, strptr("stop"))},
		{"usage", string(appendUsageChunk(nil, []byte(head), usage)), &chunk{ID: "chatcmpl-1", Object: "chat.completion.chunk", Created: 42, Model: "m\"x<y>", Choices: []chunkChoice{}, Usage: &usage}},
	} {
		want, _ := json.Marshal(tc.want)
		if tc.got != string(want) {
			t.Errorf("%s chunk = %s, want %s", tc.name, tc.got, want)
		}
	}
}

// FuzzAppendDelta: every delta a stream frames by hand is the chunk
// json.Marshal writes for it.
func FuzzAppendDelta(f *testing.F) {
	f.Add(true, "", "")
	f.Add(true, "hi", "")
	f.Add(true, "", "hmm")
	f.Add(false, "hi", "")
	f.Add(false, "", "hmm")
	f.Add(false, "a\"<b>", "\xff\u2028")
	f.Add(false, "", "")
	head := chunkHead("chatcmpl-1", "m\"x", 42)
	f.Fuzz(func(t *testing.T, role bool, text, reasoning string) {
		d := delta{ReasoningContent: reasoning}
		if text != "" || role {
			d.Content = &text
		}
		if role {
			d.Role = "assistant"
		}
		want, _ := json.Marshal(newChunk("chatcmpl-1", "m\"x", 42, d, nil))
		if got := appendDelta(head[:len(head):len(head)], role, text, reasoning); string(got) != string(want) {
			t.Errorf("appendDelta(%t, %q, %q) = %s, want %s", role, text, reasoning, got, want)
		}
	})
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

// FuzzPlainString: the decoder-free path for message contents gives what
// encoding/json gives, or declines.
func FuzzPlainString(f *testing.F) {
	for _, s := range []string{`"hello"`, `"a\"b"`, `"é😀"`, "\"\xff\"", `"`, `""`, "\"a\tb\"", `"a"b"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := plainString(raw)
		if !ok {
			return
		}
		var want string
		if err := json.Unmarshal(raw, &want); err != nil || got != want {
			t.Fatalf("plainString(%q) = %q; encoding/json: %q, %v", raw, got, want, err)
		}
	})
}

// FuzzMarshalMatchesStd: the proxy's answers, chunks and traces encode as
// encoding/json encodes them: byte for byte, but for two escapes.
func FuzzMarshalMatchesStd(f *testing.F) {
	f.Add("hello", "thinking", "list_dir", `{"path":"."}`, "a.txt\nb.txt", "stop")
	f.Add("<script>&\u2028", "\xff\xfe", "f", `{"a": [1, 2.5e3, "<"], "b" : null}`, "\x00\x1f\"\\", "")
	f.Fuzz(func(t *testing.T, content, reasoning, name, args, result, finish string) {
		if !json.Valid([]byte(args)) {
			// As the chain does: arguments that do not parse go in the
			// trace as a JSON string. (goccy does not validate a raw
			// message, encoding/json does; the trace never holds an
			// invalid one.)
			b, _ := json.Marshal(args)
			args = string(b)
		}
		tr := chain.Trace{Mode: "reflexive", Reasons: []string{reasoning}, Turns: 2, Stages: []chain.StageTrace{{
			Node: name, Model: content, Turns: 2, Status: finish, DurationMS: 7,
			Usage:     chain.Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3},
			ToolsUsed: []chain.ToolUse{{Name: name, Args: json.RawMessage(args), Status: "ok", Result: result, DurationMS: 1}},
			Error:     finish,
		}}}
		res := &chain.Result{
			Message:      chain.Message{Role: "assistant", Content: content, Reasoning: reasoning, ToolCalls: []chain.ToolCall{{ID: name, Name: name, Arguments: args}}},
			FinishReason: finish, Trace: tr,
		}
		// goccy escapes \b and \f as \u0008 and \u000c, encoding/json
		// (since Go 1.22) as \b and \f: the same JSON, other bytes.
		sameBytes := !strings.ContainsAny(content+reasoning+name+args+result+finish, "\b\f")
		for _, v := range []any{
			&tr,
			toResponse("chatcmpl-"+name, content, 1735689600, res, content),
			newChunk("id", name, 1, delta{Role: "assistant", Content: &content, ReasoningContent: reasoning, ToolCalls: wireCalls(res.Message.ToolCalls, true)}, &finish),
		} {
			want, werr := json.Marshal(v)
			got, err := marshal(v)
			if err != nil || werr != nil {
				t.Fatalf("marshal(%T): %v; encoding/json: %v", v, err, werr)
			}
			var gotV, wantV any
			if err := json.Unmarshal(got, &gotV); err != nil {
				t.Fatalf("marshal(%T) wrote invalid JSON %s: %v", v, got, err)
			}
			json.Unmarshal(want, &wantV)
			if !reflect.DeepEqual(gotV, wantV) || sameBytes && string(got) != string(want) {
				t.Fatalf("marshal(%T) =\n%s\nencoding/json:\n%s", v, got, want)
			}
		}
	})
}

// FuzzOllamaDelta: every delta line of an Ollama stream, framed by hand,
// is the object encoding/json writes for it.
func FuzzOllamaDelta(f *testing.F) {
	for _, gen := range []bool{false, true} {
		for _, show := range []bool{false, true} {
			f.Add(gen, show, "", "")
			f.Add(gen, show, "hi", "")
			f.Add(gen, show, "", "hmm")
			f.Add(gen, show, "a\"<b>&", "\xff\u2028\n")
		}
	}
	at := time.Date(2026, 11, 25, 8, 40, 1, 123456789, time.UTC)
	f.Fuzz(func(t *testing.T, generate, show bool, content, thinking string) {
		e := &ollamaEncoder{model: "qwen3:1.7b<x>", generate: generate, thinking: show}
		ch := e.chunk(content, thinking)
		ch.CreatedAt = at
		want, _ := json.Marshal(&ch)
		if got := appendOllamaDelta(nil, e.model, generate, at, content, thinking, show); string(got) != string(want) {
			t.Errorf("appendOllamaDelta(%t, %t, %q, %q) = %s, want %s", generate, show, content, thinking, got, want)
		}
	})
}

// FuzzAnthropicFrames: every block event an Anthropic stream frames by
// hand is the event encoding/json writes for it.
func FuzzAnthropicFrames(f *testing.F) {
	f.Add(0, "hi")
	f.Add(3, "")
	f.Add(12, "a\"<b>&\xff\u2028\n\b")
	f.Fuzz(func(t *testing.T, i int, text string) {
		if i < 0 {
			i = -i
		}
		sig := thinkingSignature
		for _, tc := range []struct {
			event, kind, text string
			want              anthropicEvent
		}{
			{"content_block_start", "text", "", anthropicEvent{Type: "content_block_start", Index: &i, ContentBlock: textBlock{Type: "text"}}},
			{"content_block_start", "thinking", "", anthropicEvent{Type: "content_block_start", Index: &i, ContentBlock: thinkingBlock{Type: "thinking"}}},
			{"content_block_delta", "text", text, anthropicEvent{Type: "content_block_delta", Index: &i, Delta: blockDelta{Type: "text_delta", Text: &text}}},
			{"content_block_delta", "thinking", text, anthropicEvent{Type: "content_block_delta", Index: &i, Delta: blockDelta{Type: "thinking_delta", Thinking: &text}}},
			{"content_block_delta", "signature", sig, anthropicEvent{Type: "content_block_delta", Index: &i, Delta: blockDelta{Type: "signature_delta", Signature: &sig}}},
			{"content_block_stop", "", "", anthropicEvent{Type: "content_block_stop", Index: &i}},
		} {
			want, err := json.Marshal(&tc.want)
			if err != nil {
				t.Fatal(err)
			}
			if got := appendBlockEvent(nil, tc.event, i, tc.kind, tc.text); string(got) != string(want) {
				t.Errorf("%s %s: %s, want %s", tc.event, tc.kind, got, want)
			}
		}
	})
}

// FuzzResponsesDelta: a Responses delta framed by hand is the event
// encoding/json writes for it.
func FuzzResponsesDelta(f *testing.F) {
	f.Add(false, 3, "msg_abc_0", 0, "hello")
	f.Add(true, 12, "rs_abc_1", 1, "a\"<b>\n\xff\u2028")
	f.Fuzz(func(t *testing.T, reasoning bool, seq int, id string, idx int, text string) {
		ev := responseEvent{Type: "response.output_text.delta", SequenceNumber: seq, ItemID: id, OutputIndex: &idx, ContentIndex: &index0, Delta: &text, Logprobs: &[]struct{}{}}
		if reasoning {
			ev = responseEvent{Type: "response.reasoning_summary_text.delta", SequenceNumber: seq, ItemID: id, OutputIndex: &idx, SummaryIndex: &index0, Delta: &text}
		}
		if id == "" {
			return // item ids are never empty; encoding/json would leave it out
		}
		want, _ := json.Marshal(&ev)
		if got := appendResponsesDelta(nil, reasoning, seq, id, idx, text); string(got) != string(want) {
			t.Errorf("appendResponsesDelta = %s\nencoding/json = %s", got, want)
		}
	})
}

// FuzzAnswerFrame: a non-stream answer framed by hand is the answer
// json.Marshal writes, with its trace.
func FuzzAnswerFrame(f *testing.F) {
	f.Add("chatcmpl-1", "m", int64(1735689600), "Hello", "", "stop", 12, 3)
	f.Add("chatcmpl-2", "a\"<b>", int64(-1), "line\n\"two\"\xff\u2028\b", "thinking", "length", 0, 0)
	trace := []byte(`{"mode":"simple","stages":[]}`)
	f.Fuzz(func(t *testing.T, id, model string, created int64, content, reasoning, finish string, in, out int) {
		u := chain.Usage{PromptTokens: in, CompletionTokens: out, TotalTokens: in + out}
		res := &chain.Result{Message: chain.Message{Role: "assistant", Content: content, Reasoning: reasoning}, FinishReason: finish}
		resp := toResponse(id, model, created, res, content)
		resp.Usage = u
		want, err := json.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		want = withChain(want, trace)
		if got := appendAnswer(nil, id, model, created, content, reasoning, finish, u, trace); string(got) != string(want) {
			t.Errorf("appendAnswer =\n%s\njson.Marshal =\n%s", got, want)
		}
	})
}

func strptr(s string) *string { return &s }

// TestAnswerSize: an answer is framed in the one allocation answerSize
// asks for, whatever its text's length and ordinary escapes.
func TestAnswerSize(t *testing.T) {
	trace := bytes.Repeat([]byte("x"), 600)
	u := chain.Usage{PromptTokens: 123456, CompletionTokens: 65432, TotalTokens: 188888}
	tests := []struct{ name, content, reasoning string }{
		{"empty", "", ""},
		{"short", "Hello!", ""},
		{"words", strings.Repeat("The proxy relays every chunk. ", 4), ""},
		{"paragraphs", strings.Repeat("A line of prose, \"quoted\".\n\n", 80), strings.Repeat("step\n", 100)},
		{"code", strings.Repeat("if x {\n\treturn \"y\"\n}\n", 100), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := make([]byte, 0, answerSize(tt.content, tt.reasoning, "qwen3:30b-a3b", trace))
			out := appendAnswer(b, completionID("a9534e31c73281f698e8a76352d60b46"), "qwen3:30b-a3b", 1795604736, tt.content, tt.reasoning, "tool_calls", u, trace)
			if &out[0] != &b[:1][0] {
				t.Errorf("answer of %d bytes outgrew its room of %d", len(out), cap(b))
			}
		})
	}
}
