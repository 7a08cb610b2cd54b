package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"

	"chainproxy/config"
)

// What the node layer knows of each node of a Set, learned from its
// server: the capabilities it reported, the window it runs its model
// with and the longest its model was trained for, whether it is offline.
// The engine reads it to fit prompts and offer tools; the operational
// endpoints (/readyz, /api/ps, /metrics) read it from the Set, without
// the engine.

// DefaultOllamaWindow is the window Ollama runs a model with unless told
// otherwise (its default below 24 GiB of VRAM): assumed for an Ollama node
// until /api/ps says what its loaded model runs with.
const DefaultOllamaWindow = 4096

// WindowError is a configured context_window above what the node's model
// supports: refused at startup, as Ollama would run it with garbage beyond
// its trained length.
type WindowError struct {
	Node          string
	Window, Max   int
	Configuration string // where the file sets it, "" when unknown
}

func (e *WindowError) Error() string {
	return fmt.Sprintf("node %s: context_window %d is above its model's maximum of %d tokens", e.Node, e.Window, e.Max)
}

// known is what the nodes' servers said, by node name.
type known struct {
	mu   sync.Mutex
	caps map[string][]string // absent: not yet known
	// asked holds the nodes whose server was asked since startup, whatever
	// it said: a server that reports no capabilities (an OpenAI-compatible
	// /v1/models), or failed, is not asked again on every request; the
	// readiness probe (startup, /readyz, a node coming back) asks again.
	asked  map[string]bool
	window map[string]int // what the server runs the model with
	max    map[string]int // the model's longest window
	// called holds the nodes that answered a call: after the first, the
	// loaded model's window is read.
	called map[string]bool
}

func newKnown() known {
	return known{caps: map[string][]string{}, asked: map[string]bool{}, window: map[string]int{}, max: map[string]int{}, called: map[string]bool{}}
}

// node is the configured node named name, by pointer: Window and the
// probes ask it on every call, and a Node is too large to copy each time.
func (s *Set) node(name string) (*config.Node, bool) {
	if n, ok := s.byName[name]; ok {
		return n, true
	}
	return &noNode, false
}

// noNode is the node of a name no node has: its zero value, read only.
var noNode config.Node

// Probe checks that node name answers and has its model, and remembers
// what its server says of the model (Describe). A node that does not
// answer is remembered offline; one that answers is back. A backend that
// cannot be probed is taken as up.
func (s *Set) Probe(ctx context.Context, name string) error {
	n, ok := s.node(name)
	b, okb := s.Backend(name)
	if !ok || !okb {
		return fmt.Errorf("unknown node %q", name)
	}
	p, ok := b.(Prober)
	if !ok {
		return nil
	}
	err := p.Probe(ctx)
	var ue *UpstreamError
	switch {
	case err == nil:
		s.offline.Clear(name)
		err = s.describe(ctx, n, b)
	case errors.As(err, &ue) && ue.Offline():
		s.offline.Mark(name, ue.Error())
	}
	return err
}

// describe asks n's server about its model and remembers its capabilities;
// the configuration's capabilities, when set, win over the server's.
// Backends that cannot describe their model are taken at their config.
func (s *Set) describe(ctx context.Context, n *config.Node, b Backend) error {
	d, ok := b.(Describer)
	if !ok {
		if n.Capabilities != nil {
			s.setCaps(n.Name, n.Capabilities)
		}
		return nil
	}
	info, err := d.Describe(ctx)
	s.known.mu.Lock()
	// Asked once, unless the model was missing: pulled or created while
	// the proxy runs, it must be asked about then, or it would be taken
	// for a model with tools, which Ollama refuses for one without.
	if ctx.Err() == nil && !errors.Is(err, ErrModelNotFound) {
		s.known.asked[n.Name] = true
	}
	if err == nil && info.Window > 0 && n.ContextWindow == 0 {
		s.known.window[n.Name] = info.Window
	}
	if err == nil && info.MaxWindow > 0 {
		s.known.max[n.Name] = info.MaxWindow
	}
	s.known.mu.Unlock()
	if err != nil {
		return err
	}
	if n.ContextWindow > 0 && info.MaxWindow > 0 && n.ContextWindow > info.MaxWindow {
		return &WindowError{Node: n.Name, Window: n.ContextWindow, Max: info.MaxWindow}
	}
	// The server's words are passed on (/readyz, Ollama's /api/show): a
	// hostile one may write the key it was sent into them.
	caps := s.redact.EachValue(info.Capabilities)
	if n.Capabilities != nil {
		caps = n.Capabilities
	}
	if caps != nil {
		s.setCaps(n.Name, caps)
	}
	return nil
}

