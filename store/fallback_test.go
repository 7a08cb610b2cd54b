package store_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"chainproxy/antiloop"
	"chainproxy/internal/redistest"
	"chainproxy/store"
)

// logBuffer collects log output written from several goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), s)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func openStore(t *testing.T, url string) (store.Store, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	s, err := store.Open(context.Background(), url, 0, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatalf("Open(%q) error: %v", url, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, logs
}

// exercise runs every operation of the store and fails the test on any error.
func exercise(t *testing.T, s store.Store, key string) {
	t.Helper()
	ctx := context.Background()
	if ok, err := s.Claim(ctx, key, time.Minute); err != nil || !ok {
		t.Errorf("Claim(%q) = %v, %v; want true", key, ok, err)
	}
	if err := s.Set(ctx, key, []byte("v:"+key), time.Minute); err != nil {
		t.Errorf("Set(%q) = %v", key, err)
	}
	if v, ok, err := s.Get(ctx, key); err != nil || !ok || string(v) != "v:"+key {
		t.Errorf("Get(%q) = %q, %v, %v; want %q", key, v, ok, err, "v:"+key)
	}
	if err := s.PutTrace(ctx, "trace-"+key, []byte("trace of "+key)); err != nil {
		t.Errorf("PutTrace = %v", err)
	}
	if v, ok, err := s.GetTrace(ctx, "trace-"+key); err != nil || !ok || string(v) != "trace of "+key {
		t.Errorf("GetTrace = %q, %v, %v; want %q", v, ok, err, "trace of "+key)
	}
}

func TestFallbackRedisKilledAndRestarted(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s, logs := openStore(t, srv.URL())
	if got := s.Status(); got != "redis" {
		t.Fatalf("Status() = %q, want redis", got)
	}
	exercise(t, s, "before")
	direct := newRedis(t, srv.URL(), 0)
	if v, ok, _ := direct.Get(ctx, "before"); !ok || string(v) != "v:before" {
		t.Errorf("Redis has before = %q, %v; want the value written through the store", v, ok)
	}

	srv.Kill()
	for i := range 20 {
		// Writes made while Redis was up are still known from memory.
		if v, ok, err := s.Get(ctx, "before"); err != nil || !ok || string(v) != "v:before" {
			t.Fatalf("Get(before) with Redis down (#%d) = %q, %v, %v; want the mirrored value", i, v, ok, err)
		}
		if ok, err := s.Claim(ctx, "before", time.Minute); err != nil || ok {
			t.Errorf("Claim(before) with Redis down = %v, %v; want false: the key exists", ok, err)
		}
	}
	exercise(t, s, "during")
	if got := s.Status(); got != "degraded" {
		t.Errorf("Status() with Redis down = %q, want degraded", got)
	}
	if n := logs.count("redis unreachable"); n != 1 {
		t.Errorf("logged the outage %d times, want once; logs:\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), "err=") {
		t.Errorf("outage log has no err key; logs:\n%s", logs)
	}

	srv.Restart()
	eventually(t, "the store to use Redis again", func() bool { return s.Status() == "redis" })
	if n := logs.count("recovered"); n != 1 {
		t.Errorf("logged the recovery %d times, want once; logs:\n%s", n, logs)
	}
	exercise(t, s, "after")
	if v, ok, _ := direct.Get(ctx, "after"); !ok || string(v) != "v:after" {
		t.Errorf("restarted Redis has after = %q, %v; want the value written through the store", v, ok)
	}

	// A second outage is logged again, once.
	srv.Kill()
	exercise(t, s, "again")
	if n := logs.count("redis unreachable"); n != 2 {
		t.Errorf("logged %d outages after the second, want 2; logs:\n%s", n, logs)
	}
}

func TestOpenRedisUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now

	start := time.Now()
	s, logs := openStore(t, "redis://"+addr)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Open with Redis unreachable took %v, want it bounded by the short timeouts", d)
	}
	if got := s.Status(); got != "degraded" {
		t.Errorf("Status() = %q, want degraded", got)
	}
	exercise(t, s, "k")
	if n := logs.count("redis unreachable"); n != 1 {
		t.Errorf("logged the outage %d times, want once; logs:\n%s", n, logs)
	}
}

func TestOpen(t *testing.T) {
	s, err := store.Open(context.Background(), "", 10, nil)
	if err != nil {
		t.Fatalf("Open(\"\") error: %v", err)
	}
	defer s.Close()
	if _, ok := s.(*store.Memory); !ok {
		t.Errorf("Open(\"\") = %T, want *store.Memory", s)
	}
	if got := s.Status(); got != "memory" {
		t.Errorf("Status() = %q, want memory", got)
	}
	exercise(t, s, "k")

	if s, err := store.Open(context.Background(), "mysql://localhost", 0, nil); err == nil {
		s.Close()
		t.Errorf("Open(mysql://localhost) = nil error, want one")
	}
}

func TestFallbackCallerCancelled(t *testing.T) {
	srv := redistest.Start(t)
	s, _ := openStore(t, srv.URL())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// The caller's own cancellation is returned; it does not mean Redis is down.
	if _, err := s.Claim(ctx, "k", time.Minute); !errors.Is(err, context.Canceled) {
		t.Errorf("Claim with a cancelled context = %v, want context.Canceled", err)
	}
	if got := s.Status(); got != "redis" {
		t.Errorf("Status() after a cancelled call = %q, want redis", got)
	}
}

// TestGuardSurvivesRedisOutage: with Redis killed mid-conversation, the guard
// answers without error and still knows the calls made before the outage.
func TestGuardSurvivesRedisOutage(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s, _ := openStore(t, srv.URL())
	g := antiloop.NewGuard(s, 30*time.Second, 5*time.Minute)
	sig, err := antiloop.Signature("list_dir", []byte(`{"path":"."}`))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := g.Admit(ctx, "conv", "call_0", sig, true); err != nil || d.Verdict != antiloop.Execute {
		t.Fatalf("Admit = %+v, %v; want Execute", d, err)
	}
	if err := g.Record(ctx, "conv", "call_0", sig, []byte("listing")); err != nil {
		t.Fatal(err)
	}

	srv.Kill()
	d, err := g.Admit(ctx, "conv", "call_1", sig, true)
	if err != nil || d.Verdict != antiloop.Cached || string(d.Result) != "listing" {
		t.Errorf("Admit of the same call with Redis down = %+v, %v; want Cached with the result recorded before", d, err)
	}
	other, err := antiloop.Signature("list_dir", []byte(`{"path":"src"}`))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := g.Admit(ctx, "conv", "call_2", other, true); err != nil || d.Verdict != antiloop.Execute {
		t.Errorf("Admit of a new call with Redis down = %+v, %v; want Execute", d, err)
	}
	if got := s.Status(); got != "degraded" {
		t.Errorf("Status() = %q, want degraded", got)
	}
}
