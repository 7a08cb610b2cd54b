package chain_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/chain/ollama"
	"chainproxy/config"
	"chainproxy/internal/fakeollama"
	"chainproxy/store"
	"chainproxy/tools"
)

// A stage's turns are paragraphs: OL1 says "Let me look at the workspace."
// with its tool call, then writes its notes after the result. The next
// stage reads them a paragraph apart, as the trace's output shows them,
// not glued into "workspace.Raw findings".
func TestFindingsKeepTurnsApart(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "notes.md"), []byte("42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ol1 := fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply {
		if req.Messages[len(req.Messages)-1].Role != "tool" {
			return fakeollama.Reply{Content: []string{"Let me look at the workspace."}, ToolCalls: []fakeollama.ToolCall{{Name: "read_file", Args: map[string]any{"path": "notes.md"}}}}
		}
		return fakeollama.Reply{Content: []string{"Raw findings: notes.md says 42."}}
	})
	m1 := fakeollama.New(t, fakeollama.Reply{Content: []string{"The answer is 42."}})
	cfg, err := config.Parse(fmt.Appendf(nil, `
nodes:
  - {name: OL1, provider: ollama, base_url: %q, model: qwen3:4b, context_window: 32768}
  - {name: M1, provider: ollama, base_url: %q, model: qwen3:14b, context_window: 32768}
chain:
  stages: [{node: OL1, max_turns: 2, tools: true}, {node: M1, max_turns: 1}]
  simple_node: OL1
`, ol1.URL, m1.URL))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Root = root
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	mem := store.NewMemory(1000, 10)
	e, err := chain.New(cfg, chain.Deps{
		Backends: map[string]chain.Backend{
			"OL1": ollama.New(cfg.Nodes[0], http.DefaultClient),
			"M1":  ollama.New(cfg.Nodes[1], http.DefaultClient),
		},
		Tools: reg, Guard: antiloop.NewGuard(mem, 0, 0), Memory: mem,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Run(context.Background(), &chain.RunRequest{Model: chain.ModelReflexive, Messages: []chain.Message{{Role: "user", Content: "What does notes.md say?"}}}, nil); err != nil {
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
