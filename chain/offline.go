package chain

import (
	"context"
	"slices"
	"sync"

	"chainproxy/config"
)

// stillOffline reports whether node n, remembered offline, still is, and
// why (node.Offline.Probe).
func (e *Engine) stillOffline(ctx context.Context, n *Node) (cause string, off bool) {
	return e.offline.Probe(ctx, n.Node, n.Backend, e.redact)
}

// recheckOffline probes, all at once, the nodes of stages remembered
// offline, so that the chain counts those back among the reachable ones
// before it chooses its answering stage.
func (r *run) recheckOffline(ctx context.Context, stages []config.Stage) {
	var wg sync.WaitGroup
	var seen []string // few: allocated only when a node is offline
	for _, sc := range stages {
		if slices.Contains(seen, sc.Node) || !r.e.offline.IsOffline(sc.Node) {
			continue
		}
		seen = append(seen, sc.Node)
		n := r.e.nodes[sc.Node]
		wg.Go(func() { r.e.stillOffline(ctx, n) }) // exits when the probe, bounded, ends
	}
	wg.Wait()
}
