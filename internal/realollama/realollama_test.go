package realollama_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"chainproxy/internal/realollama"
)

// The proxy under test runs as its own process, built from cmd/proxy, in
// front of a real `ollama serve` with three models made from one tiny GGUF:
//
//	tiny-tools  qwen2.5-shaped template: capabilities completion, tools
//	tiny-plain  template without tools:  capability completion only
//	tiny-brief  as tiny-plain, served by a node configured keep_alive "0"
//
// and a node whose model Ollama does not have.
const proxyConfig = `
nodes:
  - {name: tools, provider: ollama, base_url: %[1]s, model: tiny-tools, timeout: 5m}
  - {name: plain, provider: ollama, base_url: %[1]s, model: tiny-plain, timeout: 5m}
  - {name: brief, provider: ollama, base_url: %[1]s, model: tiny-brief, keep_alive: "0"}
  - {name: gone, provider: ollama, base_url: %[1]s, model: missing-model}
chain:
  stages:
    - {node: tools, max_turns: 2, tools: true}
    - {node: plain, max_turns: 1, tools: true}
  simple_node: plain
  max_total_turns: 6
tools:
  root: %[2]s
`

type fixture struct {
	ollama   *realollama.Server
	proxy    string // base URL
	proxyLog *lockedBuffer
	cmd      *exec.Cmd
	exited   chan struct{}
	dir      string
}

var (
	fxOnce sync.Once
	fx     *fixture
	fxErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fx != nil {
		fx.stop()
	}
	os.Exit(code)
}

// setup starts Ollama and the proxy once for the package's tests.
func setup(t *testing.T) *fixture {
	t.Helper()
	bin := realollama.Binary(t)
	fxOnce.Do(func() { fx, fxErr = start(bin) })
	if fxErr != nil {
		t.Fatal(fxErr)
	}
	return fx
}

func start(bin string) (*fixture, error) {
	dir, err := os.MkdirTemp("", "realollama")
	if err != nil {
		return nil, err
	}
	f := &fixture{dir: dir, proxyLog: &lockedBuffer{}, exited: make(chan struct{})}
	gguf := filepath.Join(dir, "tiny.gguf")
	if err := realollama.WriteTinyGGUF(gguf, 1); err != nil {
		return f, err
	}
	if f.ollama, err = realollama.Start(bin, dir); err != nil {
		return f, err
	}
	for name, tmpl := range map[string]string{"tiny-tools": realollama.ToolsTemplate, "tiny-plain": realollama.PlainTemplate, "tiny-brief": realollama.PlainTemplate} {
		if err := f.ollama.Create(name, gguf, tmpl); err != nil {
			return f, err
		}
	}
	root, err := realollama.RepoRoot()
	if err != nil {
		return f, err
	}
	proxyBin := filepath.Join(dir, "proxy")
	build := exec.Command("go", "build", "-o", proxyBin, "./cmd/proxy")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return f, fmt.Errorf("go build ./cmd/proxy: %w: %s", err, out)
	}
	cfg := filepath.Join(dir, "proxy.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, proxyConfig, f.ollama.URL, dir), 0o644); err != nil {
		return f, err
	}
	f.cmd = exec.Command(proxyBin, "-config", cfg, "-addr", "127.0.0.1:0")
	f.proxy, err = listen(f.cmd, f.proxyLog, f.exited)
	return f, err
}

// listen starts the proxy command cmd with its stderr to log, closes
// exited when it exits, and returns the base URL it prints once it
// listens.
func listen(cmd *exec.Cmd, log *lockedBuffer, exited chan struct{}) (string, error) {
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		return "", err
	}
	go func() { // exits when the proxy process does
		cmd.Wait()
		close(exited)
	}()
	addr := make(chan string, 1)
	go func() { // exits at the proxy's stdout EOF
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "chainproxy listening on "); ok {
				addr <- u
			}
		}
	}()
	select {
	case u := <-addr:
		return u, nil
	case <-exited:
		return "", fmt.Errorf("proxy exited: %s", log)
	case <-time.After(time.Minute):
		return "", fmt.Errorf("proxy did not listen within a minute: %s", log)
	}
}

