package chain_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"

	"chainproxy/chain"
	"chainproxy/internal/fakeollama"
)

// A stage's turns are paragraphs: OL1 says "Let me look at the workspace."
// with its tool call, then writes its notes after the result. The next
// stage reads them a paragraph apart, as the trace's output shows them,
// not glued into "workspace.Raw findings".
func TestFindingsKeepTurnsApart(t *testing.T) {
	ol1 := fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply {
		if req.Messages[len(req.Messages)-1].Role != "tool" {
			return fakeollama.Reply{Content: []string{"Let me look at the workspace."}, ToolCalls: []fakeollama.ToolCall{{Name: "read_file", Args: map[string]any{"path": "a.txt"}}}}
		}
		return fakeollama.Reply{Content: []string{"Raw findings: a.txt says alpha."}}
	})
	m1 := fakeollama.New(t, fakeollama.Reply{Content: []string{"It says alpha."}})
	e := engineOf(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, base_url: %q, model: qwen3:4b, context_window: 32768}
  - {name: M1, provider: ollama, base_url: %q, model: qwen3:14b, context_window: 32768}
chain:
  stages: [{node: OL1, max_turns: 2, tools: true}, {node: M1, max_turns: 1}]
  simple_node: OL1
`, ol1.URL, m1.URL))
	if _, err := e.Run(context.Background(), &chain.RunRequest{Model: chain.ModelReflexive, Messages: []chain.Message{{Role: "user", Content: "What does a.txt say?"}}}, nil); err != nil {
		t.Fatal(err)
	}
	reqs := m1.Requests()
	if len(reqs) == 0 {
		t.Fatal("M1 was not asked")
	}
	msgs := reqs[0].Messages
	q := msgs[len(msgs)-1].Content
	if !strings.Contains(q, "Let me look at the workspace.\n\nRaw findings") {
		t.Errorf("M1's findings do not keep OL1's turns apart:\n%s", q)
	}
}
