package openai

import (
	"errors"
	"testing"

	"chainproxy/chain"
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
			res, err := collect(t.Context(), New(node(srv.BaseURL()), nil), req)
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
		_, err := collect(t.Context(), New(node(srv.BaseURL()), nil), req)
		var ue *chain.UpstreamError
		if !errors.As(err, &ue) || ue.Kind != chain.KindStatus || ue.Status != 503 || ue.Message != "overloaded" {
			t.Errorf("err = %v", err)
		}
	})
}
