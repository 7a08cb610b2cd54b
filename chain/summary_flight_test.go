package chain_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"chainproxy/chain"
	"chainproxy/internal/fakeopenai"
)

// summaryText is what the scripted summarizer writes.
const summaryText = "The user asked what run1 to run20 do; each runs steps that return errors."

// slowSummarizer is a server whose summarizer calls wait for release (or
// for their client to go away), and whose other calls answer at once. It
// counts the summarizer calls and signals the first.
type slowSummarizer struct {
	srv     *fakeopenai.Server
	calls   atomic.Int32
	started chan struct{} // closed by the first summarizer call
	release chan struct{}
	once    sync.Once
}

func newSlowSummarizer(t *testing.T) *slowSummarizer {
	s := &slowSummarizer{started: make(chan struct{}), release: make(chan struct{})}
	s.srv = fakeopenai.NewFunc(t, func(_ int, req *goopenai.ChatCompletionRequest) fakeopenai.Reply {
		if !strings.HasPrefix(req.Messages[0].Content, "You summarise") {
			return fakeopenai.Reply{Content: []string{"run3."}, PromptTokens: 900, CompletionTokens: 2}
		}
		s.calls.Add(1)
		s.once.Do(func() { close(s.started) })
		<-s.release
		return fakeopenai.Reply{Content: []string{summaryText}}
	})
	t.Cleanup(s.free)
	return s
}

func (s *slowSummarizer) free() {
	select {
	case <-s.release:
	default:
		close(s.release)
	}
}

// waitWaiters waits until n requests wait for e's summarizer calls.
func waitWaiters(t *testing.T, e *chain.Engine, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); chain.SummaryWaiters(e) != n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests wait for the summary, want %d", chain.SummaryWaiters(e), n)
		}
	}
}

// outcome is one Run's result.
type outcome struct {
	res *chain.Result
	err error
}

func runAsync(ctx context.Context, e *chain.Engine, msgs []chain.Message) <-chan outcome {
	out := make(chan outcome, 1)
	go func() {
		res, err := e.Run(ctx, &chain.RunRequest{Model: chain.ModelSimple, Messages: msgs}, nil)
		out <- outcome{res, err}
	}()
	return out
}

// contextActions are a stage's context actions as "action:detail".
func contextActions(res *chain.Result) string {
	var out []string
	for _, a := range res.Trace.Stages[0].Context.Actions {
		out = append(out, a.Action+":"+a.Detail)
	}
	return strings.Join(out, ", ")
}

// Two requests of one conversation arrive together: a client that retries
// while its first request is still being answered (the OpenAI SDKs retry
// a timed-out request, openai-python's max_retries defaulting to 2), or
// a chat UI's side requests beside the answer. Each needs the same summary
// of the same older turns, and the summarizer, a small local model, is at
// its busiest: the second request waits for the first one's call instead
// of making its own, and its trace says it used that summary.
func TestSummaryConcurrentRequestsShareOneCall(t *testing.T) {
	sum := newSlowSummarizer(t)
	e := openaiEngine(t, sum.srv.BaseURL(), 4096)
	msgs := codeConversation(20, 800)

	first := runAsync(t.Context(), e, msgs)
	<-sum.started
	second := runAsync(t.Context(), e, msgs)
	// The second request reaches its summary while the first call runs.
	waitWaiters(t, e, 2)
	sum.free()

	a, b := <-first, <-second
	if a.err != nil || b.err != nil {
		t.Fatalf("runs: %v, %v", a.err, b.err)
	}
	if n := sum.calls.Load(); n != 1 {
		t.Errorf("%d summarizer calls for one summary, want 1", n)
	}
	if acts := contextActions(a.res); !strings.Contains(acts, "summarized") {
		t.Errorf("first request's actions %s, want summarized", acts)
	}
	if acts := contextActions(b.res); !strings.Contains(acts, "reused:made by a concurrent request") {
		t.Errorf("second request's actions %s, want the summary reused from the concurrent request", acts)
	}
	for _, c := range b.res.Trace.Stages[0].Calls {
		if c.Kind == "summary" {
			t.Errorf("second request's trace has a summary call of its own: %+v", c)
		}
	}
	// Both prompts carry the summary.
	var with int
	for _, req := range sum.srv.Requests() {
		for _, m := range req.Messages {
			if strings.Contains(m.Content, summaryText) && !strings.HasPrefix(req.Messages[0].Content, "You summarise") {
				with++
			}
		}
	}
	if with != 2 {
		t.Errorf("%d stage prompts carry the summary, want 2", with)
	}
}

// The client of the request whose call it is goes away (it timed out and
// retries, say) while another request waits for the same summary: the
// call goes on for the one still waiting. And a waiting request whose own
// client goes away stops waiting at once, without cancelling the call.
func TestSummaryFlightCancellation(t *testing.T) {
	t.Run("caller leaves, waiter gets it", func(t *testing.T) {
		sum := newSlowSummarizer(t)
		e := openaiEngine(t, sum.srv.BaseURL(), 4096)
		msgs := codeConversation(20, 800)
		ctx, cancel := context.WithCancel(t.Context())
		first := runAsync(ctx, e, msgs)
		<-sum.started
		second := runAsync(t.Context(), e, msgs)
		waitWaiters(t, e, 2)
		cancel()
		waitWaiters(t, e, 1)
		sum.free()
		b := <-second
		if b.err != nil {
			t.Fatalf("waiting request: %v", b.err)
		}
		if acts := contextActions(b.res); !strings.Contains(acts, "reused:made by a concurrent request") {
			t.Errorf("waiting request's actions %s, want the shared summary", acts)
		}
		if a := <-first; !errors.Is(a.err, context.Canceled) {
			t.Errorf("first request: %v, want it canceled", a.err)
		}
		if n := sum.calls.Load(); n != 1 {
			t.Errorf("%d summarizer calls, want 1", n)
		}
	})
	t.Run("waiter leaves", func(t *testing.T) {
		sum := newSlowSummarizer(t)
		e := openaiEngine(t, sum.srv.BaseURL(), 4096)
		msgs := codeConversation(20, 800)
		first := runAsync(t.Context(), e, msgs)
		<-sum.started
		ctx, cancel := context.WithCancel(t.Context())
		second := runAsync(ctx, e, msgs)
		waitWaiters(t, e, 2)
		cancel()
		select {
		case b := <-second:
			if !errors.Is(b.err, context.Canceled) {
				t.Errorf("waiter: %v, want canceled", b.err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the waiter whose client left is still waiting")
		}
		sum.free()
		a := <-first
		if a.err != nil {
			t.Fatalf("first request: %v", a.err)
		}
		if acts := contextActions(a.res); !strings.Contains(acts, "summarized") {
			t.Errorf("first request's actions %s, want summarized", acts)
		}
	})
	t.Run("everyone leaves", func(t *testing.T) {
		// Nobody waits any more: the call is cancelled rather than
		// kept for memory.summary_timeout.
		sum := newSlowSummarizer(t)
		e := openaiEngine(t, sum.srv.BaseURL(), 4096)
		ctx, cancel := context.WithCancel(t.Context())
		first := runAsync(ctx, e, codeConversation(20, 800))
		<-sum.started
		cancel()
		select {
		case a := <-first:
			if !errors.Is(a.err, context.Canceled) {
				t.Errorf("run: %v, want canceled", a.err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the summarizer call outlived its only caller")
		}
	})
}
