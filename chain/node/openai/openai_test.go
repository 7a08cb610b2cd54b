package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"chainproxy/chain/node"
	"chainproxy/config"
	"chainproxy/internal/fakeopenai"
	"chainproxy/internal/oaischema"
)

func nodeAt(baseURL string) config.Node {
	return config.Node{
		Name:           "M2",
		Provider:       config.ProviderOpenAI,
		BaseURL:        baseURL,
		Model:          "deepseek-coder-v2",
		APIKey:         "sk-test",
		Timeout:        30 * time.Second,
		ConnectTimeout: 2 * time.Second,
	}
}

func userRequest(text string) *node.Request {
	return &node.Request{Model: "deepseek-coder-v2", Messages: []node.Message{{Role: "user", Content: text}}}
}

type result struct {
	chunks    []node.Chunk
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
		r.chunks = append(r.chunks, ch)
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
		reply         fakeopenai.Reply
		wantContent   string
		wantReasoning string
		wantCalls     []node.ToolCall
		wantFinish    string
		wantUsage     *node.Usage
	}{
		{
			name:        "content in pieces with usage",
			reply:       fakeopenai.Reply{Content: []string{"Hel", "lo, ", "world."}, PromptTokens: 9, CompletionTokens: 4},
			wantContent: "Hello, world.",
			wantFinish:  "stop",
			wantUsage:   &node.Usage{PromptTokens: 9, CompletionTokens: 4, TotalTokens: 13},
		},
		{
			name:          "reasoning_content kept apart",
			reply:         fakeopenai.Reply{Reasoning: []string{"Let me ", "think."}, Content: []string{"42"}},
			wantContent:   "42",
			wantReasoning: "Let me think.",
			wantFinish:    "stop",
		},
		{
			name:          "reasoning field kept apart",
			reply:         fakeopenai.Reply{Reasoning: []string{"hmm"}, ReasoningField: "reasoning", Content: []string{"ok"}},
			wantContent:   "ok",
			wantReasoning: "hmm",
			wantFinish:    "stop",
		},
		{
			name:          "think tags split across chunks",
			reply:         fakeopenai.Reply{Content: []string{"<", "think>pl", "an</thi", "nk>\n\nAnswer", "."}},
			wantContent:   "Answer.",
			wantReasoning: "plan",
			wantFinish:    "stop",
		},
		{
			name:        "length",
			reply:       fakeopenai.Reply{Content: []string{"trunc"}, FinishReason: "length"},
			wantContent: "trunc",
			wantFinish:  "length",
		},
		{
			name: "tool call fragments",
			reply: fakeopenai.Reply{
				ToolCalls: []fakeopenai.ToolCall{{ID: "call_abc", Name: "list_dir", Arguments: `{"path":"."}`}},
				Fragments: 5,
			},
			wantCalls:  []node.ToolCall{{ID: "call_abc", Name: "list_dir", Arguments: `{"path":"."}`}},
			wantFinish: "tool_calls",
		},
		{
			name: "two parallel calls interleaved",
			reply: fakeopenai.Reply{
				ToolCalls: []fakeopenai.ToolCall{
					{ID: "call_a", Name: "read_file", Arguments: `{"path":"a.txt"}`},
					{ID: "call_b", Name: "search_files", Arguments: `{"pattern":"TODO","path":"src"}`},
				},
				Interleave: true,
				Fragments:  4,
			},
			wantCalls: []node.ToolCall{
				{ID: "call_a", Name: "read_file", Arguments: `{"path":"a.txt"}`},
				{ID: "call_b", Name: "search_files", Arguments: `{"pattern":"TODO","path":"src"}`},
			},
			wantFinish: "tool_calls",
		},
		{
			name: "invalid arguments passed as written",
			reply: fakeopenai.Reply{
				ToolCalls: []fakeopenai.ToolCall{{ID: "call_x", Name: "list_dir", Arguments: `{"path":`}},
			},
			wantCalls:  []node.ToolCall{{ID: "call_x", Name: "list_dir", Arguments: `{"path":`}},
			wantFinish: "tool_calls",
		},
		{
			name: "tool calls whatever the finish reason says",
			reply: fakeopenai.Reply{
				Content:      []string{"Let me look."},
				ToolCalls:    []fakeopenai.ToolCall{{ID: "call_1", Name: "list_dir", Arguments: `{}`}},
				FinishReason: "stop",
			},
			wantContent: "Let me look.",
			wantCalls:   []node.ToolCall{{ID: "call_1", Name: "list_dir", Arguments: `{}`}},
			wantFinish:  "tool_calls",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeopenai.New(t, tc.reply)
			got, err := collect(t.Context(), New(nodeAt(srv.BaseURL()), nil), userRequest("hi"))
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
			if diff := cmp.Diff(tc.wantCalls, got.calls); diff != "" {
				t.Errorf("tool calls (-want +got):\n%s", diff)
			}
			for i, c := range got.chunks {
				if strings.Contains(c.Content, "think>") {
					t.Errorf("chunk %d content %q leaks a think tag", i, c.Content)
				}
			}
		})
	}
}

