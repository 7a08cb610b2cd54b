package store

import (
	"bytes"
	"container/heap"
	"context"
	"sync"
	"time"
)

// DefaultMaxEntries bounds a Memory store when the caller says 0.
const DefaultMaxEntries = 100_000

// DefaultMaxBytes bounds the keys and values a Memory store holds: a count
// alone lets a few huge entries take gigabytes.
const DefaultMaxBytes = 128 << 20

// entryOverhead approximates an entry's bookkeeping (struct, map slot, heap
// slot), so that many tiny entries are counted too.
const entryOverhead = 128

// Memory is an in-process store: keys with a TTL, bounded in number, and the
// most recent traces. It starts no goroutine: expired entries are dropped by
// the operations themselves. Safe for concurrent use.
type Memory struct {
	mu  sync.Mutex
	max int
	// maxBytes bounds size, the sum of each entry's key, value and
	// overhead; the least recently written go first beyond it.
	maxBytes, size int
	entries        map[string]*entry
	// byExpiry holds the entries that expire, soonest first, so that
	// expired entries are dropped in O(log n) each.
	byExpiry expiryHeap
	// oldest and newest end the list of entries in order of last write,
	// which picks the victim when the store is full of live entries.
	oldest, newest *entry

	traces traceRing
}

type entry struct {
	key        string
	val        []byte
	expires    time.Time // zero: never
	heapIndex  int       // in byExpiry; -1 when not there
	prev, next *entry    // toward oldest, toward newest
}

// NewMemory returns a store holding at most maxEntries keys (0:
// DefaultMaxEntries) and the last traces traces (0: DefaultTraces). When
// full, it drops expired entries first, then the least recently written.
func NewMemory(maxEntries, traces int) *Memory {
	if maxEntries <= 0 {
		maxEntries = DefaultMaxEntries
	}
	if traces <= 0 {
		traces = DefaultTraces
	}
	return &Memory{
		max:      maxEntries,
		maxBytes: DefaultMaxBytes,
		entries:  make(map[string]*entry),
		traces:   newTraceRing(traces),
	}
}

// Claim sets key to "pending" for ttl unless it holds a live value, and
// reports whether it did. A non-positive ttl never expires.
func (m *Memory) Claim(_ context.Context, key string, ttl time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	m.dropExpired(now)
	if _, ok := m.entries[key]; ok {
		return false, nil
	}
	m.put(now, key, []byte(pending), ttl)
	return true, nil
}

// Get returns a copy of the live value under key.
func (m *Memory) Get(_ context.Context, key string) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dropExpired(time.Now())
	e, ok := m.entries[key]
	if !ok {
		return nil, false, nil
	}
	return bytes.Clone(e.val), true, nil
}

// Set stores a copy of val under key for ttl. A non-positive ttl never
// expires.
func (m *Memory) Set(_ context.Context, key string, val []byte, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	m.dropExpired(now)
	m.put(now, key, bytes.Clone(val), ttl)
	return nil
}

// Delete removes key.
func (m *Memory) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.entries[key]; ok {
		m.remove(e)
	}
	return nil
}

// Len returns the number of live entries.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dropExpired(time.Now())
	return len(m.entries)
}

// Size returns the bytes the live entries count for (keys, values and a
// fixed overhead each), which DefaultMaxBytes bounds.
func (m *Memory) Size() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dropExpired(time.Now())
	return m.size
}

// PutTrace keeps data under id, dropping the oldest trace when the last N
// are already kept. Storing an id again replaces its data. data is kept as
// it is, not copied: every request stores a trace document it built for
// the store alone, and a copy was one more allocation of its size.
func (m *Memory) PutTrace(_ context.Context, id string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.traces.put(id, data)
	return nil
}

// GetTrace returns a copy of the trace stored under id.
func (m *Memory) GetTrace(_ context.Context, id string) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	data, ok := m.traces.data[id]
	if !ok {
		return nil, false, nil
	}
	return bytes.Clone(data), true, nil
}

// Status returns "memory".
func (m *Memory) Status() string { return StatusMemory }

// Close does nothing: a Memory holds no resource.
func (m *Memory) Close() error { return nil }

func (m *Memory) dropExpired(now time.Time) {
	for len(m.byExpiry) > 0 && !now.Before(m.byExpiry[0].expires) {
		m.remove(m.byExpiry[0])
	}
}

// put writes key, the caller having dropped expired entries.
func (m *Memory) put(now time.Time, key string, val []byte, ttl time.Duration) {
	var expires time.Time
	if ttl > 0 {
		expires = now.Add(ttl)
	}
	e, ok := m.entries[key]
	if ok {
		m.size += len(val) - len(e.val)
		e.val = val
		m.unlink(e)
	} else {
		if len(m.entries) >= m.max {
			m.remove(m.oldest)
		}
		e = &entry{key: key, val: val, heapIndex: -1}
		m.entries[key] = e
		m.size += entrySize(e)
	}
	m.link(e)
	for m.size > m.maxBytes && m.oldest != e {
		m.remove(m.oldest)
	}
	e.expires = expires
	switch {
	case expires.IsZero() && e.heapIndex >= 0:
		heap.Remove(&m.byExpiry, e.heapIndex)
	case !expires.IsZero() && e.heapIndex >= 0:
		heap.Fix(&m.byExpiry, e.heapIndex)
	case !expires.IsZero():
		heap.Push(&m.byExpiry, e)
	}
}

func entrySize(e *entry) int { return len(e.key) + len(e.val) + entryOverhead }

func (m *Memory) remove(e *entry) {
	m.size -= entrySize(e)
	delete(m.entries, e.key)
	m.unlink(e)
	if e.heapIndex >= 0 {
		heap.Remove(&m.byExpiry, e.heapIndex)
	}
}

// link appends e as the newest entry.
func (m *Memory) link(e *entry) {
	e.prev, e.next = m.newest, nil
	if m.newest != nil {
		m.newest.next = e
	} else {
		m.oldest = e
	}
	m.newest = e
}

func (m *Memory) unlink(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		m.oldest = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		m.newest = e.prev
	}
	e.prev, e.next = nil, nil
}

// expiryHeap is a container/heap of entries ordered by expiry.
type expiryHeap []*entry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].expires.Before(h[j].expires) }
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIndex = i
	h[j].heapIndex = j
}

func (h *expiryHeap) Push(x any) {
	e := x.(*entry)
	e.heapIndex = len(*h)
	*h = append(*h, e)
}

func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.heapIndex = -1
	return e
}

// traceRing keeps the last len(ids) traces.
type traceRing struct {
	data map[string][]byte
	ids  []string // ring of kept ids, oldest at next once full
	next int
}

func newTraceRing(n int) traceRing {
	return traceRing{data: make(map[string][]byte, n), ids: make([]string, 0, n)}
}

func (r *traceRing) put(id string, data []byte) {
	if _, ok := r.data[id]; ok {
		r.data[id] = data
		return
	}
	if len(r.ids) < cap(r.ids) {
		r.ids = append(r.ids, id)
	} else {
		delete(r.data, r.ids[r.next])
		r.ids[r.next] = id
		r.next = (r.next + 1) % len(r.ids)
	}
	r.data[id] = data
}
