package web

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"chainproxy/chain"
	"chainproxy/config"
	"chainproxy/internal/redistest"
	"chainproxy/store"
)

// sharedListConfig is a three-stage chain whose last stage takes a while,
// so that a chain is seen running; callers a and b, and an admin.
const sharedListConfig = `
server:
  api_keys: [key-a, key-b]
  admin_keys: [key-admin]
nodes:
  - {name: OL1, provider: mock, mock: {turns: [{content: "notes"}]}}
  - {name: M1, provider: mock, mock: {turns: [{content: "synthesis"}]}}
  - {name: M2, provider: mock, mock: {delay: %DELAY%, turns: [{content: "answer"}]}}
chain:
  stages: [{node: OL1, max_turns: 1}, {node: M1, max_turns: 1}, {node: M2, max_turns: 1}]
`

// listReplica is one proxy process over the shared Redis at redisURL, as
// cmd/proxy wires it (store.Open, the store as the server's traces), its
// last stage taking delay.
func listReplica(t *testing.T, redisURL, delay string) (*httptest.Server, *Server, store.Store) {
	t.Helper()
	cfg, err := config.Parse([]byte(strings.ReplaceAll(sharedListConfig, "%DELAY%", delay)))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Root = t.TempDir()
	st, err := store.Open(t.Context(), redisURL, 50, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s := New(Options{Config: cfg, Engine: mustEngine(t, cfg), Traces: st, Keepalive: 50 * time.Millisecond})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv, s, st
}

// waitSubscribed waits until n replicas listen to the shared list's
// changes, so that what a test runs next is heard.
func waitSubscribed(t *testing.T, rs *redistest.Server, n int64) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	defer c.Close()
	waitFor(t, func() bool {
		subs, err := c.PubSubNumSub(t.Context(), "chainproxy:summaries:changed").Result()
		return err == nil && subs["chainproxy:summaries:changed"] >= n
	})
}

// listed is GET /v1/chain/traces on srv with key.
func listed(t *testing.T, srv *httptest.Server, key string) []traceSummary {
	t.Helper()
	resp := get(t, srv.URL+"/v1/chain/traces", "Authorization", "Bearer "+key)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/chain/traces with %s: status %d", key, resp.StatusCode)
	}
	var l traceList
	if err := json.Unmarshal(readAll(t, resp.Body), &l); err != nil {
		t.Fatal(err)
	}
	return l.Data
}

func find(sums []traceSummary, id string) (traceSummary, int) {
	n, found := 0, traceSummary{}
	for _, s := range sums {
		if s.TraceID == id {
			n++
			found = s
		}
	}
	return found, n
}

// openTrace is GET /v1/chain/traces/{id} on srv with key: its status and
// the document.
func openTrace(t *testing.T, srv *httptest.Server, key, id string) (int, tracedDoc) {
	t.Helper()
	resp := get(t, srv.URL+"/v1/chain/traces/"+id, "Authorization", "Bearer "+key)
	var doc tracedDoc
	body := readAll(t, resp.Body)
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatalf("trace %s: %v: %s", id, err, body)
		}
	}
	return resp.StatusCode, doc
}

// tracedDoc is a trace document: the summary, then the chain.
type tracedDoc struct {
	traceSummary
	Chain struct {
		Stages []struct {
			Node   string `json:"node"`
			Status string `json:"status"`
			Output string `json:"output"`
		} `json:"stages"`
	} `json:"chain"`
}

// stream opens srv's live trace list for key and returns its events,
// after the chains already listed and "ready".
func stream(t *testing.T, srv *httptest.Server, key string) (next func() traceSummary) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/chain/traces", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	events := readEvents(t, resp)
	for ev := range events {
		if ev.name == "ready" {
			break
		}
	}
	return func() traceSummary {
		t.Helper()
		select {
		case ev, ok := <-events:
			var sum traceSummary
			if !ok || ev.name != "trace" || json.Unmarshal([]byte(ev.data), &sum) != nil {
				t.Fatalf("stream event %+v (open %v), want a trace", ev, ok)
			}
			return sum
		case <-time.After(10 * time.Second):
			t.Fatal("no stream event in 10 s")
		}
		return traceSummary{}
	}
}

