package node

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"chainproxy/config"
	"chainproxy/internal/redact"
)

// Provider builds the backend of a node of one host (its base_url) for one
// protocol: ollama.New, openai.New.
type Provider func(config.Node) Backend

var (
	providersMu sync.RWMutex
	providers   = map[string]Provider{}
)

// Register makes build the provider of nodes whose provider is name. The
// backend packages register themselves when imported (node/ollama,
// node/openai), as database/sql's drivers do, because they import node
// and node cannot import them; Register panics on a name registered twice.
func Register(name string, build Provider) {
	providersMu.Lock()
	defer providersMu.Unlock()
	if _, dup := providers[name]; dup {
		panic("node: provider " + name + " registered twice")
	}
	providers[name] = build
}

// Deps are what Build needs besides the configuration.
type Deps struct {
	// Providers build the nodes of providers no backend package
	// registers, by provider name: the demo's mock nodes, whose script
	// follows the classifier's words (cmd/proxy). They come before the
	// registered ones, so that a test gives a node of any provider a
	// backend of its own (a recorder, a scripted fake) the way the proxy
	// builds its nodes.
	Providers map[string]Provider
}

// Set is the configured nodes: their backends, by node name, and what
// their servers said of them (known.go).
type Set struct {
	backends map[string]Backend
	order    []config.Node
	byName   map[string]*config.Node // into order: a lookup copies no Node
	// runnerWindows are the windows of the nodes sharing an Ollama runner
	// (config.RunnerWindows).
	runnerWindows map[string]int
	offline       *Offline
	known         known
	redact        redact.Redactor
	admission     Admitter
}

// newSet is the Set of cfg's nodes, their backends yet to be built. What
// their servers say is masked with cfg's redactor, the one the proxy builds
// for its logs, answers and traces.
func newSet(cfg *config.Config) *Set {
	s := &Set{backends: make(map[string]Backend, len(cfg.Nodes)), order: cfg.Nodes, byName: make(map[string]*config.Node, len(cfg.Nodes)),
		runnerWindows: cfg.RunnerWindows(), offline: NewOffline(30*time.Second, time.Now), known: newKnown(), redact: redact.FromConfig(cfg)}
	for i, n := range cfg.Nodes {
		s.byName[n.Name] = &cfg.Nodes[i]
		if n.OfflineFor > 0 {
			s.offline.SetTTL(n.Name, n.OfflineFor)
		}
	}
	return s
}

// Build is the one place a configuration becomes backends: each node's
// backend for its provider, wrapped in a Hosts when it has several hosts
// (HostsBackend). A node whose provider nobody provides is an error.
func Build(cfg *config.Config, deps Deps) (*Set, error) {
	s := newSet(cfg)
	var errs []error
	providersMu.RLock()
	defer providersMu.RUnlock()
	for _, n := range cfg.Nodes {
		build, ok := deps.Providers[n.Provider]
		if !ok {
			build, ok = providers[n.Provider]
		}
		if !ok {
			errs = append(errs, fmt.Errorf("node %s: no backend for provider %q (is its package, chain/node/%s, imported?)", n.Name, n.Provider, n.Provider))
			continue
		}
		s.backends[n.Name] = HostsBackend(n, build)
	}
	return s, errors.Join(errs...)
}

// Backend returns the backend of the node named name.
func (s *Set) Backend(name string) (Backend, bool) {
	if s == nil {
		return nil, false
	}
	b, ok := s.backends[name]
	return b, ok
}
