package store_test

import (
	"context"
	"testing"
	"time"

	"chainproxy/antiloop"
	"chainproxy/internal/redistest"
	"chainproxy/store"
)

// TestDelete: every store can give a claim back, after which the key can be
// claimed again; deleting an absent key is no error.
func TestDelete(t *testing.T) {
	stores := map[string]func(t *testing.T) antiloop.Store{
		"memory": func(t *testing.T) antiloop.Store { return store.NewMemory(0, 0) },
		"redis": func(t *testing.T) antiloop.Store {
			return newRedis(t, redistest.Start(t).URL(), 0)
		},
		"fallback": func(t *testing.T) antiloop.Store {
			f := store.NewFallback(newRedis(t, redistest.Start(t).URL(), 0), store.NewMemory(0, 0), nil)
			t.Cleanup(func() { f.Close() })
			return f
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t)
			if ok, err := s.Claim(ctx, "k", time.Minute); err != nil || !ok {
				t.Fatalf("Claim(k) = %v, %v; want true", ok, err)
			}
			if err := s.Delete(ctx, "k"); err != nil {
				t.Fatal(err)
			}
			if v, ok, err := s.Get(ctx, "k"); err != nil || ok {
				t.Errorf("Get(k) after Delete = %q, %v, %v; want nothing", v, ok, err)
			}
			if ok, err := s.Claim(ctx, "k", time.Minute); err != nil || !ok {
				t.Errorf("Claim(k) after Delete = %v, %v; want true", ok, err)
			}
			if err := s.Delete(ctx, "absent"); err != nil {
				t.Errorf("Delete(absent) = %v, want nil", err)
			}
		})
	}
}
