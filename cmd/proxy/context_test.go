package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"chainproxy/internal/fakeollama"
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
