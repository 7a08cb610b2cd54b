package chain

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"chainproxy/chain/node"
	"chainproxy/config"
)

// offlineSet remembers nodes found unreachable so that later requests skip
// them at once instead of each waiting for a connect timeout in a call
// that would fail. An entry expires after ttl; before that, a request that
// needs the node probes it (recheck), so that a node that was down a
// moment is back at once rather than after ttl.
type offlineSet struct {
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

func newOfflineSet(ttl time.Duration, now func() time.Time) *offlineSet {
	return &offlineSet{until: map[string]offline{}, probing: map[string]chan struct{}{}, ttl: ttl, ttls: map[string]time.Duration{}, now: now}
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

// recheck reports whether node is still offline, and why. A node remembered
// offline is probed first, as Envoy routes to every host when too many are
// ejected rather than fail them all (its panic threshold): one probe in
// flight per node, which the requests that find the node offline meanwhile
// wait for rather than each probing. probe runs on the first of them and
// updates the set (clear or mark); a waiter whose ctx ends takes the node
// as offline.
func (o *offlineSet) recheck(ctx context.Context, node string, probe func()) (cause string, off bool) {
	if _, off := o.lookup(node); !off {
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
		return o.lookup(node)
	}
	defer func() {
		o.mu.Lock()
		delete(o.probing, node)
		o.mu.Unlock()
		close(done)
	}()
	probe()
	return o.lookup(node)
}

// stillOffline reports whether node n, remembered offline, still is, and
// why: it is probed first (offlineSet.recheck). A node that answers the
// probe, even with an error, is back; one without a probe is, and its call
// is the probe.
func (e *Engine) stillOffline(ctx context.Context, n *Node) (cause string, off bool) {
	return e.offline.recheck(ctx, n.Name, func() {
		p, ok := n.Backend.(node.Prober)
		if !ok {
			e.offline.clear(n.Name)
			return
		}
		// The probe serves every request waiting for it: the first one
		// going away does not end it.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.ConnectTimeout+node.ProbeWait)
		defer cancel()
		err := p.Probe(pctx)
		var ue *node.UpstreamError
		switch {
		case errors.As(err, &ue) && ue.Offline():
			e.offline.mark(n.Name, e.redact.String(ue.Error()))
		case err != nil && pctx.Err() != nil:
			e.offline.mark(n.Name, e.redact.String(err.Error()))
		default:
			e.offline.clear(n.Name)
		}
	})
}

// recheckOffline probes, all at once, the nodes of stages remembered
// offline, so that the chain counts those back among the reachable ones
// before it chooses its answering stage.
func (r *run) recheckOffline(ctx context.Context, stages []config.Stage) {
	var wg sync.WaitGroup
	var seen []string // few: allocated only when a node is offline
	for _, sc := range stages {
		if slices.Contains(seen, sc.Node) || !r.e.offline.isOffline(sc.Node) {
			continue
		}
		seen = append(seen, sc.Node)
		n := r.e.nodes[sc.Node]
		wg.Go(func() { r.e.stillOffline(ctx, n) }) // exits when the probe, bounded, ends
	}
	wg.Wait()
}
