package chain

import (
	"encoding/json"
	"testing"
	"time"

	"chainproxy/config"
	"chainproxy/tools"
)

// TestSeenCallRan: an error is no result; the third identical failure in a
// row is reported, a different error or a success starts the count again.
func TestSeenCallRan(t *testing.T) {
	var c seenCall
	steps := []struct {
		status, result string
		stop           bool
	}{
		{ToolError, "error: busy", false},
		{ToolError, "error: busy", false},
		{ToolError, "error: gone", false},
		{ToolError, "error: gone", false},
		{ToolOK, "record 7", false},
		{ToolError, "error: gone", false},
		{ToolError, "error: gone", false},
		{ToolError, "error: gone", true},
	}
	for i, st := range steps {
		if got := c.ran(&ToolUse{Status: st.status, Result: st.result}); got != st.stop {
			t.Errorf("step %d (%s %q): ran = %v, want %v", i, st.status, st.result, got, st.stop)
		}
	}
}

// TestSeenSurvivesResume: a stage saved while waiting on the client keeps
// what its repeat memory knows of reads and failures.
func TestSeenSurvivesResume(t *testing.T) {
	r := &run{e: &Engine{nodes: map[string]*Node{"A": {Node: config.Node{Name: "A"}}}}, t0: time.Now()}
	s := r.newStage(0, r.e.nodes["A"], stageConfig{tools: true})
	want := seenCall{kind: tools.Deterministic, reads: "file:notes.md", runs: 2, stamp: "a1b2", failed: "error: busy", fails: 2}
	s.seen = map[uint64]*seenCall{7: &want}
	data, err := json.Marshal(saveStage(s, true))
	if err != nil {
		t.Fatal(err)
	}
	var v savedStage
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	got := r.loadStage(v).seen[7]
	if got == nil || *got != want {
		t.Errorf("resumed seen[7] = %+v, want %+v", got, want)
	}
}
