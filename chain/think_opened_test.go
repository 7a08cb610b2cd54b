package chain_test

import (
	"context"
	"strings"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"

	"chainproxy/chain"
	"chainproxy/config"
	"chainproxy/internal/fakeopenai"
)

// r1Answer is how a model whose chat template ends the prompt with
// "<think>\n" answers when its server does not parse reasoning (vLLM
// without --reasoning-parser, SGLang, llama-server --reasoning-format
// none): the reasoning, a </think> no <think> opened, then the answer.
// DeepSeek-R1 and its distills, QwQ and Qwen3's thinking-only models have
// such templates (deepseek-ai/DeepSeek-R1#352, vllm-project/vllm#13125);
// vLLM's own parser takes everything before that </think> as reasoning
// (vllm/reasoning/deepseek_r1_reasoning_parser.py). </think> is one token
// of their vocabularies, so it comes in a delta of its own.
func r1Answer(reasoning, answer string) []string {
	return []string{reasoning[:len(reasoning)/2], reasoning[len(reasoning)/2:], "\n", "</think>", "\n\n", answer}
}

const (
	m1Thinks = "Okay, the notes say a.txt holds alpha. I should just restate it."
	m2Thinks = "Hmm, the synthesis says alpha. Let me double-check the wording."
)

// TestReasoningOpenedByTemplate: an OpenAI-compatible node serving such a
// model has its reasoning split from its answer: the client never sees a
// literal </think>, and the next stage's prompt has M1's synthesis, not its
// reasoning. A streamed first answer cannot take back the content it sent
// before the </think> that showed it was reasoning; the node's answers
// after it are split from their first byte.
func TestReasoningOpenedByTemplate(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "whole", true: "stream"}[stream], func(t *testing.T) {
			scripts := map[string][]say{
				"OL1": {{content: []string{"OL1 notes: a.txt says alpha."}}},
				"M1":  {{content: r1Answer(m1Thinks, m1Text)}},
				"M2":  {{content: r1Answer(m2Thinks, m2Text)}},
			}
			var y strings.Builder
			y.WriteString("nodes:\n")
			nodes := map[string]fakeNode{}
			for _, name := range []string{"OL1", "M1", "M2"} {
				n, line := startNode(t, config.ProviderOpenAI, name, scripts[name])
				nodes[name] = n
				y.WriteString(line)
			}
			y.WriteString("chain:\n  simple_node: OL1\n  stages:\n    - {node: OL1, max_turns: 4, tools: true}\n    - {node: M1, max_turns: 1}\n    - {node: M2, max_turns: 1}\n")
			eng := engineOf(t, y.String())
			for run := range 2 {
				res, deltas, err := runEmit(t, eng, stream, &chain.RunRequest{
					TraceID: "t", Model: chain.ModelReflexive, Conversation: t.Name(),
					Messages: []chain.Message{{Role: "user", Content: "what is in a.txt?"}},
				})
				if err != nil {
					t.Fatalf("run %d: %v", run, err)
				}
				for _, s := range res.Trace.Stages {
					if strings.Contains(s.Output, "</think>") {
						t.Errorf("run %d: stage %s output %q has the tag", run, s.Node, s.Output)
					}
				}
				if strings.Contains(deltas, "</think>") {
					t.Errorf("run %d: the client saw %q", run, deltas)
				}
				if stream && run == 0 {
					// Each node's first answer was streamed (a run that
					// is watched streams every stage) and sent before
					// the </think> that showed what it was.
					continue
				}
				if m1 := res.Trace.Stages[1]; m1.Output != m1Text || m1.Reasoning != m1Thinks+"\n" {
					t.Errorf("run %d: M1 output %q, reasoning %q; want %q, %q", run, m1.Output, m1.Reasoning, m1Text, m1Thinks+"\n")
				}
				msgs := nodes["M2"].messages()
				if prompt := strings.Join(msgs[len(msgs)-1], "\n"); strings.Contains(prompt, m1Thinks) || !strings.Contains(prompt, m1Text) {
					t.Errorf("run %d: M2 was sent %q; want M1's synthesis without its reasoning", run, prompt)
				}
				if res.Message.Content != m2Text || res.Message.Reasoning != m2Thinks+"\n" {
					t.Errorf("run %d: answer %q, reasoning %q; want %q, %q", run, res.Message.Content, res.Message.Reasoning, m2Text, m2Thinks+"\n")
				}
				if stream && deltas != m2Text {
					t.Errorf("run %d: the client saw %q, want %q", run, deltas, m2Text)
				}
			}
		})
	}
}

// TestReasoningOpenedByTemplateInSummary: a summarizer whose template opens the think
// block writes "reasoning</think>summary"; the summary kept and sent with
// the later requests is the text after the tag, asked whole as summaries
// are, from the node's first answer on.
func TestReasoningOpenedByTemplateInSummary(t *testing.T) {
	const (
		thinks  = "Okay, the user wants a summary of turns 1 to 20. Let me go through them."
		summary = "Summary: the user ran run1 to run20; each returned an error."
	)
	srv := fakeopenai.NewFunc(t, func(_ int, req *goopenai.ChatCompletionRequest) fakeopenai.Reply {
		if strings.HasPrefix(req.Messages[0].Content, "You summarise") {
			return fakeopenai.Reply{Content: r1Answer(thinks, summary)}
		}
		return fakeopenai.Reply{Content: []string{"run3."}, PromptTokens: 900, CompletionTokens: 2}
	})
	e := openaiEngine(t, srv.BaseURL(), 4096)
	res, err := e.Run(context.Background(), &chain.RunRequest{Model: chain.ModelSimple, Messages: codeConversation(30, 800)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if acts := strings.Join(actionNames(res.Trace.Stages[0].Context), ","); !strings.Contains(acts, "summarized") {
		t.Fatalf("actions %s, want the older turns summarized", acts)
	}
	reqs := srv.Requests()
	var prompt strings.Builder
	for _, m := range reqs[len(reqs)-1].Messages {
		prompt.WriteString(m.Content + "\n")
	}
	if p := prompt.String(); !strings.Contains(p, summary) || strings.Contains(p, thinks) || strings.Contains(p, "</think>") {
		t.Errorf("the answering call was sent %q; want the summary without its reasoning", p)
	}
}
