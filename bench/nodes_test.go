package bench

import (
	"testing"

	"chainproxy/chain/node"
	_ "chainproxy/chain/node/ollama" // the providers cfg's nodes name
	_ "chainproxy/chain/node/openai"
	"chainproxy/config"
)

// buildNodes builds cfg's nodes as the proxy does (node.Build): a fake
// upstream is a node's base_url.
func buildNodes(tb testing.TB, cfg *config.Config) *node.Set {
	tb.Helper()
	set, err := node.Build(cfg, node.Deps{})
	if err != nil {
		tb.Fatal(err)
	}
	return set
}
