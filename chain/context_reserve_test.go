package chain_test

import (
	"context"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"

	"chainproxy/chain"
	"chainproxy/internal/fakeopenai"
)

// The answer needs room in the window: the request's max_tokens, else
// memory.answer_reserve, at most half the window (docs/context.md). A
// client asking more than the window for its answer (Open WebUI and
// LibreChat let the user set max_tokens freely) still gets its question
// answered, the history folded to leave half the window.
func TestContextAnswerReserve(t *testing.T) {
	for _, tc := range []struct {
		name      string
		maxTokens int
		folded    bool
	}{
		{"answer_reserve", 0, false},
		{"small max_tokens", 100, false},
		{"max_tokens above the window, half kept", 8000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeopenai.NewFunc(t, func(_ int, _ *goopenai.ChatCompletionRequest) fakeopenai.Reply {
				return fakeopenai.Reply{Content: []string{"run3."}}
			})
			e := openaiEngine(t, srv.BaseURL(), 4096) // answer_reserve 256
			req := &chain.RunRequest{Model: chain.ModelSimple, Messages: codeConversation(10, 800)}
			if tc.maxTokens > 0 {
				req.Params.MaxTokens = &tc.maxTokens
			}
			res, err := e.Run(context.Background(), req, nil)
			if err != nil {
				t.Fatal(err)
			}
			ct := res.Trace.Stages[0].Context
			if folded := len(ct.Actions) > 0; folded != tc.folded {
				t.Errorf("actions %v, want folded %v", actionNames(ct), tc.folded)
			}
			if tc.folded && ct.EstimatedTokens > 4096/2 {
				t.Errorf("estimated %d tokens, above the half of the window left beside the answer", ct.EstimatedTokens)
			}
		})
	}
}

// A relay request (a node named as the model) is sent as the client wrote
// it: its prompt is the client's business, even over the window.
func TestContextRelayNotFitted(t *testing.T) {
	srv := fakeopenai.New(t, fakeopenai.Reply{Content: []string{"run3."}})
	e := openaiEngine(t, srv.BaseURL(), 2048)
	msgs := codeConversation(30, 800)
	if _, err := e.Run(context.Background(), &chain.RunRequest{Model: "A", Messages: msgs}, nil); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || len(reqs[0].Messages) != len(msgs) {
		t.Fatalf("%d calls, %d messages sent of %d: want the prompt as it came", len(reqs), len(reqs[0].Messages), len(msgs))
	}
}
