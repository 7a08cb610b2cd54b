package node

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"chainproxy/config"
)

// probedHost is a fake host whose probe waits for open to be closed, then
// answers when up and refuses otherwise; it counts the probes in flight.
type probedHost struct {
	name     string
	open     chan struct{}
	up       atomic.Bool
	probes   atomic.Int64
	inFlight atomic.Int64
	most     atomic.Int64
}

func (p *probedHost) Chat(ctx context.Context, _ *Request, fn func(Chunk) error) error {
	if !p.up.Load() {
		return TransportError(ctx, "N", syscall.ECONNREFUSED)
	}
	return fn(Chunk{Content: p.name, FinishReason: "stop"})
}

func (p *probedHost) Probe(ctx context.Context) error {
	p.probes.Add(1)
	n := p.inFlight.Add(1)
	defer p.inFlight.Add(-1)
	if n > p.most.Load() {
		p.most.Store(n)
	}
	select {
	case <-p.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	if !p.up.Load() {
		return TransportError(ctx, "N", syscall.ECONNREFUSED)
	}
	return nil
}

// TestHostsRevive: calls that find every host offline probe them rather
// than fail, one probe per host in flight that the others wait for; a host
// that answers serves them all at once.
func TestHostsRevive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		open := make(chan struct{})
		a, b := &probedHost{name: "a", open: open}, &probedHost{name: "b", open: open}
		a.up.Store(true)
		unlimited := 0
		h := NewHosts(config.Node{Name: "N", BaseURLs: []string{"http://a", "http://b"}, MaxConcurrency: &unlimited, OfflineFor: time.Minute}, []Backend{a, b})
		h.mu.Lock()
		for _, x := range h.hosts {
			x.offUntil, x.cause = h.now().Add(time.Minute), "connection refused"
		}
		h.mu.Unlock()

		const calls = 6
		var wg sync.WaitGroup
		got := make([]string, calls)
		errs := make([]error, calls)
		for i := range calls {
			wg.Go(func() {
				errs[i] = h.Chat(context.Background(), &Request{}, func(c Chunk) error { got[i] = c.Content; return nil })
			})
		}
		synctest.Wait()
		if pa, pb := a.inFlight.Load(), b.inFlight.Load(); pa != 1 || pb != 1 {
			t.Errorf("probes in flight with %d calls waiting: a %d, b %d, want 1 each", calls, pa, pb)
		}
		close(open)
		wg.Wait()
		for i := range calls {
			if errs[i] != nil || got[i] != "a" {
				t.Errorf("call %d = %q, %v, want answered by a", i, got[i], errs[i])
			}
		}
		if pa, pb := a.probes.Load(), b.probes.Load(); pa != 1 || pb != 1 {
			t.Errorf("probes: a %d, b %d, want 1 each", pa, pb)
		}
		if st := h.States(); st[0].Offline || !st[1].Offline {
			t.Errorf("states = %+v, want a back, b still offline", st)
		}
	})
}
