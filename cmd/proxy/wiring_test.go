package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"chainproxy/config"
)

// startWired runs the proxy as main does, from a config file, and returns
// its base URL; it stops when the test ends.
func startWired(t *testing.T, cfgText string) string {
	t.Helper()
	cfgPath := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	base, stop := startRun(t, "-config", cfgPath)
	t.Cleanup(func() {
		if c := stop(); c != 0 {
			t.Errorf("exit code %d, want 0", c)
		}
	})
	return base
}

// startRun runs the proxy with args on a free loopback port and returns its
// base URL and a stop that ends it and returns its exit code.
func startRun(t *testing.T, args ...string) (base string, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	var stderr strings.Builder
	code := make(chan int, 1)
	go func() { // exits when run returns, after cancel in stop
		code <- run(ctx, append(args, "-addr", "127.0.0.1:0", "-log-level", "warn"), pw, &stderr)
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
	stop = func() int { cancel(); return <-code }
	if base == "" {
		t.Fatalf("%v: did not start: exit %d, %s", args, stop(), stderr.String())
	}
	return base, stop
}

// TestReadyzAndMetricsThroughWiring checks, through the real wiring (config
// file → run → HTTP), what README promises of /readyz and /metrics: each
// node with its status, the store, each MCP server with ok or its error,
// and the request, stage, tool, upstream-failure, queue and store metrics.
func TestReadyzAndMetricsThroughWiring(t *testing.T) {
	dead, err := exec.LookPath("false")
	if err != nil {
		t.Skip("needs the false command to play an MCP server that exits")
	}
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "notes.md"), []byte("notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := startWired(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: mock, model: small, mock: {turns: [{tool_calls: [{name: list_dir, args: {path: "."}}]}, {content: "found notes.md"}]}}
  - {name: M1, provider: mock, model: mid, mock: {offline: true}}
  - {name: M2, provider: mock, model: big, mock: {turns: [{content: "the answer"}]}}
tools:
  root: %q
  mcp:
    - {name: dead, command: [%q]}
`, root, dead))

	t.Run("readyz", func(t *testing.T) {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var ready struct {
			Status string `json:"status"`
			Store  string `json:"store"`
			Nodes  []struct {
				Name, Status string
				Reachable    bool
			} `json:"nodes"`
			MCP []struct{ Name, Status string } `json:"mcp"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&ready); err != nil {
			t.Fatal(err)
		}
		if ready.Status != "ready" || ready.Store != "memory" {
			t.Errorf("readyz status %q store %q, want ready memory", ready.Status, ready.Store)
		}
		states := map[string]string{}
		for _, n := range ready.Nodes {
			states[n.Name] = n.Status
		}
		if states["OL1"] != "ready" || states["M2"] != "ready" || states["M1"] != "unavailable" {
			t.Errorf("readyz nodes %+v, want OL1 and M2 ready, M1 unavailable", ready.Nodes)
		}
		if len(ready.MCP) != 1 || ready.MCP[0].Name != "dead" || ready.MCP[0].Status == "ok" || ready.MCP[0].Status == "" {
			t.Errorf("readyz mcp = %+v, want dead with its error", ready.MCP)
		}
	})

	resp, err := http.Post(base+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"chain/reflexive","messages":[{"role":"user","content":"what is in the workspace?"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("chat: %d %s", resp.StatusCode, body)
	}

	t.Run("metrics", func(t *testing.T) {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		text := string(b)
		for _, want := range []string{
			`chainproxy_requests_total{mode="reflexive",route="/v1/chat/completions",status="200"} 1`,
			`chainproxy_request_duration_seconds_count{mode="reflexive",route="/v1/chat/completions"} 1`,
			`chainproxy_stages_total{node="OL1",status="ok"} 1`,
			`chainproxy_stages_total{node="M2",status="ok"} 1`,
			`chainproxy_tool_calls_total{status="ok",tool="list_dir"} 1`,
			`chainproxy_stages_total{node="M1",status="skipped_offline"} 1`,
			`chainproxy_upstream_errors_total{node="M1",status="skipped_offline"} 1`,
			`chainproxy_stage_turns_count`,
			`chainproxy_queue_depth{node="OL1"} 0`,
			`chainproxy_store_degraded 0`,
		} {
			if !strings.Contains(text, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
}

// TestToolsRoot: the built-in file tools need their root only when the file
// asks for them. Unset and missing, or empty: the proxy starts without them;
// set and missing: a startup error at the key's line.
func TestToolsRoot(t *testing.T) {
	nodes := "nodes:\n  - {name: OL1, provider: mock, model: m, mock: {turns: [{content: a}]}}\n  - {name: M1, provider: mock, model: m1, mock: {turns: [{content: b}]}}\n  - {name: M2, provider: mock, model: m2, mock: {turns: [{content: c}]}}\n"
	existing := t.TempDir()
	tests := []struct {
		name, tools string
		wantErr     string // "" to start
		wantRoot    string
		wantLog     string
	}{
		{"unset, ./workspace missing", "", "", "", "built-in file tools off: the default tools.root does not exist"},
		{"empty", "tools:\n  root: \"\"\n", "", "", "built-in file tools off: tools.root is empty"},
		{"set and existing", "tools:\n  root: " + existing + "\n", "", existing, ""},
		{"set and missing", "tools:\n  root: ./nope\n", `c.yaml:6: tools.root: "./nope" does not exist`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(t.TempDir()) // no ./workspace here
			if err := os.WriteFile("c.yaml", []byte(nodes+tt.tools), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load("c.yaml")
			if err != nil {
				t.Fatal(err)
			}
			var log strings.Builder
			err = settleToolsRoot(cfg, slog.New(slog.NewTextHandler(&log, nil)))
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if cfg.Tools.Root != tt.wantRoot {
				t.Errorf("root = %q, want %q", cfg.Tools.Root, tt.wantRoot)
			}
			if !strings.Contains(log.String(), tt.wantLog) {
				t.Errorf("log %q lacks %q", log.String(), tt.wantLog)
			}
		})
	}
}

// TestExamplesStartWithoutWorkspace runs the proxy from a directory with no
// ./workspace on the shipped example config and with no flags at all: both
// start and serve (their nodes need not answer to be served).
func TestExamplesStartWithoutWorkspace(t *testing.T) {
	example, err := filepath.Abs("../../examples/ollama-only.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	for _, args := range [][]string{{"-config", example}, nil} {
		base, stop := startRun(t, args...)
		resp, err := http.Get(base + "/healthz")
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("%v: healthz %v %v", args, resp, err)
		}
		if resp != nil {
			resp.Body.Close()
		}
		if c := stop(); c != 0 {
			t.Errorf("%v: exit code %d, want 0", args, c)
		}
	}
}

// TestWrongBaseURLs: a base_url with a path segment too many (Ollama's
// /api) or too few (an OpenAI server's /v1) gets a 404 page from the
// server; /readyz and the client's error name the URL that was tried and
// the likely fix, and never carry the page's HTML.
func TestWrongBaseURLs(t *testing.T) {
	page := "<!DOCTYPE html><html><head><title>404 Not Found</title></head><body><h1>Not Found</h1>" + strings.Repeat("<p>padding</p>", 200) + "</body></html>"
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, page)
	}))
	defer web.Close()
	base := startWired(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, base_url: %q, model: m1}
  - {name: M1, provider: openai, base_url: %q, model: m2}
  - {name: M2, provider: openai, base_url: %q, model: m3}
tools:
  root: ""
`, web.URL+"/api", web.URL, web.URL))
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	ready := string(b)
	for _, want := range []string{
		web.URL + "/api/api/version answered",
		"without /api: try " + web.URL,
		web.URL + "/models answered",
		"try base_url " + web.URL + "/v1",
	} {
		if !strings.Contains(ready, want) {
			t.Errorf("/readyz lacks %q: %s", want, ready)
		}
	}
	if strings.Contains(strings.ToLower(ready), "<html") {
		t.Errorf("/readyz carries the HTML page: %.300s", ready)
	}
	resp, err = http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"M1","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if msg := string(b); resp.StatusCode != 502 && resp.StatusCode != 404 || !strings.Contains(msg, web.URL+"/chat/completions answered") || strings.Contains(strings.ToLower(msg), "<html") {
		t.Errorf("chat: %d %.400s, want the URL named and no HTML", resp.StatusCode, msg)
	}
}

// TestStartupProblemsAtOnce: a problem of the file, a missing tools root
// and a refused network bind are all said in one run, each naming its key.
func TestStartupProblemsAtOnce(t *testing.T) {
	t.Chdir(t.TempDir())
	cfg := "server: {addr: \"0.0.0.0:0\"}\nnodes:\n  - {name: OL1, provider: mock, model: m, mock: {turns: [{content: a}]}}\n  - {name: M1, provider: mock, model: m1, mock: {turns: [{content: b}]}}\n  - {name: M2, model: m2, mock: {turns: [{content: c}]}}\ntools:\n  root: ./nope\n"
	if err := os.WriteFile("c.yaml", []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	if code := run(t.Context(), []string{"-config", "c.yaml"}, io.Discard, &stderr); code != 2 {
		t.Fatalf("exit %d, want 2; %s", code, stderr.String())
	}
	for _, want := range []string{`c.yaml:5: nodes[2].provider: provider is required`, `c.yaml:7: tools.root: "./nope" does not exist`, `server.addr "0.0.0.0:0" is reachable from the network`} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}
