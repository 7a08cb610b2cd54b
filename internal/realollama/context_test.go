package realollama_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"chainproxy/internal/realollama"
)

// contextConfig is a proxy whose simple node runs tiny-ctx (the tiny
// model, 2,048 tokens at most) with its window configured, and summarizes
// with it too.
const contextConfig = `
nodes:
  - {name: small, provider: ollama, base_url: %[1]s, model: tiny-ctx, timeout: 5m, context_window: 2048}
chain:
  stages: [{node: small, max_turns: 1}]
  simple_node: small
memory:
  summary_timeout: 3m
  summaries_share: 0.03 # a short summary: the random-weight model never stops on its own
`

// startProxy runs the fixture's proxy binary with another configuration;
// it stops when the test ends.
func startProxy(t *testing.T, f *fixture, config string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "proxy.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(f.dir, "proxy"), "-config", cfg, "-addr", "127.0.0.1:0")
	var log lockedBuffer
	exited := make(chan struct{})
	u, err := listen(cmd, &log, exited)
	t.Cleanup(func() {
		if cmd.Process != nil {
			cmd.Process.Signal(os.Interrupt)
			<-exited
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

type ctxTrace struct {
	Stages []struct {
		Status  string
		Context *struct {
			Window          int `json:"window"`
			EstimatedTokens int `json:"estimated_tokens"`
			ReportedTokens  int `json:"reported_tokens"`
			Overflow        bool
			Actions         []struct{ Action string }
		}
		Calls []struct {
			Kind       string
			Error      string
			DurationMS int64 `json:"duration_ms"`
			Usage      struct {
				PromptTokens int `json:"prompt_tokens"`
			}
			Messages []struct {
				Role, Content, Fit string
			}
		}
	}
}

// post sends a chat completion and returns its status, trace id and body.
func post(t *testing.T, proxy string, body any) (int, string, []byte) {
	t.Helper()
	data, _ := json.Marshal(body)
	resp, err := http.Post(proxy+"/v1/chat/completions", "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Chain-Trace-Id"), out
}

func stored(t *testing.T, proxy, id string) ctxTrace {
	t.Helper()
	resp, err := http.Get(proxy + "/v1/chain/traces/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct{ Chain ctxTrace }
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	return doc.Chain
}

func longHistory(n, size int) []map[string]any {
	msgs := []map[string]any{{"role": "system", "content": "You are a helpful assistant."}}
	for i := 1; i <= n; i++ {
		msgs = append(msgs,
			map[string]any{"role": "user", "content": fmt.Sprintf("Question %d: tell me about topic-%d.", i, i)},
			map[string]any{"role": "assistant", "content": fmt.Sprintf("Answer %d: ", i) + strings.Repeat("lorem ipsum ", size/12)})
	}
	return append(msgs, map[string]any{"role": "user", "content": "What was my first question about?"})
}

// sentText is every message the trace says the answering call sent.
func sentText(tr ctxTrace) string {
	var b strings.Builder
	for _, st := range tr.Stages {
		for _, c := range st.Calls {
			if c.Kind == "" {
				b.Reset()
				for _, m := range c.Messages {
					b.WriteString(m.Content + "\n")
				}
			}
		}
	}
	return b.String()
}

// The scenario against a real Ollama v0.17.4: a 52 KB conversation
// through a node with a 2,048-token window. Ollama's log shows no cut, the
// prompt that reached it holds the first question, the trace says what was
// fitted, and the same conversation sent again makes no summarizer call.
// Then an agent's exchange whose tool results outgrow the window keeps the
// user's question.
func TestContextFits(t *testing.T) {
	f := setup(t)
	if err := f.ollama.Create("tiny-ctx", filepath.Join(f.dir, "tiny.gguf"), realollama.ToolsTemplate); err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t, f, fmt.Sprintf(contextConfig, f.ollama.URL))
	// The tiny model's tokenizer is nearly byte-level, four times denser
	// than English text in a real one: the proxy learns that from the
	// prompt_eval_count of a first short exchange, as it would of any
	// model in its first minutes.
	if status, _, out := post(t, proxy, map[string]any{"model": "chain/simple", "messages": longHistory(2, 200), "max_tokens": 4}); status != http.StatusOK {
		t.Fatalf("warm-up: status %d: %s", status, out)
	}
	before := len(f.ollama.Log())
	body := map[string]any{"model": "chain/simple", "messages": longHistory(30, 1600), "max_tokens": 8, "temperature": 0, "seed": 1}

	status, id, out := post(t, proxy, body)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, out)
	}
	if log := f.ollama.Log()[before:]; strings.Contains(log, "truncating input") {
		t.Fatalf("Ollama cut the prompt:\n%s", log)
	}
	tr := stored(t, proxy, id)
	for _, c := range tr.Stages[0].Calls {
		t.Logf("call %q: %d ms, %d prompt tokens, error %q", c.Kind, c.DurationMS, c.Usage.PromptTokens, c.Error)
	}
	ct := tr.Stages[0].Context
	t.Logf("context %+v", ct)
	if ct == nil || ct.Window != 2048 || len(ct.Actions) == 0 || ct.ReportedTokens == 0 || ct.ReportedTokens >= 2048 {
		t.Fatalf("context trace %+v", ct)
	}
	sent := sentText(tr)
	if !strings.Contains(sent, "Question 1: tell me about topic-1.") || !strings.Contains(sent, "What was my first question about?") {
		t.Fatalf("the first or last question did not reach the model:\n%.3000s", sent)
	}

	// Resent as clients do: no new summarizer call.
	status, id, out = post(t, proxy, body)
	if status != http.StatusOK {
		t.Fatalf("second request: status %d: %s", status, out)
	}
	tr2 := stored(t, proxy, id)
	t.Logf("second context %+v", tr2.Stages[0].Context)
	for _, c := range tr2.Stages[0].Calls {
		if c.Kind == "summary" {
			t.Fatal("the second request of the conversation called the summarizer again")
		}
	}

	// An agent's exchange: one question, then four tool calls whose
	// results (700 bytes each: as many tokens with this tokenizer) outgrow
	// the window, sent back with the client's tools. The older results are
	// shortened, the question stays.
	msgs := []map[string]any{{"role": "user", "content": "List the files of the project and explain what each one does."}}
	for i := 1; i <= 4; i++ {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": "", "tool_calls": []map[string]any{{"id": id, "type": "function", "function": map[string]any{"name": "read_file", "arguments": fmt.Sprintf(`{"path":"file%d.go"}`, i)}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": strings.Repeat(fmt.Sprintf("line of file%d.go\n", i), 40)})
	}
	tools := []map[string]any{{"type": "function", "function": map[string]any{"name": "read_file", "parameters": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}}}}
	before = len(f.ollama.Log())
	status, id, out = post(t, proxy, map[string]any{"model": "chain/simple", "messages": msgs, "tools": tools, "max_tokens": 8, "temperature": 0, "seed": 1})
	if status != http.StatusOK {
		t.Fatalf("agent exchange: status %d: %s", status, out)
	}
	if log := f.ollama.Log()[before:]; strings.Contains(log, "truncating input") {
		t.Fatalf("Ollama cut the prompt:\n%s", log)
	}
	tr = stored(t, proxy, id)
	if sent := sentText(tr); !strings.Contains(sent, "List the files of the project") {
		t.Fatalf("the question did not reach the model:\n%.2000s", sent)
	}
	shortened := 0
	for _, a := range tr.Stages[0].Context.Actions {
		if a.Action == "shortened" {
			shortened++
		}
	}
	if shortened == 0 {
		t.Fatalf("no tool result shortened: %+v", tr.Stages[0].Context)
	}
}

