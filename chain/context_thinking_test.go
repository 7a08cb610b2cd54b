package chain_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/config"
	"chainproxy/internal/fakeollama"
	"chainproxy/internal/nodetest"
	"chainproxy/store"
)

// An agent on Ollama's API sends its tool-call turns back as they came,
// thinking included (ollama-python's agent loops append response.message),
// and Ollama renders the thinking of the messages after the last user
// message into the prompt (ollama v0.17.4 model/renderers/qwen3vl.go,
// deepseek3.go). The proxy's measure left it out: a prompt whose current
// exchange carried pages of thinking was sent as fitting, over the window.
// Measured, the history is folded to make room for it.
func TestContextCountsOllamaThinking(t *testing.T) {
	srv := fakeollama.New(t, fakeollama.Reply{Content: []string{"main.go starts the server."}})
	e := ollamaEngine(t, srv.URL)
	thought := strings.Repeat("The user wants main.go; I should read it before answering. ", 100) // ~6 KB
	var msgs []chain.Message
	for i := 1; i <= 6; i++ {
		msgs = append(msgs,
			chain.Message{Role: "user", Content: fmt.Sprintf("What does util%d.go do?", i)},
			chain.Message{Role: "assistant", Content: strings.Repeat("It formats dates. ", 80)})
	}
	msgs = append(msgs,
		chain.Message{Role: "user", Content: "And main.go?"},
		chain.Message{Role: "assistant", Reasoning: thought, ToolCalls: []chain.ToolCall{{ID: "c1", Name: "read_file", Arguments: `{"path":"main.go"}`}}},
		chain.Message{Role: "tool", ToolCallID: "c1", Name: "read_file", Content: "package main\n\nfunc main() { serve() }\n"})
	res, err := e.Run(context.Background(), &chain.RunRequest{Model: chain.ModelSimple, Messages: msgs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ct := res.Trace.Stages[0].Context
	if ct == nil || len(ct.Actions) == 0 {
		t.Fatalf("context %+v: the prompt was sent unfitted", ct)
	}
	if ct.EstimatedTokens < len(thought)/4 {
		t.Errorf("estimated %d tokens, the current thinking alone is %d", ct.EstimatedTokens, len(thought)/4)
	}
	reqs := srv.Requests()
	sent := reqs[len(reqs)-1].Messages
	chars := 0
	for _, m := range sent {
		chars += 16 + len(m.Content) + len(m.Thinking)
	}
	if budget := (4096 - 1024) * 4; chars > budget {
		t.Errorf("sent %d characters with the thinking, budget %d", chars, budget)
	}
	if !strings.Contains(sent[len(sent)-2].Thinking, "read it before answering") {
		t.Error("the current exchange's thinking was not sent as the client wrote it")
	}
}

// ollamaEngine is one Ollama node A (qwen3, a 4,096-token window) that
// answers every request, with the summary cache in memory.
func ollamaEngine(t *testing.T, url string) *chain.Engine {
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
nodes:
  - {name: A, provider: ollama, base_url: %q, model: qwen3, timeout: 10s, context_window: 4096}
chain:
  stages: [{node: A, max_turns: 1}]
  simple_node: A
`, url)))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Root = ""
	mem := store.NewMemory(1000, 10)
	e, err := chain.New(cfg, chain.Deps{Nodes: nodetest.Build(t, cfg, nil),
		Guard: antiloop.NewGuard(mem, 0, 0), Memory: mem})
	if err != nil {
		t.Fatal(err)
	}
	return e
}
