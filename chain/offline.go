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
	until map[string]time.Time
	ttl   time.Duration
	now   func() time.Time
}

func newOfflineSet(ttl time.Duration, now func() time.Time) *offlineSet {
	return &offlineSet{until: map[string]time.Time{}, ttl: ttl, now: now}
}

func (o *offlineSet) isOffline(node string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	u, ok := o.until[node]
	if ok && o.now().After(u) {
		delete(o.until, node)
		return false
	}
	return ok
}

func (o *offlineSet) mark(node string) {
	o.mu.Lock()
	o.until[node] = o.now().Add(o.ttl)
	o.mu.Unlock()
}

func (o *offlineSet) clear(node string) {
	o.mu.Lock()
	delete(o.until, node)
	o.mu.Unlock()
}
