package chain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"chainproxy/internal/redact"
)

// CapTools is the capability of a model that takes tools, as Ollama's
// /api/show names it.
const CapTools = "tools"

// CapThinking is the capability of a model that thinks before it answers
// and can be asked not to (Ollama's think).
const CapThinking = "thinking"

// ErrModelNotFound is wrapped by a Describer's error when the node's server
// does not have the node's model.
var ErrModelNotFound = errors.New("model not found")

// ErrToolsUnsupported is wrapped by the error of a request whose own tools
// went to a node whose model cannot take tools: the client's to fix.
var ErrToolsUnsupported = errors.New("model cannot take tools")

// ModelInfo is what a node's server tells of the node's model.
type ModelInfo struct {
	// Capabilities are the model's capabilities ("completion", "tools",
	// "thinking", "vision", …); nil when the server does not say.
	Capabilities []string
	// MaxWindow is the longest context the model was trained for (Ollama's
	// model_info "<arch>.context_length"); Window is the window the server
	// runs it with (a loaded Ollama model's context_length, vLLM's
	// max_model_len). 0: not said.
	MaxWindow, Window int
}

// WindowReader is the optional capability of a backend that can tell the
// window its server runs the model with right now (Ollama's /api/ps, once
// the model is loaded); 0 when it cannot tell.
type WindowReader interface {
	LoadedWindow(ctx context.Context) (int, error)
}

// Thinker is the optional capability of a backend that learns from its
// answers whether its model thinks (reasoning apart or in think tags): an
// OpenAI-compatible server's model list rarely says so, and a summary asked
// of a thinking model must ask it not to (Request.NoThink), or its answer
// cap goes on reasoning.
type Thinker interface {
	Thinks() bool
}

// thinks reports whether n's model is known to think, from its server's
// capabilities or from its answers.
func thinks(n *Node, caps []string) bool {
	if slices.Contains(caps, CapThinking) {
		return true
	}
	t, ok := n.Backend.(Thinker)
	return ok && t.Thinks()
}

// Describer is the optional capability of a backend that can look its model
// up on its server. Describe fails with an error wrapping ErrModelNotFound
// when the server lacks the model.
type Describer interface {
	Describe(ctx context.Context) (ModelInfo, error)
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
	d, ok := n.Backend.(Describer)
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
	if ctx.Err() == nil && !errors.Is(err, ErrModelNotFound) {
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
	return !known || slices.Contains(caps, CapTools)
}

// learnCaps is Capabilities, asking n's server once when nothing tells
// yet (a node down at startup has come back).
func (e *Engine) learnCaps(ctx context.Context, n *Node) ([]string, bool) {
	caps, known := e.Capabilities(n.Name)
	if !known && !e.offline.isOffline(n.Name) && !e.caps.wasAsked(n.Name) {
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
			ErrToolsUnsupported, s.node.Name, s.node.Model, strings.Join(caps, ", "))
	}
	s.cfg.tools = false
	r.trace.Reasons = append(r.trace.Reasons, fmt.Sprintf("node %s: model %s cannot take tools: stage %d runs without them", s.node.Name, s.node.Model, s.idx))
	return nil
}

// ModelNotFoundError is a node's server lacking the node's model.
type ModelNotFoundError struct {
	Node, Model, BaseURL string
	// Hint says how to get the model, when the server's kind tells.
	Hint string
}

func (e *ModelNotFoundError) Error() string {
	msg := fmt.Sprintf("model %q not found on %s", e.Model, redact.URL(e.BaseURL))
	if e.Hint != "" {
		msg += ": " + e.Hint
	}
	return msg
}

// Is makes errors.Is(err, ErrModelNotFound) hold.
func (e *ModelNotFoundError) Is(target error) bool { return target == ErrModelNotFound }
