package bench

import (
	"testing"

	"chainproxy/chain/mock"
	"chainproxy/chain/node"
	_ "chainproxy/chain/node/ollama" // the providers cfg's nodes name
	_ "chainproxy/chain/node/openai"
	"chainproxy/config"
)

// buildNodes builds cfg's nodes as the proxy does (node.Build): a fake
// upstream is a node's base_url.
func buildNodes(tb testing.TB, cfg *config.Config) *node.Set {
	return buildWith(tb, cfg, nil)
}

// buildWith builds cfg's nodes as the proxy does (node.Build, HostsBackend
// included), with providers for the nodes whose backend is a Go value
// rather than an upstream: the scripted mock.
func buildWith(tb testing.TB, cfg *config.Config, providers map[string]node.Provider) *node.Set {
	tb.Helper()
	set, err := node.Build(cfg, node.Deps{Providers: providers})
	if err != nil {
		tb.Fatal(err)
	}
	return set
}

// mockNodes provides the nodes of provider mock their scripted backend, as
// cmd/proxy does the demo's.
var mockNodes = map[string]node.Provider{config.ProviderMock: func(n config.Node) node.Backend { return mock.New(n) }}