func TestChatDeliversPiecesAsTheyCome(t *testing.T) {
	srv := fakeopenai.New(t, fakeopenai.Reply{
		Reasoning: []string{"a", "b"}, Content: []string{"c", "d"},
		ToolCalls: []fakeopenai.ToolCall{{ID: "call_1", Name: "f", Arguments: `{"x":1}`}},
	})
	got, err := collect(t.Context(), New(nodeAt(srv.BaseURL()), nil), userRequest("hi"))
	if err != nil {
		t.Fatalf("Chat() error = %v", err)
	}
	want := []node.Chunk{
		{Reasoning: "a"}, {Reasoning: "b"}, {Content: "c"}, {Content: "d"},
		{
			ToolCalls:    []node.ToolCall{{ID: "call_1", Name: "f", Arguments: `{"x":1}`}},
			FinishReason: "tool_calls",
			Usage:        &node.Usage{},
			Model:        "deepseek-coder-v2", // as the upstream names it
		},
	}
	if diff := cmp.Diff(want, got.chunks); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}
}

func TestChatRequestMapping(t *testing.T) {
	temp, topP, maxTokens, seed := 0.0, 0.5, 128, int64(42)
	req := &node.Request{
		Model: "deepseek-coder-v2",
		Messages: []node.Message{
			{Role: "developer", Content: "Be brief."},
			{Role: "user", Content: "List the folder."},
			{Role: "assistant", Reasoning: "hidden", ToolCalls: []node.ToolCall{
				{ID: "call_1", Name: "list_dir", Arguments: `{"path":"."}`},
			}},
			{Role: "tool", ToolCallID: "call_1", Name: "list_dir", Content: "a.txt"},
			// An empty result is still sent: OpenAI requires the content.
			{Role: "tool", ToolCallID: "call_2", Name: "list_dir", Content: ""},
		},
		Tools: []node.Tool{
			{Name: "list_dir", Description: "List a folder.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
			{Name: "now"},
		},
		Params: node.Params{Temperature: &temp, TopP: &topP, MaxTokens: &maxTokens, Stop: []string{"END", "STOP"}, Seed: &seed},
	}
	srv := fakeopenai.New(t)
	if _, err := collect(t.Context(), New(nodeAt(srv.BaseURL()), nil), req); err != nil {
		t.Fatalf("Chat() error = %v", err)
	}
	bodies := srv.Bodies()
	if len(bodies) != 1 {
		t.Fatalf("upstream calls = %d, want 1", len(bodies))
	}
	got := bodies[0]
	raw, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	oaischema.Validate(t, "CreateChatCompletionRequest", raw)
	want := map[string]any{
		"model":          "deepseek-coder-v2",
		"stream":         true,
		"stream_options": map[string]any{"include_usage": true},
		"messages": []any{
			map[string]any{"role": "system", "content": "Be brief."},
			map[string]any{"role": "user", "content": "List the folder."},
			map[string]any{"role": "assistant", "tool_calls": []any{
				map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "list_dir", "arguments": `{"path":"."}`}},
			}},
			map[string]any{"role": "tool", "content": "a.txt", "tool_call_id": "call_1"},
			map[string]any{"role": "tool", "content": "", "tool_call_id": "call_2"},
		},
		"tools": []any{
			map[string]any{"type": "function", "function": map[string]any{
				"name": "list_dir", "description": "List a folder.",
				"parameters": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}, "required": []any{"path"}},
			}},
			map[string]any{"type": "function", "function": map[string]any{
				"name": "now", "parameters": map[string]any{"type": "object", "properties": map[string]any{}},
			}},
		},
		"temperature": 0.0, // sent as is, zero included
		"top_p":       0.5,
		"max_tokens":  128.0,
		"stop":        []any{"END", "STOP"},
		"seed":        42.0,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("upstream request (-want +got):\n%s", diff)
	}
	if auth := srv.Headers()[0].Get("Authorization"); auth != "Bearer sk-test" {
		t.Errorf("Authorization = %q, want %q", auth, "Bearer sk-test")
	}
}

