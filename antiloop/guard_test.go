package antiloop_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"chainproxy/antiloop"
	"chainproxy/store"
)

const (
	sigTTL = 30 * time.Second
	idTTL  = 5 * time.Minute
)

func mustSig(t *testing.T, name, args string) uint64 {
	t.Helper()
	s, err := antiloop.Signature(name, []byte(args))
	if err != nil {
		t.Fatalf("Signature(%q, %q) error: %v", name, args, err)
	}
	return s
}

// step is one call to the guard and the decision expected for it.
type step struct {
	after    time.Duration // wait before this step
	conv     string
	callID   string
	args     string
	readOnly bool
	want     antiloop.Verdict
	reason   string // substring of Decision.Reason; "" checks nothing
	result   string // Decision.Result when want is Cached
	record   string // on Execute, result to Record ("" records "result of <callID>")
}

func runSteps(t *testing.T, g *antiloop.Guard, steps []step) {
	t.Helper()
	ctx := context.Background()
	for i, s := range steps {
		time.Sleep(s.after)
		sig := mustSig(t, "list_dir", s.args)
		d, err := g.Admit(ctx, s.conv, s.callID, sig, s.readOnly)
		if err != nil {
			t.Fatalf("step %d: Admit error: %v", i, err)
		}
		if d.Verdict != s.want {
			t.Fatalf("step %d: Admit(%q, %q, %s, readOnly=%v) = %v (%q), want %v", i, s.conv, s.callID, s.args, s.readOnly, d.Verdict, d.Reason, s.want)
		}
		if !strings.Contains(d.Reason, s.reason) {
			t.Errorf("step %d: reason = %q, want it to contain %q", i, d.Reason, s.reason)
		}
		if s.want == antiloop.Cached && string(d.Result) != s.result {
			t.Errorf("step %d: result = %q, want %q", i, d.Result, s.result)
		}
		if d.Verdict == antiloop.Execute {
			rec := s.record
			if rec == "" {
				rec = "result of " + s.callID
			}
			if err := g.Record(ctx, s.conv, s.callID, sig, []byte(rec)); err != nil {
				t.Fatalf("step %d: Record error: %v", i, err)
			}
		}
	}
}

