package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"chainproxy/internal/fakeollama"
	"chainproxy/internal/redistest"
)

// A context_window above what the node's model was trained for stops the
// startup, naming the node and both numbers: Ollama would run the model
// past its length. Within it, the proxy starts and logs the window.
func TestContextWindowAboveModel(t *testing.T) {
	fake := fakeollama.New(t)
	fake.SetContextLength(2048)
	cfg := func(window int) string {
		return fmt.Sprintf("nodes:\n  - {name: OL1, provider: ollama, base_url: %q, model: m, context_window: %d}\nchain:\n  stages: [{node: OL1, max_turns: 1}]\n  simple_node: OL1\ntools: {root: \"\"}\n", fake.URL, window)
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(cfg(8192)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var stderr strings.Builder
	code := run(ctx, []string{"-config", path, "-addr", "127.0.0.1:0"}, io.Discard, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "node OL1: context_window 8192 is above its model's maximum of 2048 tokens") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	startWired(t, cfg(2048))
}

// A model whose tokenizer packs far fewer characters a token than the
// estimate assumes (the test tier's byte-level tiny model: 2,934 tokens
// estimated, 11,483 counted) refuses the first prompt the proxy sends it.
// What the refusal teaches carries to the next requests to that model,
// whichever node runs it: the first request pays the refit (two calls),
// the next one of the conversation, through another node of the same
// model, makes one, and so does a second replica's first request when the
// replicas share Redis. The nodes run with Ollama's default window, the
// upstream counting a token a character and refusing what exceeds it.
func TestRefusalTeachesTheNextRequests(t *testing.T) {
	rs := redistest.Start(t)
	fake := fakeollama.NewFunc(t, func(int, *api.ChatRequest) fakeollama.Reply {
		return fakeollama.Reply{Content: []string{"An answer."}}
	})
	fake.SetWindow(4096, 1)
	summarizer := fakeollama.NewFunc(t, func(int, *api.ChatRequest) fakeollama.Reply {
		return fakeollama.Reply{Content: []string{"The user asked about topics 1 to 20."}}
	})
	cfg := fmt.Sprintf(`nodes:
  - {name: OL1, provider: ollama, base_url: %[1]q, model: tiny}
  - {name: OL2, provider: ollama, base_url: %[1]q, model: tiny}
  - {name: S, provider: ollama, base_url: %[2]q, model: summarizer}
chain:
  stages: [{node: OL2, max_turns: 1}]
  simple_node: OL1
memory: {summarizer: S}
store: {redis_url: %[3]q}
tools: {root: ""}
`, fake.URL, summarizer.URL, rs.URL())
	msgs := []map[string]string{{"role": "system", "content": "You are a helpful assistant."}}
	for i := 1; i <= 20; i++ {
		msgs = append(msgs,
			map[string]string{"role": "user", "content": fmt.Sprintf("Question %d: tell me about topic-%d.", i, i)},
			map[string]string{"role": "assistant", "content": fmt.Sprintf("Answer %d: ", i) + strings.Repeat("lorem ipsum ", 30)})
	}
	calls := func() int { return len(fake.Requests()) }
	ask := func(base, model, question string) int {
		t.Helper()
		before := calls()
		msgs = append(msgs, map[string]string{"role": "user", "content": question})
		body, _ := json.Marshal(map[string]any{"model": model, "messages": msgs})
		resp, err := http.Post(base+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d: %s", question, resp.StatusCode, data)
		}
		msgs = append(msgs, map[string]string{"role": "assistant", "content": "An answer."})
		return calls() - before
	}

	first := startWired(t, cfg)
	if got := ask(first, "chain/simple", "What was my first question about?"); got != 2 {
		t.Fatalf("first request: %d calls to the model, want 2 (refused, then refitted)", got)
	}
	if got := ask(first, "chain/reflexive", "And my second?"); got != 1 {
		t.Errorf("second request, through the other node of the model: %d calls, want 1: the refusal's lesson was not kept", got)
	}
	second := startWired(t, cfg)
	if got := ask(second, "chain/simple", "And my third?"); got != 1 {
		t.Errorf("second replica's first request: %d calls to the model, want 1: the refusal's lesson was not shared", got)
	}
}