func TestChatNoAPIKeyNoAuthorization(t *testing.T) {
	srv := fakeopenai.New(t)
	n := nodeAt(srv.BaseURL())
	n.APIKey = ""
	if _, err := collect(t.Context(), New(n, nil), userRequest("hi")); err != nil {
		t.Fatalf("Chat() error = %v", err)
	}
	if auth := srv.Headers()[0].Get("Authorization"); auth != "" {
		t.Errorf("Authorization = %q, want none", auth)
	}
}

func TestChatRetriesWithoutStreamOptions(t *testing.T) {
	srv := fakeopenai.New(t, fakeopenai.Reply{Content: []string{"first"}}, fakeopenai.Reply{Content: []string{"second"}})
	srv.RejectStreamOptions(true)
	b := New(nodeAt(srv.BaseURL()), nil)
	for _, want := range []string{"first", "second"} {
		got, err := collect(t.Context(), b, userRequest("hi"))
		if err != nil {
			t.Fatalf("Chat() error = %v", err)
		}
		if got.content != want {
			t.Errorf("content = %q, want %q", got.content, want)
		}
	}
	var withOptions []bool
	for _, body := range srv.Bodies() {
		withOptions = append(withOptions, body["stream_options"] != nil)
	}
	// Refused once, retried without, and not sent again afterwards.
	if want := []bool{true, false, false}; !cmp.Equal(withOptions, want) {
		t.Errorf("stream_options sent per upstream call = %v, want %v", withOptions, want)
	}
}

func TestChatErrors(t *testing.T) {
	tests := []struct {
		name       string
		reply      fakeopenai.Reply
		wantKind   string
		wantStatus int
		wantMsg    string
	}{
		{"not found", fakeopenai.Reply{Status: 404, Error: "The model `nope` does not exist", ErrorCode: "model_not_found"}, node.KindStatus, 404, "does not exist"},
		{"server error", fakeopenai.Reply{Status: 500, Error: "boom"}, node.KindStatus, 500, "boom"},
		{"rate limited", fakeopenai.Reply{Status: 429, Error: "slow down", ErrorType: "rate_limit_exceeded"}, node.KindStatus, 429, "slow down"},
		{"mid-stream error event", fakeopenai.Reply{Content: []string{"par"}, StreamError: "overloaded"}, node.KindProtocol, 0, "overloaded"},
		{"stream cut", fakeopenai.Reply{Content: []string{"par", "tial"}, Cut: true}, node.KindProtocol, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeopenai.New(t, tc.reply)
			_, err := collect(t.Context(), New(nodeAt(srv.BaseURL()), nil), userRequest("hi"))
			var ue *node.UpstreamError
			if !errors.As(err, &ue) {
				t.Fatalf("Chat() error = %v, want an *node.UpstreamError", err)
			}
			if ue.Node != "M2" || ue.Kind != tc.wantKind || ue.Status != tc.wantStatus {
				t.Errorf("Chat() error = {Node:%q Kind:%q Status:%d}, want {M2 %q %d}", ue.Node, ue.Kind, ue.Status, tc.wantKind, tc.wantStatus)
			}
			if !strings.Contains(ue.Error(), tc.wantMsg) {
				t.Errorf("Chat() error = %q, want it to contain %q", ue.Error(), tc.wantMsg)
			}
		})
	}
}