func TestGuard(t *testing.T) {
	const dot, src = `{"path":"."}`, `{"path":"src"}`
	tests := []struct {
		name  string
		steps []step
	}{
		{"signature cached before TTL, executed after (read-only)", []step{
			{conv: "c", callID: "call_a", args: dot, readOnly: true, want: antiloop.Execute, record: "a.txt"},
			{after: 12 * time.Second, conv: "c", callID: "call_b", args: `{ "path" : "." }`, readOnly: true,
				want: antiloop.Cached, reason: "cached: same call ran 12s ago", result: "a.txt"},
			{after: 17 * time.Second, conv: "c", callID: "call_c", args: dot, readOnly: true, want: antiloop.Cached, result: "a.txt"},
			{after: 2 * time.Second, conv: "c", callID: "call_d", args: dot, readOnly: true, want: antiloop.Execute},
		}},
		{"signature blocked when not read-only", []step{
			{conv: "c", callID: "call_a", args: dot, want: antiloop.Execute},
			{after: 12 * time.Second, conv: "c", callID: "call_b", args: dot,
				want: antiloop.Blocked, reason: "not executed: same call ran 12s ago"},
			{after: 19 * time.Second, conv: "c", callID: "call_c", args: dot, want: antiloop.Execute},
		}},
		{"sub-second age in milliseconds", []step{
			{conv: "c", args: dot, want: antiloop.Execute},
			{after: 250 * time.Millisecond, conv: "c", args: dot, want: antiloop.Blocked, reason: "same call ran 250ms ago"},
		}},
		{"other arguments run", []step{
			{conv: "c", callID: "call_a", args: dot, want: antiloop.Execute},
			{conv: "c", callID: "call_b", args: src, want: antiloop.Execute},
		}},
		{"conversations are independent", []step{
			{conv: "c1", callID: "call_0", args: dot, want: antiloop.Execute},
			{conv: "c2", callID: "call_0", args: dot, want: antiloop.Execute},
		}},
		{"call id with same signature never re-executed within its TTL", []step{
			{conv: "c", callID: "call_0", args: dot, want: antiloop.Execute, record: "listing"},
			// The signature rule has expired; the call-ID rule holds.
			{after: time.Minute, conv: "c", callID: "call_0", args: dot,
				want: antiloop.Blocked, reason: "not executed: call id call_0 already executed"},
			{after: time.Minute, conv: "c", callID: "call_0", args: dot, readOnly: true,
				want: antiloop.Cached, reason: "call id call_0 already executed", result: "listing"},
			// A new ID for the same call is a new call once the signature expired.
			{conv: "c", callID: "call_1", args: dot, want: antiloop.Execute},
			{after: 3*time.Minute + time.Second, conv: "c", callID: "call_0", args: dot, want: antiloop.Execute},
		}},
		{"call id back with other arguments is a new call", []step{
			{conv: "c", callID: "call_0", args: dot, want: antiloop.Execute},
			{conv: "c", callID: "call_0", args: src, want: antiloop.Execute},
			{after: time.Minute, conv: "c", callID: "call_0", args: src, want: antiloop.Blocked, reason: "call id call_0"},
		}},
		{"empty call id skips the call-ID rule", []step{
			{conv: "c", args: dot, want: antiloop.Execute},
			{after: time.Minute, conv: "c", args: dot, want: antiloop.Execute},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := antiloop.NewGuard(store.NewMemory(0, 0), sigTTL, idTTL)
				runSteps(t, g, tt.steps)
			})
		})
	}
}

func TestGuardPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		g := antiloop.NewGuard(store.NewMemory(0, 0), sigTTL, idTTL)
		sig := mustSig(t, "read_file", `{"path":"a"}`)
		if d, err := g.Admit(ctx, "c", "call_0", sig, true); err != nil || d.Verdict != antiloop.Execute {
			t.Fatalf("first Admit = %+v, %v; want Execute", d, err)
		}
		// Not recorded yet: the call is running, so neither rule has a result.
		for _, id := range []string{"call_0", "call_1", ""} {
			d, err := g.Admit(ctx, "c", id, sig, true)
			if err != nil || d.Verdict != antiloop.Blocked || !strings.Contains(d.Reason, "running elsewhere") {
				t.Errorf("Admit(call id %q) while running = %+v, %v; want Blocked, running elsewhere", id, d, err)
			}
		}
		if err := g.Record(ctx, "c", "call_0", sig, []byte("content")); err != nil {
			t.Fatal(err)
		}
		d, err := g.Admit(ctx, "c", "call_1", sig, true)
		if err != nil || d.Verdict != antiloop.Cached || string(d.Result) != "content" {
			t.Errorf("Admit after Record = %+v, %v; want Cached with %q", d, err, "content")
		}
		// An execution that never records holds its claim for the TTL only.
		sig2 := mustSig(t, "read_file", `{"path":"b"}`)
		if d, err := g.Admit(ctx, "c", "", sig2, true); err != nil || d.Verdict != antiloop.Execute {
			t.Fatalf("Admit(b) = %+v, %v; want Execute", d, err)
		}
		time.Sleep(sigTTL + time.Second)
		if d, err := g.Admit(ctx, "c", "", sig2, true); err != nil || d.Verdict != antiloop.Execute {
			t.Errorf("Admit(b) after an unrecorded claim expired = %+v, %v; want Execute", d, err)
		}
	})
}

