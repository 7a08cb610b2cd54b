package chain

import (
	"context"
	"errors"
	"testing"
	"time"

	"chainproxy/config"
	"chainproxy/internal/redistest"
	"chainproxy/store"
)

func newShared(t *testing.T, url string, limit, maxQueue int) *SharedAdmission {
	t.Helper()
	slots, err := store.NewSlots(url, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slots.Close() })
	nodes := []config.Node{{Name: "N", Provider: config.ProviderOllama, MaxConcurrency: &limit, MaxQueue: maxQueue}}
	return NewSharedAdmission(t.Context(), nodes, slots, NewAdmission(nodes), nil)
}

// TestSharedAdmissionQueue: the queue's bound holds across replicas (429
// with Retry-After), and a waiter whose context ends leaves the queue at
// once, holding nothing.
func TestSharedAdmissionQueue(t *testing.T) {
	rs := redistest.Start(t)
	a, b := newShared(t, rs.URL(), 1, 1), newShared(t, rs.URL(), 1, 1)
	ctx := t.Context()
	release, err := a.Acquire(ctx, "N", false)
	if err != nil {
		t.Fatal(err)
	}

	wctx, cancel := context.WithCancel(ctx)
	waited := make(chan error, 1)
	go func() { // ends when Acquire returns: cancel below
		rel, err := b.Acquire(wctx, "N", true)
		if rel != nil {
			rel()
		}
		waited <- err
	}()
	for b.Queued("N") != 1 {
		time.Sleep(time.Millisecond)
	}
	_, err = a.Acquire(ctx, "N", false)
	var qf *QueueFullError
	if !errors.As(err, &qf) || qf.Queued != 1 || qf.RetryAfter <= 0 {
		t.Fatalf("with the one place taken on another replica: err %v, want QueueFullError", err)
	}

	cancel()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	if q := b.Queued("N"); q != 0 {
		t.Errorf("queued %d after the waiter left", q)
	}
	release()
	// The queue is empty and the slot free: taken at once.
	rel, err := a.Acquire(ctx, "N", false)
	if err != nil {
		t.Fatal(err)
	}
	rel()
	if s := a.Status(); s != AdmissionShared {
		t.Errorf("status %q, want shared", s)
	}
}

// TestSharedAdmissionRenews: a call running past its lease keeps its slot:
// the lease is renewed while it runs, and given back when it ends.
func TestSharedAdmissionRenews(t *testing.T) {
	rs := redistest.Start(t)
	lease := 900 * time.Millisecond
	slots, err := store.NewSlots(rs.URL(), lease)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slots.Close() })
	limit := 1
	nodes := []config.Node{{Name: "N", Provider: config.ProviderOllama, MaxConcurrency: &limit, MaxQueue: 4}}
	a := NewSharedAdmission(t.Context(), nodes, slots, NewAdmission(nodes), nil)
	release, err := a.Acquire(t.Context(), "N", false)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * lease)
	if g, _, _, err := slots.Take(t.Context(), "N", "other", false, 1, 4, lease); err != nil || g {
		t.Fatalf("after three leases the running call's slot was free (granted %v, err %v)", g, err)
	}
	if err := slots.Release(t.Context(), "N", "other"); err != nil {
		t.Fatal(err)
	}
	release()
	if g, _, _, err := slots.Take(t.Context(), "N", "other", false, 1, 4, lease); err != nil || !g {
		t.Fatalf("after release: granted %v, err %v", g, err)
	}
}
