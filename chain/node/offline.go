package node

import (
	"context"
	"errors"
	"sync"
	"time"

	"chainproxy/config"
	"chainproxy/internal/redact"
)

// Offline is the offline set: it remembers nodes found unreachable so
// that later requests skip them at once instead of each waiting for a
// connect timeout in a call that would fail. An entry expires after ttl; before that, a request that
// needs the node probes it (Recheck), so that a node that was down a
// moment is back at once rather than after ttl.
type Offline struct {
	mu    sync.Mutex
	until map[string]offline
	// probing holds, per node, the probe in flight: closed when it ends.
	probing map[string]chan struct{}
	ttl     time.Duration
	// ttls are the nodes' own offline_for, read once; ttl for the others.
	ttls map[string]time.Duration
	now  func() time.Time
}

// offline is one remembered node: until when, and the failure that put it
// there, so that a request that skips the node can still say why.
type offline struct {
	until time.Time
	cause string
}

// NewOffline is an offline set whose entries expire after ttl, read
// from now.
func NewOffline(ttl time.Duration, now func() time.Time) *Offline {
	return &Offline{until: map[string]offline{}, probing: map[string]chan struct{}{}, ttl: ttl, ttls: map[string]time.Duration{}, now: now}
}

// SetTTL makes d how long node stays remembered offline (its
// offline_for) rather than the set's ttl. It is for building the set,
// before any request uses it.
func (o *Offline) SetTTL(node string, d time.Duration) {
	o.ttls[node] = d
}

// TTL is how long node stays remembered offline: its offline_for.
func (o *Offline) TTL(node string) time.Duration {
	if d, ok := o.ttls[node]; ok {
		return d
	}
	return o.ttl
}

// IsOffline reports whether node is remembered offline.
func (o *Offline) IsOffline(node string) bool {
	_, ok := o.Lookup(node)
	return ok
}

// Lookup reports whether node is remembered offline, and the failure that
// made it so.
func (o *Offline) Lookup(node string) (cause string, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.until[node]
	if ok && o.now().After(e.until) {
		delete(o.until, node)
		return "", false
	}
	return e.cause, ok
}

// Mark remembers node offline for the set's ttl; cause is the failure's
// text, already redacted (UpstreamError redacts its own).
func (o *Offline) Mark(node, cause string) {
	o.mu.Lock()
	o.until[node] = offline{until: o.now().Add(o.TTL(node)), cause: cause}
	o.mu.Unlock()
}

// Clear forgets node was offline: it answered.
func (o *Offline) Clear(node string) {
	o.mu.Lock()
	delete(o.until, node)
	o.mu.Unlock()
}

// Recheck reports whether node is still offline, and why. A node remembered
// offline is probed first, as Envoy routes to every host when too many are
// ejected rather than fail them all (its panic threshold): one probe in
// flight per node, which the requests that find the node offline meanwhile
// wait for rather than each probing. probe runs on the first of them and
// updates the set (Clear or Mark); a waiter whose ctx ends takes the node
// as offline.
func (o *Offline) Recheck(ctx context.Context, node string, probe func()) (cause string, off bool) {
	if _, off := o.Lookup(node); !off {
		return "", false
	}
	o.mu.Lock()
	done, waiting := o.probing[node]
	if !waiting {
		done = make(chan struct{})
		o.probing[node] = done
	}
	o.mu.Unlock()
	if waiting {
		select {
		case <-done:
		case <-ctx.Done():
		}
		return o.Lookup(node)
	}
	defer func() {
		o.mu.Lock()
		delete(o.probing, node)
		o.mu.Unlock()
		close(done)
	}()
	probe()
	return o.Lookup(node)
}

// Probe reports whether node n, remembered offline, still is, and why:
// it is probed first (Recheck) through its backend b, red masking the
// probe's failure. A node that answers the probe, even with an error, is
// back; one without a probe (no Prober) is, and its call is the probe.
func (o *Offline) Probe(ctx context.Context, n config.Node, b Backend, red redact.Redactor) (cause string, off bool) {
	return o.Recheck(ctx, n.Name, func() {
		p, ok := b.(Prober)
		if !ok {
			o.Clear(n.Name)
			return
		}
		// The probe serves every request waiting for it: the first one
		// going away does not end it.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.ConnectTimeout+ProbeWait)
		defer cancel()
		err := p.Probe(pctx)
		var ue *UpstreamError
		switch {
		case errors.As(err, &ue) && ue.Offline():
			o.Mark(n.Name, red.String(ue.Error()))
		case err != nil && pctx.Err() != nil:
			o.Mark(n.Name, red.String(err.Error()))
		default:
			o.Clear(n.Name)
		}
	})
}
