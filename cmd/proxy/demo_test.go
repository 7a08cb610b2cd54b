package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/chain/mock"
	"chainproxy/store"
	"chainproxy/tools"
)

// TestDemoDegenerateScenarios plays the demo's "chant" and "echo" scripts
// through the engine: M2's answer is degenerate in both, cut after its
// first sentence in one and replaced by M1's synthesis in the other.
func TestDemoDegenerateScenarios(t *testing.T) {
	cfg, err := demoConfig("")
	if err != nil {
		t.Fatal(err)
	}
	root, err := demoWorkspace()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	cfg.Tools.Root = root
	backends := map[string]chain.Backend{}
	for i := range cfg.Nodes {
		n := &cfg.Nodes[i]
		n.Mock.Delay, n.Mock.ChunkDelay = 0, 0 // the script, not its pace
		backends[n.Name] = mock.New(*n)
	}
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	mem := store.NewMemory(100, 10)
	eng, err := chain.New(cfg, chain.Deps{Backends: backends, Tools: reg, Guard: antiloop.NewGuard(mem, cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL)})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		msg, reply, errPrefix string
	}{
		{"chant about the plan", "The plan covers the first risk and the second risk still needs a rollback step. ", "repetition loop"},
		{"echo the plan", "Synthesis: notes.md states the goals", "verbatim copy of M1's answer; answered with M1's answer"},
	}
	for _, tt := range tests {
		t.Run(tt.msg, func(t *testing.T) {
			var streamed strings.Builder
			res, err := eng.Run(context.Background(), &chain.RunRequest{
				TraceID: "t", Model: chain.ModelReflexive, Conversation: tt.msg,
				Messages: []chain.Message{{Role: "user", Content: tt.msg}},
			}, func(ev chain.Event) error {
				if ev.Kind == chain.EventDelta {
					streamed.WriteString(ev.Content)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			m2 := res.Trace.Stages[2]
			if m2.Status != chain.StageDegenerate || !strings.HasPrefix(m2.Error, tt.errPrefix) {
				t.Errorf("M2 = %s (%q), want degenerate (%q…)", m2.Status, m2.Error, tt.errPrefix)
			}
			if !strings.HasPrefix(res.Message.Content, tt.reply) {
				t.Errorf("reply = %q, want %q…", res.Message.Content, tt.reply)
			}
			if n := strings.Count(streamed.String(), "rollback step."); n >= 5 {
				t.Errorf("the client saw %d copies", n)
			}
		})
	}
}
