package openai

import (
	"context"
	"strings"
	"testing"

	"chainproxy/internal/fakeopenai"
)

// r1 is DeepSeek-R1's answer through a server that parses no reasoning
// (vLLM without --reasoning-parser, SGLang, llama-server
// --reasoning-format none): its chat template ends the prompt with
// "<think>\n" (deepseek-ai/DeepSeek-R1#352, vllm-project/vllm#13125), so
// the content is the reasoning, a </think> no <think> opened, then the
// answer. </think> is one token, streamed in a delta of its own.
var r1 = []string{"Okay, the user", " asks 2+2.", "\n", "</think>", "\n\n", "4", "."}

// thinkStep is one call to the same node and what it must give.
type thinkStep struct {
	whole  bool
	reply  fakeopenai.Reply
	wantC  string // content
	wantR  string // reasoning
	reason string
}

// TestThinkOpenedByTemplate: the backend learns that a node's template
// opens the think block from a </think> no <think> opened, and splits that
// node's later answers from their first byte. A whole answer is split
// after the fact; content a streamed answer sent before the </think>
// cannot be taken back. A node that answers without thinking is not left
// with every answer taken for reasoning.
func TestThinkOpenedByTemplate(t *testing.T) {
	split := []thinkStep{
		{false, fakeopenai.Reply{Content: r1}, "4.", "Okay, the user asks 2+2.\n", "learned: split from the first byte"},
		{true, fakeopenai.Reply{Content: r1}, "4.", "Okay, the user asks 2+2.\n", "learned, whole"},
	}
	tests := []struct {
		name  string
		steps []thinkStep
	}{
		{"streamed first", append([]thinkStep{
			{false, fakeopenai.Reply{Content: r1}, "Okay, the user asks 2+2.\n4.", "", "sent before the </think>"},
		}, split...)},
		{"whole first", append([]thinkStep{
			{true, fakeopenai.Reply{Content: r1}, "4.", "Okay, the user asks 2+2.\n", "split after the fact"},
		}, split...)},
		{"empty block", append([]thinkStep{
			{true, fakeopenai.Reply{Content: r1}, "4.", "Okay, the user asks 2+2.\n", ""},
			// R1 answering without thinking closes the block at once.
			{false, fakeopenai.Reply{Content: []string{"\n\n", "</think>", "\n\n", "Hi"}}, "Hi", "", "the template opened an empty block"},
		}, split...)},
		{"model opens its own", []thinkStep{
			{true, fakeopenai.Reply{Content: r1}, "4.", "Okay, the user asks 2+2.\n", ""},
			// Qwen3's /no_think: the model writes the empty block.
			{false, fakeopenai.Reply{Content: []string{"<think>", "\n\n", "</think>", "\n\n", "Hi"}}, "Hi", "", "the model's own <think> is eaten"},
			{false, fakeopenai.Reply{Content: []string{"Hel", "lo"}}, "Hello", "", "a model that opens its own block is not started inside"},
		}},
		{"stops inside", []thinkStep{
			{true, fakeopenai.Reply{Content: r1}, "4.", "Okay, the user asks 2+2.\n", ""},
			{true, fakeopenai.Reply{Content: []string{"Hello"}}, "Hello", "", "a whole answer that stopped without </think> had no block"},
			{true, fakeopenai.Reply{Content: r1}, "4.", "Okay, the user asks 2+2.\n", ""},
			{false, fakeopenai.Reply{Content: []string{"Hel", "lo"}}, "", "Hello", "streamed, it was taken for reasoning"},
			{false, fakeopenai.Reply{Content: []string{"Hel", "lo"}}, "Hello", "", "but no longer"},
		}},
		{"cut short inside", []thinkStep{
			{true, fakeopenai.Reply{Content: r1}, "4.", "Okay, the user asks 2+2.\n", ""},
			{false, fakeopenai.Reply{Content: []string{"Okay, the user", " asks"}, FinishReason: "length"}, "", "Okay, the user asks", "reasoning cut by the token cap"},
			{true, fakeopenai.Reply{Content: []string{"Okay, the user", " asks"}, FinishReason: "length"}, "", "Okay, the user asks", "whole"},
			split[0],
		}},
		{"code naming the tag", []thinkStep{
			// A model that does not think, writing code that strips R1's
			// reasoning (split("\n</think>\n\n") as evaluation scripts
			// do): its next answer is not taken for reasoning.
			{false, fakeopenai.Reply{Content: []string{"Keep the answer:\n```python\n", "answer = out.split(\"\\n", "</think>", "\\n\\n\")[-1]\n```"}},
				"Keep the answer:\n```python\nanswer = out.split(\"\\n</think>\\n\\n\")[-1]\n```", "", "the tag in code is text"},
			{false, fakeopenai.Reply{Content: []string{"Hel", "lo"}}, "Hello", "", "never started inside"},
		}},
		{"plain node", []thinkStep{
			{false, fakeopenai.Reply{Content: []string{"Use <b>", " and </b> tags."}}, "Use <b> and </b> tags.", "", ""},
			{false, fakeopenai.Reply{Content: []string{"<think>", "plan", "</think>", "ok"}}, "ok", "plan", ""},
			{false, fakeopenai.Reply{Content: []string{"Hel", "lo"}}, "Hello", "", "never started inside"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var replies []fakeopenai.Reply
			for _, st := range tt.steps {
				replies = append(replies, st.reply)
			}
			srv := fakeopenai.New(t, replies...)
			b := New(nodeAt(srv.BaseURL()), nil)
			for i, st := range tt.steps {
				req := userRequest("2+2?")
				req.Whole = st.whole
				got, err := collect(context.Background(), b, req)
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				if got.content != st.wantC || got.reasoning != st.wantR {
					t.Errorf("call %d (%s): content %q, reasoning %q; want %q, %q", i, st.reason, got.content, got.reasoning, st.wantC, st.wantR)
				}
				for _, c := range got.chunks {
					if strings.Contains(c.Content, "</think>") && !strings.Contains(st.wantC, "</think>") || strings.Contains(c.Reasoning, "</think>") {
						t.Errorf("call %d: chunk %+v has the tag", i, c)
					}
				}
			}
			if n := len(srv.Requests()); n != len(tt.steps) {
				t.Errorf("%d requests, want %d", n, len(tt.steps))
			}
		})
	}
}
