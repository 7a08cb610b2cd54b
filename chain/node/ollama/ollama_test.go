package ollama

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ollama/ollama/api"

	"chainproxy/chain/node"
	"chainproxy/config"
	"chainproxy/internal/fakeollama"
)

func nodeAt(url string) config.Node {
	return config.Node{
		Name:           "OL1",
		Provider:       config.ProviderOllama,
		BaseURL:        url,
		Model:          "qwen3:1.7b",
		Timeout:        30 * time.Second,
		ConnectTimeout: 2 * time.Second,
	}
}

func userRequest(text string) *node.Request {
	return &node.Request{Model: "qwen3:1.7b", Messages: []node.Message{{Role: "user", Content: text}}}
}

// collect runs Chat and gathers what the caller saw.
type result struct {
	chunks    int
	content   string
	reasoning string
	calls     []node.ToolCall
	finish    string
	usage     *node.Usage
}

func collect(ctx context.Context, b node.Backend, req *node.Request) (result, error) {
	var r result
	var c, th strings.Builder
	err := b.Chat(ctx, req, func(ch node.Chunk) error {
		r.chunks++
		c.WriteString(ch.Content)
		th.WriteString(ch.Reasoning)
		if ch.ToolCalls != nil {
			r.calls = ch.ToolCalls
		}
		if ch.FinishReason != "" {
			r.finish = ch.FinishReason
			r.usage = ch.Usage
		}
		return nil
	})
	r.content, r.reasoning = c.String(), th.String()
	return r, err
}

