package chain

import "chainproxy/chain/node"

// warmer is what loads models early (issue 44): for each stage i of the
// chain, the models of the stages after it (stage), and, once a chain has
// ended, the models the next request calls first (rest). Both are the
// admission's Warm, when it has one; nil, or a nil entry, when there is
// nothing to warm, so that a request pays one nil check.
type warmer struct {
	stage []func()
	rest  func()
}

// preloads builds the warmer over the admission a: the nodes' keep-alive
// and window are those their calls send, so that the server does not load
// a model again for them. A chain warms from its first stage once a
// request is classified reflexive, and a resumed chain from the stage it
// resumes in, since a pause for the client's tools may have let another
// chain evict the models it warmed.
//
// When a chain ends, its last stage's model is loaded and the first ones'
// may have been evicted for it (the design's M1 and M2 do not fit
// together in 24 GB): the next chain would wait for M1's load before its
// second stage, every time. Loading at rest what the next request calls
// first (the simple node's model, then the stages' in order, each when it
// fits beside those before) moves that load into the time between two
// requests; a request that comes sooner finds the load under way.
func (e *Engine) preloads(a node.Admitter) warmer {
	w, ok := a.(node.Warmer)
	if !ok {
		return warmer{}
	}
	preload := func(name string) (node.Preload, bool) {
		n := e.nodes[name]
		if n.keepAlive != nil && *n.keepAlive == 0 {
			// Ollama takes an empty generate with keep_alive 0 for an
			// unload (ollama stop): the model would not load, and the
			// scheduling would count it as held.
			return node.Preload{}, false
		}
		return node.Preload{Node: n.Name, KeepAlive: n.keepAlive, NumCtx: n.numCtx}, true
	}
	stages := e.cfg.Chain.Stages
	var out warmer
	if len(stages) >= 2 {
		out.stage = make([]func(), len(stages))
		some := false
		for i := range stages[:len(stages)-1] {
			var ps []node.Preload
			for _, s := range stages[i+1:] {
				if p, ok := preload(s.Node); ok {
					ps = append(ps, p)
				}
			}
			if len(ps) == 0 {
				continue
			}
			first := stages[i].Node
			out.stage[i], some = func() { w.Warm(first, ps) }, true
		}
		if !some {
			out.stage = nil
		}
	}
	simple := e.cfg.Chain.SimpleNode
	names := []string{simple}
	for _, s := range stages {
		names = append(names, s.Node)
	}
	var rest []node.Preload
	seen := map[string]bool{}
	for _, name := range names {
		if p, ok := preload(name); ok && !seen[name] {
			seen[name] = true
			rest = append(rest, p)
		}
	}
	if len(rest) > 1 {
		out.rest = func() { w.Warm(simple, rest) }
	}
	return out
}

// warmFrom loads early the models of the stages after stage i, when the
// admission schedules loads.
func (e *Engine) warmFrom(i int) {
	if i < len(e.warm.stage) && e.warm.stage[i] != nil {
		e.warm.stage[i]()
	}
}

// warmRest loads, once a chain has ended, what the next request will call
// first, when the admission schedules loads.
func (e *Engine) warmRest() {
	if e.warm.rest != nil {
		e.warm.rest()
	}
}
