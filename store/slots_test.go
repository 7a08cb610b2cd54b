package store

import (
	"testing"
	"time"

	"chainproxy/internal/redistest"
)

func newSlots(t *testing.T, url string, lease time.Duration) *Slots {
	t.Helper()
	s, err := NewSlots(url, lease)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestSlotsOrder: two slots; later callers queue, interactive before batch
// and then in arrival order; the queue's bound refuses; a release wakes the
// waiters and the first in order takes the slot.
func TestSlotsOrder(t *testing.T) {
	rs := redistest.Start(t)
	s := newSlots(t, rs.URL(), time.Minute)
	ctx := t.Context()
	take := func(id string, batch bool) (bool, bool, int) {
		t.Helper()
		g, f, q, err := s.Take(ctx, "N", id, batch, 2, 3, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return g, f, q
	}
	for _, id := range []string{"a", "b"} {
		if g, _, _ := take(id, false); !g {
			t.Fatalf("%s: no slot with slots free", id)
		}
	}
	if g, _, q := take("batch1", true); g || q != 1 {
		t.Fatalf("batch1: granted %v queued %d, want queued 1", g, q)
	}
	take("batch2", true)
	if g, _, q := take("inter", false); g || q != 3 {
		t.Fatalf("inter: granted %v queued %d, want queued 3", g, q)
	}
	if _, full, q := take("late", false); !full || q != 3 {
		t.Fatalf("late: full %v queued %d, want refused with 3 queued", full, q)
	}

	freed := s.Freed("N")
	if err := s.Release(ctx, "N", "a"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-freed:
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up after a release")
	}
	// The batch callers retry first: they stay queued behind the
	// interactive one, which then takes the slot.
	if g, _, _ := take("batch1", true); g {
		t.Fatal("batch1 took the slot before the interactive waiter")
	}
	if g, _, q := take("inter", false); !g || q != 2 {
		t.Fatalf("inter: granted %v queued %d, want the slot with 2 left", g, q)
	}
	if err := s.Release(ctx, "N", "b"); err != nil {
		t.Fatal(err)
	}
	if g, _, _ := take("batch2", true); g {
		t.Fatal("batch2 overtook batch1, which came first")
	}
	if g, _, _ := take("batch1", true); !g {
		t.Fatal("batch1: no slot when first in line")
	}
}

// TestSlotsExpire: a holder that stops renewing loses its slot within the
// lease; a renewed one keeps it; a waiter that stops asking leaves the queue.
func TestSlotsExpire(t *testing.T) {
	rs := redistest.Start(t)
	// Renewed every tenth of the lease: a renewal ten times late on a
	// loaded machine still keeps it.
	lease := time.Second
	s := newSlots(t, rs.URL(), lease)
	ctx := t.Context()
	if g, _, _, err := s.Take(ctx, "N", "kept", false, 2, 8, lease); err != nil || !g {
		t.Fatal(g, err)
	}
	if g, _, _, err := s.Take(ctx, "N", "dead", false, 2, 8, lease); err != nil || !g {
		t.Fatal(g, err)
	}
	if g, _, q, _ := s.Take(ctx, "N", "gone", false, 2, 8, lease); g || q != 1 {
		t.Fatalf("gone: granted %v queued %d", g, q)
	}
	deadline := time.Now().Add(20 * lease)
	for {
		if held, err := s.Renew(ctx, "N", "kept"); err != nil || !held {
			t.Fatalf("renew: held %v err %v", held, err)
		}
		g, _, q, err := s.Take(ctx, "N", "new", false, 2, 8, lease)
		if err != nil {
			t.Fatal(err)
		}
		if g {
			// "gone" stopped asking and was dropped; "dead" expired.
			if q != 0 {
				t.Errorf("queued %d after the slot was taken, want 0", q)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the dead holder's slot never came free")
		}
		time.Sleep(lease / 10)
	}
	if held, _ := s.Renew(ctx, "N", "dead"); held {
		t.Error("an expired lease was renewed")
	}
}

// TestSlotsWaiterDeadlineEvicted: a Redis with maxmemory and an allkeys-*
// policy evicts any key, each on its own (https://redis.io/docs/reference/eviction):
// it may drop the waiters' deadlines and keep the queue. A waiter whose
// replica died then must still leave the queue within the waiter TTL,
// rather than hold its place, and with it the slot, for good; a waiter
// still asking keeps its place.
func TestSlotsWaiterDeadlineEvicted(t *testing.T) {
	const lease = time.Second // asked again every tenth of it, as in TestSlotsExpire
	for _, tc := range []struct {
		name  string
		alive bool // the first waiter keeps asking
	}{
		{"first waiter dead", false},
		{"first waiter alive", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := redistest.Start(t)
			s := newSlots(t, rs.URL(), lease)
			ctx := t.Context()
			take := func(id string) bool {
				t.Helper()
				g, _, _, err := s.Take(ctx, "N", id, false, 1, 8, lease)
				if err != nil {
					t.Fatal(err)
				}
				return g
			}
			if !take("holder") {
				t.Fatal("holder: no slot with the slot free")
			}
			if take("first") || take("second") {
				t.Fatal("a waiter took the slot the holder has")
			}
			// What an eviction does to the key: it is gone.
			if err := s.client.Del(ctx, slotKeys("N")[2]).Err(); err != nil {
				t.Fatal(err)
			}
			if err := s.Release(ctx, "N", "holder"); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(20 * lease)
			for {
				if tc.alive && take("first") {
					return
				}
				if take("second") {
					if tc.alive {
						t.Fatal("second overtook the first waiter, which kept asking")
					}
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("no slot after %v: the queue kept a waiter that had no deadline", 20*lease)
				}
				time.Sleep(lease / 10)
			}
		})
	}
}
