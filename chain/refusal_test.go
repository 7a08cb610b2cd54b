package chain_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/config"
	"chainproxy/internal/fakeopenai"
	"chainproxy/internal/nodetest"
	"chainproxy/store"
	"chainproxy/tools"
)

// openaiEngine is an engine whose one node, A, is an OpenAI-compatible
// server at url with the given context_window, through the real backend.
func openaiEngine(t *testing.T, url string, window int) *chain.Engine {
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
nodes:
  - {name: A, provider: openai, base_url: %q, model: fake-model, timeout: 10s, context_window: %d}
chain:
  stages: [{node: A, max_turns: 1}]
  simple_node: A
memory: {answer_reserve: 256}
`, url, window)))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Root = t.TempDir()
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	mem := store.NewMemory(1000, 10)
	e, err := chain.New(cfg, chain.Deps{
		Nodes: nodetest.Build(t, cfg, nil),
		Tools: reg,
		Guard: antiloop.NewGuard(mem, cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL),
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// codeConversation is 12 turns of questions about Go code whose answers
// quote size bytes of it each, and a last question: code packs fewer
// characters a token than the 4 assumed before a node's first call.
func codeConversation(n, size int) []chain.Message {
	var msgs []chain.Message
	for i := 1; i <= n; i++ {
		var code strings.Builder
		for j := 0; code.Len() < size; j++ {
			fmt.Fprintf(&code, "\tif err := step%d_%d(ctx); err != nil {\n\t\treturn fmt.Errorf(\"step %d: %%w\", err)\n\t}\n", i, j, j)
		}
		msgs = append(msgs,
			chain.Message{Role: "user", Content: fmt.Sprintf("What does function run%d do?", i)},
			chain.Message{Role: "assistant", Content: "It runs these steps:\n```go\n" + code.String() + "```"})
	}
	return append(msgs, chain.Message{Role: "user", Content: "Which of these functions can fail?"})
}

// llama-server refuses a prompt longer than its slot's context with HTTP
// 400 and its own error type, exceed_context_size_error
// (ggml-org/llama.cpp tools/server/server-context.cpp at fb40266: "the
// request exceeds the available context size, try increasing it", or
// "input is larger than the max context size. skipping"; later builds say
// "request (N tokens) exceeds the available context size (M tokens), try
// increasing it"). The proxy must take it for what it is, as it does
// Ollama's and vLLM's refusals: fit harder and retry once and, when the
// retry is refused too, answer context_length_exceeded naming the node,
// not an upstream failure.
func TestLlamaServerContextRefusal(t *testing.T) {
	for _, msg := range []string{
		"the request exceeds the available context size, try increasing it",
		"request (4391 tokens) exceeds the available context size (4096 tokens), try increasing it",
		"input is larger than the max context size. skipping",
	} {
		t.Run(msg[:20], func(t *testing.T) {
			refusal := fakeopenai.Reply{Status: 400, Error: msg, ErrorType: "exceed_context_size_error"}
			// The first prompt is refused, the summarizer and the retry
			// are answered.
			srv := fakeopenai.NewFunc(t, func(call int, req *goopenai.ChatCompletionRequest) fakeopenai.Reply {
				switch {
				case call == 0:
					return refusal
				case strings.HasPrefix(req.Messages[0].Content, "You summarise"):
					return fakeopenai.Reply{Content: []string{"The user asked what run1 to run10 do; each runs steps that return errors."}}
				}
				return fakeopenai.Reply{Content: []string{"run3 and run7."}, PromptTokens: 900, CompletionTokens: 4}
			})
			e := openaiEngine(t, srv.BaseURL(), 4096)
			res, err := e.Run(context.Background(), &chain.RunRequest{Model: chain.ModelSimple, Messages: codeConversation(12, 800)}, nil)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			reqs := srv.Requests()
			first, last := reqs[0], reqs[len(reqs)-1]
			if res.Message.Content != "run3 and run7." {
				t.Fatalf("answer %q after %d calls", res.Message.Content, len(reqs))
			}
			if chars(last.Messages) >= chars(first.Messages) {
				t.Errorf("the retry weighs %d characters, the refused prompt %d: not fitted harder", chars(last.Messages), chars(first.Messages))
			}
			if q := last.Messages[len(last.Messages)-1].Content; q != "Which of these functions can fail?" {
				t.Errorf("the retry ends with %q", q)
			}
			ct := res.Trace.Stages[0].Context
			if ct == nil || !strings.Contains(strings.Join(actionNames(ct), ","), "refit") {
				t.Errorf("context trace %+v, want a refit action", ct)
			}

			// Refused every time: the client is told the prompt is too long.
			srv = fakeopenai.New(t, refusal)
			e = openaiEngine(t, srv.BaseURL(), 4096)
			_, err = e.Run(context.Background(), &chain.RunRequest{Model: chain.ModelSimple, Messages: codeConversation(12, 800)}, nil)
			var cl *chain.ContextLengthError
			if !errors.As(err, &cl) || cl.Node != "A" || !strings.Contains(cl.Upstream, "context size") {
				t.Fatalf("err %v, want a ContextLengthError naming A with the server's words", err)
			}
		})
	}
}

func chars(msgs []goopenai.ChatCompletionMessage) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Content)
	}
	return n
}

func actionNames(ct *chain.ContextTrace) []string {
	var out []string
	for _, a := range ct.Actions {
		out = append(out, a.Action)
	}
	return out
}
