package chain

import "chainproxy/chain/node"

// preloads returns, for each stage i of the chain, what loads the models
// of the stages after it early (issue 44): the admission's Warm, when it
// has one, over those stages' nodes with the keep-alive and window their
// calls send, with stage i's node as the one running. A chain warms from
// its first stage once a request is classified reflexive, and a resumed
// chain from the stage it resumes in, since a pause for the client's
// tools may have let another chain evict the models it warmed. nil, or a
// nil entry, when there is nothing to warm, so that a request pays one
// nil check.
func (e *Engine) preloads(a node.Admitter) []func() {
	w, ok := a.(node.Warmer)
	stages := e.cfg.Chain.Stages
	if !ok || len(stages) < 2 {
		return nil
	}
	out := make([]func(), len(stages))
	some := false
	for i := range stages[:len(stages)-1] {
		var ps []node.Preload
		for _, s := range stages[i+1:] {
			n := e.nodes[s.Node]
			if n.keepAlive != nil && *n.keepAlive == 0 {
				// Ollama takes an empty generate with keep_alive 0 for an
				// unload (ollama stop): the model would not load, and the
				// scheduling would count it as held.
				continue
			}
			ps = append(ps, node.Preload{Node: n.Name, KeepAlive: n.keepAlive, NumCtx: n.numCtx})
		}
		if len(ps) == 0 {
			continue
		}
		first := stages[i].Node
		out[i], some = func() { w.Warm(first, ps) }, true
	}
	if !some {
		return nil
	}
	return out
}

// warmFrom loads early the models of the stages after stage i, when the
// admission schedules loads.
func (e *Engine) warmFrom(i int) {
	if i < len(e.warm) && e.warm[i] != nil {
		e.warm[i]()
	}
}
