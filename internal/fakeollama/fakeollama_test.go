package fakeollama

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ollama/ollama/api"
)

// lines posts body to /api/chat and returns every NDJSON line decoded as a map.
func lines(t *testing.T, srv *Server, body string) []map[string]any {
	t.Helper()
	resp, err := http.Post(srv.URL+"/api/chat", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("Content-Type = %q, want application/x-ndjson", ct)
	}
	var out []map[string]any
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q is not JSON: %v", sc.Text(), err)
		}
		delete(m, "created_at")
		out = append(out, m)
	}
	return out
}

func TestStreamWireFormat(t *testing.T) {
	srv := New(t, Reply{
		Thinking:  []string{"hm"},
		Content:   []string{"Hi"},
		ToolCalls: []ToolCall{{Name: "list_dir", Args: map[string]any{"path": "."}}},
		EvalCount: 3, PromptEvalCount: 2,
	})
	got := lines(t, srv, `{"model":"qwen3","messages":[{"role":"user","content":"hi"}]}`)
	want := []map[string]any{
		{"model": "qwen3", "message": map[string]any{"role": "assistant", "content": "", "thinking": "hm"}, "done": false},
		{"model": "qwen3", "message": map[string]any{"role": "assistant", "content": "Hi"}, "done": false},
		{"model": "qwen3", "message": map[string]any{"role": "assistant", "content": "", "tool_calls": []any{
			map[string]any{"function": map[string]any{"index": 0.0, "name": "list_dir", "arguments": map[string]any{"path": "."}}},
		}}, "done": false},
		{
			"model": "qwen3", "message": map[string]any{"role": "assistant", "content": ""}, "done": true, "done_reason": "stop",
			"total_duration": 1e6, "load_duration": 1e3, "prompt_eval_count": 2.0, "prompt_eval_duration": 1e3,
			"eval_count": 3.0, "eval_duration": 1e3,
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

func TestMidStreamError(t *testing.T) {
	srv := New(t, Reply{Content: []string{"a"}, Error: "runner crashed"})
	got := lines(t, srv, `{"model":"m","messages":[]}`)
	if n := len(got); n != 2 || got[1]["error"] != "runner crashed" {
		t.Errorf("lines = %v, want a content line then {\"error\":\"runner crashed\"}", got)
	}
}

func client(srv *Server) *api.Client {
	u, _ := url.Parse(srv.URL)
	return api.NewClient(u, srv.Client())
}

func TestNonStreamWithOllamaClient(t *testing.T) {
	srv := New(t, Reply{
		Thinking: []string{"a", "b"}, Content: []string{"4", "2"},
		ToolCalls: []ToolCall{{ID: "call_1", Name: "f", Args: map[string]any{"x": 1}}},
	})
	stream := false
	var got []api.ChatResponse
	err := client(srv).Chat(context.Background(), &api.ChatRequest{Model: "m", Stream: &stream, Messages: []api.Message{{Role: "user", Content: "hi"}}},
		func(r api.ChatResponse) error { got = append(got, r); return nil })
	if err != nil {
		t.Fatalf("Chat() error = %v", err)
	}
	if len(got) != 1 {
		t.Fatalf("responses = %d, want 1", len(got))
	}
	r := got[0]
	if !r.Done || r.Message.Content != "42" || r.Message.Thinking != "ab" || len(r.Message.ToolCalls) != 1 || r.Message.ToolCalls[0].ID != "call_1" {
		t.Errorf("response = %+v, want done, content 42, thinking ab, one tool call call_1", r)
	}
	if got := srv.Requests()[0].Messages[0].Content; got != "hi" {
		t.Errorf("recorded message = %q, want %q", got, "hi")
	}
}

func TestStatusAndVersion(t *testing.T) {
	srv := New(t, Reply{Status: http.StatusNotFound, Error: "model not found"})
	c := client(srv)
	err := c.Chat(context.Background(), &api.ChatRequest{Model: "m"}, func(api.ChatResponse) error { return nil })
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != 404 || se.ErrorMessage != "model not found" {
		t.Errorf("Chat() error = %v, want StatusError 404 model not found", err)
	}
	if v, err := c.Version(context.Background()); err != nil || v != Version {
		t.Errorf("Version() = %q, %v; want %q", v, err, Version)
	}
	srv.SetVersionStatus(http.StatusInternalServerError)
	if _, err := c.Version(context.Background()); err == nil {
		t.Errorf("Version() error = nil after SetVersionStatus(500), want an error")
	}
}

func TestRepliesInOrderLastRepeats(t *testing.T) {
	srv := New(t, Reply{Content: []string{"one"}}, Reply{Content: []string{"two"}})
	var got []string
	for range 3 {
		var sb strings.Builder
		err := client(srv).Chat(context.Background(), &api.ChatRequest{Model: "m"}, func(r api.ChatResponse) error {
			sb.WriteString(r.Message.Content)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, sb.String())
	}
	if want := []string{"one", "two", "two"}; !cmp.Equal(got, want) {
		t.Errorf("replies = %v, want %v", got, want)
	}
}

func TestShowAndRefusals(t *testing.T) {
	s := New(t)
	c := api.NewClient(mustURL(t, s.URL), http.DefaultClient)
	resp, err := c.Show(t.Context(), &api.ShowRequest{Model: "anything"})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(resp.Capabilities); got != "[completion tools]" {
		t.Errorf("undeclared model capabilities = %s, want [completion tools]", got)
	}
	s.SetModel("plain", "completion")
	if resp, err := c.Show(t.Context(), &api.ShowRequest{Model: "plain"}); err != nil || fmt.Sprint(resp.Capabilities) != "[completion]" {
		t.Errorf("Show(plain) = %v, %v; want [completion]", resp, err)
	}
	var se api.StatusError
	if _, err := c.Show(t.Context(), &api.ShowRequest{Model: "anything"}); !errors.As(err, &se) || se.StatusCode != 404 || se.ErrorMessage != "model 'anything' not found" {
		t.Errorf("Show(undeclared) error = %v, want Ollama's 404", err)
	}
	tools := []api.Tool{{Type: "function", Function: api.ToolFunction{Name: "f"}}}
	err = c.Chat(t.Context(), &api.ChatRequest{Model: "plain", Tools: tools}, func(api.ChatResponse) error { return nil })
	if !errors.As(err, &se) || se.StatusCode != 400 || se.ErrorMessage != "registry.ollama.ai/library/plain does not support tools" {
		t.Errorf("Chat(plain, tools) error = %v, want Ollama's 400", err)
	}
	err = c.Chat(t.Context(), &api.ChatRequest{Model: "gone"}, func(api.ChatResponse) error { return nil })
	if !errors.As(err, &se) || se.StatusCode != 404 {
		t.Errorf("Chat(gone) error = %v, want Ollama's 404", err)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