func TestChatNonJSONErrorBody(t *testing.T) {
	b := New(nodeAt("http://upstream.invalid/v1"), &http.Client{Transport: memTransport{status: 502, body: "<html>Bad Gateway</html>"}})
	_, err := collect(t.Context(), b, userRequest("hi"))
	var ue *node.UpstreamError
	if !errors.As(err, &ue) || ue.Kind != node.KindStatus || ue.Status != 502 || !strings.Contains(ue.Message, "Bad Gateway") {
		t.Errorf("Chat() error = %#v, want a status error 502 with the body", err)
	}
}

func TestChatStreamWithoutFinish(t *testing.T) {
	// A body that ends cleanly, even with [DONE], but never said why it
	// finished is no success: the answer may be cut.
	body := `data: {"choices":[{"index":0,"delta":{"content":"half"}}]}` + "\n\n" + "data: [DONE]\n\n"
	b := New(nodeAt("http://upstream.invalid/v1"), &http.Client{Transport: memTransport{body: body}})
	_, err := collect(t.Context(), b, userRequest("hi"))
	var ue *node.UpstreamError
	if !errors.As(err, &ue) || ue.Kind != node.KindProtocol {
		t.Errorf("Chat() error = %v, want a protocol error", err)
	}
}

func TestChatMalformedChunk(t *testing.T) {
	body := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\ndata: {not json\n\n"
	b := New(nodeAt("http://upstream.invalid/v1"), &http.Client{Transport: memTransport{body: body}})
	_, err := collect(t.Context(), b, userRequest("hi"))
	var ue *node.UpstreamError
	if !errors.As(err, &ue) || ue.Kind != node.KindProtocol {
		t.Errorf("Chat() error = %v, want a protocol error", err)
	}
}

func closedURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/v1"
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
	srv := fakeopenai.New(t, fakeopenai.Reply{Content: []string{"started"}, Hang: true})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	err := New(nodeAt(srv.BaseURL()), nil).Chat(ctx, userRequest("hi"), func(c node.Chunk) error {
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

func TestChatNodeTimeout(t *testing.T) {
	srv := fakeopenai.New(t, fakeopenai.Reply{Content: []string{"slow"}, Hang: true})
	n := nodeAt(srv.BaseURL())
	n.Timeout = 100 * time.Millisecond
	_, err := collect(t.Context(), New(n, nil), userRequest("hi"))
	var ue *node.UpstreamError
	if !errors.As(err, &ue) || ue.Kind != node.KindTimeout {
		t.Fatalf("Chat() error = %v, want kind %q", err, node.KindTimeout)
	}
}

func TestChatConsumerErrorStops(t *testing.T) {
	srv := fakeopenai.New(t, fakeopenai.Reply{Content: []string{"a", "b", "c"}})
	stop := errors.New("enough")
	calls := 0
	err := New(nodeAt(srv.BaseURL()), nil).Chat(t.Context(), userRequest("hi"), func(node.Chunk) error {
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

func TestChatReusesConnection(t *testing.T) {
	// Sequential calls share one connection: the end of each stream is
	// read, so the connection goes back to the pool.
	// The delay has the client wait for each line, as with a real model, so
	// that it has not yet seen the end of the body when the last line comes.
	srv := fakeopenai.New(t, fakeopenai.Reply{Content: []string{"a", "b"}, Delay: time.Millisecond})
	b := New(nodeAt(srv.BaseURL()), nil)
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
	srv := fakeopenai.New(t, fakeopenai.Reply{Content: []string{"<think>x</think>", "a", "b"}})
	b := New(nodeAt(srv.BaseURL()), nil)
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
	srv := fakeopenai.New(t)
	b := New(nodeAt(srv.BaseURL()), nil)
	if err := b.Probe(t.Context()); err != nil {
		t.Errorf("Probe() error = %v, want nil", err)
	}
	srv.SetModelsStatus(http.StatusUnauthorized)
	err := b.Probe(t.Context())
	var ue *node.UpstreamError
	if !errors.As(err, &ue) || ue.Kind != node.KindStatus || ue.Status != http.StatusUnauthorized {
		t.Errorf("Probe() error = %v, want a status error 401", err)
	}
}

func TestStreamToolCallsWithoutIndex(t *testing.T) {
	// Some servers leave out "index": fragments follow their ID, or the
	// call before them.
	events := []string{
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_a","type":"function","function":{"name":"f","arguments":""}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"{\"a\":"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"1}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_b","type":"function","function":{"name":"g","arguments":"{}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	}
	var s Stream
	for _, e := range events {
		if _, err := s.Add([]byte(e)); err != nil {
			t.Fatalf("Add(%s) error = %v", e, err)
		}
	}
	last, ok := s.Finish()
	if !ok {
		t.Fatal("Finish() = false, want true")
	}
	want := []node.ToolCall{{ID: "call_a", Name: "f", Arguments: `{"a":1}`}, {ID: "call_b", Name: "g", Arguments: `{}`}}
	if diff := cmp.Diff(want, last.ToolCalls); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}
}

func TestStreamGeneratesMissingIDs(t *testing.T) {
	var s Stream
	s.Add([]byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{}"}},{"index":1,"function":{"name":"g","arguments":"{}"}}]}}]}`))
	s.Add([]byte(`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`))
	last, _ := s.Finish()
	if len(last.ToolCalls) != 2 {
		t.Fatalf("tool calls = %+v, want 2", last.ToolCalls)
	}
	a, b := last.ToolCalls[0].ID, last.ToolCalls[1].ID
	if !strings.HasPrefix(a, "call_") || !strings.HasPrefix(b, "call_") || a == b {
		t.Errorf("generated IDs = %q, %q; want two distinct call_ IDs", a, b)
	}
}

func TestStreamRejectsAbsurdIndex(t *testing.T) {
	var s Stream
	if _, err := s.Add([]byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":99999999,"function":{"name":"f"}}]}}]}`)); err == nil {
		t.Errorf("Add(index 99999999) error = nil, want an error")
	}
}

func TestStreamSameReasoningInBothFields(t *testing.T) {
	var s Stream
	c, err := s.Add([]byte(`{"choices":[{"index":0,"delta":{"reasoning_content":"x","reasoning":"x"}}]}`))
	if err != nil || c.Reasoning != "x" {
		t.Errorf("Add() = %q, %v; want reasoning %q once", c.Reasoning, err, "x")
	}
}

func TestNewChatRequestReasoningModelMaxTokens(t *testing.T) {
	n := 10
	req := &node.Request{Model: "o3-mini", Params: node.Params{MaxTokens: &n}}
	got := newChatRequest(req)
	if got.MaxTokens != 0 || got.MaxCompletionTokens != 10 {
		t.Errorf("newChatRequest(o3-mini, max 10) = max_tokens %d, max_completion_tokens %d; want 0, 10", got.MaxTokens, got.MaxCompletionTokens)
	}
}

// memTransport answers every request with the same status and body, so
// that a benchmark measures parsing and translation, not the loopback.
type memTransport struct {
	status      int
	body        string
	contentType string // text/event-stream when empty
}

func (m memTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	status := m.status
	if status == 0 {
		status = http.StatusOK
	}
	ct := m.contentType
	if ct == "" {
		ct = "text/event-stream"
	}
	return &http.Response{
		StatusCode: status,
		Status:     fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Header:     http.Header{"Content-Type": {ct}},
		Body:       io.NopCloser(strings.NewReader(m.body)),
		Request:    r,
	}, nil
}

// BenchmarkChatSSE streams a 20-chunk SSE answer, as OpenAI sends it,
// through the backend.
func BenchmarkChatSSE(b *testing.B) {
	var body bytes.Buffer
	event := func(delta, finish string) {
		fmt.Fprintf(&body, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}],"usage":null}`+"\n\n", delta, finish)
	}
	event(`{"role":"assistant","content":"","refusal":null}`, "null")
	for i := range 20 {
		event(fmt.Sprintf(`{"content":"token%d "}`, i), "null")
	}
	event(`{}`, `"stop"`)
	body.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"m","system_fingerprint":"fp","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}}` + "\n\n")
	body.WriteString("data: [DONE]\n\n")
	be := New(nodeAt("http://upstream.invalid/v1"), &http.Client{Transport: memTransport{body: body.String()}})
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

// BenchmarkStreamAdd is the per-chunk translation alone.
func BenchmarkStreamAdd(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{"content":"token "},"logprobs":null,"finish_reason":null}],"usage":null}`)
	b.ReportAllocs()
	for b.Loop() {
		var s Stream
		for range 20 {
			if _, err := s.Add(data); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func FuzzStreamAdd(f *testing.F) {
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"content":"<think>a</thi"}}]}`), []byte(`{"choices":[{"index":0,"delta":{"content":"nk>b"},"finish_reason":"stop"}]}`))
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"c","function":{"name":"f","arguments":"{"}}]}}]}`), []byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1}}`))
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":-1}]}}]}`), []byte(`null`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		// No panic whatever the upstream sends, and tool calls come out
		// complete, in index order, each with an ID.
		var s Stream
		s.Add(a)
		s.Add(b)
		last, ok := s.Finish()
		if !ok {
			return
		}
		for i, c := range last.ToolCalls {
			if c.ID == "" {
				t.Errorf("tool call %d has no ID", i)
			}
		}
		if len(last.ToolCalls) > 0 && last.FinishReason != "tool_calls" {
			t.Errorf("finish reason = %q with tool calls, want tool_calls", last.FinishReason)
		}
	})
}

