package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/chain/node"
	"chainproxy/config"
	"chainproxy/internal/fakeollama"
	"chainproxy/internal/nodetest"
	"chainproxy/internal/redistest"
	"chainproxy/store"
	"chainproxy/tools"
)

// heldUpstream is a fake Ollama that records the most chat calls it held at
// once, the order calls arrived in (by their last user message), and, when
// gated, holds each call until a token is sent on gate.
type heldUpstream struct {
	*httptest.Server
	cur, most atomic.Int64
	gate      chan struct{}
	arrived   chan string

	mu    sync.Mutex
	order []string
}

func newHeldUpstream(t *testing.T, gated bool) *heldUpstream {
	inner := fakeollama.New(t, fakeollama.Reply{Content: []string{"o", "k"}, Delay: time.Millisecond})
	u := &heldUpstream{arrived: make(chan string, 1000)}
	if gated {
		u.gate = make(chan struct{})
	}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/chat" {
			inner.Config.Handler.ServeHTTP(w, r)
			return
		}
		n := u.cur.Add(1)
		defer u.cur.Add(-1)
		for m := u.most.Load(); n > m && !u.most.CompareAndSwap(m, n); m = u.most.Load() {
		}
		body, _ := io.ReadAll(r.Body)
		var req api.ChatRequest
		_ = json.Unmarshal(body, &req)
		who := req.Messages[len(req.Messages)-1].Content
		u.mu.Lock()
		u.order = append(u.order, who)
		u.mu.Unlock()
		u.arrived <- who
		if u.gate != nil {
			select {
			case <-u.gate:
			case <-r.Context().Done():
				return
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		inner.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

// sharedReplica is one replica: its own engine, store, slots and server.
type sharedReplica struct {
	srv *httptest.Server
	adm *node.SharedAdmission
}

func sharedReplicas(t *testing.T, n int, upstream, redisURL string, lease time.Duration) []sharedReplica {
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, base_url: %q, model: m, max_concurrency: 2, max_queue: 400}
chain:
  stages: [{node: OL1, max_turns: 1}]
store:
  redis_url: %q
admission:
  lease: %s
`, upstream, redisURL, lease)))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]sharedReplica, n)
	for i := range out {
		st, err := store.Open(t.Context(), redisURL, 50, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		slots, err := store.NewSlots(redisURL, lease)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { slots.Close() })
		life, stop := context.WithCancel(context.Background())
		t.Cleanup(stop)
		adm := node.NewSharedAdmission(life, cfg.Nodes, slots, node.NewAdmission(cfg.Nodes), nil)
		reg, err := tools.New(cfg.Tools, nil)
		if err != nil {
			t.Fatal(err)
		}
		eng, err := chain.New(cfg, chain.Deps{
			Nodes:     nodetest.Build(t, cfg, nil),
			Tools:     reg,
			Admission: adm,
			Guard:     antiloop.NewGuard(st, cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL),
		})
		if err != nil {
			t.Fatal(err)
		}
		m := NewMetrics([]string{"OL1"}, adm.Queued, st.Status)
		srv := httptest.NewServer(New(Options{Config: cfg, Engine: eng, Traces: st, Metrics: m}))
		t.Cleanup(srv.Close)
		out[i] = sharedReplica{srv: srv, adm: adm}
	}
	return out
}

// ask sends one relay request to OL1 with the user message who, as batch or
// not, and returns its status.
func ask(t *testing.T, srv *httptest.Server, who string, batch bool) int {
	req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"OL1","messages":[{"role":"user","content":"`+who+`"}]}`))
	req.Header.Set("Content-Type", "application/json")
	if batch {
		req.Header.Set("X-Chain-Priority", "batch")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// waitUntil polls cond until it holds, failing after a generous bound: what
// is waited for is an event, not a speed.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSharedAdmissionLimit: three replicas on one Redis, max_concurrency 2,
// 300 mixed requests: the upstream never holds more than 2.
func TestSharedAdmissionLimit(t *testing.T) {
	rs := redistest.Start(t)
	up := newHeldUpstream(t, false)
	reps := sharedReplicas(t, 3, up.URL, rs.URL(), 15*time.Second)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 48)
	var failed atomic.Int64
	for i := range 300 {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if st := ask(t, reps[i%3].srv, fmt.Sprint("q", i), i%3 == 0); st != http.StatusOK {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.Errorf("%d requests failed", failed.Load())
	}
	up.mu.Lock()
	got := len(up.order)
	up.mu.Unlock()
	if got != 300 {
		t.Errorf("upstream got %d calls, want 300", got)
	}
	if most := up.most.Load(); most > 2 {
		t.Errorf("the upstream held %d calls at once, want at most 2 across the replicas", most)
	}
	for i, r := range reps {
		if s := r.adm.Status(); s != node.AdmissionShared {
			t.Errorf("replica %d admission %q, want shared", i, s)
		}
	}
}

// TestSharedAdmissionPriority: interactive requests queued behind batch
// ones on other replicas are served first.
func TestSharedAdmissionPriority(t *testing.T) {
	rs := redistest.Start(t)
	up := newHeldUpstream(t, true)
	reps := sharedReplicas(t, 3, up.URL, rs.URL(), 15*time.Second)
	var wg sync.WaitGroup
	send := func(r sharedReplica, who string, batch bool) {
		wg.Go(func() {
			if st := ask(t, r.srv, who, batch); st != http.StatusOK {
				t.Errorf("%s: status %d", who, st)
			}
		})
	}
	// Two calls hold both slots, upstream.
	send(reps[0], "hold1", false)
	send(reps[0], "hold2", false)
	<-up.arrived
	<-up.arrived
	// Batch calls queue on replica 1, then interactive ones on replica 2.
	for i := range 3 {
		send(reps[1], fmt.Sprint("batch", i), true)
		waitUntil(t, "batch queued", func() bool { return reps[1].adm.Queued("OL1") == i+1 })
	}
	for i := range 2 {
		send(reps[2], fmt.Sprint("inter", i), false)
		waitUntil(t, "interactive queued", func() bool { return reps[2].adm.Queued("OL1") == i+1 })
	}
	// Let one call through at a time and see who comes next.
	var next []string
	for range 5 {
		up.gate <- struct{}{}
		next = append(next, <-up.arrived)
	}
	close(up.gate)
	wg.Wait()
	if got, want := strings.Join(next, " "), "inter0 inter1 batch0 batch1 batch2"; got != want {
		t.Errorf("served after the holders: %s, want %s", got, want)
	}
}

// TestSharedAdmissionDeadReplica: slots held by a replica that dies (its
// renewals stop, nothing is released, as after kill -9) are free again
// within the lease.
func TestSharedAdmissionDeadReplica(t *testing.T) {
	rs := redistest.Start(t)
	up := newHeldUpstream(t, false)
	lease := 600 * time.Millisecond
	reps := sharedReplicas(t, 1, up.URL, rs.URL(), lease)
	dead, err := store.NewSlots(rs.URL(), lease)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"dead:1", "dead:2"} {
		if g, _, _, err := dead.Take(t.Context(), "OL1", id, false, 2, 400, lease); err != nil || !g {
			t.Fatalf("the doomed replica took no slot: %v %v", g, err)
		}
	}
	dead.Close() // dies holding both
	taken := time.Now()
	if st := ask(t, reps[0].srv, "after", false); st != http.StatusOK {
		t.Fatalf("status %d", st)
	}
	// Served only once the leases ran out, and not long after.
	if waited := time.Since(taken); waited < lease/2 {
		t.Errorf("served after %s: the dead replica's slots were not counted", waited)
	}
}

