package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"chainproxy/chain"
	"chainproxy/config"
)

// traceList is GET /v1/chain/traces as JSON.
type traceList struct {
	Data []traceSummary `json:"data"`
}

func listTraces(t *testing.T, s *testServer, key string) []string {
	t.Helper()
	resp := get(t, s.URL+"/v1/chain/traces", "Authorization", "Bearer "+key)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/chain/traces with %s: status %d", key, resp.StatusCode)
	}
	var l traceList
	if err := json.Unmarshal(readAll(t, resp.Body), &l); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range l.Data {
		ids = append(ids, s.TraceID)
	}
	return ids
}

// TestTraceListScopedPerKey: a key lists and opens its own chains only; an
// admin key lists and opens every key's.
func TestTraceListScopedPerKey(t *testing.T) {
	s := newTestServer(t, testConfig, func(c *config.Config) {
		c.Server.APIKeys = []string{"key-a", "key-b"}
		c.Server.AdminKeys = []string{"key-admin"}
	})
	ids := map[string]string{}
	for _, key := range []string{"key-a", "key-b"} {
		resp := s.post(t, "/v1/chat/completions", okBody, "Authorization", "Bearer "+key, "User-Agent", "test-client/"+key)
		readAll(t, resp.Body)
		ids[key] = resp.Header.Get("X-Chain-Trace-Id")
	}
	tests := []struct {
		key  string
		want []string
	}{
		{"key-a", []string{ids["key-a"]}},
		{"key-b", []string{ids["key-b"]}},
		{"key-admin", []string{ids["key-a"], ids["key-b"]}},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if got := listTraces(t, s, tt.key); !slices.Equal(got, tt.want) {
				t.Errorf("listed = %q, want %q", got, tt.want)
			}
			for owner, id := range ids {
				want := http.StatusNotFound
				if slices.Contains(tt.want, id) {
					want = http.StatusOK
				}
				if got := get(t, s.URL+"/v1/chain/traces/"+id, "Authorization", "Bearer "+tt.key).StatusCode; got != want {
					t.Errorf("GET %s's trace: status %d, want %d", owner, got, want)
				}
			}
		})
	}
	// The stored document starts with the list's summary.
	resp := get(t, s.URL+"/v1/chain/traces/"+ids["key-a"], "Authorization", "Bearer key-a")
	var doc traceSummary
	if err := json.Unmarshal(readAll(t, resp.Body), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.TraceID != ids["key-a"] || doc.Status != "ok" || doc.Client != "test-client/key-a" || doc.Question == "" || len(doc.Stages) == 0 || doc.Started == 0 {
		t.Errorf("stored summary = %+v, want the chain's id, status ok, client, question, stages, start", doc)
	}
}

// sseEvent is one event read from a stream.
type sseEvent struct{ name, data string }

// readEvents sends the stream's events on a channel until it ends.
func readEvents(t *testing.T, resp *http.Response) <-chan sseEvent {
	out := make(chan sseEvent, 64)
	go func() { // exits when the body ends (the test cancels the request)
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[len("data: "):]
			case line == "" && ev.data != "":
				out <- ev
				ev = sseEvent{}
			}
		}
	}()
	return out
}

