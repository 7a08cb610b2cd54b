package chain_test

import (
	"context"
	"fmt"
	"testing"

	"chainproxy/chain"
	"chainproxy/internal/fakeollama"
)

// OL1 and M1 run one small model on one Ollama, with different windows
// (and SIMPLE none): Ollama keeps one runner per model and reloads it
// whenever num_ctx changes (v0.17.4 server/sched.go, needsReload), so each
// alternation between them would load the model again. Every call sends
// the larger window; each node still fits its prompt to its own.
func TestNodesSharingARunnerSendOneWindow(t *testing.T) {
	srv := fakeollama.New(t, fakeollama.Reply{Content: []string{"Fine."}})
	e := engineOf(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, base_url: %[1]q, model: qwen3:4b, context_window: 4096}
  - {name: M1, provider: ollama, base_url: %[1]q, model: qwen3:4b, context_window: 8192}
  - {name: SIMPLE, provider: ollama, base_url: %[1]q, model: qwen3:4b}
chain:
  stages: [{node: OL1, max_turns: 1}, {node: M1, max_turns: 1}]
  simple_node: SIMPLE
`, srv.URL))
	for _, model := range []string{chain.ModelReflexive, chain.ModelSimple} {
		if _, err := e.Run(context.Background(), &chain.RunRequest{Model: model, Messages: []chain.Message{{Role: "user", Content: "How are you?"}}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	reqs := srv.Requests()
	if len(reqs) < 3 {
		t.Fatalf("%d calls, want OL1's, M1's and SIMPLE's", len(reqs))
	}
	for i, r := range reqs {
		if got := r.Options["num_ctx"]; got != float64(8192) {
			t.Errorf("call %d: num_ctx %v, want 8192 for every node on the runner", i, got)
		}
	}
	nodes := e.Nodes() // in configuration order: OL1, M1, SIMPLE
	if w := e.Window(nodes[2]); w != 8192 {
		t.Errorf("SIMPLE's window %d, want the 8192 it asks for", w)
	}
	if w := e.Window(nodes[0]); w != 4096 {
		t.Errorf("OL1's window %d, want its own 4096", w)
	}
}
