package node_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNodeImports: the node layer and its backends depend on no package
// above them or beside the engine (issue 43): a backend is the leaf the
// engine calls, and a node wired without the store, the tools, the
// classifier, memory or the HTTP layer is what keeps it so.
func TestNodeImports(t *testing.T) {
	forbidden := []string{"chainproxy/chain", "chainproxy/store", "chainproxy/tools", "chainproxy/classify", "chainproxy/memory", "chainproxy/web", "chainproxy/antiloop"}
	for _, pkg := range []string{"chainproxy/chain/node", "chainproxy/chain/node/openai", "chainproxy/chain/node/ollama"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == "chainproxy/chain/node" || strings.HasPrefix(dep, "chainproxy/chain/node/") {
				continue
			}
			for _, f := range forbidden {
				if dep == f || strings.HasPrefix(dep, f+"/") {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
		}
	}
}
