package node

import (
	"errors"
	"fmt"
	"sync"

	"chainproxy/config"
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
	// follows the classifier's words (cmd/proxy).
	Providers map[string]Provider
}

// Set is the configured nodes' backends, by node name.
type Set struct {
	backends map[string]Backend
}

// Build is the one place a configuration becomes backends: each node's
// backend for its provider, wrapped in a Hosts when it has several hosts
// (HostsBackend). A node whose provider nobody provides is an error.
func Build(cfg *config.Config, deps Deps) (*Set, error) {
	s := &Set{backends: make(map[string]Backend, len(cfg.Nodes))}
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

// SetOf is a Set of hand-made backends, by node name. It is for tests
// whose backend is a Go value (a scripted mock, a recorder) with no HTTP
// upstream behind it: a node with a base_url, fake or real, goes through
// Build as the proxy's do.
func SetOf(backends map[string]Backend) *Set {
	return &Set{backends: backends}
}

// Backend returns the backend of the node named name.
func (s *Set) Backend(name string) (Backend, bool) {
	if s == nil {
		return nil, false
	}
	b, ok := s.backends[name]
	return b, ok
}
