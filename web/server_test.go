package web

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/chain/node"
	"chainproxy/config"
	"chainproxy/internal/nodetest"
	"chainproxy/internal/oaischema"
	"chainproxy/store"
	"chainproxy/tools"
)

var update = flag.Bool("update", false, "rewrite golden files")

// testConfig scripts three mock nodes: OL1 lists and reads, M1 and M2 answer.
const testConfig = `
server:
  max_body_bytes: 4096
nodes:
  - name: OL1
    provider: mock
    model: small-1
    mock:
      turns:
        - tool_calls: [{id: call_a, name: list_dir, args: {path: "."}}]
        - content: "OL1 found a.txt."
      scenarios:
        - when: loop
          turns:
            - tool_calls: [{name: list_dir, args: {path: "."}}]
  - name: M1
    provider: mock
    model: big-1
    mock:
      turns:
        - content: "M1 synthesis."
  - name: M2
    provider: mock
    model: review-1
    mock:
      turns:
        - content: "Final answer from M2."
          reasoning: "hidden M2 thoughts"
      scenarios:
        - when: boom
          turns:
            - fail: "M2 exploded"
        - when: weather
          turns:
            - tool_calls: [{id: call_w, name: get_weather, args: {city: Paris}}]
            - content: "It is sunny in Paris."
chain:
  simple_node: M2
`

type testServer struct {
	*httptest.Server
	cfg   *config.Config
	store *store.Memory
}

