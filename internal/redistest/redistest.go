// Package redistest runs a real redis-server for tests: on a free loopback
// port, without persistence, stopped when the test ends, and able to be
// killed and restarted on the same port for fault tests.
//
// When redis-server is not on PATH the test is skipped, or fails when the
// environment variable CI is set, so that CI never passes by skipping.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startTimeout bounds how long a started server may take to answer PING.
const startTimeout = 10 * time.Second

// Server is a redis-server process owned by one test.
type Server struct {
	tb   testing.TB
	bin  string
	dir  string
	port int

	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited and been waited for
}

// Start runs a redis-server for tb and stops it when tb ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("redis-server not found on PATH, and CI is set so this test may not be skipped: %v", err)
		}
		tb.Skipf("skipping: redis-server not found on PATH (install it, e.g. apt-get install redis-server): %v", err)
	}
	s := &Server{tb: tb, bin: bin, dir: tb.TempDir()}
	tb.Cleanup(s.Kill)
	// Another process may take the free port between our probe and
	// redis-server's bind: try a few ports.
	for attempt := 1; ; attempt++ {
		s.port, err = freePort()
		if err == nil {
			err = s.start()
		}
		if err == nil {
			return s
		}
		if attempt == 3 {
			tb.Fatalf("redistest: %v", err)
		}
	}
}

// URL returns the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Addr returns the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Kill stops the server at once (SIGKILL), as a crash would, and waits for
// it to exit. Killing a stopped server does nothing.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Restart kills the server if it runs and starts it again on the same port,
// empty, returning once it answers PING.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Kill()
	if err := s.start(); err != nil {
		s.tb.Fatalf("redistest: restart: %v", err)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs redis-server on s.port and waits until it answers PING.
func (s *Server) start() error {
	logPath := filepath.Join(s.dir, "redis-"+strconv.Itoa(s.port)+".log")
	cmd := exec.Command(s.bin,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--dir", s.dir,
		"--logfile", logPath,
	)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	// Exits when the process does: Kill (also run by Cleanup) ends it.
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited

	deadline := time.Now().Add(startTimeout)
	for {
		err := ping(s.Addr())
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			s.cmd = nil
			return fmt.Errorf("redis-server on port %d exited at start: %s", s.port, tail(logPath))
		default:
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("redis-server on port %d did not answer PING within %v: %v; log: %s", s.port, startTimeout, err, tail(logPath))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ping sends PING in RESP and expects +PONG.
func ping(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(500 * time.Millisecond)); err != nil {
		return err
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return errors.New("unexpected reply to PING: " + strconv.Quote(line))
	}
	return nil
}

// tail returns the end of the server's log, for failure messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
