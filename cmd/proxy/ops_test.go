package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"chainproxy/internal/fakeollama"
	"chainproxy/internal/fakeopenai"
	"chainproxy/internal/realollama"
)

// getJSON decodes the JSON answer of GET url into v and returns its status.
func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode
}

// The operational endpoints read the node set the engine runs on, as the
// proxy wires them (config file → node.Build → web): /readyz reports each
// node's hosts and the capabilities its server gave, /api/ps the window
// each node's prompts are fitted to (the configured one, else Ollama's
// default).
func TestOpsEndpointsReadTheNodeSet(t *testing.T) {
	a, b := fakeollama.New(t), fakeollama.New(t)
	a.SetModel("small", "completion", "tools")
	b.SetModel("small", "completion", "tools")
	a.SetModel("big", "completion", "tools", "thinking")
	base := startWired(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, base_urls: [%q, %q], model: small}
  - {name: M2, provider: ollama, base_url: %q, model: big, context_window: 8192}
chain:
  stages: [{node: OL1, max_turns: 1}, {node: M2, max_turns: 1}]
  simple_node: M2
tools: {root: ""}
`, a.URL, b.URL, a.URL))

	var ready struct {
		Status string `json:"status"`
		Nodes  []struct {
			Name         string   `json:"name"`
			Status       string   `json:"status"`
			Capabilities []string `json:"capabilities"`
			Hosts        []struct {
				URL, Status string
			} `json:"hosts"`
		} `json:"nodes"`
	}
	if code := getJSON(t, base+"/readyz", &ready); code != http.StatusOK || ready.Status != "ready" {
		t.Fatalf("readyz = %d %q, want 200 ready", code, ready.Status)
	}
	if len(ready.Nodes) != 2 {
		t.Fatalf("readyz nodes = %+v, want OL1 and M2", ready.Nodes)
	}
	ol1, m2 := ready.Nodes[0], ready.Nodes[1]
	if ol1.Name != "OL1" || ol1.Status != "ready" || len(ol1.Hosts) != 2 || ol1.Hosts[0].Status != "ready" || ol1.Hosts[1].Status != "ready" {
		t.Errorf("readyz OL1 = %+v, want ready with two hosts ready", ol1)
	}
	if want := []string{"completion", "tools", "thinking"}; m2.Name != "M2" || !slices.Equal(m2.Capabilities, want) || m2.Hosts != nil {
		t.Errorf("readyz M2 = %+v, want capabilities %v and no hosts", m2, want)
	}

	var ps struct {
		Models []struct {
			Name          string `json:"name"`
			ContextLength int    `json:"context_length"`
		} `json:"models"`
	}
	if code := getJSON(t, base+"/api/ps", &ps); code != http.StatusOK {
		t.Fatalf("/api/ps = %d", code)
	}
	windows := map[string]int{}
	for _, m := range ps.Models {
		windows[m.Name] = m.ContextLength
	}
	want := map[string]int{"OL1:latest": 4096, "M2:latest": 8192, "chain/auto:latest": 0}
	for name, w := range want {
		if got, ok := windows[name]; !ok || got != w {
			t.Errorf("/api/ps %s context_length = %d (listed %v), want %d", name, got, ok, w)
		}
	}
}

// runnerPs is the proxy's GET /api/ps with what each runner holds.
type runnerPs struct {
	Models []struct {
		Name   string `json:"name"`
		Digest string `json:"digest"`
	} `json:"models"`
	Runners []struct {
		URL    string   `json:"url"`
		Nodes  []string `json:"nodes"`
		Models []struct {
			Name          string `json:"name"`
			Model         string `json:"model"`
			Size          int64  `json:"size"`
			SizeVRAM      int64  `json:"size_vram"`
			ContextLength int    `json:"context_length"`
			ExpiresAt     string `json:"expires_at"`
		} `json:"models"`
		Error string `json:"error"`
	} `json:"runners"`
}

// The proxy's /api/ps shows, beside the models it serves, what each
// Ollama server behind its nodes holds, read from that server's own
// /api/ps: a server serving several nodes once, with their names; a
// server that does not answer with its error, the others still listed;
// an OpenAI-compatible node not at all (its server cannot tell). The
// ollama CLI still reads the answer.
func TestApiPsShowsEachRunner(t *testing.T) {
	a, b := fakeollama.New(t), fakeollama.New(t)
	a.SetMemory(fakeollama.Memory{Budget: 8 << 30, Sizes: map[string]int64{"small": 1 << 30, "big": 4 << 30}})
	b.SetMemory(fakeollama.Memory{Budget: 8 << 30, Sizes: map[string]int64{"small": 1 << 30}})
	dead := "http://" + deadAddr(t)
	openai := fakeopenai.New(t)
	base := startWired(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, base_urls: [%q, %q], model: small}
  - {name: M1, provider: ollama, base_url: %q, model: mid}
  - {name: M2, provider: ollama, base_url: %q, model: big}
  - {name: O1, provider: openai, base_url: %q, model: gpt}
chain:
  stages: [{node: OL1, max_turns: 1}, {node: M2, max_turns: 1}]
  simple_node: M2
tools: {root: ""}
`, a.URL, b.URL, dead, a.URL, openai.URL+"/v1"))
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"M2","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("call to M2: status %d", resp.StatusCode)
	}

	var ps runnerPs
	if code := getJSON(t, base+"/api/ps", &ps); code != http.StatusOK {
		t.Fatalf("/api/ps = %d, want 200", code)
	}
	if len(ps.Models) == 0 {
		t.Errorf("/api/ps models empty, want the models the proxy serves")
	}
	type runner struct {
		url, nodes, models, err string
	}
	var got []runner
	for _, r := range ps.Runners {
		var models []string
		for _, m := range r.Models {
			models = append(models, fmt.Sprintf("%s %d/%d", m.Name, m.Size, m.SizeVRAM))
			if m.Model != m.Name || m.ExpiresAt == "" {
				t.Errorf("runner %s model %+v, want model and expires_at as Ollama lists them", r.URL, m)
			}
		}
		got = append(got, runner{r.URL, strings.Join(r.Nodes, ","), strings.Join(models, ","), r.Error})
	}
	want := []runner{
		{url: a.URL, nodes: "OL1,M2", models: fmt.Sprintf("big %d/%d", 4<<30, 4<<30)},
		{url: b.URL, nodes: "OL1"},
		{url: dead, nodes: "M1"},
	}
	if len(got) != len(want) {
		t.Fatalf("/api/ps runners = %+v, want %+v", got, want)
	}
	for i := range want {
		g := got[i]
		if g.url != want[i].url || g.nodes != want[i].nodes || g.models != want[i].models {
			t.Errorf("runner %d = %+v, want %+v", i, g, want[i])
		}
		if wantErr := i == 2; (g.err != "") != wantErr {
			t.Errorf("runner %d error %q, want an error: %v", i, g.err, wantErr)
		}
	}

	t.Run("ollama ps", func(t *testing.T) {
		bin := realollama.Binary(t)
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "ps")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "OLLAMA_HOST=" + base, "TERM=dumb"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("ollama ps: %v\n%s", err, out)
		}
		for _, want := range []string{"NAME", "chain/auto:latest", "M2:latest", "Forever"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("ollama ps printed:\n%s\nwant it to contain %q", out, want)
			}
		}
	})
}
