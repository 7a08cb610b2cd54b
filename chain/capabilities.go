package chain

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"chainproxy/chain/node"
)

// thinks reports whether n's model is known to think, from its server's
// capabilities or from its answers.
func thinks(n *Node, caps []string) bool {
	if slices.Contains(caps, node.CapThinking) {
		return true
	}
	t, ok := n.Backend.(node.Thinker)
	return ok && t.Thinks()
}

// Capabilities returns what is known of node's model capabilities: the
// configured ones, else those its server reported at the last probe; known
// is false when neither says (the node is then assumed to take tools).
func (e *Engine) Capabilities(node string) (caps []string, known bool) {
	return e.set.Capabilities(node)
}

// takesTools reports whether n's model takes tools. Until a probe has told,
// it asks the server once here (a node down at startup has come back); when
// nobody can tell, it assumes tools, as OpenAI-compatible servers take them.
func (e *Engine) takesTools(ctx context.Context, n *Node) bool {
	caps, known := e.learnCaps(ctx, n)
	return !known || slices.Contains(caps, node.CapTools)
}

// learnCaps is Capabilities, asking n's server once when nothing tells
// yet (a node down at startup has come back).
func (e *Engine) learnCaps(ctx context.Context, n *Node) ([]string, bool) {
	return e.set.LearnCapabilities(ctx, n.Name)
}

// fitTools adapts stage s to its node: a node whose model cannot take tools
// is offered none (the stage runs without them and the trace says so), and
// a client's own tools for it are refused, naming node and model, rather
// than sent to fail upstream as if the client were wrong.
func (r *run) fitTools(ctx context.Context, s *stage) error {
	client := len(r.req.ClientTools) > 0 && r.req.ToolChoice.Mode != "none"
	if !s.cfg.tools && !client || r.e.takesTools(ctx, s.node) {
		return nil
	}
	caps, _ := r.e.Capabilities(s.node.Name)
	if client {
		return fmt.Errorf("%w: node %s: model %q (capabilities: %s) cannot take the request's tools; send them to a node whose model can",
			node.ErrToolsUnsupported, s.node.Name, s.node.Model, strings.Join(caps, ", "))
	}
	s.cfg.tools = false
	r.trace.Reasons = append(r.trace.Reasons, fmt.Sprintf("node %s: model %s cannot take tools: stage %d runs without them", s.node.Name, s.node.Model, s.idx))
	return nil
}
