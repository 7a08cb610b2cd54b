package node

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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

// TestSharedAdmissionLeaseLost: a call holding its node's one slot keeps
// it when Redis loses the lease under it: restarted empty (the compose
// example in docs/replicas.md runs Redis without persistence), or stalled
// past the lease (CLIENT PAUSE, https://redis.io/docs/latest/commands/client-pause/,
// stands for a fork or a slow script), which expires it by Redis's clock.
// Its next renewal takes the slot again, so that another replica's call
// waits for it rather than run beside it for the rest of the call.
func TestSharedAdmissionLeaseLost(t *testing.T) {
	const lease = 900 * time.Millisecond
	for _, tc := range []struct {
		name string
		lose func(t *testing.T, rs *redistest.Server)
	}{
		{"restarted empty", func(t *testing.T, rs *redistest.Server) { rs.Restart() }},
		{"stalled past the lease", func(t *testing.T, rs *redistest.Server) {
			c := redis.NewClient(&redis.Options{Addr: rs.Addr()})
			defer c.Close()
			if err := c.Do(t.Context(), "client", "pause", (2 * lease).Milliseconds(), "all").Err(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * lease)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := redistest.Start(t)
			limit := 1
			nodes := []config.Node{{Name: "N", Provider: config.ProviderOllama, MaxConcurrency: &limit, MaxQueue: 4}}
			replica := func() *SharedAdmission {
				slots, err := store.NewSlots(rs.URL(), lease)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { slots.Close() })
				return NewSharedAdmission(t.Context(), nodes, slots, NewAdmission(nodes), nil)
			}
			a, b := replica(), replica()
			release, err := a.Acquire(t.Context(), "N", false)
			if err != nil {
				t.Fatal(err)
			}
			tc.lose(t, rs)
			time.Sleep(lease) // renewals run
			if a.Status() != AdmissionShared || b.Status() != AdmissionShared {
				t.Fatalf("status %q and %q, want both shared", a.Status(), b.Status())
			}
			ctx, cancel := context.WithTimeout(t.Context(), lease)
			rel, err := b.Acquire(ctx, "N", false)
			cancel()
			if err == nil {
				rel()
				release()
				t.Fatal("another replica took the slot of a call still running")
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("waiting for the slot: %v, want to wait until the deadline", err)
			}
			release()
			rel, err = b.Acquire(t.Context(), "N", false)
			if err != nil {
				t.Fatalf("after the call ended: %v", err)
			}
			rel()
		})
	}
}

// TestSharedAdmissionRedisReadOnly: a master demoted to a replica by a
// failover answers PING but refuses every script that writes ("READONLY
// You can't write against a read only replica",
// https://redis.io/docs/management/replication/). The limits stay local
// until it takes writes again, rather than switch back and forth every
// second, a failed call and two log lines each time.
func TestSharedAdmissionRedisReadOnly(t *testing.T) {
	rs, master := redistest.Start(t), redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	t.Cleanup(func() { c.Close() })
	slots, err := store.NewSlots(rs.URL(), 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slots.Close() })
	var logs syncBuffer
	limit := 1
	nodes := []config.Node{{Name: "N", Provider: config.ProviderOllama, MaxConcurrency: &limit, MaxQueue: 4}}
	a := NewSharedAdmission(t.Context(), nodes, slots, NewAdmission(nodes), slog.New(slog.NewTextHandler(&logs, nil)))

	host, port, _ := strings.Cut(master.Addr(), ":")
	if err := c.Do(t.Context(), "replicaof", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	for range 25 {
		rel, err := a.Acquire(t.Context(), "N", false)
		if err != nil {
			t.Fatal(err)
		}
		rel()
		time.Sleep(100 * time.Millisecond)
	}
	if n := strings.Count(logs.String(), "redis unreachable"); n != 1 || a.Status() != AdmissionLocal {
		t.Errorf("with Redis read-only for 2.5s: %d switches to local limits, status %q; want 1, local; logs:\n%s", n, a.Status(), logs.String())
	}

	if err := c.Do(t.Context(), "replicaof", "no", "one").Err(); err != nil {
		t.Fatal(err)
	}
	// The probe runs once a second; the limit holds at ten times that.
	deadline := time.Now().Add(30 * time.Second)
	for a.Status() != AdmissionShared {
		if time.Now().After(deadline) {
			t.Fatal("limits still local 30s after Redis took writes again")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for the log writes of several
// goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
