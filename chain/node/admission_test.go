package node

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"chainproxy/config"
)

func one(n int) *int { return &n }

func TestAdmissionOrderAndLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdmission([]config.Node{{Name: "OL1", Provider: config.ProviderOllama, MaxQueue: 3}})
		release, err := a.Acquire(t.Context(), "OL1", false)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var order []string
		var wg sync.WaitGroup
		enqueue := func(name string, batch bool) {
			wg.Go(func() {
				rel, err := a.Acquire(t.Context(), "OL1", batch)
				if err != nil {
					t.Errorf("%s: %v", name, err)
					return
				}
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				rel()
			})
			synctest.Wait() // name is queued before the next one
		}
		enqueue("batch1", true)
		enqueue("inter1", false)
		enqueue("inter2", false)
		if got := a.Queued("OL1"); got != 3 {
			t.Fatalf("queued = %d, want 3", got)
		}
		// The queue is full: the next one is refused at once.
		_, err = a.Acquire(t.Context(), "OL1", false)
		var qe *QueueFullError
		if !errors.As(err, &qe) || qe.Node != "OL1" || qe.RetryAfter <= 0 {
			t.Fatalf("Acquire on a full queue = %v, want QueueFullError", err)
		}
		release()
		wg.Wait()
		want := []string{"inter1", "inter2", "batch1"}
		if len(order) != 3 || order[0] != want[0] || order[1] != want[1] || order[2] != want[2] {
			t.Errorf("order = %v, want %v (interactive first, FIFO within a class)", order, want)
		}
	})
}

func TestAdmissionCancelWhileQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdmission([]config.Node{{Name: "OL1", MaxConcurrency: one(1), MaxQueue: 4}})
		release, _ := a.Acquire(t.Context(), "OL1", false)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := a.Acquire(ctx, "OL1", false)
			errc <- err
		}()
		synctest.Wait()
		if a.Queued("OL1") != 1 {
			t.Fatal("not queued")
		}
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		if a.Queued("OL1") != 0 {
			t.Error("a cancelled caller stayed in the queue")
		}
		release()
		// The slot was not leaked: the next caller gets it at once.
		rel, err := a.Acquire(t.Context(), "OL1", false)
		if err != nil {
			t.Fatal(err)
		}
		rel()
		rel() // a second release is harmless
		if r2, err := a.Acquire(t.Context(), "OL1", false); err != nil {
			t.Fatal(err)
		} else {
			r2()
		}
	})
}

func TestAdmissionUnlimited(t *testing.T) {
	a := NewAdmission([]config.Node{{Name: "M2", Provider: config.ProviderOpenAI}})
	for range 100 {
		if _, err := a.Acquire(t.Context(), "M2", false); err != nil {
			t.Fatal(err)
		}
	}
}
