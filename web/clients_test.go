package web

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"chainproxy/store"
)

// The real-client tier of the API fronts: the npm clients people use with
// local models, run by node against the proxy with scripted upstreams.
// They live in testdata/clients (package.json pins them; npm ci there).

const clientsDir = "testdata/clients"

// clientBin is the path of an npm client's executable in web/clientsDir
// (claude, codex); missing, the test skips, or fails when CI is set.
func clientBin(t *testing.T, name string) string {
	t.Helper()
	p, _ := filepath.Abs(filepath.Join(clientsDir, "node_modules", ".bin", name))
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed (%v) (CI is set, so this fails instead of skipping)", name, err)
		}
		t.Skipf("%s is not installed (%v): run `npm ci` in web/%s", name, err, clientsDir)
	}
	return p
}

// needClients returns node's path, or skips (fails under CI) when node or
// the installed clients are missing.
func needClients(t *testing.T) string {
	t.Helper()
	miss := func(why string) {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s (CI is set, so this fails instead of skipping)", why)
		}
		t.Skipf("%s: run `npm ci` in web/%s to test with the real clients", why, clientsDir)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		miss("node is not installed")
	}
	if _, err := os.Stat(filepath.Join(clientsDir, "node_modules", "openai", "package.json")); err != nil {
		miss("the clients are not installed")
	}
	return node
}

// runClient runs one of testdata/clients' scripts and decodes the JSON
// line it prints.
func runClient(t *testing.T, node, script string, args ...string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
	cmd.Dir = clientsDir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v\nstdout: %s\nstderr: %s", script, err, out, stderr.String())
	}
	var v map[string]any
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &v); err != nil {
		t.Fatalf("node %s printed %q: %v", script, out, err)
	}
	return v
}

func TestOpenAISDKResponses(t *testing.T) {
	node := needClients(t)
	u := newAgentUpstreams(t, weatherOnce)
	srv := agentProxy(t, u, "", store.NewMemory(0, 10))
	got := runClient(t, node, "responses.mjs", srv.URL+"/v1")
	for _, mode := range []string{"nonStream", "stream"} {
		r := got[mode].(map[string]any)
		if r["text"] != "It is sunny in Paris." || r["mode"] != "reflexive" || r["stages"] != "OL1:ok M1:ok M2:ok" {
			t.Errorf("%s: %v", mode, r)
		}
		if calls, _ := r["calls"].([]any); len(calls) != 1 || calls[0] != `get_weather({"city":"Paris"})` {
			t.Errorf("%s calls = %v", mode, r["calls"])
		}
	}
	var events []string
	for _, e := range got["stream"].(map[string]any)["events"].([]any) {
		events = append(events, e.(string))
	}
	for _, want := range []string{"response.created", "response.function_call_arguments.done", "response.output_text.delta", "response.completed"} {
		if !slices.Contains(events, want) {
			t.Errorf("stream events %v lack %s", events, want)
		}
	}
}

func TestAgentsSDK(t *testing.T) {
	node := needClients(t)
	u := newAgentUpstreams(t, weatherOnce)
	srv := agentProxy(t, u, "", store.NewMemory(0, 10))
	got := runClient(t, node, "agents.mjs", srv.URL+"/v1")
	if got["final"] != "It is sunny in Paris." {
		t.Errorf("final output = %v", got)
	}
	if calls, _ := got["calls"].([]any); len(calls) != 1 || calls[0] != "Paris" {
		t.Errorf("tool ran for %v, want Paris once", got["calls"])
	}
}

func TestOllamaJS(t *testing.T) {
	node := needClients(t)
	s := newTestServer(t, testConfig)
	got := runClient(t, node, "ollamajs.mjs", s.URL)
	if models, _ := got["models"].([]any); !slices.Contains(models, any("chain/reflexive:latest")) {
		t.Errorf("models = %v", got["models"])
	}
	if got["whole"] != "Final answer from M2." || got["hasChain"] != "reflexive" || got["stream"] != "Final answer from M2." ||
		got["done"] != true || got["doneReason"] != "stop" || got["evalCount"].(float64) <= 0 {
		t.Errorf("ollama-js saw %v", got)
	}
}

// TestAnthropicSDK: the npm Anthropic SDK's messages.create and
// messages.stream run a client tool loop through the chain.
func TestAnthropicSDK(t *testing.T) {
	node := needClients(t)
	if _, err := os.Stat(filepath.Join(clientsDir, "node_modules", "@anthropic-ai", "sdk", "package.json")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("@anthropic-ai/sdk is not installed (%v) (CI is set, so this fails instead of skipping)", err)
		}
		t.Skipf("@anthropic-ai/sdk is not installed (%v): run `npm ci` in web/%s", err, clientsDir)
	}
	u := newAgentUpstreams(t, weatherOnce)
	srv := agentProxy(t, u, "", store.NewMemory(0, 10))
	got := runClient(t, node, "anthropic.mjs", srv.URL)
	for _, mode := range []string{"nonStream", "stream"} {
		r := got[mode].(map[string]any)
		if r["text"] != "It is sunny in Paris." || r["stop"] != "end_turn" {
			t.Errorf("%s: %v", mode, r)
		}
		if calls, _ := r["calls"].([]any); len(calls) != 1 || calls[0] != `get_weather({"city":"Paris"})` {
			t.Errorf("%s calls = %v", mode, r["calls"])
		}
	}
	if r := got["nonStream"].(map[string]any); r["mode"] != "reflexive" || r["stages"] != "OL1:ok M1:ok M2:ok" {
		t.Errorf("the whole message's trace: %v", r)
	}
	var events []string
	for _, e := range got["stream"].(map[string]any)["events"].([]any) {
		events = append(events, e.(string))
	}
	for _, want := range []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"} {
		if !slices.Contains(events, want) {
			t.Errorf("stream events %v lack %s", events, want)
		}
	}
}