// runOn runs a chain on srv for key, in the background; its trace id comes
// on the channel when the response is read.
func runOn(t *testing.T, srv *httptest.Server, key string) <-chan string {
	t.Helper()
	done := make(chan string, 1)
	go func() { // exits when the request ends
		req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"chain/reflexive","messages":[{"role":"user","content":"compare the two\nmore"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("User-Agent", "client-of-"+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- ""
			return
		}
		defer resp.Body.Close()
		var b [512]byte
		for {
			if _, err := resp.Body.Read(b[:]); err != nil {
				break
			}
		}
		if resp.StatusCode != http.StatusOK {
			t.Errorf("chain on %s: status %d", srv.URL, resp.StatusCode)
		}
		done <- resp.Header.Get("X-Chain-Trace-Id")
	}()
	return done
}

// TestReplicasShareTraceList: two replicas on one Redis behind a load
// balancer (docs/replicas.md): a chain run on A is listed by B, live on
// B's stream (running, then ended) and in B's JSON list; an admin on B
// opens it while it runs and once stored; a caller sees only its own
// chains on either replica; A lists its chain once, as its own.
func TestReplicasShareTraceList(t *testing.T) {
	rs := redistest.Start(t)
	a, _, _ := listReplica(t, rs.URL(), "400ms")
	b, _, _ := listReplica(t, rs.URL(), "400ms")
	waitSubscribed(t, rs, 2)

	adminOnB := stream(t, b, "key-admin")
	keyBOnB := stream(t, b, "key-b")

	done := runOn(t, a, "key-a")
	first := adminOnB()
	if first.Status != traceRunning || first.Question != "compare the two" || first.Client != "client-of-key-a" {
		t.Errorf("B's stream: first news of A's chain = %+v, want it running, with its question and client", first)
	}
	id := first.TraceID
	if code, doc := openTrace(t, b, "key-admin", id); code != http.StatusOK || doc.TraceID != id || doc.Status != traceRunning {
		t.Errorf("admin on B opens A's running chain: %d %+v, want 200 running", code, doc.traceSummary)
	}
	var statuses []string
	for sum := first; ; sum = adminOnB() {
		if sum.TraceID != id {
			t.Fatalf("B's stream: chain %s, want only %s", sum.TraceID, id)
		}
		statuses = append(statuses, sum.Status)
		if sum.Status != traceRunning {
			if sum.Status != "ok" || len(sum.Stages) != 3 || sum.Tokens == 0 || sum.DurationMS < 400 {
				t.Errorf("B's stream: A's chain ended as %+v, want ok, 3 stages, tokens, its duration", sum)
			}
			break
		}
	}
	if got := <-done; got != id {
		t.Fatalf("A answered trace %q, B listed %q", got, id)
	}
	t.Logf("statuses on B: %v", statuses)

	// A's chain in B's JSON list, for whom may see it.
	tests := []struct {
		key    string
		listed bool
	}{
		{"key-admin", true},
		{"key-a", true},
		{"key-b", false},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			sum, n := find(listed(t, b, tt.key), id)
			if (n == 1) != tt.listed || n > 1 {
				t.Fatalf("B lists A's chain %d times for %s, want listed %v", n, tt.key, tt.listed)
			}
			if tt.listed && (sum.Status != "ok" || sum.Question != "compare the two") {
				t.Errorf("B lists %+v, want A's chain, ok", sum)
			}
			code, doc := openTrace(t, b, tt.key, id)
			want := http.StatusNotFound
			if tt.listed {
				want = http.StatusOK
			}
			if code != want {
				t.Fatalf("%s opens A's trace on B: %d, want %d", tt.key, code, want)
			}
			if tt.listed && (doc.Status != "ok" || len(doc.Chain.Stages) != 3 || doc.Chain.Stages[2].Output != "answer") {
				t.Errorf("%s opens A's trace on B: %+v, want the stored trace", tt.key, doc)
			}
		})
	}

	// A knows its own chain: listed once, not again as another's.
	for _, key := range []string{"key-admin", "key-a"} {
		if sum, n := find(listed(t, a, key), id); n != 1 || sum.Status != "ok" {
			t.Errorf("A lists its own chain %d times for %s (%+v), want once", n, key, sum)
		}
	}

	// key-b's stream on B never showed key-a's chain: its first event is
	// key-b's own, run on A.
	other := runOn(t, a, "key-b")
	if sum := keyBOnB(); sum.TraceID == id || sum.Client != "client-of-key-b" {
		t.Errorf("key-b's stream on B shows %+v, want only key-b's chain", sum)
	}
	otherID := <-other

	// The admin's list on either replica: every chain, oldest first.
	third := <-runOn(t, b, "key-a")
	for _, srv := range []*httptest.Server{a, b} {
		var ids []string
		for _, s := range listed(t, srv, "key-admin") {
			ids = append(ids, s.TraceID)
		}
		if want := []string{id, otherID, third}; !slices.Equal(ids, want) {
			t.Errorf("admin's list on %s = %q, want %q", srv.URL, ids, want)
		}
	}
}

