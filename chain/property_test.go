package chain_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/config"
	"chainproxy/internal/nodetest"
	"chainproxy/store"
	"chainproxy/tools"
)

// countingRunner counts executions per call identity: the tool's own key,
// so that a path or a default spelled differently counts as the same call.
// calls counts the runs that gave a result, failed those that ended in an
// error.
type countingRunner struct {
	*tools.Registry
	mu            sync.Mutex
	calls, failed map[uint64]int
}

func (c *countingRunner) Call(ctx context.Context, name string, args []byte) (string, error) {
	key, err := c.Key(name, args)
	if err != nil {
		return "", err
	}
	sig := antiloop.Hash(key.Identity)
	res, err := c.Registry.Call(ctx, name, args)
	c.mu.Lock()
	if err != nil {
		c.failed[sig]++
	} else {
		c.calls[sig]++
	}
	c.mu.Unlock()
	return res, err
}

// TestNoScriptedLoopExecutesACallTwice is the promise, checked over
// many random scripts: whatever mix of repeated calls, reordered keys,
// paths and defaults spelled differently, batches and malformed calls a
// model sends, no deterministic call that gave a result is executed twice
// in a request (one stage uses tools, and the TTL guard covers the rest),
// one that failed is retried at most until its third identical failure
// (an error is no result to reuse), the chain stays within its global
// budget, and it answers.
func TestNoScriptedLoopExecutesACallTwice(t *testing.T) {
	calls := []string{
		`{name: list_dir, args: {path: "."}}`,
		`{name: list_dir, raw_args: '{ "path" : "." }'}`,
		`{name: list_dir, args: {path: sub}}`,
		`{name: read_file, args: {path: a.txt}}`,
		`{name: read_file, raw_args: '{"path":"a.txt","x":1}'}`,
		`{name: search_files, args: {pattern: alpha, path: "."}}`,
		`{name: search_files, args: {path: ".", pattern: alpha}}`,
		`{name: list_dir, args: {path: "./"}}`,
		`{name: list_dir, args: {path: ""}}`,
		`{name: read_file, args: {path: ./a.txt}}`,
		`{name: read_file, args: {path: sub/../a.txt}}`,
		`{name: read_file, args: {path: "a.txt/"}}`,
		`{name: search_files, args: {pattern: alpha}}`,
		`{name: search_files, args: {pattern: alpha, path: "./", regex: false}}`,
		`{name: search_files, raw_args: '{"pattern":"alpha","regex":null,"path":"."}'}`,
		`{name: ls, args: {}}`,
		`{name: read_file, raw_args: '{path'}`,
	}
	for seed := range uint64(150) {
		r := rand.New(rand.NewPCG(seed, 42))
		var script strings.Builder
		script.WriteString("nodes:\n  - name: OL1\n    provider: mock\n    mock:\n      turns:\n")
		for range 1 + r.IntN(6) {
			script.WriteString("        - tool_calls: [")
			for j := range 1 + r.IntN(4) {
				if j > 0 {
					script.WriteString(", ")
				}
				script.WriteString(calls[r.IntN(len(calls))])
			}
			script.WriteString("]\n")
		}
		script.WriteString("  - {name: M1, provider: mock, mock: {turns: [{content: m1}]}}\n  - {name: M2, provider: mock, mock: {turns: [{content: m2}]}}\n")
		model := chain.ModelReflexive
		if seed%3 == 0 {
			model = chain.ModelSimple
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			cfg, err := config.Parse([]byte(script.String()))
			if err != nil {
				t.Fatalf("%v\n%s", err, script.String())
			}
			cfg.Tools.Root = t.TempDir()
			// a.txt exists, sub does not: calls succeed and fail.
			if err := os.WriteFile(filepath.Join(cfg.Tools.Root, "a.txt"), []byte("alpha"), 0o644); err != nil {
				t.Fatal(err)
			}
			reg, err := tools.New(cfg.Tools, nil)
			if err != nil {
				t.Fatal(err)
			}
			runner := &countingRunner{Registry: reg, calls: map[uint64]int{}, failed: map[uint64]int{}}
			eng, err := chain.New(cfg, chain.Deps{Nodes: nodetest.Build(t, cfg, nodetest.Mocks), Tools: runner, Guard: antiloop.NewGuard(store.NewMemory(1000, 1), cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL)})
			if err != nil {
				t.Fatal(err)
			}
			res, err := eng.Run(context.Background(), &chain.RunRequest{Model: model, Conversation: "c", Messages: []chain.Message{{Role: "user", Content: "go"}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for sig, n := range runner.calls {
				if n > 1 {
					t.Errorf("signature %x executed %d times\n%s", sig, n, script.String())
				}
			}
			for sig, n := range runner.failed {
				if n > 3 {
					t.Errorf("signature %x failed %d times, want at most 3\n%s", sig, n, script.String())
				}
			}
			if res.Trace.Turns > cfg.Chain.MaxTotalTurns {
				t.Errorf("%d turns > budget %d", res.Trace.Turns, cfg.Chain.MaxTotalTurns)
			}
			if res.Message.Content == "" {
				t.Errorf("no answer; trace %+v", res.Trace)
			}
		})
	}
}