// TestTraceListStream: the stream lists the chains already there, then a
// new chain as soon as it is classified, while its stages run, and again
// when it ends; the other key's chains never appear in it.
func TestTraceListStream(t *testing.T) {
	s := newTestServer(t, `
nodes:
  - {name: OL1, provider: mock, mock: {turns: [{content: "notes"}]}}
  - {name: M1, provider: mock, mock: {turns: [{content: "synthesis"}]}}
  - {name: M2, provider: mock, mock: {delay: 300ms, turns: [{content: "answer"}]}}
chain:
  stages: [{node: OL1, max_turns: 1}, {node: M1, max_turns: 1}, {node: M2, max_turns: 1}]
`, func(c *config.Config) { c.Server.APIKeys = []string{"key-a", "key-b"} })
	body := `{"model":"chain/reflexive","messages":[{"role":"user","content":"first line\nsecond line"}]}`
	old := s.post(t, "/v1/chat/completions", body, "Authorization", "Bearer key-a")
	readAll(t, old.Body)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.URL+"/v1/chain/traces", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer key-a")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q, want text/event-stream", ct)
	}
	events := readEvents(t, resp)
	next := func() sseEvent {
		t.Helper()
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("stream ended")
			}
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no event in 10 s")
		}
		return sseEvent{}
	}
	var first traceSummary
	if ev := next(); ev.name != "trace" || json.Unmarshal([]byte(ev.data), &first) != nil || first.TraceID != old.Header.Get("X-Chain-Trace-Id") {
		t.Fatalf("first event = %+v, want the chain already run", ev)
	}
	if first.Question != "first line" || first.Status != "ok" || first.Mode != "reflexive" {
		t.Errorf("listed chain = %+v, want question %q, status ok, mode reflexive", first, "first line")
	}
	if ev := next(); ev.name != "ready" {
		t.Fatalf("second event = %+v, want ready", ev)
	}

	// Key b's chain runs first and must not show; then key a's.
	done := make(chan string, 2)
	for _, key := range []string{"key-b", "key-a"} {
		go func() { // exits when the request ends
			req, _ := http.NewRequest("POST", s.URL+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				done <- ""
				return
			}
			resp.Body.Close()
			done <- resp.Header.Get("X-Chain-Trace-Id")
		}()
	}
	var statuses []string
	var id string
	for {
		var sum traceSummary
		ev := next()
		if err := json.Unmarshal([]byte(ev.data), &sum); err != nil || ev.name != "trace" {
			t.Fatalf("event %+v: %v", ev, err)
		}
		if id == "" {
			id = sum.TraceID
		}
		if sum.TraceID != id {
			t.Fatalf("second chain %s in the stream, want only key a's %s", sum.TraceID, id)
		}
		if len(statuses) == 0 && sum.Status == traceRunning {
			// A running chain opens too: its stages so far.
			resp := get(t, s.URL+"/v1/chain/traces/"+id, "Authorization", "Bearer key-a")
			var doc struct {
				Status string `json:"status"`
				Chain  struct {
					Stages []json.RawMessage `json:"stages"`
				} `json:"chain"`
			}
			if err := json.Unmarshal(readAll(t, resp.Body), &doc); err != nil || resp.StatusCode != http.StatusOK || doc.Status != traceRunning {
				t.Errorf("GET running trace: status %d, %+v (%v), want 200 and status running", resp.StatusCode, doc, err)
			}
		}
		if len(statuses) == 0 || statuses[len(statuses)-1] != sum.Status {
			statuses = append(statuses, sum.Status)
		}
		if sum.Status != traceRunning {
			break
		}
	}
	if !slices.Equal(statuses, []string{traceRunning, "ok"}) {
		t.Errorf("statuses seen = %q, want running then ok", statuses)
	}
	ids := []string{<-done, <-done}
	if !slices.Contains(ids, id) {
		t.Errorf("streamed chain %s is none of the requests' %q", id, ids)
	}
}

func TestQuestion(t *testing.T) {
	long := strings.Repeat("é", 150) // 300 bytes
	tests := []struct {
		name   string
		judged string // what the classifier judged, "" when it did not run
		msgs   []chain.Message
		want   string
	}{
		{"the last user message's first line", "", []chain.Message{{Role: "user", Content: "old"}, {Role: "assistant", Content: "a"}, {Role: "user", Content: "  new\nmore"}}, "new"},
		{"tool results after it", "", []chain.Message{{Role: "user", Content: "q"}, {Role: "assistant"}, {Role: "tool", Content: "sunny"}}, "q"},
		{"capped on a rune boundary", "", []chain.Message{{Role: "user", Content: long}}, strings.Repeat("é", 100) + "…"},
		{"none", "", []chain.Message{{Role: "system", Content: "s"}}, ""},
		{"the judged words first", "What is 2+2?\nmore", []chain.Message{{Role: "user", Content: "<system-reminder>x</system-reminder>\nWhat is 2+2?"}}, "What is 2+2?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := question(tt.judged, tt.msgs); got != tt.want {
				t.Errorf("question = %q, want %q", got, tt.want)
			}
		})
	}
	if got := clientName("curl/8\x00\x1b[31m" + strings.Repeat("x", 200)); strings.ContainsAny(got, "\x00\x1b") || len(got) > 124 {
		t.Errorf("clientName kept control characters or length: %q", got)
	}
}

