package node

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"chainproxy/config"
)

// slotTimeout bounds each Redis call of the shared admission, so that a
// Redis that stops answering costs a call at most this before the replica
// falls back to its local limits.
const slotTimeout = 500 * time.Millisecond

// Admission statuses (SharedAdmission.Status, /readyz "admission").
const (
	AdmissionShared = "shared"
	AdmissionLocal  = "local"
)

// SlotStore keeps the slots and queues of every node's calls where all
// the replicas see them (store.Slots, on Redis): declared here so that the
// node layer needs no store.
type SlotStore interface {
	// Lease is how long a slot is held without a renewal.
	Lease() time.Duration
	// Ping checks that the store answers and takes writes.
	Ping(ctx context.Context) error
	// Take takes a slot of name's limit for id, or queues id (beyond
	// maxQueue waiters, full); granted says which.
	Take(ctx context.Context, name, id string, batch bool, limit, maxQueue int, waitTTL time.Duration) (granted, full bool, queued int, err error)
	// Freed is closed when a slot of name is given back.
	Freed(name string) <-chan struct{}
	// Renew extends id's lease; held is false when it had been lost
	// (and Renew took it again).
	Renew(ctx context.Context, name, id string) (held bool, err error)
	// Release gives id's slot back.
	Release(ctx context.Context, name, id string) error
}

// SharedAdmission makes each node's max_concurrency a limit across all the
// replicas on one Redis (store.redis_url): a call holds a lease in Redis
// (store.Slots) that it renews while it runs and gives back when it ends,
// and that expires within admission.lease when its replica dies. Calls that
// find no slot wait in a queue kept in Redis, interactive before batch, then
// in arrival order, whatever replica they came to; beyond max_queue waiters
// in all, they are refused. Waiters are woken by a pub/sub message when a
// slot is given back, and poll at a bounded pace besides (a lease that
// expired frees its slot without a message).
//
// When Redis fails, the replica falls back at once to its local Admission
// (each replica then keeps the limit on its own), says so in Status, and
// goes back to Redis when a background ping finds it again.
type SharedAdmission struct {
	slots SlotStore
	local *Admission
	gates map[string]sharedGate
	// prefix makes this replica's lease ids unique across replicas.
	prefix   string
	seq      atomic.Uint64
	poll     time.Duration // a waiter's longest sleep between tries
	waitTTL  time.Duration // a waiter unseen this long is dropped from the queue
	degraded atomic.Bool
	log      *slog.Logger
	// life bounds the background ping that looks for Redis again.
	life context.Context
}

type sharedGate struct {
	limit, maxQueue int
	waiting         *atomic.Int64 // this replica's calls waiting in Redis
}

var (
	_ Admitter     = (*SharedAdmission)(nil)
	_ HostAdmitter = (*SharedAdmission)(nil)
)

// NewSharedAdmission shares the nodes' limits through slots, falling back to
// local. Its background ping, started while Redis is down, ends with ctx.
// A Redis that does not answer ping now starts it on local limits.
func NewSharedAdmission(ctx context.Context, nodes []config.Node, slots SlotStore, local *Admission, logger *slog.Logger) *SharedAdmission {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	lease := slots.Lease()
	a := &SharedAdmission{
		slots:   slots,
		local:   local,
		gates:   map[string]sharedGate{},
		prefix:  hex.EncodeToString(id[:]) + ":",
		poll:    min(lease/3, time.Second),
		waitTTL: max(lease, 3*min(lease/3, time.Second)),
		log:     logger,
		life:    ctx,
	}
	for _, n := range nodes {
		a.gates[n.Name] = sharedGate{limit: n.Concurrency() * len(n.Hosts()), maxQueue: n.MaxQueue, waiting: new(atomic.Int64)}
	}
	pctx, cancel := context.WithTimeout(ctx, slotTimeout)
	defer cancel()
	if err := slots.Ping(pctx); err != nil {
		a.degrade(err)
	}
	return a
}

// Status is AdmissionShared while the limits hold across replicas, and
// AdmissionLocal while Redis is down and each replica keeps them alone.
func (a *SharedAdmission) Status() string {
	if a.degraded.Load() {
		return AdmissionLocal
	}
	return AdmissionShared
}

// Queued reports how many of this replica's calls wait for node.
func (a *SharedAdmission) Queued(node string) int {
	n := a.local.Queued(node)
	if g, ok := a.gates[node]; ok {
		n += int(g.waiting.Load())
	}
	return n
}

// Acquire waits until node may take one more call across all replicas. The
// returned release must be called once when the call is over. A caller
// whose ctx ends while queued leaves the queue at once and holds no slot.
func (a *SharedAdmission) Acquire(ctx context.Context, node string, batch bool) (func(), error) {
	g, ok := a.gates[node]
	if !ok || g.limit == 0 {
		return func() {}, nil
	}
	if a.degraded.Load() {
		return a.local.Acquire(ctx, node, batch)
	}
	id := a.prefix + strconv.FormatUint(a.seq.Add(1), 36)
	var start time.Time
	var timer *time.Timer
	var freed <-chan struct{}
	for {
		tctx, cancel := context.WithTimeout(ctx, slotTimeout)
		granted, full, queued, err := a.slots.Take(tctx, node, id, batch, g.limit, g.maxQueue, a.waitTTL)
		cancel()
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, a.leave(node, id, &start, g, ctx.Err())
		case err != nil:
			// A place kept in the queue is dropped within waitTTL.
			a.degrade(err)
			a.stopWaiting(&start, g)
			return a.local.Acquire(ctx, node, batch)
		case granted:
			if !start.IsZero() {
				if a.local.OnWait != nil {
					a.local.OnWait(node, batch, time.Since(start))
				}
				a.stopWaiting(&start, g)
			}
			return a.holder(node, id), nil
		case full:
			return nil, &QueueFullError{Node: node, Queued: queued, RetryAfter: time.Second}
		}
		if start.IsZero() {
			start = time.Now()
			g.waiting.Add(1)
			timer = time.NewTimer(a.poll)
			defer timer.Stop()
		} else {
			timer.Reset(a.poll)
		}
		if freed == nil {
			freed = a.slots.Freed(node)
		}
		select {
		case <-freed:
			freed = nil
		case <-timer.C:
		case <-ctx.Done():
			return nil, a.leave(node, id, &start, g, ctx.Err())
		}
	}
}