func (f *fixture) stop() {
	if f.cmd != nil && f.cmd.Process != nil {
		f.cmd.Process.Signal(os.Interrupt)
		<-f.exited
	}
	if f.ollama != nil {
		f.ollama.Stop()
	}
	os.RemoveAll(f.dir)
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// answer is what a test reads of a chat completion, streamed or not.
type answer struct {
	status  int
	content string
	finish  string
	usage   map[string]int
	chain   struct {
		Mode    string   `json:"mode"`
		Reasons []string `json:"reasons"`
		Stages  []struct {
			Node         string         `json:"node"`
			Status       string         `json:"status"`
			FinishReason string         `json:"finish_reason"`
			Usage        map[string]int `json:"usage"`
		} `json:"stages"`
	}
	err struct {
		Message string `json:"message"`
		Code    string `json:"code"`
	}
}

// chat posts body to the proxy and reads the answer, from SSE when body
// asks to stream.
func (f *fixture) chat(t *testing.T, body map[string]any) answer {
	t.Helper()
	data, _ := json.Marshal(body)
	resp, err := http.Post(f.proxy+"/v1/chat/completions", "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK || body["stream"] != true {
		raw, _ := io.ReadAll(resp.Body)
		var r struct {
			Choices []struct {
				Message      struct{ Content string } `json:"message"`
				FinishReason string                   `json:"finish_reason"`
			} `json:"choices"`
			Usage map[string]int  `json:"usage"`
			Chain json.RawMessage `json:"chain"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatalf("answer %s: %v", raw, err)
		}
		if len(r.Choices) > 0 {
			a.content, a.finish = r.Choices[0].Message.Content, r.Choices[0].FinishReason
		}
		a.usage = r.Usage
		if r.Chain != nil {
			json.Unmarshal(r.Chain, &a.chain)
		}
		if r.Error != nil {
			json.Unmarshal(r.Error, &a.err)
		}
		return a
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta        struct{ Content string } `json:"delta"`
				FinishReason *string                  `json:"finish_reason"`
			} `json:"choices"`
			Usage map[string]int  `json:"usage"`
			Chain json.RawMessage `json:"chain"`
		}
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("chunk %s: %v", line, err)
		}
		for _, ch := range c.Choices {
			a.content += ch.Delta.Content
			if ch.FinishReason != nil {
				a.finish = *ch.FinishReason
			}
		}
		if c.Usage != nil {
			a.usage = c.Usage
		}
		if c.Chain != nil {
			json.Unmarshal(c.Chain, &a.chain)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return a
}

func request(model string, stream bool, maxTokens int) map[string]any {
	r := map[string]any{
		"model":       model,
		"stream":      stream,
		"messages":    []map[string]any{{"role": "user", "content": "hi"}},
		"max_tokens":  maxTokens,
		"temperature": 0,
		"seed":        1,
	}
	if stream {
		r["stream_options"] = map[string]any{"include_usage": true}
	}
	return r
}

func TestAnswers(t *testing.T) {
	f := setup(t)
	for _, model := range []string{"tools", "chain/simple", "chain/reflexive"} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", model, stream), func(t *testing.T) {
				a := f.chat(t, request(model, stream, 8))
				if a.status != http.StatusOK {
					t.Fatalf("status = %d (%s), want 200", a.status, a.err.Message)
				}
				if a.content == "" {
					t.Error("content is empty, want the model's words")
				}
				if a.finish != "stop" && a.finish != "length" {
					t.Errorf("finish_reason = %q, want stop or length", a.finish)
				}
				if len(a.chain.Stages) == 0 {
					t.Error("no chain stages in the answer")
				}
			})
		}
	}
}

// TestLength: an answer cut by max_tokens (Ollama's done_reason "length")
// tells the client so, and every stage's reason is in the trace.
func TestLength(t *testing.T) {
	f := setup(t)
	for _, model := range []string{"tools", "chain/simple", "chain/reflexive"} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", model, stream), func(t *testing.T) {
				a := f.chat(t, request(model, stream, 4))
				if a.status != http.StatusOK {
					t.Fatalf("status = %d (%s), want 200", a.status, a.err.Message)
				}
				if a.finish != "length" {
					t.Errorf("finish_reason = %q, want length", a.finish)
				}
				for i, s := range a.chain.Stages {
					if s.FinishReason != "length" {
						t.Errorf("stages[%d].finish_reason = %q, want length", i, s.FinishReason)
					}
				}
			})
		}
	}
}

// TestNoToolsNode: a node whose model cannot take tools is offered none,
// and a client's tools for it get a 400 that names node and model.
func TestNoToolsNode(t *testing.T) {
	f := setup(t)
	t.Run("chain/simple", func(t *testing.T) {
		a := f.chat(t, request("chain/simple", false, 8))
		if a.status != http.StatusOK {
			t.Fatalf("status = %d (%s), want 200", a.status, a.err.Message)
		}
		want := "node plain: model tiny-plain cannot take tools: stage 0 runs without them"
		if !slices.Contains(a.chain.Reasons, want) {
			t.Errorf("reasons = %q, want %q among them", a.chain.Reasons, want)
		}
	})
	t.Run("client tools", func(t *testing.T) {
		req := request("plain", false, 8)
		req["tools"] = []map[string]any{{"type": "function", "function": map[string]any{"name": "lookup", "parameters": map[string]any{"type": "object"}}}}
		a := f.chat(t, req)
		if a.status != http.StatusBadRequest || a.err.Code != "tools_unsupported" {
			t.Fatalf("status, code = %d, %q, want 400, tools_unsupported", a.status, a.err.Code)
		}
		for _, w := range []string{"node plain", `"tiny-plain"`} {
			if !strings.Contains(a.err.Message, w) {
				t.Errorf("message %q does not name %s", a.err.Message, w)
			}
		}
	})
}

// TestReadyz: /readyz finds the model Ollama lacks and says how to get it,
// and reports what the others can do.
func TestReadyz(t *testing.T) {
	f := setup(t)
	resp, err := http.Get(f.proxy + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Nodes []struct {
			Name         string   `json:"name"`
			Status       string   `json:"status"`
			Error        string   `json:"error"`
			Capabilities []string `json:"capabilities"`
		} `json:"nodes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		status, err string
		caps        []string
	}{
		"tools": {"ready", "", []string{"completion", "tools"}},
		"plain": {"ready", "", []string{"completion"}},
		"gone":  {"unavailable", fmt.Sprintf(`model "missing-model" not found on %s: ollama pull missing-model`, f.ollama.URL), nil},
	}
	for _, n := range r.Nodes {
		w, ok := want[n.Name]
		if !ok {
			continue
		}
		if n.Status != w.status || n.Error != w.err || !slices.Equal(n.Capabilities, w.caps) {
			t.Errorf("node %s = %q, %q, %q; want %q, %q, %q", n.Name, n.Status, n.Error, n.Capabilities, w.status, w.err, w.caps)
		}
	}
}

// TestMissingModel: a call to a model Ollama lacks is a 502 that keeps
// Ollama's message and names node and model.
func TestMissingModel(t *testing.T) {
	f := setup(t)
	a := f.chat(t, request("gone", false, 4))
	if a.status != http.StatusBadGateway {
		t.Fatalf("status = %d, want 502", a.status)
	}
	for _, w := range []string{"model 'missing-model' not found", "node gone", `model "missing-model"`} {
		if !strings.Contains(a.err.Message, w) {
			t.Errorf("message %q lacks %q", a.err.Message, w)
		}
	}
}

// loaded lists the models Ollama holds in memory (GET /api/ps).
func (f *fixture) loaded(t *testing.T) []string {
	t.Helper()
	resp, err := http.Get(f.ollama.URL + "/api/ps")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ps struct {
		Models []struct {
			Name string `json:"name"`
		} `json:"models"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ps); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range ps.Models {
		names = append(names, m.Name)
	}
	return names
}

// waitUnloaded polls /api/ps: Ollama unloads a keep_alive 0 model once the
// request is done, in its scheduler's own time.
func (f *fixture) waitUnloaded(t *testing.T, model string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for slices.Contains(f.loaded(t), model) {
		if time.Now().After(deadline) {
			t.Fatalf("%s still loaded a minute after a keep_alive 0 call: /api/ps = %q", model, f.loaded(t))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// unload asks Ollama to unload model now (a call without messages, with
// keep_alive 0) and waits until nothing is loaded. The tiny models share
// one GGUF, and Ollama keeps one runner per model file, listed in /api/ps
// under the name of the model that loaded it: unloading one unloads the
// runner of all, whatever name it was listed under.
func (f *fixture) unload(t *testing.T, model string) {
	t.Helper()
	resp, err := http.Post(f.ollama.URL+"/api/chat", "application/json", strings.NewReader(`{"model":"`+model+`","keep_alive":0}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	deadline := time.Now().Add(time.Minute)
	for len(f.loaded(t)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("/api/ps = %q a minute after unloading %s", f.loaded(t), model)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestKeepAlive(t *testing.T) {
	f := setup(t)
	t.Run("client 10m keeps it", func(t *testing.T) {
		// The runner the tiny models share may be listed under another
		// model's name: loaded afresh, it is listed under this one's.
		f.unload(t, "tiny-tools")
		req := request("tools", false, 4)
		req["keep_alive"] = "10m"
		if a := f.chat(t, req); a.status != http.StatusOK {
			t.Fatalf("status = %d (%s)", a.status, a.err.Message)
		}
		if got := f.loaded(t); !slices.Contains(got, "tiny-tools:latest") {
			t.Fatalf("/api/ps = %q, want tiny-tools:latest loaded", got)
		}
	})
	t.Run("client 0 unloads", func(t *testing.T) {
		req := request("tools", false, 4)
		req["keep_alive"] = 0
		if a := f.chat(t, req); a.status != http.StatusOK {
			t.Fatalf("status = %d (%s)", a.status, a.err.Message)
		}
		f.waitUnloaded(t, "tiny-tools:latest")
	})
	t.Run("node keep_alive 0 unloads", func(t *testing.T) {
		if a := f.chat(t, request("brief", false, 4)); a.status != http.StatusOK {
			t.Fatalf("status = %d (%s)", a.status, a.err.Message)
		}
		f.waitUnloaded(t, "tiny-brief:latest")
	})
}

// TestUsage: the usage the proxy reports is what Ollama counted for the same
// call. Both calls load the model afresh (keep_alive 0), so that neither
// reuses the other's prompt cache.
func TestUsage(t *testing.T) {
	f := setup(t)
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			f.unload(t, "tiny-tools")
			req := request("tools", stream, 6)
			req["keep_alive"] = 0
			a := f.chat(t, req)
			if a.status != http.StatusOK {
				t.Fatalf("status = %d (%s)", a.status, a.err.Message)
			}
			f.waitUnloaded(t, "tiny-tools:latest")
			direct, _ := json.Marshal(map[string]any{
				"model": "tiny-tools", "stream": false, "keep_alive": 0,
				"messages": []map[string]any{{"role": "user", "content": "hi"}},
				"options":  map[string]any{"num_predict": 6, "temperature": 0, "seed": 1},
			})
			resp, err := http.Post(f.ollama.URL+"/api/chat", "application/json", bytes.NewReader(direct))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var o struct {
				PromptEvalCount int `json:"prompt_eval_count"`
				EvalCount       int `json:"eval_count"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
				t.Fatal(err)
			}
			want := map[string]int{"prompt_tokens": o.PromptEvalCount, "completion_tokens": o.EvalCount, "total_tokens": o.PromptEvalCount + o.EvalCount}
			for k, v := range want {
				if a.usage[k] != v {
					t.Errorf("usage.%s = %d, want Ollama's %d (usage %v)", k, a.usage[k], v, a.usage)
				}
			}
			if o.PromptEvalCount == 0 || o.EvalCount == 0 {
				t.Errorf("Ollama counted %d prompt and %d completion tokens, want both > 0", o.PromptEvalCount, o.EvalCount)
			}
		})
	}
}

// TestCancel: a client that goes away mid-stream ends the runner's
// generation: the runner, busy generating the 100000 tokens asked for,
// goes idle. (Ollama logs nothing when a stream is abandoned, and lets a
// new request through either way, so the runner's CPU time is the witness.)
func TestCancel(t *testing.T) {
	f := setup(t)
	// Greedy sampling: the tiny model falls into a loop that never writes
	// <|im_end|>, where sampling would end it after a few hundred tokens.
	req := request("tools", true, 100000)
	data, _ := json.Marshal(req)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hreq, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.proxy+"/v1/chat/completions", bytes.NewReader(data))
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	chunks := 0
	for chunks < 3 && sc.Scan() {
		if strings.Contains(sc.Text(), `"content":"`) {
			chunks++
		}
	}
	if chunks < 3 {
		t.Fatalf("stream ended after %d content chunks, want it still generating: %v", chunks, sc.Err())
	}
	if !f.runnerBusy(t) {
		t.Fatal("the runner is idle while the client still reads: the test cannot tell a cancel from an end")
	}
	cancel()
	deadline := time.Now().Add(time.Minute)
	for f.runnerBusy(t) {
		if time.Now().After(deadline) {
			t.Fatal("the runner still generates a minute after the client went away")
		}
	}
}

// runnerBusy samples the runners' CPU time over 500ms: busy means more
// than a tenth of a core.
func (f *fixture) runnerBusy(t *testing.T) bool {
	t.Helper()
	c0, err := f.ollama.RunnerCPU()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	c1, err := f.ollama.RunnerCPU()
	if err != nil {
		t.Fatal(err)
	}
	return c1-c0 > 50*time.Millisecond
}

// TestStartupLog: the proxy's startup log names each node's capabilities
// and warns, once, of the node that cannot take tools.
func TestStartupLog(t *testing.T) {
	f := setup(t)
	log := f.proxyLog.String()
	for _, re := range []string{
		`msg="node ready" node=tools .*capabilities="\[completion tools\]"`,
		`msg="node ready" node=plain .*capabilities=\[completion\]`,
		`level=WARN msg="node cannot take tools.*" node=plain model=tiny-plain`,
		`level=WARN msg="node lacks its model" node=gone .*model \\"missing-model\\" not found`,
	} {
		if !regexp.MustCompile(re).MatchString(log) {
			t.Errorf("startup log lacks %s:\n%s", re, log)
		}
	}
	for _, node := range []string{"plain", "brief"} {
		re := regexp.MustCompile(`msg="node cannot take tools[^"]*" node=` + node + ` `)
		if n := len(re.FindAllString(log, -1)); n != 1 {
			t.Errorf("the tools warning for node %s appears %d times, want once:\n%s", node, n, log)
		}
	}
}