// TestSharedAdmissionRedisDown: with Redis killed mid-run the replicas keep
// answering on their local limits and say so; when it returns they share
// the limits again.
func TestSharedAdmissionRedisDown(t *testing.T) {
	rs := redistest.Start(t)
	up := newHeldUpstream(t, false)
	reps := sharedReplicas(t, 3, up.URL, rs.URL(), 15*time.Second)
	run := func(n int) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				if st := ask(t, reps[i%3].srv, fmt.Sprint("q", i), i%2 == 0); st != http.StatusOK {
					t.Errorf("request %d: status %d", i, st)
				}
			})
		}
		wg.Wait()
	}
	run(30)
	rs.Kill()
	run(30)
	for i, r := range reps {
		if s := r.adm.Status(); s != node.AdmissionLocal {
			t.Errorf("replica %d with Redis down: admission %q, want local", i, s)
		}
	}
	if most := up.most.Load(); most > 6 {
		t.Errorf("upstream held %d calls: more than each replica's local limit", most)
	}
	resp, err := http.Get(reps[0].srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var ready struct {
		Admission string `json:"admission"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&ready)
	resp.Body.Close()
	if ready.Admission != node.AdmissionLocal {
		t.Errorf("readyz admission %q, want local", ready.Admission)
	}
	mresp, err := http.Get(reps[0].srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	if !strings.Contains(string(metrics), "chainproxy_admission_degraded 1") {
		t.Error("metrics lack chainproxy_admission_degraded 1 with Redis down")
	}

	rs.Restart()
	waitUntil(t, "shared admission again", func() bool {
		for _, r := range reps {
			if r.adm.Status() != node.AdmissionShared {
				return false
			}
		}
		return true
	})
	up.most.Store(0)
	run(60)
	if most := up.most.Load(); most > 2 {
		t.Errorf("after recovery the upstream held %d calls at once, want at most 2", most)
	}
}
