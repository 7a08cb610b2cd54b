package main

import (
	"testing"
	"time"

	"chainproxy/config"
)

// The chain scenario's configuration is one the proxy accepts, with the
// design's three nodes on the simulator and the default stages over them.
func TestChainsConfig(t *testing.T) {
	for _, sched := range []bool{false, true} {
		cfg, err := config.Parse([]byte(chainsConfig("http://127.0.0.1:1", t.TempDir(), sched, 0.05)))
		if err != nil {
			t.Fatalf("config.Parse(chainsConfig(sched %v)) = %v", sched, err)
		}
		wait := time.Duration(0)
		if sched {
			wait = 1500 * time.Millisecond
		}
		if got := cfg.Admission.MaxReorderWait; got != wait {
			t.Errorf("sched %v: max_reorder_wait = %v, want %v", sched, got, wait)
		}
		if got := cfg.Nodes[0].KeepLoaded; got != sched {
			t.Errorf("sched %v: OL1 keep_loaded = %v, want %v", sched, got, sched)
		}
		checkChainsConfig(t, cfg)
	}
}

func checkChainsConfig(t *testing.T, cfg *config.Config) {
	t.Helper()
	var stages []string
	for _, s := range cfg.Chain.Stages {
		stages = append(stages, s.Node)
	}
	if got, want := len(stages), len(chainModels); got != want {
		t.Fatalf("stages = %q, want %d", stages, want)
	}
	for i, m := range chainModels {
		n := cfg.Nodes[i]
		if n.Name != m.node || n.Model != m.model || n.Provider != config.ProviderOllama || stages[i] != m.node {
			t.Errorf("node %d = %s %s %s, stage %s; want %s %s ollama", i, n.Name, n.Model, n.Provider, stages[i], m.node, m.model)
		}
	}
}
