package chain_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ollama/ollama/api"

	"chainproxy/chain"
	"chainproxy/internal/fakeollama"
)

// Ollama's runner keeps the previous prompt's KV cache and evaluates only
// what follows the longest common prefix (ollama v0.17.4
// runner/ollamarunner/cache.go, LoadCacheSlot and findLongestCachedPrefix):
// on a small GPU or a CPU a 4k-token prompt read again costs seconds. A
// conversation that outgrew the node's window, resent one turn longer at
// each request as chat clients do, must keep the head of its fitted
// prompt (the stage's instructions, the summary, the earlier questions)
// from one request to the next between two folds, and call the
// summarizer only at a fold: the fold moved by one turn at every request,
// with a summarizer call and the whole prompt evaluated again each time.
func TestContextPrefixStableAcrossRequests(t *testing.T) {
	var summaries atomic.Int32
	srv := fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply {
		if strings.HasPrefix(req.Messages[0].Content, "You summarise") {
			summaries.Add(1)
			return fakeollama.Reply{Content: []string{"The user asked about the run functions; each returns its steps' errors."}}
		}
		// A prompt of about 4 characters a token, as the estimate counts.
		tokens := 0
		for _, m := range req.Messages {
			tokens += (len(m.Content) + 16) / 4
		}
		return fakeollama.Reply{Content: []string{"It does what its name says."}, PromptEvalCount: tokens, EvalCount: 8}
	})
	e := ollamaEngine(t, srv.URL)
	const requests = 40
	var msgs []chain.Message
	var prev string
	folds, beyond := 0, 0
	for n := 1; n <= requests; n++ {
		msgs = append(msgs, chain.Message{Role: "user", Content: fmt.Sprintf("What does function run%d do?", n)})
		before := summaries.Load()
		res, err := e.Run(context.Background(), &chain.RunRequest{Model: chain.ModelSimple, Messages: msgs}, nil)
		if err != nil {
			t.Fatalf("request %d: %v", n, err)
		}
		reqs := srv.Requests()
		cur := renderedOllama(reqs[len(reqs)-1].Messages)
		common := 0
		for common < len(prev) && common < len(cur) && prev[common] == cur[common] {
			common++
		}
		folded := summaries.Load() > before
		var acts []string
		if ct := res.Trace.Stages[0].Context; ct != nil {
			for _, a := range ct.Actions {
				acts = append(acts, fmt.Sprintf("%s %d–%d", a.Action, a.FromTurn, a.ToTurn))
			}
		}
		t.Logf("request %2d: %5d chars, %5d in common with the previous %5d, summarizer called %v, %v", n, len(cur), common, len(prev), folded, acts)
		if len(acts) > 0 {
			beyond++
		}
		if folded {
			folds++
		} else if common < len(prev) {
			t.Errorf("request %d: no fold, yet the previous prompt is not the head of this one (%d of %d characters in common)", n, common, len(prev))
		}
		prev = cur
		msgs = append(msgs, chain.Message{Role: "assistant", Content: "It runs these steps:\n" + strings.Repeat(fmt.Sprintf("step %d: check the input and return its error.\n", n), 30)})
	}
	if beyond < 15 {
		t.Fatalf("only %d requests beyond the window: the test proves nothing", beyond)
	}
	if folds > beyond/3 {
		t.Errorf("%d summarizer calls in %d requests beyond the window: the fold moves at nearly every request", folds, beyond)
	}
}

// renderedOllama is a prompt as the runner's cache compares it: roles and
// texts one after the other.
func renderedOllama(msgs []api.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(m.Role)
		b.WriteString("\n")
		b.WriteString(m.Content)
		b.WriteString("\n\x00")
	}
	return b.String()
}
