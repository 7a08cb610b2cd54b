package realollama_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"chainproxy/internal/realollama"
)

var ansiRE = regexp.MustCompile(`\x1b\[[0-9;?]*[a-zA-Z]`)

// chatCalls counts the POST /api/chat requests the real server logged.
func (f *fixture) chatCalls() int {
	return strings.Count(f.ollama.Log(), `| POST     "/api/chat"`)
}

// settledChatCalls is chatCalls once Ollama's log has stopped growing for
// 200 ms: Ollama logs a request after its answer is out, so the line of an
// earlier test's last call may come after the proxy has answered it.
func (f *fixture) settledChatCalls() int {
	n := f.chatCalls()
	for range 50 {
		time.Sleep(200 * time.Millisecond)
		m := f.chatCalls()
		if m == n {
			return n
		}
		n = m
	}
	return n
}

// TestOllamaCLI drives the proxy with the real `ollama` CLI while its nodes
// are the real Ollama: the CLI's requests (v0.17.4 cmd/cmd.go: HEAD /,
// /api/show, the /api/generate warm-up, /api/chat) reach the model and come
// back as the CLI prints them, and what it shows of a node is what the
// node's server says of its model.
func TestOllamaCLI(t *testing.T) {
	f := setup(t)
	bin := realollama.Binary(t)
	// The CLI sets no num_predict: its runs go to a proxy whose model
	// stops after 8 tokens, where the tiny model would write thousands.
	if err := f.ollama.Create("tiny-short", filepath.Join(f.dir, "tiny.gguf"), realollama.PlainTemplate, "num_predict 8"); err != nil {
		t.Fatal(err)
	}
	short := startProxy(t, f, fmt.Sprintf(`
nodes:
  - {name: short, provider: ollama, base_url: %[1]s, model: tiny-short}
  - {name: short2, provider: ollama, base_url: %[1]s, model: tiny-short}
chain:
  stages: [{node: short, max_turns: 1}, {node: short2, max_turns: 1}]
  simple_node: short
`, f.ollama.URL))
	for _, tc := range []struct {
		name, proxy string
		args        []string
		want, never []*regexp.Regexp
	}{
		// The tiny model writes garbage: any printed line is its answer.
		{"run node", short, []string{"run", "short", "hi"}, []*regexp.Regexp{regexp.MustCompile(`\S`)}, nil},
		{"run chain", short, []string{"run", "chain/reflexive", "hi"}, []*regexp.Regexp{regexp.MustCompile(`\S`)}, nil},
		{"show tools", f.proxy, []string{"show", "tools"}, []*regexp.Regexp{regexp.MustCompile(`(?m)^\s+completion\s*$`), regexp.MustCompile(`(?m)^\s+tools\s*$`)}, nil},
		{"show plain", f.proxy, []string{"show", "plain"}, []*regexp.Regexp{regexp.MustCompile(`(?m)^\s+completion\s*$`)}, []*regexp.Regexp{regexp.MustCompile(`(?m)^\s+tools\s*$`)}},
		{"list", f.proxy, []string{"list"}, []*regexp.Regexp{regexp.MustCompile(`(?m)^chain/reflexive:latest`), regexp.MustCompile(`(?m)^tiny-tools:latest`)}, nil},
		{"ps", f.proxy, []string{"ps"}, []*regexp.Regexp{regexp.MustCompile(`(?m)^plain:latest .*Forever`)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, tc.args...)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "OLLAMA_HOST=" + tc.proxy, "TERM=dumb"}
			out, err := cmd.CombinedOutput()
			out = ansiRE.ReplaceAll(out, nil)
			if err != nil {
				t.Fatalf("ollama %s: %v\n%s", strings.Join(tc.args, " "), err, out)
			}
			for _, re := range tc.want {
				if !re.Match(out) {
					t.Errorf("ollama %s printed:\n%s\nwant it to match %s", strings.Join(tc.args, " "), out, re)
				}
			}
			for _, re := range tc.never {
				if re.Match(out) {
					t.Errorf("ollama %s printed:\n%s\nwant nothing matching %s", strings.Join(tc.args, " "), out, re)
				}
			}
		})
	}
}

// TestShowContextLength: `ollama show` of a node prints the context length
// its model runs with. Ollama runs a model with at most the context it was
// trained for, whatever num_ctx asks (v0.17.4 llm/server.go, NewLlamaServer:
// "requested context size too large for model", num_ctx set to
// n_ctx_train), and /api/show says that length (model_info
// "llama.context_length": 2048 for the tiny model). The proxy fits each
// node's prompts to the window it shows there, so a larger one is a prompt
// the node refuses.
func TestShowContextLength(t *testing.T) {
	f := setup(t)
	// A node no request has reached yet: its model is not loaded, so
	// /api/ps cannot tell its window; /api/show can.
	proxy := startProxy(t, f, `
nodes:
  - {name: fresh, provider: ollama, base_url: `+f.ollama.URL+`, model: tiny-tools}
chain:
  stages: [{node: fresh, max_turns: 1}]
  simple_node: fresh
`)
	status, out := postRaw(t, proxy+"/api/show", map[string]any{"model": "fresh"})
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, out)
	}
	var show struct {
		ModelInfo map[string]any `json:"model_info"`
	}
	if err := json.Unmarshal(out, &show); err != nil {
		t.Fatal(err)
	}
	if got := show.ModelInfo["chain.context_length"]; got != float64(2048) {
		t.Errorf("chain.context_length = %v, want the model's 2048, which Ollama runs it with", got)
	}
}

