package store_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"chainproxy/chain"
	"chainproxy/internal/redistest"
	"chainproxy/store"
)

var (
	_ chain.ResumeStore = (*store.Memory)(nil)
	_ chain.ResumeStore = (*store.Redis)(nil)
	_ chain.ResumeStore = (*store.Fallback)(nil)
)

// TestMemoryResumeTTL: a paused chain is found until chain.resume_ttl, then
// not; its key does not collide with the anti-loop's.
func TestMemoryResumeTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := store.NewMemory(0, 0)
		if err := m.PutResume(ctx, "k", []byte("state"), 30*time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := m.Get(ctx, "k"); ok {
			t.Error("Get(k) found the resume state: keys collide")
		}
		time.Sleep(30*time.Minute - time.Second)
		if got, ok, err := m.GetResume(ctx, "k"); err != nil || !ok || string(got) != "state" {
			t.Errorf("GetResume(k) before the TTL = %q, %v, %v; want state", got, ok, err)
		}
		time.Sleep(2 * time.Second)
		if got, ok, err := m.GetResume(ctx, "k"); err != nil || ok {
			t.Errorf("GetResume(k) after the TTL = %q, %v, %v; want nothing", got, ok, err)
		}
	})
}

// TestRedisResumeShared: what one replica saves, another finds.
func TestRedisResumeShared(t *testing.T) {
	rs := redistest.Start(t)
	a, b := newRedis(t, rs.URL(), 10), newRedis(t, rs.URL(), 10)
	ctx := t.Context()
	if err := a.PutResume(ctx, "k", []byte("state"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := b.GetResume(ctx, "k"); err != nil || !ok || string(got) != "state" {
		t.Errorf("other replica's GetResume(k) = %q, %v, %v; want state", got, ok, err)
	}
	if _, ok, _ := b.GetResume(ctx, "other"); ok {
		t.Error("GetResume(other) found a state")
	}
}
