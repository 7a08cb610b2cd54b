package chain

import (
	"sync"
	"time"
)

// offlineSet remembers nodes found unreachable so that later requests skip
// them at once instead of waiting for a connect timeout each time. An entry
// expires after ttl: the next call is then the probe that brings the node
// back.
type offlineSet struct {
	mu    sync.Mutex
	until map[string]offline
	ttl   time.Duration
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

func newOfflineSet(ttl time.Duration, now func() time.Time) *offlineSet {
	return &offlineSet{until: map[string]offline{}, ttl: ttl, ttls: map[string]time.Duration{}, now: now}
}

// ttlOf is how long node stays remembered offline: its offline_for.
func (o *offlineSet) ttlOf(node string) time.Duration {
	if d, ok := o.ttls[node]; ok {
		return d
	}
	return o.ttl
}

func (o *offlineSet) isOffline(node string) bool {
	_, ok := o.lookup(node)
	return ok
}

// lookup reports whether node is remembered offline, and the failure that
// made it so.
func (o *offlineSet) lookup(node string) (cause string, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.until[node]
	if ok && o.now().After(e.until) {
		delete(o.until, node)
		return "", false
	}
	return e.cause, ok
}

// mark remembers node offline for the set's ttl; cause is the failure's
// text, already redacted (UpstreamError redacts its own).
func (o *offlineSet) mark(node, cause string) {
	o.mu.Lock()
	o.until[node] = offline{until: o.now().Add(o.ttlOf(node)), cause: cause}
	o.mu.Unlock()
}

func (o *offlineSet) clear(node string) {
	o.mu.Lock()
	delete(o.until, node)
	o.mu.Unlock()
}