func TestGuardConcurrentExecutesOnce(t *testing.T) {
	g := antiloop.NewGuard(store.NewMemory(0, 0), sigTTL, idTTL)
	sig := mustSig(t, "list_dir", `{"path":"."}`)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		executed int
	)
	for i := range 16 {
		wg.Go(func() {
			d, err := g.Admit(context.Background(), "c", "call_"+string(rune('a'+i)), sig, false)
			if err != nil {
				t.Error(err)
				return
			}
			if d.Verdict == antiloop.Execute {
				mu.Lock()
				executed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if executed != 1 {
		t.Errorf("16 concurrent Admits of one call: %d executed, want 1", executed)
	}
}

func TestGuardDisabledRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		sig := mustSig(t, "f", `{}`)
		g := antiloop.NewGuard(store.NewMemory(0, 0), 0, 0)
		for i := range 3 {
			d, err := g.Admit(ctx, "c", "call_0", sig, false)
			if err != nil || d.Verdict != antiloop.Execute {
				t.Fatalf("Admit #%d with both rules off = %+v, %v; want Execute", i, d, err)
			}
			if err := g.Record(ctx, "c", "call_0", sig, nil); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// recordingStore records the keys it is asked for and can fail.
type recordingStore struct {
	keys []string
	err  error
}

func (s *recordingStore) Claim(_ context.Context, key string, _ time.Duration) (bool, error) {
	s.keys = append(s.keys, "claim "+key)
	return s.err == nil, s.err
}

func (s *recordingStore) Get(_ context.Context, key string) ([]byte, bool, error) {
	s.keys = append(s.keys, "get "+key)
	return nil, false, s.err
}

func (s *recordingStore) Set(_ context.Context, key string, _ []byte, _ time.Duration) error {
	s.keys = append(s.keys, "set "+key)
	return s.err
}

func (s *recordingStore) Delete(_ context.Context, key string) error {
	s.keys = append(s.keys, "delete "+key)
	return s.err
}

func TestGuardKeys(t *testing.T) {
	ctx := context.Background()
	s := &recordingStore{}
	g := antiloop.NewGuard(s, sigTTL, idTTL)
	const sig = 0x00ab_cdef_0123_4567
	if _, err := g.Admit(ctx, "user:1%", "call:0", sig, false); err != nil {
		t.Fatal(err)
	}
	if err := g.Record(ctx, "user:1%", "call:0", sig, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"get chainproxy:id:user%3A1%25:call%3A0:00abcdef01234567",
		"claim chainproxy:sig:user%3A1%25:00abcdef01234567",
		"claim chainproxy:id:user%3A1%25:call%3A0:00abcdef01234567",
		"set chainproxy:sig:user%3A1%25:00abcdef01234567",
		"set chainproxy:id:user%3A1%25:call%3A0:00abcdef01234567",
	}
	if strings.Join(s.keys, "\n") != strings.Join(want, "\n") {
		t.Errorf("store calls:\n%s\nwant:\n%s", strings.Join(s.keys, "\n"), strings.Join(want, "\n"))
	}
}

// TestGuardKeysBounded: a call ID of any length makes a key of bounded
// length, and two long IDs stay two keys.
func TestGuardKeysBounded(t *testing.T) {
	ctx := context.Background()
	s := &recordingStore{}
	g := antiloop.NewGuard(s, sigTTL, idTTL)
	long := strings.Repeat("x", 1<<20)
	for _, id := range []string{long + "a", long + "b"} {
		if _, err := g.Admit(ctx, "c", id, 1, true); err != nil {
			t.Fatal(err)
		}
	}
	ids := map[string]bool{}
	for _, k := range s.keys {
		if len(k) > 200 {
			t.Fatalf("key of %d bytes: %.80s…", len(k), k)
		}
		if strings.HasPrefix(k, "get chainproxy:id:") {
			ids[k] = true
		}
	}
	if len(ids) != 2 {
		t.Errorf("call-ID lookups = %v, want two distinct keys", ids)
	}
}

func TestGuardStoreError(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("boom")
	g := antiloop.NewGuard(&recordingStore{err: boom}, sigTTL, idTTL)
	for _, id := range []string{"call_0", ""} {
		if d, err := g.Admit(ctx, "c", id, 1, true); !errors.Is(err, boom) {
			t.Errorf("Admit(call id %q) on a failing store = %+v, %v; want an error wrapping boom", id, d, err)
		}
	}
	if err := g.Record(ctx, "c", "call_0", 1, nil); !errors.Is(err, boom) {
		t.Errorf("Record on a failing store = %v, want an error wrapping boom", err)
	}
}

func TestVerdictString(t *testing.T) {
	tests := []struct {
		v    antiloop.Verdict
		want string
	}{
		{antiloop.Execute, "execute"},
		{antiloop.Cached, "cached"},
		{antiloop.Blocked, "blocked"},
		{0, "verdict(0)"},
	}
	for _, tt := range tests {
		if got := tt.v.String(); got != tt.want {
			t.Errorf("Verdict(%d).String() = %q, want %q", tt.v, got, tt.want)
		}
	}
}

func TestGuardRelease(t *testing.T) {
	ctx := context.Background()
	g := antiloop.NewGuard(store.NewMemory(0, 0), sigTTL, idTTL)
	const sig = 42
	if d, err := g.Admit(ctx, "c", "call_1", sig, false); err != nil || d.Verdict != antiloop.Execute {
		t.Fatalf("first Admit = %+v, %v; want Execute", d, err)
	}
	// Without Release, the same call would now be refused as pending.
	if d, _ := g.Admit(ctx, "c", "call_1", sig, false); d.Verdict == antiloop.Execute {
		t.Fatalf("second Admit before Release = Execute; want a refusal")
	}
	if err := g.Release(ctx, "c", "call_1", sig); err != nil {
		t.Fatal(err)
	}
	if d, err := g.Admit(ctx, "c", "call_1", sig, false); err != nil || d.Verdict != antiloop.Execute {
		t.Errorf("Admit after Release = %+v, %v; want Execute", d, err)
	}
}

// TestGuardStamped: a stored read is served only with the stamp it was
// recorded with; an unstampable state and a missing stamp never get it.
func TestGuardStamped(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name, recorded, asked string
		want                  antiloop.Verdict
	}{
		{"same stamp", "s12m34", "s12m34", antiloop.Cached},
		{"file changed", "s12m34", "s13m35", antiloop.Execute},
		{"file removed", "s12m34", "absent", antiloop.Execute},
		{"unstampable", "s12m34", antiloop.Unstamped, antiloop.Execute},
		{"recorded unstampable", antiloop.Unstamped, antiloop.Unstamped, antiloop.Execute},
		{"recorded without, asked with", "", "s12m34", antiloop.Execute},
		{"no stamps (HTTP read)", "", "", antiloop.Cached},
		{"stamp with separators", "a:b/c", "a:b/c", antiloop.Cached},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := antiloop.NewGuard(store.NewMemory(0, 0), sigTTL, idTTL)
			if _, err := g.AdmitStamped(ctx, "c", "", 7, true, "file:notes.md", tt.recorded); err != nil {
				t.Fatal(err)
			}
			if err := g.RecordStamped(ctx, "c", "", 7, tt.recorded, []byte("first draft")); err != nil {
				t.Fatal(err)
			}
			d, err := g.AdmitStamped(ctx, "c", "", 7, true, "file:notes.md", tt.asked)
			if err != nil {
				t.Fatal(err)
			}
			if d.Verdict != tt.want {
				t.Errorf("AdmitStamped(%q) after RecordStamped(%q) = %v, want %v", tt.asked, tt.recorded, d.Verdict, tt.want)
			}
			if d.Verdict == antiloop.Cached && string(d.Result) != "first draft" {
				t.Errorf("served %q, want the recorded result", d.Result)
			}
		})
	}
}
