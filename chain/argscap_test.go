package chain_test

import (
	"context"
	"strings"
	"testing"

	"chainproxy/chain"
)

// argsCapNodes script calls whose raw arguments are over the config's
// tools.max_args_bytes (64).
const argsCapNodes = `
tools: {max_args_bytes: 64}
chain:
  stages: [{node: OL1, max_turns: 2, tools: true}]
  simple_node: OL1
  max_total_turns: 3
nodes:
  - name: OL1
    provider: mock
    mock:
      turns:
        - tool_calls: [{id: c1, name: get_weather, raw_args: '` + `{"city":"Paris Paris Paris Paris Paris Paris Paris Paris Paris Paris Paris Paris Paris Paris"}` + `'}]
      scenarios:
        - when: server tool
          turns:
            - tool_calls: [{id: s1, name: read_file, raw_args: '{"path":"a.txt","pad":"` + `xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx` + `"}'}]
            - content: "The file could not be read."
        - when: are longer than
          turns:
            - content: "Sorry, that was too long."
`

// TestArgsOverCapRefused: a call whose arguments are over
// tools.max_args_bytes is not run (server tool) nor passed on (client
// tool); the model is told why, and the trace records an error.
func TestArgsOverCapRefused(t *testing.T) {
	h := newHarness(t, argsCapNodes)
	for _, tc := range []struct {
		name, ask string
		model     string
		client    bool
		wantTool  string
	}{
		{"client tool", "weather please", chain.ModelSimple, true, "get_weather"},
		{"server tool", "server tool please", chain.ModelReflexive, false, "read_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &chain.RunRequest{Model: tc.model, Conversation: t.Name(), Messages: []chain.Message{{Role: "user", Content: tc.ask}}}
			if tc.client {
				req.ClientTools = clientTools
			}
			res, err := h.engine.Run(context.Background(), req, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Message.ToolCalls) != 0 {
				t.Errorf("calls passed on: %+v", res.Message.ToolCalls)
			}
			used := res.Trace.Stages[0].ToolsUsed
			if len(used) == 0 || used[0].Name != tc.wantTool || used[0].Status != chain.ToolError || !strings.Contains(used[0].Result, "tools.max_args_bytes") {
				t.Fatalf("tools used = %+v; want %s refused with an error naming tools.max_args_bytes", used, tc.wantTool)
			}
			if res.Message.Content == "" {
				t.Errorf("no answer after the refusal; trace %+v", res.Trace)
			}
		})
	}
}