// TestStreamMaxArgs: a call's arguments are kept up to MaxArgs+1 bytes, so
// that one over the cap is known by its length, and nothing more of it is
// held; calls under the cap are whole.
func TestStreamMaxArgs(t *testing.T) {
	tests := []struct {
		name     string
		frags    []string
		maxArgs  int
		wantArgs string
		wantOver bool
	}{
		{"under", []string{`{"a":`, `1}`}, 10, `{"a":1}`, false},
		{"exactly the cap", []string{`{"a":`, `12}`}, 8, `{"a":12}`, false},
		{"over in one fragment", []string{`{"a":"0123456789"}`}, 8, `{"a":"012`, true},
		{"over across fragments", []string{`{"a":"01`, `234`, `56789"}`}, 8, `{"a":"012`, true},
		{"no cap", []string{`{"a":"0123456789"}`}, 0, `{"a":"0123456789"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Stream{MaxArgs: tt.maxArgs}
			for i, f := range tt.frags {
				e := fmt.Sprintf(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":%q}}]}}]}`, f)
				if i > 0 {
					e = fmt.Sprintf(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":%q}}]}}]}`, f)
				}
				if _, err := s.Add([]byte(e)); err != nil {
					t.Fatal(err)
				}
			}
			s.Add([]byte(`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`))
			last, _ := s.Finish()
			if len(last.ToolCalls) != 1 || last.ToolCalls[0].Arguments != tt.wantArgs || s.over != tt.wantOver {
				t.Errorf("arguments = %+v, over %v; want %q, over %v", last.ToolCalls, s.over, tt.wantArgs, tt.wantOver)
			}
		})
	}
}