func newTestServer(t *testing.T, yamlText string, mutate ...func(*config.Config)) *testServer {
	t.Helper()
	cfg, err := config.Parse([]byte(yamlText))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Root = t.TempDir()
	if err := os.WriteFile(filepath.Join(cfg.Tools.Root, "a.txt"), []byte("alpha\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, m := range mutate {
		m(cfg)
	}
	mem := store.NewMemory(10000, 50)
	srv := httptest.NewServer(New(Options{Config: cfg, Engine: mustEngine(t, cfg), Traces: mem, Keepalive: 20 * time.Millisecond}))
	t.Cleanup(srv.Close)
	return &testServer{Server: srv, cfg: cfg, store: mem}
}

func (s *testServer) post(t *testing.T, path, body string, hdr ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", s.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readAll(t *testing.T, r io.Reader) []byte {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBadInput(t *testing.T) {
	s := newTestServer(t, testConfig, func(c *config.Config) { c.Server.APIKeys = nil })
	big := `{"model":"chain/auto","messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`
	tests := []struct {
		name, path, body string
		status           int
		typ, code, param string
	}{
		{"invalid JSON", "/v1/chat/completions", `{"model":`, 400, "invalid_request_error", "invalid_request", ""},
		{"missing model", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "invalid_request", "model"},
		{"missing messages", "/v1/chat/completions", `{"model":"chain/auto"}`, 400, "invalid_request_error", "invalid_request", "messages"},
		{"empty messages", "/v1/chat/completions", `{"model":"chain/auto","messages":[]}`, 400, "invalid_request_error", "invalid_request", "messages"},
		{"unknown role", "/v1/chat/completions", `{"model":"chain/auto","messages":[{"role":"robot","content":"hi"}]}`, 400, "invalid_request_error", "invalid_request", "messages[0].role"},
		{"n > 1", "/v1/chat/completions", `{"model":"chain/auto","n":2,"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "invalid_request", "n"},
		{"temperature high", "/v1/chat/completions", `{"model":"chain/auto","temperature":2.5,"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "invalid_request", "temperature"},
		{"temperature negative", "/v1/chat/completions", `{"model":"chain/auto","temperature":-1,"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "invalid_request", "temperature"},
		{"top_p high", "/v1/chat/completions", `{"model":"chain/auto","top_p":1.5,"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "invalid_request", "top_p"},
		{"user message without content", "/v1/chat/completions", `{"model":"chain/auto","messages":[{"role":"user"}]}`, 400, "invalid_request_error", "invalid_request", "messages[0].content"},
		{"system message with null content", "/v1/chat/completions", `{"model":"chain/auto","messages":[{"role":"system","content":null},{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "invalid_request", "messages[0].content"},
		{"tool message without content", "/v1/chat/completions", `{"model":"chain/auto","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1"}]}`, 400, "invalid_request_error", "invalid_request", "messages[2].content"},
		{"tool message without id", "/v1/chat/completions", `{"model":"chain/auto","messages":[{"role":"user","content":"hi"},{"role":"tool","content":"x"}]}`, 400, "invalid_request_error", "invalid_request", "messages[1].tool_call_id"},
		{"image part not a URL", "/v1/chat/completions", `{"model":"chain/auto","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400, "invalid_request_error", "invalid_request", "messages[0].content[0].image_url.url"},
		{"image part not an image", "/v1/chat/completions", `{"model":"chain/auto","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:text/plain;base64,aGk="}}]}]}`, 400, "invalid_request_error", "invalid_request", "messages[0].content[0].image_url.url"},
		{"image part bad base64", "/v1/chat/completions", `{"model":"chain/auto","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,%%%%"}}]}]}`, 400, "invalid_request_error", "invalid_request", "messages[0].content[0].image_url.url"},
		{"image part in a system message", "/v1/chat/completions", `{"model":"chain/auto","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://x/a.png"}}]}]}`, 400, "invalid_request_error", "invalid_request", "messages[0].content[0]"},
		{"file part empty", "/v1/chat/completions", `{"model":"chain/auto","messages":[{"role":"user","content":[{"type":"file","file":{}}]}]}`, 400, "invalid_request_error", "invalid_request", "messages[0].content[0].file"},
		{"audio part", "/v1/chat/completions", `{"model":"chain/auto","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]}`, 400, "invalid_request_error", "invalid_request", "messages[0].content[0].type"},
		{"wrong type", "/v1/chat/completions", `{"model":"chain/auto","messages":"hi"}`, 400, "invalid_request_error", "invalid_request", "messages"},
		{"unknown model", "/v1/chat/completions", `{"model":"gpt-9","messages":[{"role":"user","content":"hi"}]}`, 404, "invalid_request_error", "model_not_found", "model"},
		{"body too large", "/v1/chat/completions", big, 413, "invalid_request_error", "request_too_large", ""},
		{"unknown path", "/v1/nope", `{}`, 404, "invalid_request_error", "not_found", ""},
		{"embeddings", "/v1/embeddings", `{"model":"x","input":"hi"}`, 404, "invalid_request_error", "not_found", ""},
		{"legacy completions", "/v1/completions", `{"model":"x","prompt":"hi"}`, 404, "invalid_request_error", "not_found", ""},
		{"chat empty message", "/chat", `{"message":""}`, 400, "invalid_request_error", "invalid_request", "message"},
		{"chat bad mode", "/chat", `{"message":"hi","mode":"turbo"}`, 400, "invalid_request_error", "invalid_request", "mode"},
		{"chat invalid JSON", "/chat", `{`, 400, "invalid_request_error", "invalid_request", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := s.post(t, tt.path, tt.body)
			body := readAll(t, resp.Body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, tt.status, body)
			}
			var e struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
					Code    *string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("body %s: %v", body, err)
			}
			oaischema.Validate(t, "ErrorResponse", body)
			param := ""
			if e.Error.Param != nil {
				param = *e.Error.Param
			}
			if e.Error.Type != tt.typ || e.Error.Code == nil || *e.Error.Code != tt.code || param != tt.param || e.Error.Message == "" {
				t.Errorf("error = %s, want type %s code %s param %q", body, tt.typ, tt.code, tt.param)
			}
		})
	}
	// The server is still up and answers.
	resp := s.post(t, "/v1/chat/completions", `{"model":"chain/simple","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 {
		t.Errorf("after bad input: status %d", resp.StatusCode)
	}
}

func TestStatusFor(t *testing.T) {
	tests := []struct {
		err    error
		status int
		code   string
	}{
		{&badRequest{param: "n", msg: "bad"}, 400, "invalid_request"},
		{&badRequest{param: "logprobs", msg: "bad", code: "unsupported_parameter"}, 400, "unsupported_parameter"},
		{fmt.Errorf("resolve: %w", chain.ErrUnknownModel), 404, "model_not_found"},
		{errUnauthorized, 401, "invalid_api_key"},
		{context.Canceled, 499, "client_closed"},
		{&node.UpstreamError{Node: "M1", Kind: node.KindConnect}, 502, "upstream_error"},
		{&node.UpstreamError{Node: "M1", Kind: node.KindStatus, Status: 500}, 502, "upstream_error"},
		{&node.UpstreamError{Node: "M1", Kind: node.KindTimeout}, 504, "upstream_timeout"},
		{&node.UpstreamError{Node: "M1", Kind: node.KindStatus, Status: 429}, 429, "upstream_rate_limited"},
		{&node.UpstreamError{Node: "M1", Kind: node.KindStatus, Status: 400}, 400, "upstream_rejected"},
		{&chain.Failure{Err: &node.UpstreamError{Node: "M1", Kind: node.KindTimeout}}, 504, "upstream_timeout"},
		{&chain.Failure{Err: chain.ErrAllStagesFailed}, 502, "chain_failed"},
		{&node.QueueFullError{Node: "OL1"}, 429, "rate_limit_exceeded"},
		{fmt.Errorf("%w: node OL1", node.ErrToolsUnsupported), 400, "tools_unsupported"},
		{&chain.PartError{Param: "messages[0].content[1]", Kind: chain.PartImage, Why: []string{"node OL1: no vision"}}, 400, "image_unsupported"},
		{&chain.PartError{Kind: chain.PartFile, Why: []string{"node OL1: Ollama takes no files"}}, 400, "file_unsupported"},
		{&chain.ContextLengthError{Node: "OL1", Window: 2048, Estimate: 5000}, 400, "context_length_exceeded"},
		{&chain.Failure{Err: &chain.ContextLengthError{Node: "OL1", Upstream: "the input length exceeds the context length"}}, 400, "context_length_exceeded"},
		{&node.UpstreamError{Node: "OL1", Kind: node.KindStatus, Status: 404, Message: "model 'x' not found"}, 502, "upstream_error"},
		{context.DeadlineExceeded, 504, "upstream_timeout"},
		{errors.New("weird"), 500, "internal_error"},
	}
	for _, tt := range tests {
		status, obj := statusFor(tt.err)
		if status != tt.status || obj.Code == nil || *obj.Code != tt.code {
			t.Errorf("statusFor(%v) = %d %v, want %d %s", tt.err, status, obj.Code, tt.status, tt.code)
		}
	}
	if _, obj := statusFor(&chain.Failure{Trace: chain.Trace{Mode: "reflexive"}, Err: chain.ErrAllStagesFailed}); obj.Chain == nil {
		t.Error("a failed chain's error must carry the trace")
	}
}

func TestAuth(t *testing.T) {
	s := newTestServer(t, testConfig, func(c *config.Config) { c.Server.APIKeys = []string{"sk-good"} })
	body := `{"model":"chain/simple","messages":[{"role":"user","content":"hi"}]}`
	for _, tt := range []struct {
		hdr    string
		status int
	}{{"", 401}, {"Bearer sk-bad", 401}, {"Bearer sk-good", 200}} {
		resp := s.post(t, "/v1/chat/completions", body, "Authorization", tt.hdr)
		if resp.StatusCode != tt.status {
			t.Errorf("Authorization %q: status %d, want %d", tt.hdr, resp.StatusCode, tt.status)
		}
	}
	// Health needs no key.
	resp, err := http.Get(s.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("healthz: %v %v", resp, err)
	}
}

// normalize blanks the values that change from run to run.
func normalize(t *testing.T, b []byte) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			for k, val := range x {
				switch k {
				case "duration_ms", "start_ms", "queue_ms", "load_ms", "generation_ms", "created", "id", "trace_id":
					x[k] = "X"
				default:
					walk(val)
				}
			}
		case []any:
			for _, val := range x {
				walk(val)
			}
		}
	}
	walk(v)
	out, _ := json.MarshalIndent(v, "", "  ")
	return append(out, '\n')
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (-want +got):\n--- want\n%s\n--- got\n%s", name, want, got)
	}
}

func TestNonStreamReflexiveGolden(t *testing.T) {
	s := newTestServer(t, testConfig)
	resp := s.post(t, "/v1/chat/completions", `{"model":"chain/reflexive","messages":[{"role":"user","content":"compare things"}]}`)
	body := readAll(t, resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	oaischema.Validate(t, "CreateChatCompletionResponse", body)
	if resp.Header.Get("X-Chain-Mode") != "reflexive" || resp.Header.Get("X-Chain-Trace-Id") == "" {
		t.Errorf("headers = %v", resp.Header)
	}
	if bytes.Contains(body, []byte("hidden M2 thoughts\"")) && bytes.Contains(body, []byte(`"content":"hidden`)) {
		t.Error("reasoning leaked into content")
	}
	golden(t, "reflexive.json.golden", normalize(t, body))

	// The trace is kept and served by id.
	tr, err := http.Get(s.URL + "/v1/chain/traces/" + resp.Header.Get("X-Chain-Trace-Id"))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Body.Close()
	var doc struct {
		Chain chain.Trace `json:"chain"`
	}
	if err := json.NewDecoder(tr.Body).Decode(&doc); err != nil || tr.StatusCode != 200 || len(doc.Chain.Stages) != 3 {
		t.Errorf("trace lookup: %d %v %+v", tr.StatusCode, err, doc)
	}
}

// sseFrames splits an SSE body into its frames.
func sseFrames(t *testing.T, body []byte) []string {
	t.Helper()
	var frames []string
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if cur.Len() > 0 {
				frames = append(frames, cur.String())
				cur.Reset()
			}
			continue
		}
		if cur.Len() > 0 {
			cur.WriteByte('\n')
		}
		cur.WriteString(line)
	}
	return frames
}

