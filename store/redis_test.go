package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"chainproxy/antiloop"
	"chainproxy/internal/redistest"
	"chainproxy/store"
)

func newRedis(t *testing.T, url string, traces int) *store.Redis {
	t.Helper()
	r, err := store.NewRedis(url, traces)
	if err != nil {
		t.Fatalf("NewRedis(%q) error: %v", url, err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// eventually polls cond every 20 ms for up to 30 s: real Redis expiry and
// reconnection are asynchronous (a degraded store tries Redis once a
// second), the limit must hold at ten times that on a loaded machine, and a
// poll never sleeps longer than needed.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 30s waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRedisClaimSharedByTwoStores(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	a, b := newRedis(t, srv.URL(), 0), newRedis(t, srv.URL(), 0)

	if ok, err := a.Claim(ctx, "k", time.Minute); err != nil || !ok {
		t.Fatalf("a.Claim(k) = %v, %v; want true", ok, err)
	}
	if ok, err := b.Claim(ctx, "k", time.Minute); err != nil || ok {
		t.Errorf("b.Claim(k) after a's claim = %v, %v; want false", ok, err)
	}
	if ok, err := a.Claim(ctx, "k", time.Minute); err != nil || ok {
		t.Errorf("a.Claim(k) again = %v, %v; want false", ok, err)
	}
	if v, ok, err := b.Get(ctx, "k"); err != nil || !ok || string(v) != "pending" {
		t.Errorf("b.Get(k) = %q, %v, %v; want pending", v, ok, err)
	}
	if err := b.Set(ctx, "k", []byte("done"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := a.Get(ctx, "k"); err != nil || !ok || string(v) != "done" {
		t.Errorf("a.Get(k) after b.Set = %q, %v, %v; want done", v, ok, err)
	}
	if v, ok, err := a.Get(ctx, "missing"); err != nil || ok || v != nil {
		t.Errorf("a.Get(missing) = %q, %v, %v; want nothing", v, ok, err)
	}

	// Many claimers at once: exactly one wins.
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		won int
	)
	for i := range 20 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			ok, err := s.Claim(ctx, "race", time.Minute)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				won++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if won != 1 {
		t.Errorf("20 concurrent claims on two stores: %d won, want 1", won)
	}
}

func TestRedisTTL(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	r := newRedis(t, srv.URL(), 0)

	const ttl = 200 * time.Millisecond
	start := time.Now()
	if ok, err := r.Claim(ctx, "claim", ttl); err != nil || !ok {
		t.Fatalf("Claim = %v, %v; want true", ok, err)
	}
	if err := r.Set(ctx, "set", []byte("v"), ttl); err != nil {
		t.Fatal(err)
	}
	if err := r.Set(ctx, "forever", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	gone := func(key string) func() bool {
		return func() bool {
			_, ok, err := r.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			return !ok
		}
	}
	eventually(t, "the claim to expire", gone("claim"))
	eventually(t, "the set key to expire", gone("set"))
	if d := time.Since(start); d < ttl {
		t.Errorf("keys with TTL %v gone after %v, want no sooner than the TTL", ttl, d)
	}
	if ok, err := r.Claim(ctx, "claim", ttl); err != nil || !ok {
		t.Errorf("Claim after expiry = %v, %v; want true", ok, err)
	}
	if _, ok, err := r.Get(ctx, "forever"); err != nil || !ok {
		t.Errorf("Get(forever) = %v, %v; want a key with no TTL kept", ok, err)
	}
}

func TestRedisTraces(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	a, b := newRedis(t, srv.URL(), 3), newRedis(t, srv.URL(), 3)
	for i := 1; i <= 5; i++ {
		s := a
		if i%2 == 0 {
			s = b
		}
		if err := s.PutTrace(ctx, fmt.Sprint("t", i), []byte(fmt.Sprint("data", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.PutTrace(ctx, "t4", []byte("data4b")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		id     string
		want   string
		wantOK bool
	}{
		{"t1", "", false},
		{"t2", "", false},
		{"t3", "data3", true},
		{"t4", "data4b", true},
		{"t5", "data5", true},
	}
	for _, tt := range tests {
		for name, s := range map[string]*store.Redis{"a": a, "b": b} {
			got, ok, err := s.GetTrace(ctx, tt.id)
			if err != nil || ok != tt.wantOK || string(got) != tt.want {
				t.Errorf("%s.GetTrace(%q) = %q, %v, %v; want %q, %v", name, tt.id, got, ok, err, tt.want, tt.wantOK)
			}
		}
	}
	// Only the kept traces and the list remain in Redis.
	if n := dbSize(t, srv); n != 4 {
		t.Errorf("keys in Redis = %d, want 4 (3 traces and the list)", n)
	}
}

// dbSize returns the number of keys in the server's database.
func dbSize(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), DisableIdentity: true})
	defer c.Close()
	n, err := c.DBSize(context.Background()).Result()
	if err != nil {
		t.Fatalf("DBSIZE: %v", err)
	}
	return n
}

func TestNewRedisBadURL(t *testing.T) {
	for _, url := range []string{"http://127.0.0.1:6379", "redis://127.0.0.1:6379/notadb", "::"} {
		if _, err := store.NewRedis(url, 0); err == nil {
			t.Errorf("NewRedis(%q) = nil error, want one", url)
		}
	}
}

// TestGuardTwoReplicas runs the anti-loop guard of two proxy replicas over
// one Redis: whatever the interleaving, a call is executed once, and the
// other replica then gets its result.
func TestGuardTwoReplicas(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	replicas := []*antiloop.Guard{
		antiloop.NewGuard(newRedis(t, srv.URL(), 0), 30*time.Second, 5*time.Minute),
		antiloop.NewGuard(newRedis(t, srv.URL(), 0), 30*time.Second, 5*time.Minute),
	}
	sig, err := antiloop.Signature("list_dir", []byte(`{"path":"."}`))
	if err != nil {
		t.Fatal(err)
	}
	// Both replicas receive the same call, with the same ID, many times at once.
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		executed []int
	)
	for i := range 20 {
		wg.Go(func() {
			g := replicas[i%2]
			d, err := g.Admit(ctx, "conv", "call_0", sig, true)
			if err != nil {
				t.Error(err)
				return
			}
			if d.Verdict == antiloop.Execute {
				mu.Lock()
				executed = append(executed, i%2)
				mu.Unlock()
				if err := g.Record(ctx, "conv", "call_0", sig, []byte("a.txt b.txt")); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if len(executed) != 1 {
		t.Fatalf("call admitted for execution %d times across two replicas, want 1", len(executed))
	}
	other := replicas[1-executed[0]]
	for _, id := range []string{"call_0", "call_1", ""} {
		d, err := other.Admit(ctx, "conv", id, sig, true)
		if err != nil || d.Verdict != antiloop.Cached || string(d.Result) != "a.txt b.txt" {
			t.Errorf("other replica Admit(call id %q) = %+v, %v; want Cached with the recorded result", id, d, err)
		}
	}
	d, err := other.Admit(ctx, "conv", "call_0", sig, false)
	if err != nil || d.Verdict != antiloop.Blocked {
		t.Errorf("other replica Admit(call_0, not read-only) = %+v, %v; want Blocked", d, err)
	}
}
