package chain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

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

// capabilities remembers what each node's server last said of its model.
type capabilities struct {
	mu    sync.Mutex
	known map[string][]string // node → capabilities; absent: not yet known
	// asked holds the nodes whose server was asked since startup, whatever
	// it said: a server that reports no capabilities (an OpenAI-compatible
	// /v1/models), or failed, is not asked again on every request; the
	// readiness probe (startup, /readyz, a node coming back) asks again.
	asked map[string]bool
}

func newCapabilities() *capabilities {
	return &capabilities{known: map[string][]string{}, asked: map[string]bool{}}
}

func (c *capabilities) markAsked(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked[node] = true
}

func (c *capabilities) wasAsked(node string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.asked[node]
}

func (c *capabilities) get(node string) ([]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	caps, ok := c.known[node]
	return caps, ok
}

func (c *capabilities) set(node string, caps []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.known[node] = caps
}

// describe asks n's server about its model and remembers its capabilities;
// the configuration's capabilities, when set, win over the server's.
// Backends that cannot describe their model are taken at their config.
func (e *Engine) describe(ctx context.Context, n *Node) error {
	d, ok := n.Backend.(node.Describer)
	if !ok {
		if n.Capabilities != nil {
			e.caps.set(n.Name, n.Capabilities)
		}
		return nil
	}
	info, err := d.Describe(ctx)
	// Asked once, unless the model was missing: pulled or created while
	// the proxy runs, it must be asked about then, or it would be taken
	// for a model with tools, which Ollama refuses for one without.
	if ctx.Err() == nil && !errors.Is(err, node.ErrModelNotFound) {
		e.caps.markAsked(n.Name)
	}
	if err != nil {
		return err
	}
	if info.Window > 0 && n.ContextWindow == 0 {
		e.windows.set(n.Name, info.Window)
	}
	if info.MaxWindow > 0 {
		e.windows.setMax(n.Name, info.MaxWindow)
	}
	if n.ContextWindow > 0 && info.MaxWindow > 0 && n.ContextWindow > info.MaxWindow {
		return &WindowError{Node: n.Name, Window: n.ContextWindow, Max: info.MaxWindow}
	}
	// The server's words are passed on (/readyz, Ollama's /api/show): a
	// hostile one may write the key it was sent into them.
	caps := e.redact.EachValue(info.Capabilities)
	if n.Capabilities != nil {
		caps = n.Capabilities
	}
	if caps != nil {
		e.caps.set(n.Name, caps)
	}
	return nil
}

// Capabilities returns what is known of node's model capabilities: the
// configured ones, else those its server reported at the last probe; known
// is false when neither says (the node is then assumed to take tools).
func (e *Engine) Capabilities(node string) (caps []string, known bool) {
	if n, ok := e.nodes[node]; ok && n.Capabilities != nil {
		return n.Capabilities, true
	}
	return e.caps.get(node)
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
	caps, known := e.Capabilities(n.Name)
	if !known && !e.offline.IsOffline(n.Name) && !e.caps.wasAsked(n.Name) {
		// An offline node is skipped anyway: asking it would only wait.
		if err := e.describe(ctx, n); err == nil {
			caps, known = e.caps.get(n.Name)
		}
	}
	return caps, known
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
