package redistest_test

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"chainproxy/internal/redistest"
)

func ping(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("reply %q", line)
	}
	return nil
}

func TestServerKillRestart(t *testing.T) {
	s := redistest.Start(t)
	if !strings.HasPrefix(s.URL(), "redis://127.0.0.1:") {
		t.Errorf("URL() = %q, want redis://127.0.0.1:PORT/0", s.URL())
	}
	if err := ping(s.Addr()); err != nil {
		t.Fatalf("PING after Start: %v", err)
	}
	s.Kill()
	if err := ping(s.Addr()); err == nil {
		t.Fatalf("PING after Kill succeeded, want a refused connection")
	}
	s.Kill() // idempotent
	addr := s.Addr()
	s.Restart()
	if s.Addr() != addr {
		t.Errorf("Addr() after Restart = %q, want the same %q", s.Addr(), addr)
	}
	if err := ping(s.Addr()); err != nil {
		t.Fatalf("PING after Restart: %v", err)
	}
}

// fakeTB records Skipf and Fatalf, and stops Start the way testing does
// (by unwinding), without ending the real test.
type fakeTB struct {
	testing.TB
	skipped, failed string
}

type stopped struct{}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Skipf(format string, args ...any) {
	f.skipped = fmt.Sprintf(format, args...)
	panic(stopped{})
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	panic(stopped{})
}

func startWith(tb *fakeTB) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(stopped); !ok {
				panic(r)
			}
		}
	}()
	redistest.Start(tb)
}

func TestStartWithoutBinary(t *testing.T) {
	t.Setenv("PATH", t.TempDir())

	t.Setenv("CI", "")
	tb := &fakeTB{TB: t}
	startWith(tb)
	if tb.skipped == "" || tb.failed != "" || !strings.Contains(tb.skipped, "redis-server not found") {
		t.Errorf("without redis-server: skipped %q, failed %q; want a skip naming redis-server", tb.skipped, tb.failed)
	}

	t.Setenv("CI", "true")
	tb = &fakeTB{TB: t}
	startWith(tb)
	if tb.failed == "" || tb.skipped != "" {
		t.Errorf("without redis-server under CI: skipped %q, failed %q; want a failure", tb.skipped, tb.failed)
	}
}
