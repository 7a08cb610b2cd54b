package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"chainproxy/internal/fakeollama"
	"chainproxy/internal/redistest"
)

// TestHostsAndSharedAdmissionThroughWiring: through the real wiring, a node
// with two hosts (one dead) answers from the live one, /readyz shows each
// host and the shared admission, and /metrics labels the hosts.
func TestHostsAndSharedAdmissionThroughWiring(t *testing.T) {
	rs := redistest.Start(t)
	live := fakeollama.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there: connections are refused
	base := startWired(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, base_urls: [%q, %q], model: m, max_concurrency: 1}
chain:
  stages: [{node: OL1, max_turns: 1}]
store:
  redis_url: %q
admission:
  lease: 5s
`, dead, live.URL, rs.URL()))

	for range 3 {
		resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"OL1","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("chat: %d %s", resp.StatusCode, body)
		}
	}
	if n := len(live.Requests()); n != 3 {
		t.Errorf("live host got %d calls, want 3", n)
	}

	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var ready struct {
		Status, Store, Admission string
		Nodes                    []struct {
			Status string
			Hosts  []struct{ URL, Status, Error string }
		}
	}
	err = json.NewDecoder(resp.Body).Decode(&ready)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if ready.Status != "ready" || ready.Store != "redis" || ready.Admission != "shared" {
		t.Errorf("readyz status %q store %q admission %q, want ready redis shared", ready.Status, ready.Store, ready.Admission)
	}
	if len(ready.Nodes) != 1 || len(ready.Nodes[0].Hosts) != 2 {
		t.Fatalf("readyz nodes = %+v, want OL1 with two hosts", ready.Nodes)
	}
	if h := ready.Nodes[0].Hosts; h[0].URL != dead || h[0].Status != "offline" || h[0].Error == "" || h[1].Status != "ready" {
		t.Errorf("readyz hosts = %+v, want the dead one offline with its cause, the live one ready", h)
	}

	resp, err = http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		"chainproxy_admission_degraded 0",
		fmt.Sprintf(`chainproxy_host_calls_total{host=%q,node="OL1"} 3`, live.URL),
		fmt.Sprintf(`chainproxy_host_offline{host=%q,node="OL1"} 1`, dead),
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
