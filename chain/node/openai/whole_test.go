package openai

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"chainproxy/chain/node"
	"chainproxy/internal/fakeopenai"
)

// TestChatWhole: a caller that wants the answer whole gets the same chunks
// from an unstreamed call, and the upstream is asked for no stream.
func TestChatWhole(t *testing.T) {
	tests := []struct {
		name          string
		reply         fakeopenai.Reply
		wantContent   string
		wantReasoning string
		wantCalls     int
		wantFinish    string
	}{
		{"content and usage", fakeopenai.Reply{Content: []string{"Hel", "lo"}, PromptTokens: 3, CompletionTokens: 2}, "Hello", "", 0, "stop"},
		{"reasoning field", fakeopenai.Reply{Reasoning: []string{"think"}, ReasoningField: "reasoning", Content: []string{"ok"}}, "ok", "think", 0, "stop"},
		{"think tags", fakeopenai.Reply{Content: []string{"<think>plan</think>answer"}}, "answer", "plan", 0, "stop"},
		{"tool calls", fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{{ID: "c1", Name: "f", Arguments: `{"a":1}`}, {Name: "g", Arguments: `{}`}}}, "", "", 2, "tool_calls"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakeopenai.New(t, tt.reply)
			req := userRequest("hi")
			req.Whole = true
			res, err := collect(t.Context(), New(nodeAt(srv.BaseURL()), nil), req)
			if err != nil {
				t.Fatal(err)
			}
			if res.content != tt.wantContent || res.reasoning != tt.wantReasoning || len(res.calls) != tt.wantCalls || res.finish != tt.wantFinish {
				t.Errorf("got content %q reasoning %q calls %d finish %q", res.content, res.reasoning, len(res.calls), res.finish)
			}
			for _, c := range res.calls {
				if c.ID == "" {
					t.Error("a tool call without ID")
				}
			}
			if s, ok := srv.Bodies()[0]["stream"]; ok && s != false {
				t.Errorf("upstream asked with stream = %v", s)
			}
		})
	}
	t.Run("error status", func(t *testing.T) {
		srv := fakeopenai.New(t, fakeopenai.Reply{Status: 503, Error: "overloaded"})
		req := userRequest("hi")
		req.Whole = true
		_, err := collect(t.Context(), New(nodeAt(srv.BaseURL()), nil), req)
		var ue *node.UpstreamError
		if !errors.As(err, &ue) || ue.Kind != node.KindStatus || ue.Status != 503 || ue.Message != "overloaded" {
			t.Errorf("err = %v", err)
		}
	})
}

// TestChatWholeTooLarge: an unstreamed answer past maxWholeBody fails as
// the protocol error it is, naming the cap, rather than being cut and
// reported as JSON the upstream never sent. An image model's answer on
// OpenRouter carries its pictures in the message, base64 data URLs
// (BerriAI/litellm, litellm/llms/openrouter/image_generation/
// transformation.py): a few of them reach the cap.
func TestChatWholeTooLarge(t *testing.T) {
	const (
		head = `{"id":"gen-1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"`
		tail = `"},"finish_reason":"stop"}]}`
	)
	answer := func(n int) string { return head + strings.Repeat("A", n-len(head)-len(tail)) + tail }
	for _, tc := range []struct {
		name    string
		size    int
		wantErr string
	}{
		{"at the cap", maxWholeBody, ""},
		{"one byte over", maxWholeBody + 1, "answer larger than 32 MiB"},
		{"far over", maxWholeBody + 1<<20, "answer larger than 32 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New(nodeAt("http://upstream.invalid/v1"), &http.Client{Transport: memTransport{body: answer(tc.size), contentType: "application/json"}})
			req := userRequest("draw")
			req.Whole = true
			got, err := collect(t.Context(), b, req)
			if tc.wantErr == "" {
				if err != nil || len(got.content) != tc.size-len(head)-len(tail) {
					t.Fatalf("Chat() error = %v, content %d bytes", err, len(got.content))
				}
				return
			}
			var ue *node.UpstreamError
			if !errors.As(err, &ue) || ue.Kind != node.KindProtocol || ue.Message != tc.wantErr {
				t.Errorf("Chat() error = %#v, want a protocol error %q", err, tc.wantErr)
			}
		})
	}
}

