package chain_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"chainproxy/chain"
)

func TestContextBudgetShortensOldestResultsFirst(t *testing.T) {
	h := newHarness(t, threeNodes+"  context_budget: 1500\n")
	var big strings.Builder
	for i := range 200 {
		fmt.Fprintf(&big, "line %03d of the big file\n", i)
	}
	if err := os.WriteFile(filepath.Join(h.cfg.Tools.Root, "a.txt"), []byte(big.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.run(t, chain.ModelReflexive, "compare a and b"); err != nil {
		t.Fatal(err)
	}
	msgs := h.nodes["M1"].requests()[0].Messages
	q := msgs[len(msgs)-1].Content
	i, j := strings.Index(q, "## What the earlier stages found"), strings.LastIndex(q, "\n## My message\n")
	if i < 0 || j < i {
		t.Fatalf("no findings in M1's question:\n%s", q)
	}
	found := q[i:j]
	if len(found) > 1500 {
		t.Errorf("findings are %d chars, budget 1500", len(found))
	}
	// Every call is still named with its arguments, even when its result
	// was shortened; the newest result (b.txt) is kept whole.
	for _, want := range []string{`list_dir {"path":"."}`, `read_file {"path":"a.txt"}`, `read_file {"path":"b.txt"}`, "bravo", "more lines"} {
		if !strings.Contains(found, want) {
			t.Errorf("findings lack %q:\n%s", want, found)
		}
	}
	if strings.Contains(found, "line 150 of the big file") {
		t.Error("the big result was not shortened")
	}
}

func TestSignatureTTLAcrossRequests(t *testing.T) {
	h := newHarness(t, threeNodes)
	statuses := func() []string {
		res, err := h.engine.Run(t.Context(), &chain.RunRequest{
			Model: chain.ModelReflexive, Conversation: "conv-1",
			Messages: []chain.Message{{Role: "user", Content: "batch"}},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, u := range res.Trace.Stages[0].ToolsUsed {
			out = append(out, u.Status)
		}
		return out
	}
	first, second := statuses(), statuses()
	if !equalSlices(first, []string{"ok", "duplicate", "duplicate"}) {
		t.Errorf("first request: %v", first)
	}
	// Within 30 s, the same conversation gets the stored result: read-only
	// built-ins are not executed again.
	if !equalSlices(second, []string{"cached", "duplicate", "duplicate"}) {
		t.Errorf("second request: %v, want the call cached", second)
	}
}
