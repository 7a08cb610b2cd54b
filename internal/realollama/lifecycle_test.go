package realollama_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"chainproxy/internal/realollama"
)

// readyNode is one node of GET /readyz.
type readyNode struct {
	Name         string   `json:"name"`
	Status       string   `json:"status"`
	Error        string   `json:"error"`
	Capabilities []string `json:"capabilities"`
}

func readyz(t *testing.T, proxy string) map[string]readyNode {
	t.Helper()
	resp, err := http.Get(proxy + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct{ Nodes []readyNode }
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	out := map[string]readyNode{}
	for _, n := range r.Nodes {
		out[n.Name] = n
	}
	return out
}

// TestModelCreatedLater: a node whose model is pulled (here: created) while
// the proxy runs. Its first requests are served as the model's
// capabilities say: the model cannot take tools, so the chain's stage runs
// without them and a client's tools are refused by the proxy; Ollama would
// refuse them itself, as a 400 "… does not support tools" (v0.17.4
// server/routes.go, ChatHandler, scheduleRunner with CapabilityTools),
// which the chain reports as its every stage failing. /readyz then says
// ready. No /readyz comes between the creation and the requests: nobody
// polls it on a workstation.
func TestModelCreatedLater(t *testing.T) {
	f := setup(t)
	model := fmt.Sprintf("tiny-later-%d", time.Now().UnixNano())
	proxy := startProxy(t, f, fmt.Sprintf(`
nodes:
  - {name: later, provider: ollama, base_url: %[1]s, model: %[2]s, timeout: 1m}
chain:
  stages: [{node: later, max_turns: 1, tools: true}]
  simple_node: later
tools:
  root: %[3]s
`, f.ollama.URL, model, f.dir))
	if n := readyz(t, proxy)["later"]; n.Status != "unavailable" || !strings.Contains(n.Error, "not found") {
		t.Fatalf("before the model exists: /readyz says %+v", n)
	}
	if err := f.ollama.Create(model, filepath.Join(f.dir, "tiny.gguf"), realollama.PlainTemplate); err != nil {
		t.Fatal(err)
	}

	status, out := postRaw(t, proxy+"/v1/chat/completions", map[string]any{
		"model": "chain/reflexive", "max_tokens": 2, "temperature": 0, "seed": 1,
		"messages": []map[string]any{{"role": "user", "content": "hi"}},
	})
	want := fmt.Sprintf("node later: model %s cannot take tools: stage 0 runs without them", model)
	if status != http.StatusOK || !strings.Contains(string(out), want) {
		t.Errorf("chain: status %d: %.1500s\nwant 200 with the reason %q", status, out, want)
	}

	status, out = postRaw(t, proxy+"/v1/chat/completions", map[string]any{
		"model": "later", "max_tokens": 2,
		"messages": []map[string]any{{"role": "user", "content": "hi"}},
		"tools":    []map[string]any{{"type": "function", "function": map[string]any{"name": "lookup", "parameters": map[string]any{"type": "object"}}}},
	})
	if status != http.StatusBadRequest || !strings.Contains(string(out), `"code":"tools_unsupported"`) {
		t.Errorf("client tools: status %d: %.1500s\nwant 400 tools_unsupported", status, out)
	}

	if n := readyz(t, proxy)["later"]; n.Status != "ready" || !slices.Equal(n.Capabilities, []string{"completion"}) {
		t.Errorf("after the model was created: /readyz says %+v, want ready with [completion]", n)
	}
}

// TestConcurrent: requests at once to one node of a real Ollama that runs
// one request at a time (OLLAMA_NUM_PARALLEL=1): with the proxy's default
// max_concurrency of 1 the proxy queues them (the trace's queue_ms), with
// max_concurrency 3 Ollama does; either way each gets its own whole answer.
func TestConcurrent(t *testing.T) {
	f := setup(t)
	wide := startProxy(t, f, fmt.Sprintf(`
nodes:
  - {name: plain, provider: ollama, base_url: %[1]s, model: tiny-plain, max_concurrency: 3}
chain:
  stages: [{node: plain, max_turns: 1}]
  simple_node: plain
`, f.ollama.URL))
	for _, tc := range []struct {
		name, proxy string
		queued      bool // the proxy holds some back
	}{
		{"max_concurrency 1", f.proxy, true},
		{"max_concurrency 3", wide, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 3
			type result struct {
				status int
				body   []byte
			}
			results := make([]result, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() { // exits when the request is answered
					status, out := postRaw(t, tc.proxy+"/v1/chat/completions", map[string]any{
						"model": "plain", "max_tokens": 16, "temperature": 0, "seed": i,
						"messages": []map[string]any{{"role": "user", "content": fmt.Sprintf("question %d", i)}},
					})
					results[i] = result{status: status, body: out}
				})
			}
			wg.Wait()
			queued := false
			for i, r := range results {
				var a struct {
					Choices []struct {
						Message      struct{ Content string }
						FinishReason string `json:"finish_reason"`
					}
					Chain struct {
						Stages []struct {
							Calls []struct {
								QueueMS int64 `json:"queue_ms"`
							}
						}
					}
				}
				if r.status != http.StatusOK || json.Unmarshal(r.body, &a) != nil || len(a.Choices) != 1 || len(a.Chain.Stages) != 1 || len(a.Chain.Stages[0].Calls) != 1 {
					t.Fatalf("request %d: status %d: %.1500s", i, r.status, r.body)
				}
				if a.Choices[0].Message.Content == "" || a.Choices[0].FinishReason == "" {
					t.Errorf("request %d: answer %q, finish_reason %q", i, a.Choices[0].Message.Content, a.Choices[0].FinishReason)
				}
				queued = queued || a.Chain.Stages[0].Calls[0].QueueMS > 0
			}
			if queued != tc.queued {
				t.Errorf("some request queued in the proxy: %v, want %v", queued, tc.queued)
			}
		})
	}
}
