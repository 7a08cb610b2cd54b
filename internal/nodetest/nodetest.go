// Package nodetest builds a configuration's nodes for tests as the proxy
// does (node.Build, HostsBackend included). It is a package because the
// engine's, the server's and the benchmarks' tests all build their nodes
// this way and each had kept its own copy of the same helpers.
package nodetest

import (
	"testing"

	"chainproxy/chain/mock"
	"chainproxy/chain/node"
	_ "chainproxy/chain/node/ollama" // the providers configurations name
	_ "chainproxy/chain/node/openai"
	"chainproxy/config"
)

// Build builds cfg's nodes as the proxy does, with providers for the nodes
// whose backend is a Go value rather than an upstream (the scripted mock,
// a recorder, a fake); a fake upstream is a node's base_url.
func Build(tb testing.TB, cfg *config.Config, providers map[string]node.Provider) *node.Set {
	tb.Helper()
	set, err := node.Build(cfg, node.Deps{Providers: providers})
	if err != nil {
		tb.Fatal(err)
	}
	return set
}

// Mocks provides the nodes of provider mock their scripted backend, as
// cmd/proxy does the demo's.
var Mocks = map[string]node.Provider{config.ProviderMock: func(n config.Node) node.Backend { return mock.New(n) }}
