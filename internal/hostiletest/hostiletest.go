// Package hostiletest starts the hostile servers of the project's tests on
// loopback: a redirect target on another host (127.0.0.2) or another port
// of 127.0.0.1, which records whatever reaches it, so that a test can
// assert that nothing did; a server that never finishes its answer.
package hostiletest

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Target is a server a hostile redirect points to.
type Target struct {
	*httptest.Server
	mu   sync.Mutex
	hits []*http.Request
}

// Body is what a target answers: a test checks that it reaches nobody.
const Body = "TARGET-BODY-secret-from-metadata"

// NewTarget starts a target on host ("127.0.0.2" for another host,
// "127.0.0.1" for another port of the usual one). It skips the test when
// the host has no such loopback address.
func NewTarget(t testing.TB, host string) *Target {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Skipf("cannot listen on %s (needed as another loopback host): %v", host, err)
	}
	tg := &Target{}
	tg.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tg.mu.Lock()
		tg.hits = append(tg.hits, r.Clone(r.Context()))
		tg.mu.Unlock()
		w.Write([]byte(Body))
	}))
	tg.Listener.Close()
	tg.Listener = l
	tg.Start()
	t.Cleanup(tg.Close)
	return tg
}

// Hits returns the requests the target received.
func (tg *Target) Hits() []*http.Request {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return append([]*http.Request(nil), tg.hits...)
}

// Redirector answers every request with status and a Location of to+path.
func Redirector(t testing.TB, status int, to string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", to+r.URL.Path)
		w.WriteHeader(status)
		w.Write([]byte("redirect body"))
	}))
	t.Cleanup(s.Close)
	return s
}

// Staller starts a server that answers every request with status 200 and
// contentType, flushes its headers, then sends one space of body every
// interval (nothing more when interval is 0) until the client goes away
// or the test ends: headers then a stall, or a trickle that stays under
// any idle timeout. Only a bound on the whole call ends such an answer.
func Staller(t testing.TB, contentType string, interval time.Duration) *httptest.Server {
	t.Helper()
	done := make(chan struct{})
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		var tick <-chan time.Time
		if interval > 0 {
			tk := time.NewTicker(interval)
			defer tk.Stop()
			tick = tk.C
		}
		for {
			select {
			case <-r.Context().Done():
				return
			case <-done:
				return
			case <-tick:
				if _, err := w.Write([]byte(" ")); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		}
	}))
	// Cleanups run last first: the handlers return before Close waits
	// for them.
	t.Cleanup(s.Close)
	t.Cleanup(func() { close(done) })
	return s
}