func TestStreamReflexive(t *testing.T) {
	s := newTestServer(t, testConfig)
	resp := s.post(t, "/v1/chat/completions", `{"model":"chain/reflexive","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"compare things"}]}`)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	frames := sseFrames(t, readAll(t, resp.Body))
	var comments, content []string
	var chunks []map[string]any
	sawDone := false
	for i, f := range frames {
		switch {
		case strings.HasPrefix(f, ": "):
			if len(chunks) > 0 {
				t.Errorf("comment %q after content started", f)
			}
			comments = append(comments, f)
		case f == "data: [DONE]":
			if i != len(frames)-1 {
				t.Error("[DONE] is not last")
			}
			sawDone = true
		case strings.HasPrefix(f, "data: "):
			payload := []byte(strings.TrimPrefix(f, "data: "))
			oaischema.Validate(t, "CreateChatCompletionStreamResponse", payload)
			var m map[string]any
			if err := json.Unmarshal(payload, &m); err != nil {
				t.Fatal(err)
			}
			chunks = append(chunks, m)
			if ch, _ := m["choices"].([]any); len(ch) > 0 {
				d := ch[0].(map[string]any)["delta"].(map[string]any)
				if c, ok := d["content"].(string); ok {
					content = append(content, c)
				}
				if _, ok := d["role"]; ok != (len(chunks) == 1) {
					t.Errorf("chunk %d: role present = %v; want it only in the first", len(chunks), ok)
				}
			}
		default:
			t.Errorf("unexpected frame %q", f)
		}
	}
	if !sawDone {
		t.Error("no [DONE]")
	}
	if len(comments) == 0 || !strings.Contains(strings.Join(comments, "\n"), ": stage OL1 turn 1") {
		t.Errorf("comments = %q, want stage progress", comments)
	}
	if got := strings.Join(content, ""); got != "Final answer from M2." {
		t.Errorf("streamed content %q", got)
	}
	last := chunks[len(chunks)-1]
	if _, ok := last["chain"]; !ok {
		t.Error("the last chunk before [DONE] must carry chain")
	}
	if ch := last["choices"].([]any); len(ch) != 0 || last["usage"] == nil {
		t.Errorf("last chunk = %v, want the usage chunk with empty choices", last)
	}
	prev := chunks[len(chunks)-2]["choices"].([]any)[0].(map[string]any)
	if prev["finish_reason"] != "stop" {
		t.Errorf("finish chunk = %v", prev)
	}
}

