package chain_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"

	"chainproxy/chain"
	"chainproxy/internal/fakeopenai"
)

// thinkingOpenAIEngine is one OpenAI-compatible node whose configuration
// says its model thinks (capabilities: [tools, thinking]): the engine then
// asks its summaries with node.Request.NoThink.
func thinkingOpenAIEngine(t *testing.T, url string) *chain.Engine {
	t.Helper()
	return engineOf(t, fmt.Sprintf(`
nodes:
  - {name: A, provider: openai, base_url: %q, model: fake-model, timeout: 10s, context_window: 4096, capabilities: [tools, thinking]}
chain:
  stages: [{node: A, max_turns: 1}]
  simple_node: A
memory: {answer_reserve: 256}
`, url))
}

// noThinkAsked reports whether req carries vLLM's and llama-server's switch
// of a Qwen3 chat template's thinking: chat_template_kwargs.enable_thinking
// false.
func noThinkAsked(req *goopenai.ChatCompletionRequest) bool {
	v, ok := req.ChatTemplateKwargs["enable_thinking"]
	return ok && v == false
}

// A Qwen3 summarizer thinks by default. Served by vLLM, SGLang or
// llama-server, it is told not to by chat_template_kwargs
// {"enable_thinking": false} (docs.vllm.ai features/reasoning_outputs:
// "To disable it, you must pass enable_thinking=False in your
// chat_template_kwargs"; llama.cpp tools/server/README.md
// chat_template_kwargs). Not told, it spends the summary's cap (512
// tokens) on reasoning, the summary is empty, and the older turns are
// dropped instead of summarized. OpenAI proper refuses the unknown field
// with 400 "Unrecognized request argument supplied": the summary is asked
// again without it. A server that ignores it leaves the summary to fail as
// before. A summary whose reasoning came apart (reasoning_content) is
// judged, and sent on, by its content alone.
func TestSummaryThinkingSummarizerToldNotToThink(t *testing.T) {
	const reasoning = "Okay, the user wants a summary of run1 to run20. Let me go through each turn"
	thinks := fakeopenai.Reply{Reasoning: []string{reasoning}, FinishReason: "length"}
	summary := fakeopenai.Reply{Content: []string{summaryText}}
	tests := []struct {
		name   string
		answer func(req *goopenai.ChatCompletionRequest) fakeopenai.Reply
		// asks are the summarizer requests wanted: whether each carries
		// the switch.
		asks       []bool
		summarized bool
	}{
		{"honours", func(req *goopenai.ChatCompletionRequest) fakeopenai.Reply {
			if noThinkAsked(req) {
				return summary
			}
			return thinks
		}, []bool{true}, true},
		{"refuses", func(req *goopenai.ChatCompletionRequest) fakeopenai.Reply {
			if req.ChatTemplateKwargs != nil {
				return fakeopenai.Reply{Status: 400, Error: "Unrecognized request argument supplied: chat_template_kwargs", ErrorType: "invalid_request_error"}
			}
			return summary
		}, []bool{true, false}, true},
		{"ignores", func(*goopenai.ChatCompletionRequest) fakeopenai.Reply { return thinks }, []bool{true}, false},
		{"reasoning apart", func(*goopenai.ChatCompletionRequest) fakeopenai.Reply {
			return fakeopenai.Reply{Reasoning: []string{reasoning}, Content: []string{summaryText}}
		}, []bool{true}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeopenai.NewFunc(t, func(_ int, req *goopenai.ChatCompletionRequest) fakeopenai.Reply {
				if strings.HasPrefix(req.Messages[0].Content, "You summarise") {
					return tc.answer(req)
				}
				return fakeopenai.Reply{Content: []string{"run3."}, PromptTokens: 900, CompletionTokens: 2}
			})
			e := thinkingOpenAIEngine(t, srv.BaseURL())
			res, err := e.Run(context.Background(), &chain.RunRequest{Model: chain.ModelSimple, Messages: codeConversation(30, 800)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Message.Content != "run3." {
				t.Fatalf("answer %q", res.Message.Content)
			}
			var asks []bool
			var stage *goopenai.ChatCompletionRequest
			reqs := srv.Requests()
			for i := range reqs {
				if strings.HasPrefix(reqs[i].Messages[0].Content, "You summarise") {
					asks = append(asks, noThinkAsked(&reqs[i]))
				} else {
					stage = &reqs[i]
				}
			}
			if fmt.Sprint(asks) != fmt.Sprint(tc.asks) {
				t.Errorf("summarizer requests told not to think: %v, want %v", asks, tc.asks)
			}
			acts := contextActions(res)
			if got := strings.Contains(acts, "summarized"); got != tc.summarized {
				t.Fatalf("actions %s: summarized %v, want %v", acts, got, tc.summarized)
			}
			if !tc.summarized {
				return
			}
			var sent strings.Builder
			for _, m := range stage.Messages {
				sent.WriteString(m.Content)
			}
			if !strings.Contains(sent.String(), summaryText) || strings.Contains(sent.String(), reasoning) {
				t.Errorf("the stage's prompt does not carry the summary alone:\n%s", sent.String())
			}
		})
	}
}

// An OpenAI-compatible server's model list rarely says a model thinks
// (capabilities not configured): the node is known to think once one of
// its answers carried reasoning, and its summaries are asked not to from
// then on. The first request's answer shows the reasoning; the second,
// longer than the window, is summarized by the same node, told not to
// think.
func TestSummaryThinkingLearnedFromAnswers(t *testing.T) {
	srv := fakeopenai.NewFunc(t, func(_ int, req *goopenai.ChatCompletionRequest) fakeopenai.Reply {
		if strings.HasPrefix(req.Messages[0].Content, "You summarise") {
			if noThinkAsked(req) {
				return fakeopenai.Reply{Content: []string{summaryText}}
			}
			return fakeopenai.Reply{Reasoning: []string{"Let me go through each turn"}, FinishReason: "length"}
		}
		return fakeopenai.Reply{Reasoning: []string{"The user asks about run3."}, Content: []string{"run3."}, PromptTokens: 900, CompletionTokens: 2}
	})
	e := openaiEngine(t, srv.BaseURL(), 4096)
	if _, err := e.Run(context.Background(), &chain.RunRequest{Model: chain.ModelSimple, Messages: codeConversation(1, 100)}, nil); err != nil {
		t.Fatal(err)
	}
	res, err := e.Run(context.Background(), &chain.RunRequest{Model: chain.ModelSimple, Messages: codeConversation(30, 800)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if acts := contextActions(res); !strings.Contains(acts, "summarized") {
		t.Errorf("actions %s: the summary was not made", acts)
	}
}
