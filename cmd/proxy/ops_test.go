package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"chainproxy/internal/fakeollama"
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