func TestStreamUpstreamFailure(t *testing.T) {
	s := newTestServer(t, testConfig)
	// In simple mode nothing has streamed when M2 fails: a proper 502.
	resp := s.post(t, "/v1/chat/completions", `{"model":"chain/simple","stream":true,"messages":[{"role":"user","content":"boom"}]}`)
	body := readAll(t, resp.Body)
	if resp.StatusCode != 502 {
		t.Fatalf("status %d body %s, want 502", resp.StatusCode, body)
	}
	oaischema.Validate(t, "ErrorResponse", body)
	if !bytes.Contains(body, []byte("M2 exploded")) || !bytes.Contains(body, []byte(`"chain"`)) {
		t.Errorf("body %s: want the node's message and the trace", body)
	}
}

func TestChatEndpoint(t *testing.T) {
	s := newTestServer(t, testConfig)
	t.Run("json", func(t *testing.T) {
		resp := s.post(t, "/chat", `{"message":"compare things","mode":"reflexive"}`)
		body := readAll(t, resp.Body)
		var out chatResponseBody
		if err := json.Unmarshal(body, &out); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%d %s %v", resp.StatusCode, body, err)
		}
		if out.Reply != "Final answer from M2." || out.Mode != "reflexive" || len(out.Chain) != 3 || len(out.ToolsUsed) != 1 || out.Turns != 4 {
			t.Errorf("response = %+v", out)
		}
		golden(t, "chat.json.golden", normalize(t, body))
	})
	t.Run("stream", func(t *testing.T) {
		resp := s.post(t, "/chat", `{"message":"compare things","stream":true}`)
		frames := sseFrames(t, readAll(t, resp.Body))
		var names []string
		var doneBody string
		for _, f := range frames {
			if strings.HasPrefix(f, ":") {
				continue
			}
			lines := strings.SplitN(f, "\n", 2)
			name := strings.TrimPrefix(lines[0], "event: ")
			if name != "delta" && (len(names) == 0 || names[len(names)-1] != name || name != "turn") {
				names = append(names, name)
			}
			if name == "done" {
				doneBody = strings.TrimPrefix(lines[1], "data: ")
			}
		}
		want := []string{"classified", "stage_start", "turn", "tool", "turn", "stage_end", "stage_start", "turn", "stage_end", "stage_start", "turn", "stage_end", "done"}
		if strings.Join(names, ",") != strings.Join(want, ",") {
			t.Errorf("events = %v\nwant %v", names, want)
		}
		var out chatResponseBody
		if err := json.Unmarshal([]byte(doneBody), &out); err != nil || out.Reply != "Final answer from M2." {
			t.Errorf("done = %s (%v)", doneBody, err)
		}
	})
}

