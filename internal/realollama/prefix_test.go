package realollama_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"chainproxy/internal/realollama"
)

// cacheSlot is the runner's debug line for each prompt it loads (ollama
// v0.17.4 runner/ollamarunner/cache.go, LoadCacheSlot): how many of the
// prompt's tokens it found in its cache (used) and evaluates (remaining).
var cacheSlot = regexp.MustCompile(`msg="loading cache slot".* prompt=(\d+) used=(\d+) remaining=(\d+)`)

// TestPrefixReusedAcrossRequests: a conversation longer than the node's
// window, resent a turn longer as chat clients do. Between two folds the
// fitted prompt keeps the previous one as its head, so the runner reuses
// its KV cache for all of it and evaluates only the new turn. Ollama's
// prompt_eval_count does not show it: v0.17.4 reports the whole prompt
// (numPromptInputs is counted before LoadCacheSlot), cached or not, which
// is what the proxy's calibration needs; the runner's log line does.
func TestPrefixReusedAcrossRequests(t *testing.T) {
	f := setup(t)
	if err := f.ollama.Create("tiny-ctx", filepath.Join(f.dir, "tiny.gguf"), realollama.ToolsTemplate); err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t, f, fmt.Sprintf(contextConfig, f.ollama.URL))
	// The proxy learns the tiny tokenizer's ratio, as in TestContextFits.
	if status, _, out := post(t, proxy, map[string]any{"model": "chain/simple", "messages": longHistory(2, 200), "max_tokens": 4}); status != http.StatusOK {
		t.Fatalf("warm-up: status %d: %s", status, out)
	}
	msgs := longHistory(12, 150)
	reused, previous := 0, 0
	for n := 1; n <= 4; n++ {
		before := len(f.ollama.Log())
		status, id, out := post(t, proxy, map[string]any{"model": "chain/simple", "messages": msgs, "max_tokens": 4, "temperature": 0, "seed": 1})
		if status != http.StatusOK {
			t.Fatalf("request %d: status %d: %s", n, status, out)
		}
		tr := stored(t, proxy, id)
		summarized, tokens := false, 0
		for _, c := range tr.Stages[0].Calls {
			if c.Kind == "summary" {
				summarized = true
			} else {
				tokens = c.Usage.PromptTokens
			}
		}
		loads := cacheSlot.FindAllStringSubmatch(f.ollama.Log()[before:], -1)
		if len(loads) == 0 {
			t.Fatalf("request %d: no cache slot line in Ollama's log", n)
		}
		last := loads[len(loads)-1]
		prompt, _ := strconv.Atoi(last[1])
		used, _ := strconv.Atoi(last[2])
		t.Logf("request %d: summarizer called %v, prompt_eval_count %d, runner: prompt %d tokens, %d from its cache, %s evaluated; actions %+v",
			n, summarized, tokens, prompt, used, last[3], tr.Stages[0].Context.Actions)
		if tokens != prompt {
			t.Errorf("request %d: prompt_eval_count %d, the runner's prompt %d tokens", n, tokens, prompt)
		}
		if n > 1 && !summarized {
			reused++
			// The previous prompt, but for the assistant's header that
			// closed it, came from the cache.
			if used < previous-16 {
				t.Errorf("request %d: %d tokens from the cache, the previous prompt had %d: its head changed", n, used, previous)
			}
		}
		previous = prompt
		// The next request: this question answered, a new one.
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": strings.Repeat("lorem ipsum ", 12)},
			map[string]any{"role": "user", "content": fmt.Sprintf("Question %d: tell me about topic-%d.", 12+n, 12+n)})
	}
	if reused == 0 {
		t.Fatal("every request called the summarizer: the fold moved at each one")
	}
}