// TestReplicasTraceListRedisLost: with Redis gone each replica lists its
// own chains, and neither a request nor a list fails; once Redis is back
// the replicas list each other's chains again.
func TestReplicasTraceListRedisLost(t *testing.T) {
	rs := redistest.Start(t)
	a, _, stA := listReplica(t, rs.URL(), "0s")
	b, _, stB := listReplica(t, rs.URL(), "0s")
	waitSubscribed(t, rs, 2)
	before := <-runOn(t, a, "key-a")
	waitFor(t, func() bool { _, n := find(listed(t, b, "key-admin"), before); return n == 1 })

	rs.Kill()
	onA, onB := <-runOn(t, a, "key-a"), <-runOn(t, b, "key-a")
	if onA == "" || onB == "" {
		t.Fatal("a chain failed during the outage")
	}
	for _, tc := range []struct {
		srv        *httptest.Server
		own, other string
	}{{a, onA, onB}, {b, onB, onA}} {
		start := time.Now()
		sums := listed(t, tc.srv, "key-a")
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("list during the outage took %v", d)
		}
		if _, n := find(sums, tc.own); n != 1 {
			t.Errorf("%s does not list its own chain during the outage: %+v", tc.srv.URL, sums)
		}
		if code, _ := openTrace(t, tc.srv, "key-a", tc.own); code != http.StatusOK {
			t.Errorf("%s opens its own chain during the outage: %d", tc.srv.URL, code)
		}
	}
	if _, n := find(listed(t, b, "key-a"), before); n != 1 {
		t.Errorf("B forgot A's chain heard before the outage")
	}

	rs.Restart()
	waitFor(t, func() bool { return stA.Status() == store.StatusRedis && stB.Status() == store.StatusRedis })
	after := <-runOn(t, a, "key-a")
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, n := find(listed(t, b, "key-a"), after); n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("B does not list A's chain run after Redis came back")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReplicasTraceListReplicaKilled: a replica that dies with a chain
// under way never says it ended; the others list it running while it was
// heard of recently, then, traceStaleAfter after the last news, as
// interrupted, live and in the JSON list, and an admin still opens it.
func TestReplicasTraceListReplicaKilled(t *testing.T) {
	rs := redistest.Start(t)
	a, _, stA := listReplica(t, rs.URL(), "1m")
	b, sb, _ := listReplica(t, rs.URL(), "0s")
	waitSubscribed(t, rs, 2)
	live := stream(t, b, "key-admin")

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", a.URL+"/v1/chat/completions", strings.NewReader(`{"model":"chain/reflexive","stream":true,"messages":[{"role":"user","content":"long job"}]}`))
	req.Header.Set("Authorization", "Bearer key-a")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	id := resp.Header.Get("X-Chain-Trace-Id")
	var sum traceSummary
	for sum.TraceID != id || len(sum.Stages) < 3 {
		sum = live() // until M2 starts
	}
	if sum.Status != traceRunning {
		t.Fatalf("B lists A's chain as %+v, want running", sum)
	}

	// A dies: its Redis connections go, then its client.
	stA.Close()
	cancel()

	if got, _ := find(listed(t, b, "key-admin"), id); got.Status != traceRunning {
		t.Errorf("B lists A's chain, heard of just now, as %q, want running", got.Status)
	}
	sb.hub.mu.Lock()
	sb.hub.now = func() time.Time { return time.Now().Add(traceStaleAfter + time.Second) }
	sb.hub.mu.Unlock()

	got, _ := find(listed(t, b, "key-admin"), id)
	var stages []string
	for _, st := range got.Stages {
		stages = append(stages, st.Node+" "+st.Status)
	}
	want := []string{"OL1 ok", "M1 ok", "M2 " + traceInterrupted}
	if got.Status != traceInterrupted || !slices.Equal(stages, want) || got.DurationMS > int64(time.Minute/time.Millisecond) {
		t.Errorf("B lists A's silent chain as %+v, want interrupted, M2 interrupted, its duration as last heard", got)
	}
	if sum := live(); sum.TraceID != id || sum.Status != traceInterrupted {
		t.Errorf("B's stream: %+v, want A's chain interrupted", sum)
	}
	code, doc := openTrace(t, b, "key-admin", id)
	if code != http.StatusOK || doc.Status != traceInterrupted || len(doc.Chain.Stages) != 3 || doc.Chain.Stages[2].Status != traceInterrupted {
		t.Errorf("admin on B opens A's interrupted chain: %d %+v", code, doc)
	}
}

