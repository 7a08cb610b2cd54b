package chain_test

import (
	"context"
	"strings"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"

	"chainproxy/chain"
	"chainproxy/internal/fakeopenai"
)

// A thinking summarizer (Qwen3 and DeepSeek-R1 distills think by default)
// can spend its whole answer cap on reasoning, finish_reason "length".
// vLLM's deepseek_r1 reasoning parser then sends it all as
// reasoning_content and no content (no </think> in the output: everything
// is reasoning); its qwen3 parser sends it as content, the <think> never
// closed (vllm/reasoning/qwen3_reasoning_parser.py: without </think> the
// output is content). Either way no summary was written: the request is
// still answered, the older turns dropped, and the trace's summary call
// says why, as it does for a summarizer that failed, rather than look
// like a call that worked.
func TestSummaryEmptyAnswerIsAFailure(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply fakeopenai.Reply
		want  string
	}{
		{"reasoning only, cut", fakeopenai.Reply{Reasoning: []string{"Okay, the user wants a summary. Let me go through turn 1"}, FinishReason: "length"}, "length"},
		{"inline think, cut", fakeopenai.Reply{Content: []string{"<think>\nOkay, let me go through turn 1"}, FinishReason: "length"}, "length"},
		{"nothing", fakeopenai.Reply{Content: []string{"  \n"}}, "stop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeopenai.NewFunc(t, func(_ int, req *goopenai.ChatCompletionRequest) fakeopenai.Reply {
				if strings.HasPrefix(req.Messages[0].Content, "You summarise") {
					return tc.reply
				}
				return fakeopenai.Reply{Content: []string{"run3."}, PromptTokens: 900, CompletionTokens: 2}
			})
			e := openaiEngine(t, srv.BaseURL(), 4096)
			res, err := e.Run(context.Background(), &chain.RunRequest{Model: chain.ModelSimple, Messages: codeConversation(30, 800)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Message.Content != "run3." {
				t.Fatalf("answer %q", res.Message.Content)
			}
			st := res.Trace.Stages[0]
			if acts := strings.Join(actionNames(st.Context), ","); !strings.Contains(acts, "dropped") || strings.Contains(acts, "summarized") {
				t.Errorf("actions %s, want the older turns dropped", acts)
			}
			var sum *chain.ModelCall
			for i := range st.Calls {
				if st.Calls[i].Kind == "summary" {
					sum = &st.Calls[i]
				}
			}
			if sum == nil {
				t.Fatalf("no summary call in %+v", st.Calls)
			}
			if sum.Error == "" || !strings.Contains(sum.Error, tc.want) {
				t.Errorf("summary call error %q, want it to say no summary was written (%s)", sum.Error, tc.want)
			}
		})
	}
}