func (s *Set) setCaps(name string, caps []string) {
	s.known.mu.Lock()
	defer s.known.mu.Unlock()
	s.known.caps[name] = caps
}

// Capabilities returns what is known of node name's model capabilities:
// the configured ones, else those its server reported at the last probe;
// known is false when neither says (the node is then assumed to take
// tools).
func (s *Set) Capabilities(name string) (caps []string, known bool) {
	if n, ok := s.node(name); ok && n.Capabilities != nil {
		return n.Capabilities, true
	}
	s.known.mu.Lock()
	defer s.known.mu.Unlock()
	caps, known = s.known.caps[name]
	return caps, known
}

// LearnCapabilities is Capabilities, asking the node's server once when
// nothing tells yet (a node down at startup has come back).
func (s *Set) LearnCapabilities(ctx context.Context, name string) ([]string, bool) {
	caps, known := s.Capabilities(name)
	if known || s.offline.IsOffline(name) {
		// An offline node is skipped anyway: asking it would only wait.
		return caps, known
	}
	s.known.mu.Lock()
	asked := s.known.asked[name]
	s.known.mu.Unlock()
	n, ok := s.node(name)
	b, okb := s.Backend(name)
	if asked || !ok || !okb {
		return caps, known
	}
	if err := s.describe(ctx, n, b); err == nil {
		caps, known = s.Capabilities(name)
	}
	return caps, known
}

// RunnerWindow is the window node name's server is asked to run the
// model with (Request.NumCtx): its context_window, or the largest of the
// nodes sharing its Ollama runner (config.RunnerWindows), so that they do
// not reload the model for each other; 0 leaves the server's.
func (s *Set) RunnerWindow(name string) int {
	if w, ok := s.runnerWindows[name]; ok {
		return w
	}
	n, _ := s.node(name)
	return n.ContextWindow
}

// Window is node name's context window in tokens as the layer knows it:
// the configured one, else the one its server is asked for (that of
// another node sharing its Ollama runner), else what its server reported,
// else Ollama's default for an Ollama node, or its model's longest when
// shorter (Ollama runs such a model at its trained length); 0 when
// unknown (no fitting).
func (s *Set) Window(name string) int {
	n, _ := s.node(name)
	if w := cmp.Or(n.ContextWindow, s.runnerWindows[name]); w > 0 {
		return w // RunnerWindow's answer, without asking for n again
	}
	s.known.mu.Lock()
	w, most := s.known.window[name], s.known.max[name]
	s.known.mu.Unlock()
	if w > 0 {
		return w
	}
	if n.Provider == config.ProviderOllama {
		if most > 0 && most < DefaultOllamaWindow {
			return most
		}
		return DefaultOllamaWindow
	}
	return 0
}

// FirstCall reports whether this is the first time it is asked for node
// name: after the first call that succeeds, the loaded model's window is
// read (LearnWindow).
func (s *Set) FirstCall(name string) bool {
	s.known.mu.Lock()
	defer s.known.mu.Unlock()
	if s.known.called[name] {
		return false
	}
	s.known.called[name] = true
	return true
}

// LearnWindow asks node name's server the window its loaded model runs
// with, when the configuration does not say and the backend can tell.
func (s *Set) LearnWindow(ctx context.Context, name string) {
	if s.RunnerWindow(name) > 0 {
		return
	}
	b, _ := s.Backend(name)
	wr, ok := b.(WindowReader)
	if !ok {
		return
	}
	if w, err := wr.LoadedWindow(ctx); err == nil && w > 0 {
		s.known.mu.Lock()
		s.known.window[name] = w
		s.known.mu.Unlock()
	}
}

// Offline is the set's offline set: the nodes found unreachable.
func (s *Set) Offline() *Offline { return s.offline }

// Hosts reports the hosts of node name when it has several (base_urls);
// nil for a node of one host.
func (s *Set) Hosts(name string) []HostState {
	b, _ := s.Backend(name)
	h, ok := b.(*Hosts)
	if !ok {
		return nil
	}
	return h.States()
}

// Admit has the nodes' calls admitted by a: a node of several hosts
// keeps a's host limits (HostAdmitter), and AdmissionStatus reports a's.
// The engine, which acquires through a, hands it over when built.
func (s *Set) Admit(a Admitter) {
	s.admission = a
	ha, ok := a.(HostAdmitter)
	if !ok {
		return
	}
	for _, b := range s.backends {
		if h, ok := b.(*Hosts); ok {
			h.ShareLimits(ha)
		}
	}
}

// AdmissionStatus is the shared admission's status (AdmissionShared or
// AdmissionLocal), or "" when the limits are not shared (no Redis).
func (s *Set) AdmissionStatus() string {
	if a, ok := s.admission.(*SharedAdmission); ok {
		return a.Status()
	}
	return ""
}
