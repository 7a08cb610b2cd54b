package chain_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"

	"chainproxy/chain"
	"chainproxy/internal/fakeopenai"
)

// The summarizer's answer is capped (max_tokens; num_predict on Ollama)
// and an upstream stops there, finish_reason "length" (OpenAI's chat
// completions reference; Ollama's api/types.go Options.NumPredict). The
// words it is asked for must fit that cap, in any language: French and
// German take about twice as many tokens a word as English in the Llama 3
// and Qwen tokenizers. Asked more, a summarizer that writes the
// conversation in order is cut before its latest turns, and that cut
// summary is cached for every later request.
func TestSummaryWordsFitItsCap(t *testing.T) {
	words := regexp.MustCompile(`at most (\d+) words`)
	for _, window := range []int{4096, 8192, 32768} {
		t.Run(strconv.Itoa(window), func(t *testing.T) {
			srv := fakeopenai.NewFunc(t, func(_ int, req *goopenai.ChatCompletionRequest) fakeopenai.Reply {
				if strings.HasPrefix(req.Messages[0].Content, "You summarise") {
					return fakeopenai.Reply{Content: []string{"L'utilisateur a demandé ce que font run1 à run40."}}
				}
				return fakeopenai.Reply{Content: []string{"run3."}, PromptTokens: 900, CompletionTokens: 2}
			})
			e := openaiEngine(t, srv.BaseURL(), window)
			// About twice the window: the older turns are folded.
			conv := codeConversation(window*8/1000, 800)
			if _, err := e.Run(context.Background(), &chain.RunRequest{Model: chain.ModelSimple, Messages: conv}, nil); err != nil {
				t.Fatal(err)
			}
			var found bool
			for _, req := range srv.Requests() {
				if !strings.HasPrefix(req.Messages[0].Content, "You summarise") {
					continue
				}
				found = true
				m := words.FindStringSubmatch(req.Messages[0].Content)
				if m == nil {
					t.Fatalf("no word limit in %q", req.Messages[0].Content)
				}
				n, _ := strconv.Atoi(m[1])
				//lint:ignore SA1019 max_tokens, the field the backend sends to OpenAI-compatible servers
				limit := max(req.MaxTokens, req.MaxCompletionTokens)
				if limit == 0 || 2*n > limit {
					t.Errorf("asked for %d words with a cap of %d tokens", n, limit)
				}
			}
			if !found {
				t.Fatal("no summarizer call")
			}
		})
	}
}
