package chain_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/chain/node"
	"chainproxy/config"
	"chainproxy/internal/nodetest"
	"chainproxy/store"
)

// flaky fails its first calls with an upstream status, then answers.
type flaky struct {
	calls  atomic.Int32
	fails  int32
	status int
}

func (f *flaky) Chat(ctx context.Context, req *node.Request, fn func(node.Chunk) error) error {
	if f.calls.Add(1) <= f.fails {
		return &node.UpstreamError{Node: "A", Kind: node.KindStatus, Status: f.status, Message: "busy"}
	}
	return fn(node.Chunk{Content: "ok", FinishReason: "stop"})
}

func TestBatchRetries(t *testing.T) {
	tests := []struct {
		name      string
		batch     bool
		status    int
		fails     int32
		wantCalls int32
		wantErr   bool
	}{
		{"interactive fails fast", false, 503, 2, 1, true},
		{"batch retries a 503", true, 503, 2, 3, false},
		{"batch retries a 502 until the backoff runs out", true, 502, 9, 4, true},
		{"batch never retries a 4xx", true, 400, 2, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte("nodes:\n  - {name: A, provider: mock, mock: {}, retry_backoff: [1ms, 2ms, 3ms]}\nchain:\n  stages: [{node: A, max_turns: 1}]\n  simple_node: A\n"))
			if err != nil {
				t.Fatal(err)
			}
			f := &flaky{fails: tt.fails, status: tt.status}
			eng, err := chain.New(cfg, chain.Deps{Nodes: nodetest.Build(t, cfg, ownMocks(t, map[string]*flaky{"A": f})), Guard: antiloop.NewGuard(store.NewMemory(10, 1), time.Second, time.Second)})
			if err != nil {
				t.Fatal(err)
			}
			_, err = eng.Run(context.Background(), &chain.RunRequest{Model: "A", Batch: tt.batch, Messages: []chain.Message{{Role: "user", Content: "hi"}}}, nil)
			if (err != nil) != tt.wantErr || f.calls.Load() != tt.wantCalls {
				t.Errorf("err = %v after %d calls, want error %v after %d", err, f.calls.Load(), tt.wantErr, tt.wantCalls)
			}
		})
	}
}