// noShiftConfig is a proxy whose node runs the tiny model in a 512-token
// window; the random-weight model never stops on its own.
const noShiftConfig = `
nodes:
  - {name: small, provider: ollama, base_url: %[1]s, model: tiny-ctx, timeout: 2m, context_window: 512}
chain:
  stages: [{node: small, max_turns: 1}]
  simple_node: small
`

// TestNoShift: an answer that fills the node's window ends there with
// finish_reason "length". Ollama's default (shift, v0.17.4 server/routes.go)
// would drop the oldest half of the prompt and go on generating, the
// question among what the model no longer sees, with no word to anyone.
func TestNoShift(t *testing.T) {
	f := setup(t)
	if err := f.ollama.Create("tiny-ctx", filepath.Join(f.dir, "tiny.gguf"), realollama.ToolsTemplate); err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t, f, fmt.Sprintf(noShiftConfig, f.ollama.URL))
	status, _, out := post(t, proxy, map[string]any{"model": "chain/simple", "temperature": 1, "seed": 3,
		"messages": []map[string]any{{"role": "user", "content": "Write a long story."}}})
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, out)
	}
	var answer struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	if err := json.Unmarshal(out, &answer); err != nil || len(answer.Choices) != 1 {
		t.Fatalf("answer %s: %v", out, err)
	}
	t.Logf("finish_reason %q, usage %+v", answer.Choices[0].FinishReason, answer.Usage)
	if answer.Choices[0].FinishReason != "length" {
		t.Errorf("finish_reason %q, want length", answer.Choices[0].FinishReason)
	}
	// Ollama counts the token it sampled last, which never went into the
	// window: one more than it holds.
	if n := answer.Usage.PromptTokens + answer.Usage.CompletionTokens; n > 512+1 {
		t.Errorf("prompt and answer hold %d tokens: the window (512) was shifted", n)
	}
}