// TakeHost takes one of limit slots of host (a base URL of node) across
// the replicas, without waiting: ok is false when calls on any replica
// hold them all. While Redis is down it takes none and says ok: each
// replica then keeps the host's limit alone, as it keeps the node's.
func (a *SharedAdmission) TakeHost(ctx context.Context, node, host string, limit int) (release func(), ok bool) {
	if limit == 0 || a.degraded.Load() {
		return func() {}, true
	}
	name := hostSlot(node, host)
	id := a.prefix + strconv.FormatUint(a.seq.Add(1), 36)
	tctx, cancel := context.WithTimeout(ctx, slotTimeout)
	// No queue (max queue 0): a call that finds its host full tries
	// another, or waits in Hosts.
	granted, _, _, err := a.slots.Take(tctx, name, id, false, limit, 0, a.waitTTL)
	cancel()
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, false
	case err != nil:
		a.degrade(err)
		return func() {}, true
	case !granted:
		return nil, false
	}
	return a.holder(name, id), true
}

// hostSlot names the slots of one host of node in Redis: by a hash of its
// URL, which may hold credentials, so that replicas whose files list the
// hosts in another order still share them.
func hostSlot(node, host string) string {
	sum := sha256.Sum256([]byte(host))
	return node + "@" + hex.EncodeToString(sum[:8])
}

// stopWaiting counts a waiter out of its gate once.
func (a *SharedAdmission) stopWaiting(start *time.Time, g sharedGate) {
	if !start.IsZero() {
		g.waiting.Add(-1)
		*start = time.Time{}
	}
}

// leave takes id out of node's queue in Redis (and gives back a slot its
// last Take may have taken unseen), and returns err.
func (a *SharedAdmission) leave(node, id string, start *time.Time, g sharedGate, err error) error {
	a.stopWaiting(start, g)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.life), slotTimeout)
	defer cancel()
	if rerr := a.slots.Release(ctx, node, id); rerr != nil {
		a.degrade(rerr)
	}
	return err
}

// holder returns the release of a slot taken in Redis, and renews its
// lease every third of the lease until then: a call shorter than that
// costs no renewal.
func (a *SharedAdmission) holder(node, id string) func() {
	h := &lease{a: a, node: node, id: id}
	h.mu.Lock()
	h.timer = time.AfterFunc(a.slots.Lease()/3, h.renew)
	h.mu.Unlock()
	return h.release
}

// lease is one slot held in Redis.
type lease struct {
	a        *SharedAdmission
	node, id string

	mu    sync.Mutex
	timer *time.Timer
	done  bool
}

// renew runs on the timer's goroutine, which ends when it returns; it
// arms the next renewal unless the slot was released meanwhile. It holds
// mu while it asks Redis, so that a release waits for it: a renewal that
// reached Redis after the release would take the slot again, for a call
// already over, for a whole lease.
func (l *lease) renew() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return
	}
	// A draining replica's calls still hold their slots: renewals go on
	// past the end of life, until each call releases its own.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(l.a.life), slotTimeout)
	held, err := l.a.slots.Renew(ctx, l.node, l.id)
	cancel()
	switch {
	case err != nil:
		l.a.log.Debug("admission: lease not renewed", "node", l.node, "err", err)
	case !held:
		// Redis lost it (restarted empty, or stalled past the lease), and
		// another call may have had the slot since: the call runs on, not
		// cut, and counts again from now.
		l.a.log.Warn("admission: lease lost while its call ran, taken again", "node", l.node)
	}
	l.timer.Reset(l.a.slots.Lease() / 3)
}

func (l *lease) release() {
	l.mu.Lock()
	if l.done {
		l.mu.Unlock()
		return
	}
	l.done = true
	l.timer.Stop()
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(l.a.life), slotTimeout)
	defer cancel()
	if err := l.a.slots.Release(ctx, l.node, l.id); err != nil {
		// The lease expires on its own; until then it counts.
		l.a.degrade(err)
	}
}

// degrade switches to local limits after a Redis error, once per outage,
// and starts the ping that switches back.
func (a *SharedAdmission) degrade(err error) {
	if a.life.Err() != nil || !a.degraded.CompareAndSwap(false, true) {
		return
	}
	a.log.Warn("admission: redis unreachable, each replica keeps the limits on its own", "err", err)
	go a.probe() // exits when Redis answers or life ends
}

// probe pings Redis every second until it answers and takes writes, then
// shares the limits again. It exits then, or when life ends.
func (a *SharedAdmission) probe() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-a.life.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(a.life, slotTimeout)
		err := a.slots.Ping(ctx)
		cancel()
		if err == nil {
			a.degraded.Store(false)
			a.log.Info("admission: redis answers again, limits shared across replicas")
			return
		}
	}
}