// TestGenerateKeepAlive: the CLI's and ollama-js's /api/generate on the
// proxy. A prompt with keep_alive 0 reaches the node with it, and the real
// server unloads the model after the answer; an empty prompt with
// keep_alive 0 (what `ollama stop` sends) answers "unload" at once, and,
// as docs/ollama-api.md says, leaves the node's model loaded.
//
// The tiny models share one GGUF, and Ollama runs one runner per model
// file, listed in /api/ps under the name that loaded it: a model is
// loaded when any is listed.
func TestGenerateKeepAlive(t *testing.T) {
	f := setup(t)
	warm := request("tools", false, 2)
	warm["keep_alive"] = "10m"
	if a := f.chat(t, warm); a.status != http.StatusOK {
		t.Fatalf("status = %d (%s)", a.status, a.err.Message)
	}
	status, out := postRaw(t, f.proxy+"/api/generate", map[string]any{"model": "tools", "keep_alive": 0})
	if status != http.StatusOK || !strings.Contains(string(out), `"done_reason":"unload"`) {
		t.Fatalf("empty prompt, keep_alive 0: status %d: %s", status, out)
	}
	if len(f.loaded(t)) == 0 {
		t.Fatal("/api/ps lists nothing after an empty /api/generate: the proxy unloaded the node's model")
	}
	status, out = postRaw(t, f.proxy+"/api/generate", map[string]any{
		"model": "tools", "prompt": "hi", "stream": false, "keep_alive": 0,
		"options": map[string]any{"num_predict": 2, "temperature": 0, "seed": 1},
	})
	if status != http.StatusOK || !strings.Contains(string(out), `"done":true`) {
		t.Fatalf("prompt, keep_alive 0: status %d: %s", status, out)
	}
	deadline := time.Now().Add(time.Minute)
	for len(f.loaded(t)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("/api/ps = %q a minute after /api/generate with keep_alive 0", f.loaded(t))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestThinkNoThinking: Ollama refuses think true for a model without the
// thinking capability (v0.17.4 server/routes.go, ChatHandler: 400 "…does
// not support thinking"). The proxy does not pass think on
// (docs/ollama-api.md: it only says whether the node's reasoning comes
// back), so a client that asks to think, as `ollama run --think` does,
// gets the model's answer from such a node.
func TestThinkNoThinking(t *testing.T) {
	f := setup(t)
	for _, think := range []any{true, false, "high"} {
		before := len(f.ollama.Log())
		status, out := postRaw(t, f.proxy+"/api/chat", map[string]any{
			"model": "plain", "stream": false, "think": think,
			"messages": []map[string]any{{"role": "user", "content": "hi"}},
			"options":  map[string]any{"num_predict": 2, "temperature": 0, "seed": 1},
		})
		if status != http.StatusOK || !strings.Contains(string(out), `"done":true`) {
			t.Errorf("think %v: status %d: %s", think, status, out)
		}
		if log := f.ollama.Log()[before:]; strings.Contains(log, "| 400 |") {
			t.Errorf("think %v: Ollama refused a call:\n%s", think, log)
		}
	}
}

// TestImagesNoVision: a picture for a node whose model has no vision
// (/api/show lists none of the tiny models' capabilities as "vision") is
// refused by the proxy before any call, on both fronts, with the node
// named: the real server would not refuse it, it would drop or garble it.
func TestImagesNoVision(t *testing.T) {
	f := setup(t)
	const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
	for _, tc := range []struct {
		name, path string
		body       map[string]any
		param      string
	}{
		{"openai", "/v1/chat/completions", map[string]any{"model": "tools", "max_tokens": 2, "messages": []map[string]any{{"role": "user", "content": []map[string]any{
			{"type": "text", "text": "what is this?"},
			{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64," + png}},
		}}}}, "messages[0].content[1].image_url.url"},
		{"ollama chat", "/api/chat", map[string]any{"model": "plain", "stream": false, "messages": []map[string]any{{"role": "user", "content": "what is this?", "images": []string{png}}}}, "messages[0].images[0]"},
		{"ollama generate", "/api/generate", map[string]any{"model": "chain/reflexive", "stream": false, "prompt": "what is this?", "images": []string{png}}, "images[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := f.settledChatCalls()
			status, out := postRaw(t, f.proxy+tc.path, tc.body)
			if status != http.StatusBadRequest || !strings.Contains(string(out), tc.param) || !strings.Contains(string(out), "cannot take images") {
				t.Errorf("status %d: %s; want 400 naming %s", status, out, tc.param)
			}
			if n := f.settledChatCalls() - calls; n != 0 {
				t.Errorf("%d calls reached Ollama, want none", n)
			}
		})
	}
}
