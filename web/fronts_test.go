package web

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
		{"/v1/messages/count_tokens", `{"model":"chain/simple","messages":[{"role":"user","content":"hi"}]}`},
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
		if !strings.Contains(body, `chainproxy_requests_total{mode="",route="/v1/messages/count_tokens",status="200"} 1`) {
			missing = append(missing, "/v1/messages/count_tokens")
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

// TestFrontsModelAliases: every front resolves model_aliases the same
// way, and refuses a name neither served nor aliased with a 404 in its
// own shape that names the models that exist.
func TestFrontsModelAliases(t *testing.T) {
	s := newTestServer(t, testConfig, func(c *config.Config) {
		c.ModelAliases = map[string]string{"claude-*": "chain/reflexive", "claude-*haiku*": "chain/simple", "gpt-*": "M1"}
	})
	bodies := map[string]string{
		"/v1/chat/completions": `{"model":%q,"messages":[{"role":"user","content":"hi"}]}`,
		"/v1/responses":        `{"model":%q,"input":"hi"}`,
		"/api/chat":            `{"model":%q,"stream":false,"messages":[{"role":"user","content":"hi"}]}`,
		"/v1/messages":         `{"model":%q,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
	}
	for path, body := range bodies {
		for model, mode := range map[string]string{"claude-haiku-4-5": "simple", "claude-opus-4-1": "reflexive", "gpt-4o": "simple"} {
			resp := s.post(t, path, fmt.Sprintf(body, model))
			if b := readAll(t, resp.Body); resp.StatusCode != 200 || resp.Header.Get("X-Chain-Mode") != mode {
				t.Errorf("%s %s: %d mode %q, want 200 %s: %.200s", path, model, resp.StatusCode, resp.Header.Get("X-Chain-Mode"), mode, b)
			}
		}
		resp := s.post(t, path, fmt.Sprintf(body, "mistral-large"))
		b := readAll(t, resp.Body)
		var shape map[string]any
		_ = json.Unmarshal(b, &shape)
		msg := ""
		switch e := shape["error"].(type) {
		case string: // Ollama's
			msg = e
		case map[string]any: // OpenAI's and Anthropic's
			msg, _ = e["message"].(string)
			if anthropicPath(path) && (shape["type"] != "error" || e["type"] != "not_found_error") {
				t.Errorf("%s: %s is not Anthropic's not_found_error", path, b)
			}
		}
		if resp.StatusCode != 404 || !strings.Contains(msg, `"mistral-large"`) || !strings.Contains(msg, "chain/reflexive") || !strings.Contains(msg, "big-1") || !strings.Contains(msg, "claude-*haiku* → chain/simple") {
			t.Errorf("%s unknown model: %d %s", path, resp.StatusCode, b)
		}
	}
}

// TestFrontsOriginRefused: a cross-origin page is refused on every front,
// in the front's shape.
func TestFrontsOriginRefused(t *testing.T) {
	s := newTestServer(t, testConfig)
	for _, fr := range fronts {
		resp := s.post(t, fr.path, strings.ReplaceAll(fr.body, `"A"`, `"chain/simple"`), "Origin", "https://evil.example")
		b := readAll(t, resp.Body)
		if resp.StatusCode != 403 {
			t.Errorf("%s: %d %s, want 403", fr.path, resp.StatusCode, b)
		}
		if anthropicPath(fr.path) && !bytes.Contains(b, []byte(`"type":"permission_error"`)) {
			t.Errorf("%s: %s is not Anthropic's permission_error", fr.path, b)
		}
	}
}
