package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	goopenai "github.com/sashabaranov/go-openai"

	"chainproxy/chain/node"
	"chainproxy/internal/fakeopenai"
)

// refusedKwargs is OpenAI's answer to a body field it does not know
// (error type invalid_request_error, message "Unrecognized request
// argument supplied: <field>").
var refusedKwargs = fakeopenai.Reply{Status: 400, Error: "Unrecognized request argument supplied: chat_template_kwargs", ErrorType: "invalid_request_error"}

// noThinkRequest is a summary's request: asked whole, not to think.
func noThinkRequest() *node.Request {
	req := userRequest("Summarise the conversation.")
	req.Whole, req.NoThink = true, true
	return req
}

// kwargsSent is each request's chat_template_kwargs as the server read it.
func kwargsSent(srv *fakeopenai.Server) []any {
	var out []any
	for _, body := range srv.Bodies() {
		out = append(out, body["chat_template_kwargs"])
	}
	return out
}

// A call asked not to think (node.Request.NoThink) tells the model's chat
// template so, through chat_template_kwargs: vLLM and SGLang pass it to
// the template ("To disable it, you must pass enable_thinking=False in
// your chat_template_kwargs", docs.vllm.ai features/reasoning_outputs,
// which also names DeepSeek-V3.1's and Granite's "thinking"), as
// llama-server does (llama.cpp tools/server/README.md). A server that
// honours it stops thinking; one that ignores it thinks on, and its
// reasoning is kept apart from the content. Other calls do not carry it.
func TestChatNoThinkTellsTheTemplate(t *testing.T) {
	off := map[string]any{"enable_thinking": false, "thinking": false}
	tests := []struct {
		name          string
		noThink       bool
		whole         bool
		honours       bool
		wantKwargs    any
		wantContent   string
		wantReasoning string
	}{
		{"honoured, whole", true, true, true, off, "The user asked about run1.", ""},
		{"honoured, streamed", true, false, true, off, "The user asked about run1.", ""},
		{"ignored", true, true, false, off, "The user asked about run1.", "Okay, let me summarise."},
		{"not asked", false, true, true, nil, "The user asked about run1.", "Okay, let me summarise."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakeopenai.NewFunc(t, func(_ int, req *goopenai.ChatCompletionRequest) fakeopenai.Reply {
				if tt.honours && req.ChatTemplateKwargs["enable_thinking"] == false {
					return fakeopenai.Reply{Content: []string{"The user asked about run1."}}
				}
				return fakeopenai.Reply{Reasoning: []string{"Okay, let me summarise."}, Content: []string{"The user asked about run1."}}
			})
			b := New(nodeAt(srv.BaseURL()), nil)
			req := noThinkRequest()
			req.NoThink, req.Whole = tt.noThink, tt.whole
			got, err := collect(t.Context(), b, req)
			if err != nil {
				t.Fatal(err)
			}
			if got.content != tt.wantContent || got.reasoning != tt.wantReasoning {
				t.Errorf("content %q, reasoning %q; want %q, %q", got.content, got.reasoning, tt.wantContent, tt.wantReasoning)
			}
			if diff := cmp.Diff([]any{tt.wantKwargs}, kwargsSent(srv)); diff != "" {
				t.Errorf("chat_template_kwargs sent (-want +got):\n%s", diff)
			}
		})
	}
}

