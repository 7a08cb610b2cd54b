package realollama_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"chainproxy/internal/realollama"
)

// findingsConfig is a reflexive chain of two stages on two models of
// their own (two runners, each with its own KV cache): the second stage
// gets the first one's notes, which change at every request.
const findingsConfig = `
nodes:
  - {name: OL1, provider: ollama, base_url: %[1]s, model: tiny-tools, timeout: 5m, context_window: 2048}
  - {name: M1, provider: ollama, base_url: %[1]s, model: tiny-m1, timeout: 5m, context_window: 2048}
chain:
  stages: [{node: OL1, max_turns: 1}, {node: M1, max_turns: 1}]
  simple_node: OL1
`

// TestFindingsKeepRunnerCache: a conversation resent a turn longer, through
// a reflexive chain. The earlier stage's findings change at every request;
// placed after the history (in the current question), they leave the
// later stage's instructions and the history the head of its next prompt,
// which its runner takes from its KV cache (ollama v0.17.4
// runner/ollamarunner/cache.go, LoadCacheSlot, logs "loading cache slot"
// with the tokens used from the cache). In the stage's system message,
// which the template renders first, they made the runner evaluate the
// whole history again on every request.
func TestFindingsKeepRunnerCache(t *testing.T) {
	f := setup(t)
	gguf := filepath.Join(t.TempDir(), "m1.gguf")
	if err := realollama.WriteTinyGGUF(gguf, 2); err != nil {
		t.Fatal(err)
	}
	if err := f.ollama.Create("tiny-m1", gguf, realollama.ToolsTemplate); err != nil {
		t.Fatal(err)
	}
	// tiny-m1 has a runner of its own: the other tests expect none left
	// once they unload the shared one.
	t.Cleanup(func() {
		resp, err := http.Post(f.ollama.URL+"/api/chat", "application/json", strings.NewReader(`{"model":"tiny-m1","keep_alive":0}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		f.waitUnloaded(t, "tiny-m1:latest")
	})
	proxy := startProxy(t, f, fmt.Sprintf(findingsConfig, f.ollama.URL))
	msgs := longHistory(4, 120)
	previous, previousLast := 0, 0
	for n := 1; n <= 3; n++ {
		before := len(f.ollama.Log())
		status, id, out := post(t, proxy, map[string]any{"model": "chain/reflexive", "messages": msgs, "max_tokens": 8, "temperature": 0, "seed": 1})
		if status != http.StatusOK {
			t.Fatalf("request %d: status %d: %s", n, status, out)
		}
		tr := stored(t, proxy, id)
		if len(tr.Stages) != 2 || len(tr.Stages[1].Calls) != 1 || tr.Stages[1].Calls[0].Kind != "" {
			t.Fatalf("request %d: trace %+v, want OL1 and M1 with one call each", n, tr)
		}
		sent := tr.Stages[1].Calls[0].Messages
		last := sent[len(sent)-1]
		if last.Role != "user" || !strings.Contains(last.Content, "## What the earlier stages found") {
			t.Errorf("request %d: M1's prompt ends with a %s message %.300q, want the findings in the question", n, last.Role, last.Content)
		}
		loads := cacheSlot.FindAllStringSubmatch(f.ollama.Log()[before:], -1)
		if len(loads) != 2 {
			t.Fatalf("request %d: %d cache slot lines in Ollama's log, want OL1's and M1's", n, len(loads))
		}
		prompt, _ := strconv.Atoi(loads[1][1])
		used, _ := strconv.Atoi(loads[1][2])
		t.Logf("request %d: M1's prompt %d tokens, %d from its cache, %s evaluated", n, prompt, used, loads[1][3])
		// The previous prompt but its question (findings included: the
		// tiny tokenizer makes at most a token a byte) and the
		// assistant's header came from the cache.
		if n > 1 && used < previous-previousLast-16 {
			t.Errorf("request %d: %d tokens from the cache; the previous prompt had %d, %d of them at most its question: its instructions or history changed", n, used, previous, previousLast)
		}
		previous, previousLast = prompt, len(last.Content)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": strings.Repeat("lorem ipsum ", 8)},
			map[string]any{"role": "user", "content": fmt.Sprintf("Question %d: tell me about topic-%d.", 4+n, 4+n)})
	}
}