// TestStreamMaxCallsBytes: calls whose arguments together would go past
// MaxCallsBytes are dropped, whole, and the stream is marked over so that
// the rest of the answer is not read.
func TestStreamMaxCallsBytes(t *testing.T) {
	s := Stream{MaxArgs: 100, MaxCallsBytes: 20}
	for _, e := range []string{
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{\"a\":\"0123456\"}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"g","arguments":"{\"b\":"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\"0123456789\"}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	} {
		if _, err := s.Add([]byte(e)); err != nil {
			t.Fatal(err)
		}
	}
	last, _ := s.Finish()
	if len(last.ToolCalls) != 1 || last.ToolCalls[0].ID != "a" || !s.over {
		t.Errorf("calls %+v, over %v; want only call a, over", last.ToolCalls, s.over)
	}
}

// TestChatRequestParts: a message with images and files goes as content
// parts, its text first, each part as the client sent it; a text message
// stays a string.
func TestChatRequestParts(t *testing.T) {
	req := &node.Request{Model: "m", Messages: []node.Message{
		{Role: "system", Content: "be brief"},
		{Role: "user", Content: "what are these?", Parts: []node.Part{
			{Kind: node.PartImage, Data: "iVBORw0KGgo=", MediaType: "image/png", Detail: "low"},
			{Kind: node.PartImage, URL: "https://example.com/a.jpg"},
			{Kind: node.PartFile, Data: "JVBERi0=", MediaType: "application/pdf", Filename: "a.pdf"},
			{Kind: node.PartFile, Data: "JVBERi0=", Filename: "bare.pdf"},
			{Kind: node.PartFile, FileID: "file-1"},
		}},
		{Role: "user", Parts: []node.Part{{Kind: node.PartImage, Data: "iVBORw0KGgo=", MediaType: "image/png"}}},
	}}
	raw, err := json.Marshal(newChatRequest(req).Messages)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"role":"system","content":"be brief"},` +
		`{"role":"user","content":[{"type":"text","text":"what are these?"},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"}},` +
		`{"type":"image_url","image_url":{"url":"https://example.com/a.jpg"}},` +
		`{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERi0=","filename":"a.pdf"}},` +
		`{"type":"file","file":{"file_data":"JVBERi0=","filename":"bare.pdf"}},` +
		`{"type":"file","file":{"file_id":"file-1"}}]},` +
		`{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}]`
	if string(raw) != want {
		t.Errorf("messages\n%s\nwant\n%s", raw, want)
	}
}

// TestRequestTools: the tools go upstream as OpenAI's function tools, a
// server tool's declaration as the engine encoded it, a client's encoded
// for the call, and the body stays one valid JSON object.
func TestRequestTools(t *testing.T) {
	server := node.Tool{Name: "read_file", Description: "Reads <a> file & more", Parameters: json.RawMessage(`{"type": "object", "properties": {"path": {"type": "string"}}}`)}
	server.Declaration = node.ToolDeclaration(server)
	req := &node.Request{Model: "m", Messages: []node.Message{{Role: "user", Content: "hi"}}, Tools: []node.Tool{
		server,
		{Name: "lookup", Parameters: json.RawMessage(`null`)},
		{Name: `say "hi"`, Description: "no parameters"},
	}}
	body, err := newChatRequest(req).encode()
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Model string `json:"model"`
		Tools []struct {
			Type     string `json:"type"`
			Function struct {
				Name        string          `json:"name"`
				Description *string         `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	var whole map[string]json.RawMessage
	if err := json.Unmarshal(body, &whole); err != nil {
		t.Fatalf("body is not one JSON object: %v\n%s", err, body)
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Model != "m" || len(got.Tools) != 3 {
		t.Fatalf("model %q, %d tools: %s", got.Model, len(got.Tools), body)
	}
	for i, want := range []struct{ name, desc, params string }{
		{"read_file", "Reads <a> file & more", `{"type":"object","properties":{"path":{"type":"string"}}}`},
		{"lookup", "", `{"type":"object","properties":{}}`},
		{`say "hi"`, "no parameters", `{"type":"object","properties":{}}`},
	} {
		f := got.Tools[i].Function
		var compact bytes.Buffer
		if err := json.Compact(&compact, f.Parameters); err != nil {
			t.Fatal(err)
		}
		desc := ""
		if f.Description != nil {
			desc = *f.Description
		}
		if got.Tools[i].Type != "function" || f.Name != want.name || desc != want.desc || compact.String() != want.params {
			t.Errorf("tools[%d] = %s %q %q %s, want function %q %q %s", i, got.Tools[i].Type, f.Name, desc, compact.String(), want.name, want.desc, want.params)
		}
		if want.desc == "" && f.Description != nil {
			t.Errorf("tools[%d]: an empty description is sent", i)
		}
	}
	// Without tools, no "tools" member at all.
	body, err = newChatRequest(&node.Request{Model: "m", Messages: req.Messages}).encode()
	if err != nil || bytes.Contains(body, []byte(`"tools"`)) {
		t.Errorf("a request without tools: %s, %v", body, err)
	}
}

// FuzzRequestEncode: the request written by hand is the request
// encoding/json writes, byte for byte, with the tools' declarations after
// the other members.
func FuzzRequestEncode(f *testing.F) {
	f.Add("m", "hello", "a\"<b>\n\xff\u2028", "f", `{"a":1}`, "call_1", 0.7, int64(42), uint8(0xff))
	f.Add("gpt-5", "", "", "", "", "", 1e-7, int64(-1), uint8(0))
	f.Add("", "é", "x", "g", "not json", "", 1e21, int64(0), uint8(0x55))
	f.Fuzz(func(t *testing.T, model, text, other, name, args, id string, temp float64, seed int64, flags uint8) {
		on := func(bit uint8) bool { return flags&(1<<bit) != 0 }
		max := int(seed % 5000)
		req := &node.Request{Model: model, Whole: on(0)}
		req.Messages = []node.Message{
			{Role: "system", Content: other},
			{Role: "developer", Content: text},
			{Role: "user", Content: text, Parts: []node.Part{{Kind: node.PartImage, Data: "aGk=", MediaType: "image/png", Detail: other}, {Kind: node.PartImage, URL: "https://x/" + other}, {Kind: node.PartFile, FileID: id, Filename: name}, {Kind: node.PartFile, Data: "aGk=", MediaType: other}}},
			{Role: "assistant", ToolCalls: []node.ToolCall{{ID: id, Name: name, Arguments: args}, {ID: "2", Name: name, Arguments: "{}"}}},
			{Role: "assistant", Content: other, ToolCalls: []node.ToolCall{{ID: id, Name: name, Arguments: args}}},
			{Role: "tool", ToolCallID: id, Content: ""},
			{Role: "assistant", Content: text, Reasoning: other},
		}
		if on(1) {
			req.Params.Temperature = &temp
		}
		if on(2) {
			req.Params.TopP = &temp
		}
		if on(3) {
			req.Params.MaxTokens = &max
		}
		if on(4) {
			req.Params.Stop = []string{text, other}
		}
		if on(5) {
			req.Params.Seed = &seed
		}
		if on(6) {
			req.Params.Format = json.RawMessage(`{"type":"object","properties":{"` + strings.ReplaceAll(name, `"`, "") + `":{"type":"string"}}}`)
			if !json.Valid(req.Params.Format) {
				req.Params.Format = json.RawMessage(`"json"`)
			}
		}
		if on(7) {
			req.Tools = []node.Tool{{Name: name, Description: text}}
		}
		creq := newChatRequest(req)
		creq.Stream = !req.Whole
		if creq.Stream && on(2) {
			creq.StreamOptions = &streamOptions{IncludeUsage: on(3)}
		}
		got, err := creq.encode()
		want, stdErr := json.Marshal(creq)
		if (err == nil) != (stdErr == nil) {
			t.Fatalf("encode error %v, encoding/json's %v", err, stdErr)
		}
		if err != nil {
			return
		}
		if len(creq.tools) > 0 {
			want = append(want[:len(want)-1], `,"tools":[`...)
			for i, d := range creq.tools {
				if i > 0 {
					want = append(want, ',')
				}
				want = append(want, d...)
			}
			want = append(want, "]}"...)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("encode =\n%s\nencoding/json =\n%s", got, want)
		}
	})
}
