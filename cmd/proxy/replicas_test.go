package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// TestHostLimitAcrossReplicas: three replicas on one Redis, one node of two
// hosts with max_concurrency 2, 60 requests at once spread over the
// replicas: no host ever holds more than its 2 calls, as docs/config.md
// promises of max_concurrency with base_urls and Redis.
func TestHostLimitAcrossReplicas(t *testing.T) {
	rs := redistest.Start(t)
	type counted struct {
		url            string
		inFlight, most atomic.Int64
		calls          atomic.Int64
	}
	hosts := make([]*counted, 2)
	for i := range hosts {
		meta := fakeollama.New(t) // version, model details, loaded window
		target, _ := url.Parse(meta.URL)
		fwd := httputil.NewSingleHostReverseProxy(target)
		c := &counted{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/api/chat" {
				fwd.ServeHTTP(w, r)
				return
			}
			c.calls.Add(1)
			n := c.inFlight.Add(1)
			for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
			}
			// A few lines apart, so that calls overlap; the call counts
			// out before its done line, which lets the proxy give its
			// slot to the next call.
			w.Header().Set("Content-Type", "application/x-ndjson")
			rc := http.NewResponseController(w)
			for range 3 {
				time.Sleep(10 * time.Millisecond)
				io.WriteString(w, `{"model":"m","message":{"role":"assistant","content":"a"},"done":false}`+"\n")
				rc.Flush()
			}
			c.inFlight.Add(-1)
			io.WriteString(w, `{"model":"m","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop"}`+"\n")
		}))
		t.Cleanup(srv.Close)
		c.url = srv.URL
		hosts[i] = c
	}
	cfg := fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, base_urls: [%q, %q], model: m, max_concurrency: 2}
chain:
  stages: [{node: OL1, max_turns: 1}]
tools:
  root: ""
store:
  redis_url: %q
`, hosts[0].url, hosts[1].url, rs.URL())
	replicas := []string{startWired(t, cfg), startWired(t, cfg), startWired(t, cfg)}

	const requests = 60
	var wg sync.WaitGroup
	codes := make([]int, requests)
	for i := range requests {
		wg.Go(func() {
			resp, err := http.Post(replicas[i%len(replicas)]+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"OL1","messages":[{"role":"user","content":"hi"}]}`))
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes[i] = resp.StatusCode
		})
	}
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("request %d: %d, want 200", i, c)
		}
	}
	total := int64(0)
	for i, h := range hosts {
		total += h.calls.Load()
		if m := h.most.Load(); m > 2 {
			t.Errorf("host %d held %d calls at once, want at most max_concurrency 2", i, m)
		}
	}
	if total != requests {
		t.Errorf("hosts got %d calls, want %d", total, requests)
	}
}