// TestTracesListTheJudgedQuestion: an agent's chain is listed under the
// words the classifier judged, not its injected blocks.
func TestTracesListTheJudgedQuestion(t *testing.T) {
	s := newTestServer(t, testConfig)
	body := `{"model":"chain/auto","messages":[{"role":"user","content":"<system-reminder>\nThe skills you may use.\n</system-reminder>\nWhat is 2+2?"}]}`
	if resp := s.post(t, "/v1/chat/completions", body); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, readAll(t, resp.Body))
	}
	resp, err := http.Get(s.URL + "/v1/chain/traces")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []traceSummary `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Data) != 1 {
		t.Fatalf("list %+v, err %v", list, err)
	}
	if q := list.Data[0].Question; q != "What is 2+2?" {
		t.Errorf("question %q, want the words judged", q)
	}
}

// TestTraceHubKeepsTheLast: the list holds the last traceListCap chains,
// the oldest going first.
func TestTraceHubKeepsTheLast(t *testing.T) {
	h := newTraceHub(30 * time.Minute)
	for i := range traceListCap + 3 {
		h.Watch(&chain.RunRequest{TraceID: fmt.Sprint(i)}, chain.Event{Kind: chain.EventClassified, Mode: "simple"})
	}
	got := h.list("", false)
	if len(got) != traceListCap || got[0].TraceID != "3" || got[len(got)-1].TraceID != fmt.Sprint(traceListCap+2) {
		t.Errorf("list = %d chains from %s to %s, want %d from 3", len(got), got[0].TraceID, got[len(got)-1].TraceID, traceListCap)
	}
}

// TestTraceHubRelistsAnEndedID: a request under the id of a chain that
// ended (a client's traceparent shared by several requests) is listed in
// its place, live, once.
func TestTraceHubRelistsAnEndedID(t *testing.T) {
	h := newTraceHub(30 * time.Minute)
	first := &chain.RunRequest{TraceID: "t1", Messages: []chain.Message{{Role: "user", Content: "first"}}}
	h.Watch(first, chain.Event{Kind: chain.EventClassified, Mode: "simple"})
	h.Watch(&chain.RunRequest{TraceID: "other"}, chain.Event{Kind: chain.EventClassified, Mode: "simple"})
	h.end(first, "", "t1", &chain.Trace{Mode: "simple", Stages: []chain.StageTrace{{Node: "OL1", Status: chain.StageOK}}}, nil)
	second := &chain.RunRequest{TraceID: "t1", Messages: []chain.Message{{Role: "user", Content: "second"}}}
	h.Watch(second, chain.Event{Kind: chain.EventClassified, Mode: "reflexive"})
	h.Watch(second, chain.Event{Kind: chain.EventStageStart, Stage: 0, Node: "OL1"})
	got := h.list("", false)
	if len(got) != 2 || got[1].TraceID != "t1" || got[1].Question != "second" || got[1].Status != traceRunning || len(got[1].Stages) != 1 {
		t.Errorf("list = %+v, want other, then t1 running its second request", got)
	}
}

// TestTraceListEveryFront: a chain is listed whichever API front started
// it, with the client that sent it.
func TestTraceListEveryFront(t *testing.T) {
	s := newTestServer(t, testConfig)
	fronts := []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"chain/simple","messages":[{"role":"user","content":"from chat completions"}]}`},
		{"/v1/responses", `{"model":"chain/simple","input":"from responses"}`},
		{"/api/chat", `{"model":"chain/simple","stream":false,"messages":[{"role":"user","content":"from ollama"}]}`},
		{"/chat", `{"message":"from the cockpit","mode":"simple"}`},
	}
	var want []string
	for _, f := range fronts {
		resp := s.post(t, f.path, f.body, "User-Agent", "client-of"+f.path)
		readAll(t, resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: status %d", f.path, resp.StatusCode)
		}
		want = append(want, "client-of"+f.path)
	}
	resp := get(t, s.URL+"/v1/chain/traces")
	var l traceList
	if err := json.Unmarshal(readAll(t, resp.Body), &l); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, sum := range l.Data {
		got = append(got, sum.Client)
		if sum.Status != "ok" || sum.Question == "" {
			t.Errorf("%s: status %q, question %q, want ok and the question", sum.Client, sum.Status, sum.Question)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("listed clients = %q, want %q", got, want)
	}
}
