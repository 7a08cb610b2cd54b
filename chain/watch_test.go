package chain_test

import (
	"context"
	"slices"
	"testing"

	"chainproxy/chain"
)

type kinds []string

func (k *kinds) Watch(req *chain.RunRequest, ev chain.Event) { *k = append(*k, ev.Kind) }

// TestWatcherSeesEveryRun: the engine's Watcher sees a run's progress
// whether the caller follows it (emit) or not, and never its deltas.
func TestWatcherSeesEveryRun(t *testing.T) {
	h := newHarness(t, `
nodes:
  - {name: OL1, provider: mock, mock: {turns: [{content: "notes"}]}}
  - {name: M1, provider: mock, mock: {turns: [{content: "synthesis"}]}}
  - {name: M2, provider: mock, mock: {turns: [{content: "answer"}]}}
chain:
  stages: [{node: OL1, max_turns: 1}, {node: M1, max_turns: 1}, {node: M2, max_turns: 1}]
`)
	var w kinds
	h.engine.SetWatcher(&w)
	stage := []string{chain.EventStageStart, chain.EventTurn, chain.EventStageEnd}
	want := slices.Concat([]string{chain.EventClassified}, stage, stage, stage)
	for _, follow := range []bool{false, true} {
		w = nil
		var emit func(chain.Event) error
		var deltas int
		if follow {
			emit = func(ev chain.Event) error {
				if ev.Kind == chain.EventDelta {
					deltas++
				}
				return nil
			}
		}
		if _, err := h.engine.Run(context.Background(), &chain.RunRequest{Model: chain.ModelReflexive, Messages: []chain.Message{{Role: "user", Content: "q"}}}, emit); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(w, want) {
			t.Errorf("follow=%v: watcher saw %q, want %q", follow, w, want)
		}
		if follow && deltas == 0 {
			t.Error("the caller got no deltas")
		}
	}
	h.engine.SetWatcher(nil)
	w = nil
	if _, err := h.engine.Run(context.Background(), &chain.RunRequest{Model: chain.ModelReflexive, Messages: []chain.Message{{Role: "user", Content: "q"}}}, nil); err != nil || len(w) != 0 {
		t.Errorf("after SetWatcher(nil): saw %q (err %v), want nothing", w, err)
	}
}
