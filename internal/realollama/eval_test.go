package realollama_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"chainproxy/internal/realollama"
)

// evalConfig is two nodes on the tiny model (two names, so that neither
// reloads the other's), chained.
const evalConfig = `
nodes:
  - {name: a, provider: ollama, base_url: %[1]s, model: tiny-eval-a, timeout: 5m}
  - {name: b, provider: ollama, base_url: %[1]s, model: tiny-eval-b, timeout: 5m}
chain:
  stages:
    - {node: a, max_turns: 1}
    - {node: b, max_turns: 1}
  simple_node: a
tools:
  root: %[2]s
`

// TestEvalCommand runs "proxy eval" against the real Ollama: its answers
// are noise (random weights), the point is the wiring. Every item is
// answered under every mode, none fails, and the costs come from Ollama's
// own counts.
func TestEvalCommand(t *testing.T) {
	f := setup(t)
	gguf := filepath.Join(f.dir, "tiny.gguf")
	for _, name := range []string{"tiny-eval-a", "tiny-eval-b"} {
		// num_predict: the random model never stops on its own.
		if err := f.ollama.Create(name, gguf, realollama.PlainTemplate, "num_predict 12"); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "proxy.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, evalConfig, f.ollama.URL, dir), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "items.jsonl")
	items := `{"id":"sum","question":"What is 2 + 3?","answer":5}
{"id":"capital","question":"What is the capital of France?","answer":"Paris","match":"contains"}
{"id":"pick","question":"Which is a colour? A) red B) seven","answer":"A","match":"choice"}
`
	if err := os.WriteFile(data, []byte(items), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	cmd := exec.Command(filepath.Join(f.dir, "proxy"), "eval", "-config", cfg, "-data", data, "-out", out, "-concurrency", "1", "-temperature", "0", "-seed", "1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("proxy eval: %v\n%s", err, b)
	}
	raw, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Modes []struct {
			Mode      string `json:"mode"`
			Items     int    `json:"items"`
			Failed    int    `json:"failed"`
			TokensIn  int    `json:"tokens_in"`
			TokensOut int    `json:"tokens_out"`
		} `json:"modes"`
		Items []struct {
			TraceID string `json:"trace_id"`
			Error   string `json:"error"`
		} `json:"items"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Modes) != 4 || len(rep.Items) != 12 {
		t.Fatalf("report: %d modes, %d answers; want 4 (a, b, chain/reflexive, chain/auto) and 12", len(rep.Modes), len(rep.Items))
	}
	for _, m := range rep.Modes {
		if m.Items != 3 || m.Failed != 0 || m.TokensIn == 0 || m.TokensOut == 0 {
			t.Errorf("%s: %d items, %d failed, tokens %d/%d; want 3 answered, none failed, Ollama's counts", m.Mode, m.Items, m.Failed, m.TokensIn, m.TokensOut)
		}
	}
	for _, it := range rep.Items {
		if it.TraceID == "" || it.Error != "" {
			t.Errorf("answer with trace %q, error %q", it.TraceID, it.Error)
		}
	}
}