// splitStore keeps traces in memory and shares the list through Redis
// alone: every Redis call of a request path is the list's.
type splitStore struct {
	*store.Memory
	feed *store.Redis
}

func (s splitStore) PutSummary(ctx context.Context, id string, data []byte) error {
	return s.feed.PutSummary(ctx, id, data)
}

func (s splitStore) Summaries(ctx context.Context) ([][]byte, error) { return s.feed.Summaries(ctx) }

func (s splitStore) WatchSummaries(ctx context.Context, fn func([]byte)) {
	s.feed.WatchSummaries(ctx, fn)
}

// TestTraceSharingNeverBlocksRequests: a Redis that stops answering (here
// paused with CLIENT PAUSE, as a stalled or overloaded server would be)
// costs a request nothing: its summaries are sent by another goroutine.
// Were each of a chain's summary changes sent in line, every request
// would wait the 500 ms Redis timeout several times.
func TestTraceSharingNeverBlocksRequests(t *testing.T) {
	rs := redistest.Start(t)
	cfg, err := config.Parse([]byte(strings.ReplaceAll(sharedListConfig, "%DELAY%", "0s")))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Root = t.TempDir()
	feed, err := store.NewRedis(rs.URL(), 50)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { feed.Close() })
	srv := httptest.NewServer(New(Options{Config: cfg, Engine: mustEngine(t, cfg), Traces: splitStore{store.NewMemory(100, 50), feed}}))
	t.Cleanup(srv.Close)
	waitSubscribed(t, rs, 1)

	admin := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	defer admin.Close()
	if err := admin.Do(t.Context(), "client", "pause", "3000", "all").Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range 5 {
		if id := <-runOn(t, srv, "key-a"); id == "" {
			t.Fatal("request failed")
		}
	}
	d := time.Since(start)
	if d > 1500*time.Millisecond {
		t.Errorf("5 chains with Redis stalled took %v, want no wait for it", d)
	}
	t.Logf("5 chains with Redis stalled: %v", d)

	// Once Redis answers, the chains run then are shared.
	admin.Do(t.Context(), "client", "unpause")
	last := <-runOn(t, srv, "key-a")
	waitFor(t, func() bool {
		sums, err := feed.Summaries(t.Context())
		return err == nil && slices.ContainsFunc(sums, func(b []byte) bool { return strings.Contains(string(b), last) })
	})
}

