package chain_test

import (
	"context"
	"strings"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"

	"chainproxy/chain"
	"chainproxy/internal/fakeopenai"
)

// A small summarizer model can fall into a repetition loop, writing one
// line again and again until its cap stops it (finish_reason "length"), as
// the stages' models do (issue 25, antiloop.Repeats). That summary is
// cached for memory.summary_ttl and sent to every later request of the
// conversation: it is cut after the first copy, as a stage's answer is,
// and the stage's prompt carries the line once.
func TestSummaryRepetitionLoopCut(t *testing.T) {
	line := "- The user asked what run3 does; it runs steps that return errors.\n"
	srv := fakeopenai.NewFunc(t, func(_ int, req *goopenai.ChatCompletionRequest) fakeopenai.Reply {
		if strings.HasPrefix(req.Messages[0].Content, "You summarise") {
			return fakeopenai.Reply{Content: []string{"- The user asked what run1 does.\n" + strings.Repeat(line, 30)}, FinishReason: "length"}
		}
		return fakeopenai.Reply{Content: []string{"run3."}, PromptTokens: 900, CompletionTokens: 2}
	})
	e := openaiEngine(t, srv.BaseURL(), 8192)
	if _, err := e.Run(context.Background(), &chain.RunRequest{Model: chain.ModelSimple, Messages: codeConversation(40, 800)}, nil); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	var summary string
	for _, m := range reqs[len(reqs)-1].Messages {
		if strings.HasPrefix(m.Content, "Summary of the earlier conversation") {
			summary = m.Content
		}
	}
	if summary == "" {
		t.Fatal("no summary in the stage's prompt")
	}
	if !strings.Contains(summary, "what run1 does") || strings.Count(summary, "what run3 does") != 1 {
		t.Errorf("summary sent, the loop not cut after its first copy:\n%s", summary)
	}
}
