package web

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"chainproxy/config"
	"chainproxy/internal/fakeollama"
)

// The scenarios every front shares, run through each: the driver is one,
// so what holds on one front must hold on all.
var fronts = []struct {
	name, path, body, firstLine string
}{
	{"chat completions", "/v1/chat/completions", `{"model":"A","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "data: "},
	{"responses", "/v1/responses", `{"model":"A","stream":true,"input":"hi"}`, "event: response.output_text.delta"},
	{"ollama", "/api/chat", `{"model":"A","messages":[{"role":"user","content":"hi"}]}`, `{"model":"A"`},
	{"anthropic", "/v1/messages", `{"model":"A","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, "event: content_block_delta"},
}

// TestFrontsClientCancel: a client that goes away mid-stream cancels the
// upstream call, whichever front it came through.
func TestFrontsClientCancel(t *testing.T) {
	for _, fr := range fronts {
		t.Run(fr.name, func(t *testing.T) {
			f := fakeollama.New(t, fakeollama.Reply{Content: []string{"partial "}, Hang: true})
			_, srv := wireProxy(t, []config.Node{ollamaNode("A", f.URL)}, oneStage)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+fr.path, strings.NewReader(fr.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() && !strings.HasPrefix(sc.Text(), fr.firstLine) {
			}
			if !strings.Contains(sc.Text()+readLine(sc), "partial") {
				t.Fatalf("no partial content before the cancel (%d)", resp.StatusCode)
			}
			cancel()
			select {
			case <-f.Canceled():
			case <-time.After(5 * time.Second):
				t.Fatal("the upstream never saw the client go away")
			}
		})
	}
}

// readLine is the scanner's next line, for an event whose data follows
// its name.
func readLine(sc *bufio.Scanner) string {
	if sc.Scan() {
		return sc.Text()
	}
	return ""
}

// TestFrontsMetricsRoute: each front's requests are counted under its own
// route label.
func TestFrontsMetricsRoute(t *testing.T) {
	cfg := mustConfig(t, testConfig)
	m := NewMetrics(nil, nil, nil)
	srv := New(Options{Config: cfg, Engine: mustEngine(t, cfg), Metrics: m, Keepalive: time.Hour})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	ts := &testServer{Server: hs}
	for _, p := range []struct{ path, body string }{
		{"/v1/responses", `{"model":"chain/simple","input":"hi"}`},
		{"/api/chat", `{"model":"chain/simple","stream":false,"messages":[{"role":"user","content":"hi"}]}`},
		{"/api/generate", `{"model":"chain/simple","stream":false,"prompt":"hi"}`},
		{"/v1/messages", `{"model":"chain/simple","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		if resp := ts.post(t, p.path, p.body); resp.StatusCode != 200 {
			t.Fatalf("%s: %d", p.path, resp.StatusCode)
		}
	}
	// A request is counted once its handler returns, which may be just
	// after the client has read the answer: wait for the counts.
	routes := []string{"/v1/responses", "/api/chat", "/api/generate", "/v1/messages"}
	var missing []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := http.Get(ts.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body := string(readAll(t, resp.Body))
		resp.Body.Close()
		missing = missing[:0]
		for _, route := range routes {
			if !strings.Contains(body, `chainproxy_requests_total{mode="simple",route="`+route+`",status="200"} 1`) {
				missing = append(missing, route)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(missing) > 0 {
		t.Errorf("no request counted for routes %v", missing)
	}
}

// TestFrontsTokenLimit: an answer cut at the token limit says so in each
// front's words: finish_reason "length", status "incomplete" with
// max_output_tokens, done_reason "length", stop_reason "max_tokens".
func TestFrontsTokenLimit(t *testing.T) {
	f := fakeollama.New(t, fakeollama.Reply{Content: []string{"cut sho"}, DoneReason: "length"})
	_, srv := wireProxy(t, []config.Node{ollamaNode("A", f.URL)}, oneStage)
	ts := &testServer{Server: srv}
	for _, tc := range []struct{ path, body, want string }{
		{"/v1/chat/completions", `{"model":"A","max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`, `"finish_reason":"length"`},
		{"/v1/chat/completions", `{"model":"A","stream":true,"max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`, `"finish_reason":"length"`},
		{"/v1/responses", `{"model":"A","max_output_tokens":3,"input":"hi"}`, `"status":"incomplete"`},
		{"/v1/responses", `{"model":"A","stream":true,"max_output_tokens":3,"input":"hi"}`, `event: response.incomplete`},
		{"/api/chat", `{"model":"A","options":{"num_predict":3},"messages":[{"role":"user","content":"hi"}]}`, `"done_reason":"length"`},
		{"/api/generate", `{"model":"A","stream":false,"options":{"num_predict":3},"prompt":"hi"}`, `"done_reason":"length"`},
		{"/v1/messages", `{"model":"A","max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`, `"stop_reason":"max_tokens"`},
		{"/v1/messages", `{"model":"A","stream":true,"max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`, `"stop_reason":"max_tokens"`},
	} {
		resp := ts.post(t, tc.path, tc.body)
		b := string(readAll(t, resp.Body))
		if resp.StatusCode != 200 || !strings.Contains(b, tc.want) {
			t.Errorf("%s %s: %d %s, want %s", tc.path, tc.body, resp.StatusCode, b, tc.want)
		}
		if tc.path == "/v1/responses" && !strings.Contains(b, `"incomplete_details":{"reason":"max_output_tokens"}`) {
			t.Errorf("%s: no incomplete_details: %s", tc.body, b)
		}
	}
}
