package chain_test

import (
	"testing"

	"chainproxy/chain/node"
	"chainproxy/config"
)

// byName provides each node the backend backends holds under its name: a
// test's own backend for each node.
func byName[B node.Backend](tb testing.TB, backends map[string]B) node.Provider {
	return func(n config.Node) node.Backend {
		b, ok := backends[n.Name]
		if !ok {
			tb.Fatalf("no backend for node %s", n.Name)
		}
		return b
	}
}

// ownMocks provides each node of provider mock the backend backends holds
// under its name: a recorder or a scripted fake in the mock's place.
func ownMocks[B node.Backend](tb testing.TB, backends map[string]B) map[string]node.Provider {
	return map[string]node.Provider{config.ProviderMock: byName(tb, backends)}
}
