package node

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"chainproxy/config"
)

// hostBackend is one fake host: it records its calls, refuses connections
// while down, and holds each call until release is closed when set.
type hostBackend struct {
	name    string
	down    bool
	calls   int
	release chan struct{}
}

func (b *hostBackend) Chat(ctx context.Context, _ *Request, fn func(Chunk) error) error {
	b.calls++
	if b.down {
		return TransportError(ctx, "N", syscall.ECONNREFUSED)
	}
	if b.release != nil {
		<-b.release
	}
	return fn(Chunk{Content: b.name, FinishReason: "stop"})
}

func newTestHosts(limit int, bs ...*hostBackend) *Hosts {
	n := config.Node{Name: "N", Provider: config.ProviderOllama, MaxConcurrency: &limit, OfflineFor: time.Minute}
	backends := make([]Backend, len(bs))
	for i, b := range bs {
		n.BaseURLs = append(n.BaseURLs, "http://"+b.name)
		backends[i] = b
	}
	return NewHosts(n, backends)
}

func chatOn(t *testing.T, h *Hosts, pin *string) string {
	t.Helper()
	got := ""
	if err := h.Chat(t.Context(), &Request{Host: pin}, func(c Chunk) error { got = c.Content; return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestHostsPick: calls go to the host with the fewest in flight, ties in
// turn; a stage keeps its host while it is below its limit.
func TestHostsPick(t *testing.T) {
	a, b, c := &hostBackend{name: "a"}, &hostBackend{name: "b"}, &hostBackend{name: "c"}
	h := newTestHosts(1, a, b, c)
	var order []string
	for range 6 {
		order = append(order, chatOn(t, h, nil))
	}
	if want := "abcabc"; join(order) != want {
		t.Errorf("ties in turn: order %q, want %q", join(order), want)
	}

	// A host with a call in flight is passed over.
	i, busy, _ := h.pick("", nil, nil)
	if busy == nil || i != 0 {
		t.Fatalf("pick = %d, want host 0 (the next in turn)", i)
	}
	for range 4 {
		if got := chatOn(t, h, nil); got == "a" {
			t.Fatalf("a call went to host a, which has one in flight")
		}
	}
	h.mu.Lock()
	busy.inFlight--
	h.mu.Unlock()

	// A stage's pin holds whatever the counts say, until its host is at
	// its limit.
	pin := "http://c"
	for range 3 {
		if got := chatOn(t, h, &pin); got != "c" {
			t.Fatalf("pinned call went to %q, want c", got)
		}
	}
	h.mu.Lock()
	h.hosts[2].inFlight = 1 // at its limit of 1
	h.mu.Unlock()
	if got := chatOn(t, h, &pin); got == "c" || pin != "http://"+got {
		t.Errorf("pinned to a full host: went to %q, pin now %q", got, pin)
	}
}

// TestHostsOffline: a host that refuses is marked offline and the same call
// goes to another; the node fails to connect only when all hosts do; a
// probe brings a host back.
func TestHostsOffline(t *testing.T) {
	a, b := &hostBackend{name: "a", down: true}, &hostBackend{name: "b"}
	h := newTestHosts(1, a, b)
	for range 4 {
		if got := chatOn(t, h, nil); got != "b" {
			t.Fatalf("answered by %q, want b", got)
		}
	}
	if a.calls != 1 {
		t.Errorf("down host tried %d times, want once (then skipped for offline_for)", a.calls)
	}
	if st := h.States(); !st[0].Offline || st[1].Offline || st[0].Error == "" {
		t.Errorf("states = %+v, want a offline with its cause, b up", st)
	}

	b.down = true
	h.mu.Lock()
	h.hosts[1].offUntil = time.Time{}
	h.mu.Unlock()
	err := h.Chat(t.Context(), &Request{}, func(Chunk) error { return nil })
	var ue *UpstreamError
	if !errors.As(err, &ue) || !ue.Offline() {
		t.Fatalf("all hosts down: err = %v, want a connect error", err)
	}
	err = h.Chat(t.Context(), &Request{}, func(Chunk) error { return nil })
	if !errors.As(err, &ue) || !ue.Offline() {
		t.Fatalf("all hosts offline: err = %v, want a connect error", err)
	}

	a.down = false
	if err := h.Probe(t.Context()); err != nil {
		t.Fatalf("probe with a up: %v", err)
	}
	if got := chatOn(t, h, nil); got != "a" {
		t.Errorf("after the probe: answered by %q, want a", got)
	}
}

func join(s []string) string {
	out := ""
	for _, x := range s {
		out += x
	}
	return out
}

// TestHostsWaitForLimit: with a host down, a call that finds the others at
// their limit waits for one to finish instead of overloading it, and
// leaves when its context ends.
func TestHostsWaitForLimit(t *testing.T) {
	a, b := &hostBackend{name: "a", down: true}, &hostBackend{name: "b", release: make(chan struct{})}
	h := newTestHosts(1, a, b)
	first := make(chan string)
	go func() { first <- chatOn(t, h, nil) }() // ends when b.release is closed
	for {
		h.mu.Lock()
		busy := h.hosts[1].inFlight == 1
		h.mu.Unlock()
		if busy {
			break
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := h.Chat(ctx, &Request{}, func(Chunk) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting call with its context ended: %v", err)
	}
	second := make(chan string)
	go func() { second <- chatOn(t, h, nil) }() // ends after first
	close(b.release)
	if got := <-first; got != "b" {
		t.Errorf("first answered by %q", got)
	}
	if got := <-second; got != "b" {
		t.Errorf("second answered by %q", got)
	}
}
