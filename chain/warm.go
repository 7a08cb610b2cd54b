package chain

import "chainproxy/chain/node"

// preloads returns what loads the models of the chain's stages after the
// first early, once a request is classified reflexive (issue 44): the
// admission's Warm, when it has one, over those stages' nodes with the
// keep-alive and window their calls send; nil when there is nothing to
// warm, so that a request pays one nil check.
func (e *Engine) preloads(a node.Admitter) func() {
	w, ok := a.(node.Warmer)
	if !ok || len(e.cfg.Chain.Stages) < 2 {
		return nil
	}
	var ps []node.Preload
	for _, s := range e.cfg.Chain.Stages[1:] {
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
		return nil
	}
	first := e.cfg.Chain.Stages[0].Node
	return func() { w.Warm(first, ps) }
}
