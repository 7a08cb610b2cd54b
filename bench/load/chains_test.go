package main

import (
	"testing"

	"chainproxy/config"
)

// The chain scenario's configuration is one the proxy accepts, with the
// design's three nodes on the simulator and the default stages over them.
func TestChainsConfig(t *testing.T) {
	cfg, err := config.Parse([]byte(chainsConfig("http://127.0.0.1:1", t.TempDir())))
	if err != nil {
		t.Fatalf("config.Parse(chainsConfig) = %v", err)
	}
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
