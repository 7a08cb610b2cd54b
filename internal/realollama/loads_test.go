package realollama_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"chainproxy/config"
	"chainproxy/internal/realollama"
)

// runnerStarts counts the runners a server's log says it started: one per
// model load.
func runnerStarts(log string) int {
	n := 0
	for l := range strings.Lines(log) {
		if strings.Contains(l, `msg="starting runner"`) && !strings.Contains(l, "discovery") {
			n++
		}
	}
	return n
}

// TestLoadSchedulingFewerLoads: two distinct tiny models on an Ollama that
// holds one at a time (OLLAMA_MAX_LOADED_MODELS=1), four chains at once
// whose stages alternate between them. With the load scheduling off the
// second stages interleave with the first ones and Ollama reloads a model
// at nearly every call; on, the first stages run together, then the
// second: fewer loads, counted from Ollama's own log (issue 44). Once the
// chains have ended, the server holds A again, for the next request.
func TestLoadSchedulingFewerLoads(t *testing.T) {
	f := setup(t)
	dir := t.TempDir()
	srv, err := realollama.Start(realollama.Binary(t), dir, "OLLAMA_MAX_LOADED_MODELS=1")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	for i, name := range []string{"tiny-a", "tiny-b"} {
		// Distinct weights: one runner each.
		gguf := filepath.Join(dir, name+".gguf")
		if err := realollama.WriteTinyGGUF(gguf, uint64(10+i)); err != nil {
			t.Fatal(err)
		}
		if err := srv.Create(name, gguf, realollama.PlainTemplate, "num_predict 4"); err != nil {
			t.Fatal(err)
		}
	}
	const chains = 4
	loads := map[string]int{}
	for _, mode := range []struct{ name, wait string }{{"off", "0s"}, {"on", "30s"}} {
		proxy := startProxy(t, f, fmt.Sprintf(`
nodes:
  - {name: A, provider: ollama, base_url: %[1]s, model: tiny-a, timeout: 5m}
  - {name: B, provider: ollama, base_url: %[1]s, model: tiny-b, timeout: 5m}
chain:
  stages: [{node: A, max_turns: 1}, {node: B, max_turns: 1}]
  simple_node: A
  max_total_turns: 2
admission:
  max_reorder_wait: %[2]s
tools:
  root: %[3]s
`, srv.URL, mode.wait, dir))
		for _, m := range []string{"tiny-a", "tiny-b"} {
			// Both unloaded: each mode starts from a cold server.
			status, out := postRaw(t, srv.URL+"/api/generate", map[string]any{"model": m, "keep_alive": 0})
			if status != http.StatusOK {
				t.Fatalf("unload %s: %d %s", m, status, out)
			}
		}
		before := runnerStarts(srv.Log())
		var wg sync.WaitGroup
		for i := range chains {
			wg.Go(func() {
				body := fmt.Sprintf(`{"model": "chain/reflexive", "max_tokens": 4, "temperature": 0, "seed": 1, "messages": [{"role": "user", "content": "Question %d: review the plan."}]}`, i)
				resp, err := http.Post(proxy+"/v1/chat/completions", "application/json", strings.NewReader(body))
				if err != nil {
					t.Errorf("%s: chain %d: %v", mode.name, i, err)
					return
				}
				defer resp.Body.Close()
				out, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusOK {
					t.Errorf("%s: chain %d: status %d: %.500s", mode.name, i, resp.StatusCode, out)
				}
			})
		}
		wg.Wait()
		if mode.name == "on" {
			// Once the last chain has ended, the server holds A again, what
			// the next chain (and simple mode) calls first, in place of B.
			held := ollamaHolds(t, srv.URL, "tiny-a")
			if len(held) != 1 || held[0] != "tiny-a:latest" {
				t.Errorf("after the chains the server holds %q, want [tiny-a:latest]", held)
			}
		}
		loads[mode.name] = runnerStarts(srv.Log()) - before
		if mode.name == "on" {
			loads[mode.name]-- // A's again, after the chains
		}
	}
	t.Logf("runner starts for %d chains: scheduling off %d, on %d (and A's again after them)", chains, loads["off"], loads["on"])
	if loads["on"] >= loads["off"] || loads["on"] > 3 {
		t.Errorf("runner starts: off %d, on %d; want fewer on, at most 3", loads["off"], loads["on"])
	}
}

// ollamaHolds polls the Ollama server at base's /api/ps for up to a minute
// until it lists model, and returns what it lists then.
func ollamaHolds(t *testing.T, base, model string) []string {
	t.Helper()
	var names []string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get(base + "/api/ps")
		if err != nil {
			t.Fatal(err)
		}
		var ps api.ProcessResponse
		err = json.NewDecoder(resp.Body).Decode(&ps)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		names = names[:0]
		for _, m := range ps.Models {
			names = append(names, m.Name)
		}
		if slices.Contains(names, config.FullModelName(model)) || time.Now().After(deadline) {
			return names
		}
	}
}