// TestTraceHubMerge: how a replica lists the news of another: the latest
// news of each chain wins, in order of start, its own chains kept, and the
// cap held.
func TestTraceHubMerge(t *testing.T) {
	base := time.Now().UnixMilli()
	news := func(h *traceHub, replica string, seq uint64, id string, started int64, status, question string) {
		data, err := json.Marshal(sharedSummary{Replica: replica, Seq: seq, Owner: "o", At: time.Now().UnixMilli(),
			Summary: traceSummary{TraceID: id, Started: started, Status: status, Question: question, Stages: []stageBadge{}}})
		if err != nil {
			t.Fatal(err)
		}
		h.heard(data)
	}
	local := func(h *traceHub, id, question string, ended bool) {
		req := &chain.RunRequest{TraceID: id, Caller: "o", Messages: []chain.Message{{Role: "user", Content: question}}}
		h.Watch(req, chain.Event{Kind: chain.EventClassified, Mode: "simple"})
		if ended {
			h.end(req, "o", id, &chain.Trace{Mode: "simple", Stages: []chain.StageTrace{{Node: "OL1", Status: chain.StageOK}}}, nil)
			h.stored("o", id)
		}
	}
	tests := []struct {
		name  string
		steps func(h *traceHub)
		want  []string // id status question, oldest first
	}{
		{"own news coming back", func(h *traceHub) {
			news(h, h.replica, 1, "t1", base, "ok", "mine")
		}, nil},
		{"older news after newer", func(h *traceHub) {
			news(h, "r2", 2, "t1", base, "ok", "ended")
			news(h, "r2", 1, "t1", base, traceRunning, "running")
		}, []string{"t1 ok ended"}},
		{"own running chain stays", func(h *traceHub) {
			local(h, "t1", "here", false)
			news(h, "r2", 1, "t1", time.Now().UnixMilli()+1000, "ok", "there")
		}, []string{"t1 running here"}},
		{"own ended chain, later request elsewhere", func(h *traceHub) {
			local(h, "t1", "here", true)
			news(h, "r2", 1, "t1", time.Now().UnixMilli()+1000, traceRunning, "there")
		}, []string{"t1 running there"}},
		{"chain gone on here from elsewhere", func(h *traceHub) {
			news(h, "r2", 1, "t1", base-1000, "awaiting_client", "there")
			local(h, "t1", "here", false)
		}, []string{"t1 running here"}},
		{"in order of start", func(h *traceHub) {
			local(h, "t2", "here", true)
			news(h, "r2", 1, "t1", base-60_000, "ok", "earlier")
			news(h, "r3", 1, "t3", time.Now().UnixMilli()+60_000, "ok", "later")
		}, []string{"t1 ok earlier", "t2 ok here", "t3 ok later"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newTraceHub(30 * time.Minute)
			tt.steps(h)
			var got []string
			for _, s := range h.list("", true) {
				got = append(got, s.TraceID+" "+s.Status+" "+s.Question)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("list = %q, want %q", got, tt.want)
			}
		})
	}

	t.Run("cap", func(t *testing.T) {
		h := newTraceHub(30 * time.Minute)
		for i := range traceListCap {
			local(h, fmt.Sprint("l", i), "q", true)
		}
		news(h, "r2", 1, "old", base-60_000, "ok", "older than all")
		news(h, "r2", 2, "new", time.Now().UnixMilli()+1000, "ok", "newer")
		got := h.list("", true)
		if len(got) != traceListCap || got[0].TraceID != "l1" || got[len(got)-1].TraceID != "new" {
			t.Errorf("list = %d chains from %s to %s, want %d from l1 to new", len(got), got[0].TraceID, got[len(got)-1].TraceID, traceListCap)
		}
	})
}
