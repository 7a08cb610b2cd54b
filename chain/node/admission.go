package node

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"

	"chainproxy/config"
)

// QueueFullError is returned when a node's queue is full: the client should
// retry after RetryAfter.
type QueueFullError struct {
	Node       string
	Queued     int
	RetryAfter time.Duration
}

func (e *QueueFullError) Error() string {
	return fmt.Sprintf("node %s is busy: %d requests already waiting; retry later", e.Node, e.Queued)
}

// Admitter lets a model call wait its turn for a node. Acquire blocks until
// the call may proceed or ctx is done; release must be called once.
type Admitter interface {
	Acquire(ctx context.Context, node string, batch bool) (release func(), err error)
}

// Admission bounds the calls in flight to each node. Calls beyond a node's
// concurrency wait in its queue, interactive ones before batch ones and FIFO
// within a class (design 000/001); beyond the queue's size they are refused.
// Local model servers run one or a few requests at a time: letting requests
// pile onto them only makes every one slower.
type Admission struct {
	mu    sync.Mutex
	gates map[string]*gate
	// OnWait, when set, observes how long each admitted call waited.
	OnWait func(node string, batch bool, d time.Duration)
	// OnPreload, when set, observes each early load (Warm) the server
	// answered: its node, when it was sent, and how long the server took,
	// which is the load when the model was not loaded yet (Ollama's
	// answer to a preload says nothing of it).
	OnPreload func(node string, sent time.Time, took time.Duration)
}

type gate struct {
	limit, maxQueue int
	active          int
	queues          [2]*list.List // 0: interactive, 1: batch
	// runner, when set, is the node's Ollama server, shared with other
	// nodes, whose calls are scheduled around model loads (loads.go):
	// the node's calls wait in its queue, queued of them, rather than in
	// queues. model is the node's (config.FullModelName), loader its
	// backend.
	runner *runnerQueue
	model  string
	loader ModelLoader
	queued int
}

type waiter struct {
	ready   chan struct{}
	granted bool
	// On a runner's queue: the waiter's gate, class, arrival and element.
	g     *gate
	batch bool
	at    time.Time
	elem  *list.Element
}

var _ Admitter = (*Admission)(nil)

// NewAdmission sets up the gates of the configured nodes.
func NewAdmission(nodes []config.Node) *Admission {
	a := &Admission{gates: map[string]*gate{}}
	for _, n := range nodes {
		a.gates[n.Name] = &gate{limit: n.Concurrency() * len(n.Hosts()), maxQueue: n.MaxQueue, queues: [2]*list.List{list.New(), list.New()}}
	}
	return a
}

// Acquire waits until node may take one more call. The returned release
// must be called exactly once when the call is over. A caller whose ctx ends
// while queued leaves the queue at once and holds no slot.
func (a *Admission) Acquire(ctx context.Context, node string, batch bool) (func(), error) {
	g := a.gates[node]
	if g != nil && g.runner != nil {
		return a.acquireOn(ctx, g, node, batch)
	}
	if g == nil || g.limit == 0 {
		return func() {}, nil
	}
	start := time.Now()
	class := 0
	if batch {
		class = 1
	}
	a.mu.Lock()
	if g.active < g.limit && g.queues[0].Len()+g.queues[1].Len() == 0 {
		g.active++
		a.mu.Unlock()
		return a.releaser(g), nil
	}
	if q := g.queues[0].Len() + g.queues[1].Len(); q >= g.maxQueue {
		a.mu.Unlock()
		return nil, &QueueFullError{Node: node, Queued: q, RetryAfter: time.Second}
	}
	w := &waiter{ready: make(chan struct{})}
	el := g.queues[class].PushBack(w)
	a.mu.Unlock()

	select {
	case <-w.ready:
		if a.OnWait != nil {
			a.OnWait(node, batch, time.Since(start))
		}
		return a.releaser(g), nil
	case <-ctx.Done():
		a.mu.Lock()
		if w.granted {
			// The slot was handed over just as ctx ended: pass it on.
			a.mu.Unlock()
			a.releaser(g)()
		} else {
			g.queues[class].Remove(el)
			a.mu.Unlock()
		}
		return nil, ctx.Err()
	}
}

// releaser returns a once-only release of one slot of g, which hands the
// slot to the next waiter, interactive first.
func (a *Admission) releaser(g *gate) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			for _, q := range g.queues {
				if el := q.Front(); el != nil {
					q.Remove(el)
					w := el.Value.(*waiter)
					w.granted = true
					close(w.ready)
					return
				}
			}
			g.active--
		})
	}
}

// Queued reports how many calls wait for node.
func (a *Admission) Queued(node string) int {
	g := a.gates[node]
	if g == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return g.queues[0].Len() + g.queues[1].Len() + g.queued
}
