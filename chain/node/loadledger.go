package node

import (
	"sync"
	"time"
)

// LoadLedger tells the model loads calls report apart from the reports of
// one load. Ollama reports a load to every call that waited for it (its
// load_duration runs from a request's arrival to its runner's readiness),
// so counting each call's report counts one load once per waiting call:
// /metrics and proxy eval both count loads, and count them through one
// ledger each. The zero value is ready to use and safe for concurrent use.
type LoadLedger struct {
	mu sync.Mutex
	// ready holds by node when the models of the loads counted lately
	// became ready (loadsKept of them).
	ready map[string][]time.Time
}

// loadsKept is how many loads a node's recent ready times keep: more than
// the calls that may wait for one load together (a node's max_concurrency
// and the summaries beside it, at the request ends they are counted in).
const loadsKept = 16

// First reports whether a load of node's model that made it ready at
// ready is one not counted yet, and counts it. Calls whose model became
// ready within LoadThreshold of each other waited for one load, since two
// loads of one node's model take longer than that apart.
func (l *LoadLedger) First(node string, ready time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := l.ready[node]
	for _, r := range seen {
		if d := ready.Sub(r); d < LoadThreshold && d > -LoadThreshold {
			return false
		}
	}
	if len(seen) == loadsKept {
		seen = seen[1:]
	}
	if l.ready == nil {
		l.ready = map[string][]time.Time{}
	}
	l.ready[node] = append(seen, ready)
	return true
}
