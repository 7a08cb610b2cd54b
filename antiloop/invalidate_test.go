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
		admit("w1", write, false, "")
		time.Sleep(time.Millisecond)
		if err := g.Invalidate(ctx, "c", []string{"file:notes.md", "dir:."}); err != nil {
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
			{"the same write again", "w2", write, false, "", antiloop.Blocked},
		}
		for _, s := range steps {
			if got := admit(s.id, s.sig, s.readOnly, s.reads); got != s.want {
				t.Errorf("%s: Admit = %v, want %v", s.what, got, s.want)
			}
		}
		// A write of unknown reach makes everything stale.
		time.Sleep(time.Millisecond)
		if err := g.Invalidate(ctx, "c", nil); err != nil {
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