// OpenAI refuses chat_template_kwargs, as any field it does not know, with
// a 400 that names it. The call is made again once without it, and the
// backend remembers: later calls asked not to think go without it. A 400
// that names another field is the caller's, and is not retried.
func TestChatNoThinkRefused(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		srv := fakeopenai.NewFunc(t, func(_ int, req *goopenai.ChatCompletionRequest) fakeopenai.Reply {
			if req.ChatTemplateKwargs != nil {
				return refusedKwargs
			}
			return fakeopenai.Reply{Content: []string{"summary"}}
		})
		srv.RejectStreamOptions(true)
		b := New(nodeAt(srv.BaseURL()), nil)
		for i, whole := range []bool{true, true, false} {
			req := noThinkRequest()
			req.Whole = whole
			got, err := collect(t.Context(), b, req)
			if err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
			if got.content != "summary" {
				t.Errorf("call %d: content %q", i, got.content)
			}
		}
		var sent []string
		for _, body := range srv.Bodies() {
			sent = append(sent, fmt.Sprintf("kwargs %v, stream_options %v", body["chat_template_kwargs"] != nil, body["stream_options"] != nil))
		}
		// The streamed call still drops the stream_options its server
		// refuses, after the kwargs were learned.
		want := []string{"kwargs true, stream_options false", "kwargs false, stream_options false", "kwargs false, stream_options false",
			"kwargs false, stream_options true", "kwargs false, stream_options false"}
		if diff := cmp.Diff(want, sent); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
	})
	t.Run("another field", func(t *testing.T) {
		srv := fakeopenai.New(t, fakeopenai.Reply{Status: 400, Error: "Unrecognized request argument supplied: seed", ErrorType: "invalid_request_error"})
		b := New(nodeAt(srv.BaseURL()), nil)
		_, err := collect(t.Context(), b, noThinkRequest())
		var ue *node.UpstreamError
		if !errors.As(err, &ue) || ue.Status != 400 {
			t.Fatalf("err %v, want the upstream's 400", err)
		}
		if n := len(srv.Requests()); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
	})
}

// Thinks: the backend learns that the node's model thinks from an answer
// that carried reasoning, in any of the shapes servers send it: vLLM's
// and DeepSeek's reasoning_content, OpenRouter's and recent vLLM's
// reasoning, a <think> block in the content (a server that parses no
// reasoning), or the "…</think>" of a template that opened the block
// (DeepSeek-R1 without a reasoning parser, r1). An answer without
// reasoning, an empty block included, teaches nothing.
func TestThinksLearned(t *testing.T) {
	tests := []struct {
		name  string
		reply fakeopenai.Reply
		want  bool
	}{
		{"reasoning_content", fakeopenai.Reply{Reasoning: []string{"Let me see."}, Content: []string{"4"}}, true},
		{"reasoning", fakeopenai.Reply{Reasoning: []string{"Let me see."}, ReasoningField: "reasoning", Content: []string{"4"}}, true},
		{"think tags", fakeopenai.Reply{Content: []string{"<think>", "Let me see.", "</think>", "4"}}, true},
		{"template opened", fakeopenai.Reply{Content: r1}, true},
		{"cut while thinking", fakeopenai.Reply{Content: []string{"<think>", "Let me"}, FinishReason: "length"}, true},
		{"empty block", fakeopenai.Reply{Content: []string{"<think>", "\n\n", "</think>", "\n\n", "4"}}, false},
		{"plain", fakeopenai.Reply{Content: []string{"4"}}, false},
	}
	for _, tt := range tests {
		for _, whole := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/whole=%v", tt.name, whole), func(t *testing.T) {
				srv := fakeopenai.New(t, tt.reply)
				b := New(nodeAt(srv.BaseURL()), nil)
				if b.Thinks() {
					t.Fatal("Thinks before any answer")
				}
				req := userRequest("2+2?")
				req.Whole = whole
				if _, err := collect(t.Context(), b, req); err != nil {
					t.Fatal(err)
				}
				if b.Thinks() != tt.want {
					t.Errorf("Thinks() = %v, want %v", b.Thinks(), tt.want)
				}
			})
		}
	}
}

// The kwargs written by hand are what encoding/json writes
// (FuzzRequestEncode covers the other members).
func TestRequestEncodeTemplateKwargs(t *testing.T) {
	creq := newChatRequest(noThinkRequest())
	creq.ChatTemplateKwargs = &templateKwargs{}
	got, err := creq.encode()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(creq)
	if string(got) != string(want) {
		t.Errorf("encode:\n%s\nencoding/json:\n%s", got, want)
	}
}