// TestChatAnswerOfAnotherShape: a server may answer whole when a stream
// was asked for, or stream when the whole answer was, and label what it
// sends otherwise than it is, or not at all. The proxy reads an answer
// labelled as the shape it asked for as that, and any other as its first
// byte shows it.
//   - mini-sglang streamed to every request, text/event-stream, whatever
//     "stream" said (sgl-project/mini-sglang#51, fixed by #125); so did
//     the Manifest gateway (mnfst/llm-gateway#2060).
//   - a FastAPI StreamingResponse without media_type sends events with no
//     Content-Type (nearai/private-ml-sdk#20).
//   - servers that do not stream answer one chat.completion whatever was
//     asked (mistralai/mistral-vibe#84); a Go handler that writes it
//     without a Content-Type has it labelled text/plain by net/http's
//     sniffing, a Python one may send none.
//   - Jan's Nitro server (cortex.cpp, on drogon) labelled its answers
//     text/html, drogon's default (janhq/cortex.cpp#465): JSON is read
//     whatever its label, and only a body that opens with markup is a
//     page in the node's place (TestHTMLPageInTheNodesPlace).
//   - an event stream may open with a comment line, as OpenRouter's do
//     while the model starts (": OPENROUTER PROCESSING",
//     https://openrouter.ai/docs/api-reference/streaming).
func TestChatAnswerOfAnotherShape(t *testing.T) {
	const (
		whole  = `{"id":"chatcmpl-1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`
		events = `data: {"id":"cmpl-1","object":"chat.completion.chunk","choices":[{"delta":{"role":"assistant","content":"Hel"},"index":0,"finish_reason":null}]}` + "\n\n" +
			`data: {"id":"cmpl-1","object":"chat.completion.chunk","choices":[{"delta":{"content":"lo"},"index":0,"finish_reason":null}]}` + "\n\n" +
			`data: {"id":"cmpl-1","object":"chat.completion.chunk","choices":[{"delta":{},"index":0,"finish_reason":"stop"}]}` + "\n\n" +
			"data: [DONE]\n\n"
	)
	none := []string(nil)
	tests := []struct {
		name        string
		askWhole    bool
		contentType []string
		body        string
	}{
		{"stream asked, whole answer as application/json", false, []string{"application/json"}, whole},
		{"stream asked, whole answer unlabelled", false, none, whole},
		{"stream asked, whole answer as text/plain", false, []string{"text/plain; charset=utf-8"}, "\n" + whole},
		{"stream asked, events as application/json", false, []string{"application/json"}, events},
		{"stream asked, events unlabelled", false, none, events},
		{"stream asked, events after a comment as application/json", false, []string{"application/json"}, ": OPENROUTER PROCESSING\n\n" + events},
		{"whole asked, events as text/event-stream", true, []string{"text/event-stream; charset=utf-8"}, events},
		{"whole asked, events unlabelled", true, none, events},
		{"whole asked, whole answer as application/json", true, []string{"application/json"}, whole},
		{"whole asked, whole answer unlabelled", true, none, whole},
		{"whole asked, whole answer as text/event-stream", true, []string{"text/event-stream"}, whole},
		// Jan's Nitro (cortex.cpp on drogon, whose default type is HTML)
		// labelled its chat.completion text/html (janhq/cortex.cpp#465).
		{"whole asked, whole answer as text/html", true, []string{"text/html; charset=utf-8"}, whole},
		{"stream asked, whole answer as text/html", false, []string{"text/html; charset=utf-8"}, whole},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header()["Content-Type"] = tt.contentType // nil: none, not net/http's sniffed one
				io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			req := userRequest("hi")
			req.Whole = tt.askWhole
			got, err := collect(t.Context(), New(nodeAt(srv.URL+"/v1"), nil), req)
			if err != nil {
				t.Fatalf("Chat() error = %v", err)
			}
			if got.content != "Hello" || got.finish != "stop" {
				t.Errorf("content %q finish %q, want \"Hello\" \"stop\"", got.content, got.finish)
			}
		})
	}
}
