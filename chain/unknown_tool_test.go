package chain_test

import (
	"context"
	"strings"
	"testing"

	"chainproxy/chain"
)

// TestUnknownToolNote: a chain stage that misspells a tool is told the tools it
// may call, each once, the client's included.
func TestUnknownToolNote(t *testing.T) {
	h := newHarness(t, `
nodes:
  - name: OL1
    provider: mock
    mock:
      turns:
        - tool_calls: [{id: c1, name: get_wether, args: {city: Paris}}]
        - content: "Sorry."
  - {name: M1, provider: mock, mock: {turns: [{content: x}]}}
  - {name: M2, provider: mock, mock: {turns: [{content: y}]}}
`)
	res, err := h.engine.Run(context.Background(), &chain.RunRequest{
		Model: chain.ModelReflexive, Conversation: t.Name(), ClientTools: clientTools, ToolChoice: chain.ToolChoice{Mode: "auto"},
		Messages: []chain.Message{{Role: "user", Content: "weather in Paris"}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	uses := res.Trace.Stages[0].ToolsUsed
	if len(uses) == 0 {
		t.Fatalf("no tool call in the trace: %+v", res.Trace.Stages[0])
	}
	note := uses[0].Result
	if uses[0].Status != chain.ToolError || !strings.Contains(note, `unknown tool "get_wether"`) {
		t.Fatalf("status %s, note %q", uses[0].Status, note)
	}
	if n := strings.Count(strings.ToLower(note), "available tools"); n != 1 {
		t.Errorf("the list comes %d times: %q", n, note)
	}
	for _, name := range []string{"get_weather", "get_time", "list_dir", "read_file"} {
		if n := strings.Count(note, name); n != 1 {
			t.Errorf("%s named %d times in %q, want once", name, n, note)
		}
	}
}