func TestChat(t *testing.T) {
	tests := []struct {
		name          string
		reply         fakeollama.Reply
		wantContent   string
		wantReasoning string
		wantCalls     []node.ToolCall // IDs "" are checked to be generated
		wantFinish    string
		wantUsage     *node.Usage
	}{
		{
			name:        "content in pieces",
			reply:       fakeollama.Reply{Content: []string{"Hel", "lo, ", "world."}, PromptEvalCount: 12, EvalCount: 3},
			wantContent: "Hello, world.",
			wantFinish:  "stop",
			wantUsage:   &node.Usage{PromptTokens: 12, CompletionTokens: 3, TotalTokens: 15},
		},
		{
			name:          "native thinking kept apart",
			reply:         fakeollama.Reply{Thinking: []string{"Let me ", "think."}, Content: []string{"42"}},
			wantContent:   "42",
			wantReasoning: "Let me think.",
			wantFinish:    "stop",
		},
		{
			name:          "think tags split across lines",
			reply:         fakeollama.Reply{Content: []string{"<thi", "nk>\nhidden ", "plan</th", "ink>\n\nVisible", " answer"}},
			wantContent:   "Visible answer",
			wantReasoning: "hidden plan",
			wantFinish:    "stop",
		},
		{
			name:          "unclosed think is reasoning",
			reply:         fakeollama.Reply{Content: []string{"<think>never", " closed"}, DoneReason: "length"},
			wantReasoning: "never closed",
			wantFinish:    "length",
		},
		{
			name: "tool calls whole",
			reply: fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{
				{Name: "list_dir", Args: map[string]any{"path": "."}},
				{ID: "call_upstream", Name: "read_file", Args: map[string]any{"path": "a.txt", "limit": 10}},
			}},
			wantCalls: []node.ToolCall{
				{ID: "", Name: "list_dir", Arguments: `{"path":"."}`},
				{ID: "call_upstream", Name: "read_file", Arguments: `{"limit":10,"path":"a.txt"}`},
			},
			wantFinish: "tool_calls",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeollama.New(t, tc.reply)
			got, err := collect(t.Context(), New(nodeAt(srv.URL), nil), userRequest("hi"))
			if err != nil {
				t.Fatalf("Chat() error = %v", err)
			}
			if got.content != tc.wantContent {
				t.Errorf("content = %q, want %q", got.content, tc.wantContent)
			}
			if got.reasoning != tc.wantReasoning {
				t.Errorf("reasoning = %q, want %q", got.reasoning, tc.wantReasoning)
			}
			if got.finish != tc.wantFinish {
				t.Errorf("finish reason = %q, want %q", got.finish, tc.wantFinish)
			}
			if tc.wantUsage != nil && !cmp.Equal(got.usage, tc.wantUsage) {
				t.Errorf("usage = %+v, want %+v", got.usage, tc.wantUsage)
			}
			if len(got.calls) != len(tc.wantCalls) {
				t.Fatalf("tool calls = %+v, want %+v", got.calls, tc.wantCalls)
			}
			seen := map[string]bool{}
			for i, want := range tc.wantCalls {
				c := got.calls[i]
				if want.ID == "" {
					if !strings.HasPrefix(c.ID, "call_") || len(c.ID) < 20 {
						t.Errorf("call %d ID = %q, want a generated call_ ID", i, c.ID)
					}
					want.ID = c.ID
				}
				if seen[c.ID] {
					t.Errorf("call %d ID %q is not unique", i, c.ID)
				}
				seen[c.ID] = true
				if diff := cmp.Diff(want, c); diff != "" {
					t.Errorf("call %d (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

func TestChatDeliversPiecesAsTheyCome(t *testing.T) {
	srv := fakeollama.New(t, fakeollama.Reply{Thinking: []string{"a", "b"}, Content: []string{"c", "d"}})
	var got []node.Chunk
	err := New(nodeAt(srv.URL), nil).Chat(t.Context(), userRequest("hi"), func(c node.Chunk) error {
		got = append(got, c)
		return nil
	})
	if err != nil {
		t.Fatalf("Chat() error = %v", err)
	}
	want := []node.Chunk{
		{Reasoning: "a"}, {Reasoning: "b"}, {Content: "c"}, {Content: "d"},
		// The done line names the model and its load_duration (the
		// fake's microsecond: no load).
		{FinishReason: "stop", Model: "qwen3:1.7b", Load: time.Microsecond},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}
}

func TestChatRequestMapping(t *testing.T) {
	temp, topP, topK, maxTokens, seed := 0.0, 0.9, 40, 64, int64(7)
	req := &node.Request{
		Model: "qwen3:1.7b",
		Messages: []node.Message{
			{Role: "developer", Content: "Be brief."},
			{Role: "user", Content: "List the folder."},
			{Role: "assistant", Reasoning: "I should list.", ToolCalls: []node.ToolCall{
				{ID: "call_1", Name: "list_dir", Arguments: `{"path":".","deep":false}`},
				{ID: "call_2", Name: "read_file", Arguments: `{not json`},
			}},
			{Role: "tool", ToolCallID: "call_1", Content: "a.txt"},
			{Role: "tool", ToolCallID: "call_2", Name: "read_file", Content: "error"},
		},
		Tools: []node.Tool{{
			Name:        "list_dir",
			Description: "List a folder.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"folder"}},"required":["path"]}`),
		}, {
			Name: "now",
		}},
		Params: node.Params{Temperature: &temp, TopP: &topP, TopK: &topK, MaxTokens: &maxTokens, Stop: []string{"END"}, Seed: &seed},
	}
	srv := fakeollama.New(t)
	if _, err := collect(t.Context(), New(nodeAt(srv.URL), nil), req); err != nil {
		t.Fatalf("Chat() error = %v", err)
	}
	bodies := srv.Bodies()
	if len(bodies) != 1 {
		t.Fatalf("upstream calls = %d, want 1", len(bodies))
	}
	want := map[string]any{
		"model":  "qwen3:1.7b",
		"stream": true,
		// An overflow must be an error the proxy sees, never a silent cut.
		"truncate": false,
		// Nor may the answer push the prompt out of the window.
		"shift": false,
		"messages": []any{
			map[string]any{"role": "system", "content": "Be brief."},
			map[string]any{"role": "user", "content": "List the folder."},
			map[string]any{"role": "assistant", "content": "", "thinking": "I should list.", "tool_calls": []any{
				map[string]any{"id": "call_1", "function": map[string]any{"index": 0.0, "name": "list_dir", "arguments": map[string]any{"path": ".", "deep": false}}},
				map[string]any{"id": "call_2", "function": map[string]any{"index": 1.0, "name": "read_file", "arguments": map[string]any{}}},
			}},
			map[string]any{"role": "tool", "content": "a.txt", "tool_call_id": "call_1", "tool_name": "list_dir"},
			map[string]any{"role": "tool", "content": "error", "tool_call_id": "call_2", "tool_name": "read_file"},
		},
		"tools": []any{
			map[string]any{"type": "function", "function": map[string]any{
				"name": "list_dir", "description": "List a folder.",
				"parameters": map[string]any{
					"type":       "object",
					"required":   []any{"path"},
					"properties": map[string]any{"path": map[string]any{"type": "string", "description": "folder"}},
				},
			}},
			map[string]any{"type": "function", "function": map[string]any{
				"name":       "now",
				"parameters": map[string]any{"type": "object", "properties": map[string]any{}},
			}},
		},
		"options": map[string]any{"temperature": 0.0, "top_p": 0.9, "top_k": 40.0, "num_predict": 64.0, "stop": []any{"END"}, "seed": 7.0},
	}
	if diff := cmp.Diff(want, bodies[0]); diff != "" {
		t.Errorf("upstream request (-want +got):\n%s", diff)
	}
}

func TestChatWithoutParamsSendsNoOptions(t *testing.T) {
	srv := fakeollama.New(t)
	if _, err := collect(t.Context(), New(nodeAt(srv.URL), nil), userRequest("hi")); err != nil {
		t.Fatalf("Chat() error = %v", err)
	}
	if opts := srv.Bodies()[0]["options"]; opts != nil {
		t.Errorf("options = %v, want null (model defaults)", opts)
	}
	if think, ok := srv.Bodies()[0]["think"]; ok {
		t.Errorf("think = %v, want unset (model default)", think)
	}
}

func TestToArguments(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"b":1,"a":{"c":[1,2]}}`, `{"b":1,"a":{"c":[1,2]}}`},
		{` {"path":"."} `, `{"path":"."}`},
		{`{}`, `{}`},
		{``, `{}`},
		{`null`, `{}`},
		{`[1,2]`, `{}`},
		{`"path"`, `{}`},
		{`{"path":`, `{}`},
	}
	for _, tc := range tests {
		args := ToArguments(tc.in)
		got, err := json.Marshal(args)
		if err != nil {
			t.Fatalf("Marshal(ToArguments(%q)) error = %v", tc.in, err)
		}
		if string(got) != tc.want {
			t.Errorf("ToArguments(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestToChatRequestBadToolSchema(t *testing.T) {
	req := userRequest("hi")
	req.Tools = []node.Tool{{Name: "x", Parameters: json.RawMessage(`{"type":5}`)}}
	if _, err := ToChatRequest(req); err == nil {
		t.Errorf("ToChatRequest(tool with bad schema) error = nil, want an error")
	}
}

func TestChatErrors(t *testing.T) {
	tests := []struct {
		name       string
		reply      fakeollama.Reply
		wantKind   string
		wantStatus int
		wantMsg    string
	}{
		{"http status", fakeollama.Reply{Status: http.StatusNotFound, Error: `model "nope" not found, try pulling it first`}, node.KindStatus, 404, `model "nope" not found`},
		{"server error", fakeollama.Reply{Status: http.StatusInternalServerError, Error: "boom"}, node.KindStatus, 500, "boom"},
		{"mid-stream error line", fakeollama.Reply{Content: []string{"par", "tial"}, Error: "runner crashed"}, node.KindProtocol, 0, "runner crashed"},
		{"stream cut", fakeollama.Reply{Content: []string{"par", "tial"}, Cut: true}, node.KindProtocol, 0, "unexpected EOF"},
		// Ended cleanly without a done line: Ollama's token repeat limit.
		{"stream ended early", fakeollama.Reply{Content: []string{"{", "\n\n\n"}, EndEarly: true}, node.KindProtocol, 0, "token repeat limit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeollama.New(t, tc.reply)
			_, err := collect(t.Context(), New(nodeAt(srv.URL), nil), userRequest("hi"))
			var ue *node.UpstreamError
			if !errors.As(err, &ue) {
				t.Fatalf("Chat() error = %v, want an *node.UpstreamError", err)
			}
			if ue.Node != "OL1" || ue.Kind != tc.wantKind || ue.Status != tc.wantStatus {
				t.Errorf("Chat() error = {Node:%q Kind:%q Status:%d}, want {OL1 %q %d}", ue.Node, ue.Kind, ue.Status, tc.wantKind, tc.wantStatus)
			}
			if !strings.Contains(ue.Error(), tc.wantMsg) {
				t.Errorf("Chat() error = %q, want it to contain %q", ue.Error(), tc.wantMsg)
			}
		})
	}
}

// closedURL returns the URL of a loopback port that nothing listens on.
func closedURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

func TestChatConnectionRefused(t *testing.T) {
	b := New(nodeAt(closedURL(t)), nil)
	_, err := collect(t.Context(), b, userRequest("hi"))
	var ue *node.UpstreamError
	if !errors.As(err, &ue) || ue.Kind != node.KindConnect || !ue.Offline() {
		t.Fatalf("Chat() error = %v, want an offline UpstreamError of kind %q", err, node.KindConnect)
	}
	if err := b.Probe(t.Context()); !errors.As(err, &ue) || ue.Kind != node.KindConnect {
		t.Errorf("Probe() error = %v, want kind %q", err, node.KindConnect)
	}
}

func TestChatCancel(t *testing.T) {
	srv := fakeollama.New(t, fakeollama.Reply{Content: []string{"started"}, Hang: true})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	err := New(nodeAt(srv.URL), nil).Chat(ctx, userRequest("hi"), func(c node.Chunk) error {
		if c.Content == "started" {
			cancel() // the client goes away mid-stream
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Chat() error = %v, want context.Canceled", err)
	}
	var ue *node.UpstreamError
	if errors.As(err, &ue) {
		t.Errorf("Chat() error = %v, a cancellation must not be blamed on the node", err)
	}
	select {
	case <-srv.Canceled():
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream never saw the cancellation")
	}
}

func TestChatCancelBeforeHeaders(t *testing.T) {
	srv := fakeollama.New(t, fakeollama.Reply{Hang: true})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		errc <- New(nodeAt(srv.URL), nil).Chat(ctx, userRequest("hi"), func(node.Chunk) error { return nil })
	}()
	<-srv.Hanging() // the upstream holds the request, no header sent yet
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Chat() error = %v, want context.Canceled", err)
	}
	<-srv.Canceled()
}

func TestChatNodeTimeout(t *testing.T) {
	srv := fakeollama.New(t, fakeollama.Reply{Content: []string{"slow"}, Hang: true})
	n := nodeAt(srv.URL)
	n.Timeout = 100 * time.Millisecond
	_, err := collect(t.Context(), New(n, nil), userRequest("hi"))
	var ue *node.UpstreamError
	if !errors.As(err, &ue) || ue.Kind != node.KindTimeout {
		t.Fatalf("Chat() error = %v, want kind %q", err, node.KindTimeout)
	}
}

func TestChatConsumerErrorStops(t *testing.T) {
	srv := fakeollama.New(t, fakeollama.Reply{Content: []string{"a", "b", "c"}})
	stop := errors.New("enough")
	calls := 0
	err := New(nodeAt(srv.URL), nil).Chat(t.Context(), userRequest("hi"), func(node.Chunk) error {
		calls++
		return stop
	})
	if err != stop {
		t.Errorf("Chat() error = %v, want the callback's error unchanged", err)
	}
	if calls != 1 {
		t.Errorf("callback ran %d times after returning an error, want 1", calls)
	}
}

func TestChatStreamWithoutDone(t *testing.T) {
	// A body that ends cleanly but early is no success either.
	body := `{"model":"m","message":{"role":"assistant","content":"half"},"done":false}` + "\n"
	b := New(nodeAt("http://ollama.invalid"), &http.Client{Transport: memTransport(body)})
	_, err := collect(t.Context(), b, userRequest("hi"))
	var ue *node.UpstreamError
	if !errors.As(err, &ue) || ue.Kind != node.KindProtocol {
		t.Errorf("Chat() error = %v, want a protocol error", err)
	}
}

func TestChatReusesConnection(t *testing.T) {
	// Sequential calls share one connection: the end of each stream is
	// read, so the connection goes back to the pool.
	// The delay has the client wait for each line, as with a real model, so
	// that it has not yet seen the end of the body when the last line comes.
	srv := fakeollama.New(t, fakeollama.Reply{Content: []string{"a", "b"}, Delay: time.Millisecond})
	b := New(nodeAt(srv.URL), nil)
	for range 3 {
		if _, err := collect(t.Context(), b, userRequest("hi")); err != nil {
			t.Fatalf("Chat() error = %v", err)
		}
	}
	if got := srv.Conns(); got != 1 {
		t.Errorf("connections for 3 sequential calls = %d, want 1", got)
	}
}

func TestChatConcurrent(t *testing.T) {
	// One backend serves every request to its node at once.
	srv := fakeollama.New(t, fakeollama.Reply{Content: []string{"<think>x</think>", "a", "b"}})
	b := New(nodeAt(srv.URL), nil)
	const n = 8
	errc := make(chan error, n)
	for range n {
		go func() { // exits when Chat returns
			got, err := collect(t.Context(), b, userRequest("hi"))
			if err == nil && (got.content != "ab" || got.reasoning != "x") {
				err = fmt.Errorf("content %q, reasoning %q; want %q, %q", got.content, got.reasoning, "ab", "x")
			}
			errc <- err
		}()
	}
	for range n {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
}

func TestProbe(t *testing.T) {
	srv := fakeollama.New(t)
	b := New(nodeAt(srv.URL), nil)
	if err := b.Probe(t.Context()); err != nil {
		t.Errorf("Probe() error = %v, want nil", err)
	}
	srv.SetVersionStatus(http.StatusServiceUnavailable)
	err := b.Probe(t.Context())
	var ue *node.UpstreamError
	if !errors.As(err, &ue) || ue.Kind != node.KindStatus || ue.Status != http.StatusServiceUnavailable {
		t.Errorf("Probe() error = %v, want a status error 503", err)
	}
}

func TestBadBaseURL(t *testing.T) {
	b := New(nodeAt("http://[::1"), nil)
	if err := b.Chat(t.Context(), userRequest("hi"), func(node.Chunk) error { return nil }); err == nil {
		t.Errorf("Chat() with a bad base URL error = nil, want an error")
	}
	if err := b.Probe(t.Context()); err == nil {
		t.Errorf("Probe() with a bad base URL error = nil, want an error")
	}
}

// memTransport answers every request with the same body, so that a
// benchmark measures parsing and translation, not the loopback.
type memTransport []byte

func (m memTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"application/x-ndjson"}},
		Body:       io.NopCloser(bytes.NewReader(m)),
		Request:    r,
	}, nil
}

// BenchmarkChatNDJSON streams a 20-line NDJSON answer through the backend.
func BenchmarkChatNDJSON(b *testing.B) {
	var body bytes.Buffer
	for i := range 20 {
		line := api.ChatResponse{Model: "m", CreatedAt: time.Now().UTC(), Message: api.Message{Role: "assistant", Content: "token" + string(rune('a'+i)) + " "}}
		json.NewEncoder(&body).Encode(line)
	}
	json.NewEncoder(&body).Encode(api.ChatResponse{Model: "m", Done: true, DoneReason: "stop", Metrics: api.Metrics{PromptEvalCount: 10, EvalCount: 20}})
	be := New(nodeAt("http://ollama.invalid"), &http.Client{Transport: memTransport(body.Bytes())})
	req := userRequest("hi")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		if err := be.Chat(ctx, req, func(node.Chunk) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
		if n != 21 {
			b.Fatalf("chunks = %d, want 21", n)
		}
	}
}

// BenchmarkStreamAdd is the per-line translation alone.
func BenchmarkStreamAdd(b *testing.B) {
	line := api.ChatResponse{Model: "m", Message: api.Message{Role: "assistant", Content: "token "}}
	b.ReportAllocs()
	for b.Loop() {
		var s Stream
		for range 20 {
			s.Add(&line)
		}
	}
}

// TestStreamMaxArgs: a whole tool call's arguments are kept up to
// MaxArgs+1 bytes, so that one over the cap is known by its length.
func TestStreamMaxArgs(t *testing.T) {
	for _, tc := range []struct {
		maxArgs int
		want    string
	}{
		{0, `{"a":"0123456789"}`},
		{18, `{"a":"0123456789"}`},
		{8, `{"a":"012`},
	} {
		s := Stream{MaxArgs: tc.maxArgs}
		c := s.Add(&api.ChatResponse{Done: true, Message: api.Message{ToolCalls: []api.ToolCall{
			{Function: api.ToolCallFunction{Name: "f", Arguments: ToArguments(`{"a":"0123456789"}`)}},
		}}})
		if len(c.ToolCalls) != 1 || c.ToolCalls[0].Arguments != tc.want {
			t.Errorf("MaxArgs %d: calls %+v, want arguments %q", tc.maxArgs, c.ToolCalls, tc.want)
		}
	}
}

// TestToChatRequestImages: an image goes as its bytes in images; what
// Ollama cannot take (a URL, a file) is an error, never sent.
func TestToChatRequestImages(t *testing.T) {
	req := &node.Request{Model: "llava", Messages: []node.Message{{Role: "user", Content: "what?", Parts: []node.Part{{Kind: node.PartImage, Data: "aGk=", MediaType: "image/png"}}}}}
	got, err := ToChatRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	if m := got.Messages[0]; m.Content != "what?" || len(m.Images) != 1 || string(m.Images[0]) != "hi" {
		t.Errorf("message %+v", m)
	}
	for _, p := range []node.Part{{Kind: node.PartImage, URL: "https://x/a.png", Param: "messages[0].content[1]"}, {Kind: node.PartFile, FileID: "f"}} {
		req.Messages[0].Parts = []node.Part{p}
		if _, err := ToChatRequest(req); err == nil || !strings.Contains(err.Error(), "Ollama takes images as bytes only") {
			t.Errorf("ToChatRequest(%+v) error = %v", p, err)
		}
	}
}

// TestStreamNamesCountAsCalls: a hostile server's tool calls cost the proxy
// no more than MaxCallsBytes, however long their names and IDs.
func TestStreamNamesCountAsCalls(t *testing.T) {
	const limit = 4 << 10
	long := strings.Repeat("n", 1<<10)
	s := Stream{MaxCallsBytes: limit}
	for i := range 64 {
		s.Add(&api.ChatResponse{Message: api.Message{ToolCalls: []api.ToolCall{
			{ID: fmt.Sprintf("%s%d", long, i), Function: api.ToolCallFunction{Name: long, Arguments: ToArguments(`{}`)}},
		}}})
	}
	c := s.Add(&api.ChatResponse{Done: true})
	held := 0
	for _, tc := range c.ToolCalls {
		held += len(tc.ID) + len(tc.Name) + len(tc.Arguments)
	}
	if held > limit {
		t.Errorf("calls hold %d bytes, want at most %d", held, limit)
	}
}

// TestChatReadsLoadDuration: the done line's load_duration, in nanoseconds
// as Ollama writes it, is the last chunk's Load. The lines are Ollama
// v0.17.4's, from a tiny model: loading it, then finding it loaded.
func TestChatReadsLoadDuration(t *testing.T) {
	tests := []struct {
		name, done string
		want       time.Duration
	}{
		{"a load", `"total_duration":378400000,"load_duration":299012345,"prompt_eval_count":10,"prompt_eval_duration":36100000,"eval_count":3,"eval_duration":39800000`, 299012345},
		{"loaded already", `"total_duration":20800000,"load_duration":5712000,"prompt_eval_count":10,"prompt_eval_duration":6200000,"eval_count":3,"eval_duration":5500000`, 5712 * time.Microsecond},
		{"none reported", `"eval_count":3`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/x-ndjson")
				fmt.Fprintln(w, `{"model":"qwen3:1.7b","created_at":"2026-11-28T20:00:00Z","message":{"role":"assistant","content":"hi"},"done":false}`)
				fmt.Fprintln(w, `{"model":"qwen3:1.7b","created_at":"2026-11-28T20:00:00Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop",`+tt.done+`}`)
			}))
			defer srv.Close()
			var got time.Duration
			err := New(nodeAt(srv.URL), nil).Chat(t.Context(), userRequest("hi"), func(c node.Chunk) error {
				if c.FinishReason != "" {
					got = c.Load
				}
				return nil
			})
			if err != nil {
				t.Fatalf("Chat() error = %v", err)
			}
			if got != tt.want {
				t.Errorf("last chunk's Load = %v, want %v", got, tt.want)
			}
		})
	}
}
