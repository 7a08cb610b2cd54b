package antiloop_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"chainproxy/antiloop"
	"chainproxy/store"
)

// TestGuardInvalidate checks that a write makes exactly the stored results
// it touched stale, for both rules, and that writes stay refused.
func TestGuardInvalidate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		g := antiloop.NewGuard(store.NewMemory(0, 0), sigTTL, idTTL)
		notes := mustSig(t, "read_file", `{"path":"notes.md"}`)
		other := mustSig(t, "read_file", `{"path":"other.md"}`)
		write := mustSig(t, "write_file", `{"path":"notes.md"}`)
		lookup := mustSig(t, "lookup", `{"id":7}`)
		admit := func(id string, sig uint64, readOnly bool, reads string) antiloop.Verdict {
			t.Helper()
			d, err := g.AdmitScoped(ctx, "c", id, sig, readOnly, reads)
			if err != nil {
				t.Fatal(err)
			}
			if d.Verdict == antiloop.Execute {
				if err := g.Record(ctx, "c", id, sig, []byte("v")); err != nil {
					t.Fatal(err)
				}
			}
			return d.Verdict
		}
		admit("r1", notes, true, "file:notes.md")
		admit("r2", other, true, "file:other.md")
		admit("l1", lookup, true, "")
		admit("w1", write, false, "")
		time.Sleep(time.Millisecond)
		if err := g.Invalidate(ctx, "c", write, []string{"file:notes.md", "dir:."}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
		steps := []struct {
			what     string
			id       string
			sig      uint64
			readOnly bool
			reads    string
			want     antiloop.Verdict
		}{
			{"the written file, fresh call id", "r3", notes, true, "file:notes.md", antiloop.Execute},
			{"the written file again, now recorded after the write", "r4", notes, true, "file:notes.md", antiloop.Cached},
			{"the written file under its old call id", "r1", notes, true, "file:notes.md", antiloop.Cached},
			{"an untouched file", "r5", other, true, "file:other.md", antiloop.Cached},
			{"a read that does not say what it reads (HTTP, MCP)", "l2", lookup, true, "", antiloop.Execute},
			{"the same write again", "w2", write, false, "", antiloop.Blocked},
		}
		for _, s := range steps {
			if got := admit(s.id, s.sig, s.readOnly, s.reads); got != s.want {
				t.Errorf("%s: Admit = %v, want %v", s.what, got, s.want)
			}
		}
		// Another write, then the first one again: writing a value back is
		// a new call; the same write right after itself stays refused.
		other2 := mustSig(t, "write_file", `{"path":"other.md"}`)
		if got := admit("w3", other2, false, ""); got != antiloop.Execute {
			t.Fatalf("a second write: Admit = %v, want Execute", got)
		}
		time.Sleep(time.Millisecond)
		if err := g.Invalidate(ctx, "c", other2, []string{"file:other.md"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
		if got := admit("w4", write, false, ""); got != antiloop.Execute {
			t.Errorf("the first write after another: Admit = %v, want Execute", got)
		}
		if err := g.Invalidate(ctx, "c", write, []string{"file:notes.md"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
		if got := admit("w5", write, false, ""); got != antiloop.Blocked {
			t.Errorf("the same write right after itself: Admit = %v, want Blocked", got)
		}
		// A write of unknown reach makes everything stale.
		time.Sleep(time.Millisecond)
		if err := g.Invalidate(ctx, "c", 0, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
		if got := admit("r6", other, true, "file:other.md"); got != antiloop.Execute {
			t.Errorf("untouched file after a write of unknown reach: Admit = %v, want Execute", got)
		}
		if got := admit("r7", other, true, "file:other.md"); got != antiloop.Cached {
			t.Errorf("the fresh result: Admit = %v, want Cached", got)
		}
	})
}