func TestModelsAndReady(t *testing.T) {
	s := newTestServer(t, testConfig)
	resp, err := http.Get(s.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp.Body)
	resp.Body.Close()
	oaischema.Validate(t, "ListModelsResponse", body)
	for _, id := range []string{"chain/auto", "chain/simple", "chain/reflexive", `"OL1"`, `"M2"`, `"small-1"`, `"review-1"`} {
		if !bytes.Contains(body, []byte(id)) {
			t.Errorf("models lack %s: %s", id, body)
		}
	}
	resp, err = http.Get(s.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body = readAll(t, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"store":"memory"`)) || !bytes.Contains(body, []byte(`"reachable":true`)) {
		t.Errorf("readyz %d %s", resp.StatusCode, body)
	}
	resp, err = http.Get(s.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body = readAll(t, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`data-app="chain-cockpit"`)) {
		t.Errorf("GET / = %d, want the cockpit page", resp.StatusCode)
	}
}

func TestRenderDetails(t *testing.T) {
	s := newTestServer(t, testConfig)
	resp := s.post(t, "/v1/chat/completions", `{"model":"chain/reflexive","messages":[{"role":"user","content":"compare"}]}`, "X-Chain-Render", "details")
	var out chatResponse
	if err := json.Unmarshal(readAll(t, resp.Body), &out); err != nil {
		t.Fatal(err)
	}
	c := *out.Choices[0].Message.Content
	if !strings.HasPrefix(c, `<details type="tool_calls"`) || !strings.Contains(c, "<summary>OL1 ▸ 2 turns</summary>") || !strings.HasSuffix(c, "Final answer from M2.") {
		t.Errorf("content = %q", c)
	}
	// Without the header, plain content.
	resp = s.post(t, "/v1/chat/completions", `{"model":"chain/reflexive","messages":[{"role":"user","content":"compare"}]}`)
	out = chatResponse{}
	_ = json.Unmarshal(readAll(t, resp.Body), &out)
	if got := *out.Choices[0].Message.Content; got != "Final answer from M2." {
		t.Errorf("plain content = %q", got)
	}
}

func TestMetrics(t *testing.T) {
	m := NewMetrics([]string{"OL1"}, func(string) int { return 2 }, func() string { return "degraded" })
	s := newTestServer(t, testConfig)
	s.Config.Handler = New(Options{Config: s.cfg, Engine: mustEngine(t, s.cfg), Traces: s.store, Metrics: m})
	resp := s.post(t, "/v1/chat/completions", `{"model":"chain/reflexive","messages":[{"role":"user","content":"loop please"}]}`)
	readAll(t, resp.Body)
	mr, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body := string(readAll(t, mr.Body))
	mr.Body.Close()
	for _, want := range []string{
		`chainproxy_requests_total{mode="reflexive",route="/v1/chat/completions",status="200"} 1`,
		`chainproxy_stages_total{node="OL1",status="stopped_repeat"} 1`,
		`chainproxy_tool_calls_total{status="ok",tool="list_dir"} 1`,
		`chainproxy_tool_calls_total{status="blocked",tool="list_dir"} 1`,
		`chainproxy_queue_depth{node="OL1"} 2`,
		`chainproxy_store_degraded 1`,
		`chainproxy_request_duration_seconds_count{mode="reflexive",route="/v1/chat/completions"} 1`,
		`chainproxy_proxy_duration_seconds_count{mode="reflexive",route="/v1/chat/completions"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// mustEngine builds an engine over cfg's mock nodes.
func mustEngine(t testing.TB, cfg *config.Config) *chain.Engine {
	t.Helper()
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	mem := store.NewMemory(1000, 10)
	eng, err := chain.New(cfg, chain.Deps{Nodes: nodetest.Build(t, cfg, nodetest.Mocks), Tools: reg, Guard: antiloop.NewGuard(mem, cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL)})
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// TestStreamGolden pins the whole SSE transcript of a reflexive stream with
// details rendering: stage comments, the role chunk with the stage blocks,
// the content deltas, the finish chunk, the usage chunk with the trace, [DONE].
func TestStreamGolden(t *testing.T) {
	s := newTestServer(t, testConfig)
	// No keepalive ticks: the transcript must not depend on timing.
	s.Config.Handler = New(Options{Config: s.cfg, Engine: mustEngine(t, s.cfg), Traces: s.store, Keepalive: time.Hour})
	resp := s.post(t, "/v1/chat/completions", `{"model":"chain/reflexive","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"compare"}]}`, "X-Chain-Render", "details")
	var out strings.Builder
	for _, f := range sseFrames(t, readAll(t, resp.Body)) {
		if payload, ok := strings.CutPrefix(f, "data: {"); ok {
			f = "data: " + strings.TrimSpace(string(normalizeCompact(t, []byte("{"+payload))))
		}
		out.WriteString(f + "\n\n")
	}
	golden(t, "reflexive_stream.sse.golden", []byte(out.String()))
}

// normalizeCompact is normalize on one line.
func normalizeCompact(t *testing.T, b []byte) []byte {
	var v any
	if err := json.Unmarshal(normalize(t, b), &v); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSpace(buf.Bytes())
}

func mustConfig(t testing.TB, yamlText string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(yamlText))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Root = t.TempDir()
	return cfg
}

// TestHeaderNames: the names header looks up as they are are canonical, or
// the header would never be found.
func TestHeaderNames(t *testing.T) {
	for _, name := range []string{hAuthorization, hAPIKey, hOrigin, hUserAgent, hSession, hMode, hCategory, hPriority, hRender} {
		if c := http.CanonicalHeaderKey(name); c != name {
			t.Errorf("header name %q is not canonical (%q)", name, c)
		}
	}
}

// TestRequestLogLine: every request logs one line with the stable keys
// that log pipelines parse, its req_id the trace id the client got, and
// no source position.
func TestRequestLogLine(t *testing.T) {
	cfg, err := config.Parse([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Root = t.TempDir()
	buf := new(logBuffer)
	log := slog.New(slog.NewJSONHandler(buf, nil))
	srv := httptest.NewServer(New(Options{Config: cfg, Engine: mustEngine(t, cfg), Traces: store.NewMemory(100, 10), Logger: log}))
	defer srv.Close()
	for _, stream := range []bool{false, true} {
		buf.reset()
		body := fmt.Sprintf(`{"model":"M2","stream":%t,"messages":[{"role":"user","content":"hi"}]}`, stream)
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		// The line is written after the answer went out.
		for end := time.Now().Add(5 * time.Second); !strings.Contains(buf.String(), `"msg":"request"`) && time.Now().Before(end); {
			time.Sleep(5 * time.Millisecond)
		}
		var line map[string]any
		for _, l := range strings.Split(buf.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "request" {
				line = m
			}
		}
		if line == nil {
			t.Fatalf("stream %t: no request line in %s", stream, buf.String())
		}
		want := map[string]any{"level": "INFO", "req_id": resp.Header.Get("X-Chain-Trace-Id"), "route": "/v1/chat/completions", "status": float64(200), "mode": "simple", "turns": float64(1), "stages": "M2:ok"}
		for k, v := range want {
			if line[k] != v {
				t.Errorf("stream %t: %s = %v, want %v (%v)", stream, k, line[k], v, line)
			}
		}
		if _, ok := line["dur_ms"]; !ok {
			t.Errorf("stream %t: no dur_ms: %v", stream, line)
		}
		if _, ok := line["time"]; !ok {
			t.Errorf("stream %t: no time: %v", stream, line)
		}
		if _, ok := line["source"]; ok {
			t.Errorf("stream %t: a source position: %v", stream, line)
		}
	}
}

// logBuffer collects log lines that the server's goroutines write while
// the test reads them.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

// TestMissingV1: a client whose base URL lacks /v1 is told to add it, in
// OpenAI's error shape, rather than "no such endpoint".
func TestMissingV1(t *testing.T) {
	s := newTestServer(t, testConfig)
	for _, path := range []string{"/chat/completions", "/responses", "/messages"} {
		resp := s.post(t, path, `{"model":"chain/auto","messages":[{"role":"user","content":"hi"}]}`)
		var body errorBody
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		if want := "sends /v1" + path; resp.StatusCode != 404 || body.Error.Code == nil || *body.Error.Code != "not_found" || !strings.Contains(body.Error.Message, want) {
			t.Errorf("POST %s = %d %+v, want 404 not_found saying %q", path, resp.StatusCode, body.Error, want)
		}
	}
}

// TestNotServed: an endpoint of the APIs the proxy speaks that it does not
// serve gets a 404 saying so and where to go; any other path the plain one.
func TestNotServed(t *testing.T) {
	for path, want := range map[string]string{
		"/v1/embeddings":  "does not serve embeddings (/v1/embeddings)",
		"/api/embed":      "does not serve embeddings (/api/embed)",
		"/v1/completions": "use /v1/chat/completions",
		"/models":         "add /v1 to the client's base URL",
		"/api/copy":       "does not manage models (/api/copy)",
		"/api/blobs/x":    "does not manage models (/api/blobs)",
		"/v1/nope":        "no such endpoint",
		"/api/blobsx":     "no such endpoint",
	} {
		status, obj := statusFor(notServed(path))
		if status != 404 || obj.Code == nil || *obj.Code != "not_found" || !strings.Contains(obj.Message, want) {
			t.Errorf("%s: %d %+v, want 404 not_found with %q", path, status, obj, want)
		}
	}
}

// TestCockpitExamplesWithoutScenarios: the empty chat's examples, shown
// whatever the models, name none of the demo's scenarios (loop, weather,
// …), which mean something only to the -demo's scripted models; those are
// listed in the demo block alone, which the page shows only when every node
// is a mock.
func TestCockpitExamplesWithoutScenarios(t *testing.T) {
	s := newTestServer(t, testConfig)
	resp, err := http.Get(s.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page := string(readAll(t, resp.Body))
	_, examples, ok1 := strings.Cut(page, `<div class="examples">`)
	examples, demo, ok2 := strings.Cut(examples, `<div id="demo" class="demo-scenarios" hidden>`)
	if !ok1 || !ok2 {
		t.Fatal("the page has no examples, or no hidden demo block after them")
	}
	var words []string
	for rest := demo; ; {
		var ok bool
		if _, rest, ok = strings.Cut(rest, `data-scenario="`); !ok {
			break
		}
		word, _, _ := strings.Cut(rest, `"`)
		words = append(words, word)
	}
	if len(words) == 0 {
		t.Fatal("the demo block lists no scenarios")
	}
	for _, w := range words {
		if strings.Contains(examples, `data-example="`+w+`:`) {
			t.Errorf("the examples shown with real models offer the demo scenario %q", w)
		}
	}
}

// TestRejectedLogLine: a rejected request's log line carries a request
// id, whether it was refused before the chain's trace began (a wrong key,
// an unknown path, count_tokens' bad body) or after (a bad body), and two
// requests have two ids.
func TestRejectedLogLine(t *testing.T) {
	cfg := mustConfig(t, testConfig)
	cfg.Server.APIKeys = []string{"sk-right"}
	buf := new(logBuffer)
	srv := httptest.NewServer(New(Options{Config: cfg, Engine: mustEngine(t, cfg), Traces: store.NewMemory(100, 10), Logger: slog.New(slog.NewJSONHandler(buf, nil))}))
	defer srv.Close()
	seen := map[string]string{}
	for _, tc := range []struct{ name, key, path, body string }{
		{"wrong key", "sk-wrong", "/v1/chat/completions", `{}`},
		{"unknown path", "sk-right", "/v1/nope", `{}`},
		{"count_tokens bad body", "sk-right", "/v1/messages/count_tokens", `{`},
		{"chat bad body", "sk-right", "/v1/chat/completions", `{`},
	} {
		buf.reset()
		req, _ := http.NewRequest("POST", srv.URL+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer "+tc.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		var line map[string]any
		for _, l := range strings.Split(buf.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "request rejected" {
				line = m
			}
		}
		if line == nil {
			t.Fatalf("%s: no request rejected line in %s", tc.name, buf.String())
		}
		id, _ := line["req_id"].(string)
		if len(id) != 32 {
			t.Errorf("%s: req_id %q, want a request id (%v)", tc.name, id, line)
		}
		if other, ok := seen[id]; ok {
			t.Errorf("%s: req_id %q, already %s's", tc.name, id, other)
		}
		seen[id] = tc.name
	}
}
