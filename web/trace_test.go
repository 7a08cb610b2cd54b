package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"chainproxy/chain"
	"chainproxy/chain/trace"
)

// TestStageOutputCappedInResponseWholeInStore: a stage's long output is cut
// in the answer's trace, with a note, and whole in the stored trace.
func TestStageOutputCappedInResponseWholeInStore(t *testing.T) {
	// 10000 bytes of words that differ: one word said 2000 times would be
	// a repetition loop, cut to its first copy (issue 25).
	var b strings.Builder
	for i := 0; b.Len() < 10000; i++ {
		fmt.Fprintf(&b, "word%d ", i)
	}
	long := b.String()[:10000]
	s := newTestServer(t, `
nodes:
  - {name: A, provider: mock, mock: {turns: [{content: "`+long+`", reasoning: "short thought"}]}}
chain:
  simple_node: A
  stages: [{node: A, max_turns: 1}]
`)
	resp := s.post(t, "/v1/chat/completions", `{"model":"chain/reflexive","messages":[{"role":"user","content":"hi"}]}`)
	var out struct {
		Chain chain.Trace `json:"chain"`
	}
	if err := json.Unmarshal(readAll(t, resp.Body), &out); err != nil {
		t.Fatal(err)
	}
	st := out.Chain.Stages[0]
	if len(st.Output) != trace.OutputCap || !strings.Contains(st.Cut, "output: 5904 of 10000 bytes cut") || st.Reasoning != "short thought" {
		t.Errorf("response stage: output %d bytes, reasoning %q, cut %q; want %d bytes and a note", len(st.Output), st.Reasoning, st.Cut, trace.OutputCap)
	}
	tr, err := http.Get(s.URL + "/v1/chain/traces/" + resp.Header.Get("X-Chain-Trace-Id"))
	if err != nil {
		t.Fatal(err)
	}
	var stored struct {
		Chain chain.Trace `json:"chain"`
	}
	if err := json.Unmarshal(readAll(t, tr.Body), &stored); err != nil {
		t.Fatal(err)
	}
	tr.Body.Close()
	if got := stored.Chain.Stages[0]; got.Output != long || got.Cut != "" {
		t.Errorf("stored stage: output %d bytes, cut %q; want the whole %d bytes", len(got.Output), got.Cut, len(long))
	}
}
