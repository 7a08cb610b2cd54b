package store_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"chainproxy/internal/redistest"
	"chainproxy/store"
)

// heard collects what a summary watcher is given.
type heard struct {
	mu   sync.Mutex
	msgs []string
}

func (h *heard) add(data []byte) {
	h.mu.Lock()
	h.msgs = append(h.msgs, string(data))
	h.mu.Unlock()
}

func (h *heard) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.msgs)
}

// watch runs w.WatchSummaries until the test ends, and waits until its
// subscription is in place (PUBSUB NUMSUB counts it), so that what the
// test puts next is heard.
func watch(t *testing.T, w interface {
	WatchSummaries(context.Context, func([]byte))
}, admin *redis.Client, want int64) *heard {
	t.Helper()
	h := &heard{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { // exits when cancel runs, at the end of the test
		defer close(done)
		w.WatchSummaries(ctx, h.add)
	}()
	t.Cleanup(func() { cancel(); <-done })
	eventually(t, "the summary subscription", func() bool {
		n, err := admin.PubSubNumSub(context.Background(), "chainproxy:summaries:changed").Result()
		return err == nil && n["chainproxy:summaries:changed"] >= want
	})
	return h
}

func adminClient(t *testing.T, srv *redistest.Server) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestRedisSummariesSharedAndCapped: summaries one replica puts are read
// and heard by another, the newest N kept (N as the traces), a chain
// keeping its place while its summary changes, every key with a TTL.
func TestRedisSummariesSharedAndCapped(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	admin := adminClient(t, srv)
	a, b := newRedis(t, srv.URL(), 3), newRedis(t, srv.URL(), 3)
	h := watch(t, a, admin, 1)

	puts := []struct{ id, data string }{
		{"t1", "one"}, {"t2", "two"}, {"t1", "one, ended"}, {"t3", "three"}, {"t4", "four"},
	}
	for _, p := range puts {
		if err := b.PutSummary(ctx, p.id, []byte(p.data)); err != nil {
			t.Fatalf("PutSummary(%s) = %v", p.id, err)
		}
	}
	// t1 was put first: its update kept its place, and it went first.
	want := []string{"two", "three", "four"}
	for _, s := range []*store.Redis{a, b} {
		got, err := s.Summaries(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var strs []string
		for _, g := range got {
			strs = append(strs, string(g))
		}
		slices.Sort(strs)
		if w := slices.Sorted(slices.Values(want)); !slices.Equal(strs, w) {
			t.Errorf("Summaries() = %q, want %q", strs, w)
		}
	}
	eventually(t, "every put heard", func() bool { return len(h.all()) == len(puts) })
	var wantHeard []string
	for _, p := range puts {
		wantHeard = append(wantHeard, p.data)
	}
	if got := h.all(); !slices.Equal(got, wantHeard) {
		t.Errorf("heard %q, want %q in order", got, wantHeard)
	}
	for _, key := range []string{"chainproxy:summaries", "chainproxy:summaries:order"} {
		if ttl := admin.PTTL(ctx, key).Val(); ttl <= 0 {
			t.Errorf("PTTL(%s) = %v, want a TTL", key, ttl)
		}
	}
	if n := admin.ZCard(ctx, "chainproxy:summaries:order").Val(); n != 3 {
		t.Errorf("order holds %d ids, want 3", n)
	}
}

// TestRedisSummariesOrderLost: a Redis under an allkeys-* policy may evict
// the order key and keep the hash; the next put drops what the order no
// longer holds, so that the hash does not grow without bound.
func TestRedisSummariesOrderLost(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	admin := adminClient(t, srv)
	r := newRedis(t, srv.URL(), 3)
	for i := range 3 {
		if err := r.PutSummary(ctx, fmt.Sprint("t", i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	admin.Del(ctx, "chainproxy:summaries:order")
	for i := range 10 {
		if err := r.PutSummary(ctx, fmt.Sprint("new", i), []byte("y")); err != nil {
			t.Fatal(err)
		}
	}
	if n := admin.HLen(ctx, "chainproxy:summaries").Val(); n != 3 {
		t.Errorf("hash holds %d summaries, want 3", n)
	}
}

// TestFallbackSummariesOutage: with Redis gone the shared list is off and
// costs nothing: puts do nothing and return at once, reads find nothing,
// no error reaches the caller; once Redis is back the summaries are shared
// again and the watcher, resubscribed by itself, hears them.
func TestFallbackSummariesOutage(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	admin := adminClient(t, srv)
	a, _ := openStore(t, srv.URL())
	b, _ := openStore(t, srv.URL())
	type feed interface {
		PutSummary(context.Context, string, []byte) error
		Summaries(context.Context) ([][]byte, error)
		WatchSummaries(context.Context, func([]byte))
	}
	fa, fb := a.(feed), b.(feed)
	h := watch(t, fa, admin, 1)
	if err := fb.PutSummary(ctx, "t1", []byte("before")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the put heard", func() bool { return slices.Equal(h.all(), []string{"before"}) })

	srv.Kill()
	for range 2 {
		start := time.Now()
		if err := fb.PutSummary(ctx, "t2", []byte("during")); err != nil {
			t.Errorf("PutSummary during the outage = %v, want nil", err)
		}
		if sums, err := fb.Summaries(ctx); err != nil || len(sums) != 0 {
			t.Errorf("Summaries during the outage = %q, %v; want none, nil", sums, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("put and read during the outage took %v", d)
		}
	}
	if b.Status() != store.StatusDegraded {
		t.Errorf("Status() = %q, want degraded", b.Status())
	}

	srv.Restart()
	eventually(t, "the store back on Redis", func() bool { return b.Status() == store.StatusRedis })
	// The subscription comes back by itself (go-redis checks its connection every few seconds).
	deadline := time.Now().Add(20 * time.Second)
	for len(h.all()) < 2 && time.Now().Before(deadline) {
		if err := fb.PutSummary(ctx, "t3", []byte("after")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := h.all(); len(got) < 2 || got[1] != "after" {
		t.Errorf("heard %q, want the put after the restart", got)
	}
	if sums, err := fa.Summaries(ctx); err != nil || len(sums) != 1 || string(sums[0]) != "after" {
		t.Errorf("Summaries after the restart = %q, %v; want [after]", sums, err)
	}
}

// TestRedisCloseEndsWatchers: Close returns with no watcher left running
// (TestMain checks for leaks), and a watch begun after Close returns.
func TestRedisCloseEndsWatchers(t *testing.T) {
	srv := redistest.Start(t)
	r, err := store.NewRedis(srv.URL(), 0)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { // exits when Close ends the watch
		defer close(done)
		r.WatchSummaries(context.Background(), func([]byte) {})
	}()
	admin := adminClient(t, srv)
	eventually(t, "the subscription", func() bool {
		n, err := admin.PubSubNumSub(context.Background(), "chainproxy:summaries:changed").Result()
		return err == nil && n["chainproxy:summaries:changed"] == 1
	})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("WatchSummaries still running after Close")
	}
	r.WatchSummaries(context.Background(), func([]byte) {}) // returns at once
}
