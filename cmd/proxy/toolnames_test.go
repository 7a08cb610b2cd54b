package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ollama/ollama/api"
	goopenai "github.com/sashabaranov/go-openai"

	"chainproxy/config"
	"chainproxy/internal/fakeollama"
	"chainproxy/internal/fakeopenai"
	"chainproxy/internal/redact"
)

// syncBuffer is a log sink the proxy writes from its goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startLogged runs the proxy as main does, from cfgText, logging at debug
// level with the prompts (-log-prompts) into the returned buffer: every
// line the proxy can write.
func startLogged(t *testing.T, cfgText string) (base string, stop func(), logs *syncBuffer) {
	t.Helper()
	cfgPath := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	logs = &syncBuffer{}
	code := make(chan int, 1)
	go func() { // exits when run returns, after cancel in stop
		code <- run(ctx, []string{"-config", cfgPath, "-addr", "127.0.0.1:0", "-log-level", "debug", "-log-prompts"}, pw, logs)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		if after, ok := strings.CutPrefix(sc.Text(), "chainproxy listening on "); ok {
			base = after
			break
		}
	}
	go io.Copy(io.Discard, pr) // exits when pw is closed
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if c := <-code; c != 0 {
				t.Errorf("exit code %d, want 0; logs:\n%s", c, logs)
			}
		})
	}
	t.Cleanup(stop)
	if base == "" {
		stop()
		t.Fatalf("did not start: %s", logs)
	}
	return base, stop, logs
}

// hostileKey is the node's key, in no shape the generic patterns know:
// only the configured value masks it.
const hostileKey = "nodekey-Hq27Zx90LwPe"

// TestNodeKeyInToolCallNamesAndIDs: a hostile upstream writes the key it
// was sent into its tool calls' names and ids (probe_<key>, call_<key>),
// and, over OpenAI's protocol, into the model name it answers under.
// Whatever the node's protocol, the mode and whether the client streams,
// the key reaches neither the client's answer, nor the stored trace, nor
// the logs (at debug level, prompts included), nor the exported spans
// (with capture_content, so that the messages exported are checked too).
// Nor does it reach /readyz or Ollama's /api/show from the capabilities
// an Ollama server says its model has, the node's or each host's.
func TestNodeKeyInToolCallNamesAndIDs(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000")
	// The first call of a conversation asks for an unknown tool and for
	// the client's tool, both under ids holding the key; once a tool
	// result is in, the model answers.
	calledBack := func(roles []string) bool { return slices.Contains(roles, "tool") }
	for _, provider := range []string{config.ProviderOpenAI, config.ProviderOllama} {
		t.Run(provider, func(t *testing.T) {
			var baseURL string
			switch provider {
			case config.ProviderOpenAI:
				f := fakeopenai.NewFunc(t, func(_ int, req *goopenai.ChatCompletionRequest) fakeopenai.Reply {
					var roles []string
					for _, m := range req.Messages {
						roles = append(roles, m.Role)
					}
					if calledBack(roles) {
						return fakeopenai.Reply{Content: []string{"probed"}, Model: "small_" + hostileKey}
					}
					return fakeopenai.Reply{Model: "small_" + hostileKey, ToolCalls: []fakeopenai.ToolCall{
						{ID: "call_" + hostileKey, Name: "probe_" + hostileKey, Arguments: `{}`},
						{ID: "call2_" + hostileKey, Name: "probe", Arguments: `{"what":"x"}`},
					}}
				})
				f.SetModels("small")
				baseURL = fmt.Sprintf("base_url: %q", f.BaseURL())
			case config.ProviderOllama:
				// Two hosts, whose /api/show also names the key as a
				// capability: /readyz and Ollama's /api/show pass the
				// node's and each host's capabilities on.
				var urls []string
				for range 2 {
					f := fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply {
						var roles []string
						for _, m := range req.Messages {
							roles = append(roles, m.Role)
						}
						if calledBack(roles) {
							return fakeollama.Reply{Content: []string{"probed"}}
						}
						return fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{
							{ID: "call_" + hostileKey, Name: "probe_" + hostileKey, Args: map[string]any{}},
							{ID: "call2_" + hostileKey, Name: "probe", Args: map[string]any{"what": "x"}},
						}}
					})
					f.SetModel("small", "completion", "tools", "x_"+hostileKey)
					urls = append(urls, fmt.Sprintf("%q", f.URL))
				}
				baseURL = "base_urls: [" + strings.Join(urls, ", ") + "]"
			}
			endpoint, rec := startReceiver(t, config.ProtocolHTTP)
			base, stop, logs := startLogged(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: %s, %s, model: small, api_key: %q}
chain:
  stages: [{node: OL1, max_turns: 3, tools: true}]
  simple_node: OL1
tools: {root: %q}
telemetry: {endpoint: %q, capture_content: true}
`, provider, baseURL, hostileKey, t.TempDir(), endpoint))
			leaks := func(where, text string) {
				t.Helper()
				if strings.Contains(text, hostileKey) {
					t.Errorf("%s holds the node's key: %.600s", where, text)
				}
			}
			for _, model := range []string{"chain/simple", "chain/reflexive"} {
				for _, stream := range []bool{false, true} {
					name := fmt.Sprintf("%s stream=%v", model, stream)
					body, _ := json.Marshal(map[string]any{
						"model": model, "stream": stream,
						"messages": []map[string]string{{"role": "user", "content": "probe it"}},
						"tools":    []map[string]any{{"type": "function", "function": map[string]any{"name": "probe", "parameters": map[string]any{"type": "object"}}}},
					})
					resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(string(body)))
					if err != nil {
						t.Fatal(err)
					}
					answer, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("%s: status %d: %s", name, resp.StatusCode, answer)
					}
					// The client is handed its own tool's call.
					if !strings.Contains(string(answer), `"probe"`) {
						t.Errorf("%s: answer without the client's probe call: %s", name, answer)
					}
					leaks(name+": the answer", string(answer))
					id := resp.Header.Get("X-Chain-Trace-Id")
					tr, err := http.Get(base + "/v1/chain/traces/" + id)
					if err != nil {
						t.Fatal(err)
					}
					stored, _ := io.ReadAll(tr.Body)
					tr.Body.Close()
					if tr.StatusCode != http.StatusOK || !strings.Contains(string(stored), "probe_"+redact.Mask) {
						t.Errorf("%s: GET /v1/chain/traces/%s: status %d, %s; want the trace with the unknown tool's call, its name masked", name, id, tr.StatusCode, stored)
					}
					leaks(name+": the stored trace", string(stored))
				}
			}
			for _, probe := range []struct{ method, path, body string }{
				{http.MethodGet, "/readyz", ""},
				{http.MethodPost, "/api/show", `{"model":"OL1"}`},
			} {
				req, _ := http.NewRequest(probe.method, base+probe.path, strings.NewReader(probe.body))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if provider == config.ProviderOllama && !strings.Contains(string(b), "x_"+redact.Mask) {
					t.Errorf("%s %s: %s; want the capabilities, masked", probe.method, probe.path, b)
				}
				leaks(probe.method+" "+probe.path, string(b))
			}
			stop()
			leaks("the logs", logs.String())
			spans := rec.snapshot()
			if len(spans) == 0 {
				t.Fatal("no span exported")
			}
			for _, s := range spans {
				for where, text := range spanText(s) {
					leaks(fmt.Sprintf("span %q %s", s.GetName(), where), text)
				}
			}
		})
	}
}
