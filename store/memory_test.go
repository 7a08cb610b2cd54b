package store_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"chainproxy/store"
)

func TestMemoryTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := store.NewMemory(0, 0)
		claim := func(key string, ttl time.Duration, want bool) {
			t.Helper()
			if got, err := m.Claim(ctx, key, ttl); err != nil || got != want {
				t.Errorf("Claim(%q) = %v, %v; want %v", key, got, err, want)
			}
		}
		get := func(key, want string, wantOK bool) {
			t.Helper()
			got, ok, err := m.Get(ctx, key)
			if err != nil || ok != wantOK || string(got) != want {
				t.Errorf("Get(%q) = %q, %v, %v; want %q, %v", key, got, ok, err, want, wantOK)
			}
		}
		claim("k", 30*time.Second, true)
		claim("k", 30*time.Second, false)
		get("k", "pending", true)
		time.Sleep(29 * time.Second)
		claim("k", 30*time.Second, false)
		time.Sleep(2 * time.Second)
		get("k", "", false)
		claim("k", 30*time.Second, true)

		if err := m.Set(ctx, "v", []byte("one"), time.Minute); err != nil {
			t.Fatal(err)
		}
		time.Sleep(59 * time.Second)
		get("v", "one", true)
		// Set renews the TTL.
		if err := m.Set(ctx, "v", []byte("two"), time.Minute); err != nil {
			t.Fatal(err)
		}
		time.Sleep(59 * time.Second)
		get("v", "two", true)
		time.Sleep(2 * time.Second)
		get("v", "", false)

		// A non-positive TTL never expires, and replacing a TTL by none works.
		if err := m.Set(ctx, "forever", []byte("x"), 0); err != nil {
			t.Fatal(err)
		}
		if err := m.Set(ctx, "was-ttl", []byte("y"), time.Second); err != nil {
			t.Fatal(err)
		}
		if err := m.Set(ctx, "was-ttl", []byte("y"), -1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(24 * time.Hour)
		get("forever", "x", true)
		get("was-ttl", "y", true)
		if got := m.Len(); got != 2 {
			t.Errorf("Len() after expiry = %d, want 2", got)
		}
	})
}

func TestMemoryBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := store.NewMemory(3, 0)
		set := func(key string, ttl time.Duration) {
			t.Helper()
			if err := m.Set(ctx, key, []byte(key), ttl); err != nil {
				t.Fatal(err)
			}
		}
		has := func(keys ...string) {
			t.Helper()
			for _, k := range keys {
				if _, ok, _ := m.Get(ctx, k); !ok {
					t.Errorf("Get(%q) missing, want present", k)
				}
			}
		}
		hasNot := func(keys ...string) {
			t.Helper()
			for _, k := range keys {
				if _, ok, _ := m.Get(ctx, k); ok {
					t.Errorf("Get(%q) present, want evicted", k)
				}
			}
		}

		set("a", time.Hour)
		set("b", time.Second) // expires first
		set("c", time.Hour)
		time.Sleep(2 * time.Second)
		set("d", time.Hour) // full: the expired b goes, not the oldest a
		has("a", "c", "d")
		hasNot("b")

		set("e", time.Hour) // full of live entries: the oldest, a, goes
		has("c", "d", "e")
		hasNot("a")

		set("c", time.Hour) // rewriting c makes d the oldest
		if ok, _ := m.Claim(ctx, "f", time.Hour); !ok {
			t.Fatal("Claim(f) = false, want true")
		}
		has("c", "e", "f")
		hasNot("d")
		if got := m.Len(); got != 3 {
			t.Errorf("Len() = %d, want 3", got)
		}

		// Many more keys than the bound: the newest stay.
		m = store.NewMemory(100, 0)
		for i := range 1000 {
			if i%2 == 0 {
				set(fmt.Sprint(i), time.Hour)
			} else {
				set(fmt.Sprint(i), 0)
			}
		}
		if got := m.Len(); got != 100 {
			t.Errorf("Len() after 1000 writes with bound 100 = %d, want 100", got)
		}
		has("900", "901", "999")
		hasNot("0", "1", "899")
	})
}

func TestMemoryTraces(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory(0, 3)
	for i := 1; i <= 5; i++ {
		if err := m.PutTrace(ctx, fmt.Sprint("t", i), []byte(fmt.Sprint("data", i))); err != nil {
			t.Fatal(err)
		}
	}
	// Storing a kept id again replaces it without evicting anything.
	if err := m.PutTrace(ctx, "t4", []byte("data4b")); err != nil {
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
		{"t6", "", false},
	}
	for _, tt := range tests {
		got, ok, err := m.GetTrace(ctx, tt.id)
		if err != nil || ok != tt.wantOK || string(got) != tt.want {
			t.Errorf("GetTrace(%q) = %q, %v, %v; want %q, %v", tt.id, got, ok, err, tt.want, tt.wantOK)
		}
	}
}

func TestMemoryCopies(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory(0, 0)
	val := []byte("abc")
	if err := m.Set(ctx, "k", val, time.Hour); err != nil {
		t.Fatal(err)
	}
	// PutTrace keeps its data (the caller hands it over); what GetTrace
	// returns is the caller's own.
	if err := m.PutTrace(ctx, "t", []byte("abc")); err != nil {
		t.Fatal(err)
	}
	val[0] = 'X'
	got, _, _ := m.Get(ctx, "k")
	got[1] = 'Y'
	tr, _, _ := m.GetTrace(ctx, "t")
	tr[1] = 'Y'
	if got, _, _ := m.Get(ctx, "k"); string(got) != "abc" {
		t.Errorf("Get after caller mutations = %q, want %q", got, "abc")
	}
	if tr, _, _ := m.GetTrace(ctx, "t"); string(tr) != "abc" {
		t.Errorf("GetTrace after caller mutations = %q, want %q", tr, "abc")
	}
}

func TestMemoryConcurrentClaim(t *testing.T) {
	m := store.NewMemory(0, 0)
	var won atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			ctx := context.Background()
			for j := range 200 {
				if ok, _ := m.Claim(ctx, "shared", time.Hour); ok {
					won.Add(1)
				}
				_ = m.Set(ctx, fmt.Sprint(i, "-", j%10), nil, time.Hour)
				_, _, _ = m.Get(ctx, "shared")
			}
		})
	}
	wg.Wait()
	if got := won.Load(); got != 1 {
		t.Errorf("concurrent Claims of one key won %d times, want 1", got)
	}
}

func TestMemoryStatus(t *testing.T) {
	m := store.NewMemory(0, 0)
	if got := m.Status(); got != "memory" {
		t.Errorf("Status() = %q, want memory", got)
	}
	if err := m.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
}
