package fakeopenai

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	openai "github.com/sashabaranov/go-openai"
)

// events posts body and returns the data of every SSE event, checking the
// framing on the way: every line is "data: …" followed by a blank line.
func events(t *testing.T, url, body string) []string {
	t.Helper()
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("Content-Type = %q, want text/event-stream", ct)
	}
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			t.Fatalf("line %q, want a data: line", sc.Text())
		}
		out = append(out, data)
		if !sc.Scan() || sc.Text() != "" {
			t.Fatalf("event %q not followed by a blank line", data)
		}
	}
	return out
}

func TestStreamWireFormat(t *testing.T) {
	srv := New(t, Reply{
		Content:      []string{"Hi"},
		ToolCalls:    []ToolCall{{Name: "list_dir", Arguments: `{"path":"."}`}},
		Fragments:    2,
		PromptTokens: 5, CompletionTokens: 7,
	})
	got := events(t, srv.URL, `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	want := []string{
		`{"id":"chatcmpl-fake0","object":"chat.completion.chunk","created":1735689600,"model":"m","system_fingerprint":"fp_fake","choices":[{"index":0,"delta":{"content":"","refusal":null,"role":"assistant"},"logprobs":null,"finish_reason":null}],"usage":null}`,
		`{"id":"chatcmpl-fake0","object":"chat.completion.chunk","created":1735689600,"model":"m","system_fingerprint":"fp_fake","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}],"usage":null}`,
		`{"id":"chatcmpl-fake0","object":"chat.completion.chunk","created":1735689600,"model":"m","system_fingerprint":"fp_fake","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_0","type":"function","function":{"name":"list_dir","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}`,
		`{"id":"chatcmpl-fake0","object":"chat.completion.chunk","created":1735689600,"model":"m","system_fingerprint":"fp_fake","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path"}}]},"logprobs":null,"finish_reason":null}],"usage":null}`,
		`{"id":"chatcmpl-fake0","object":"chat.completion.chunk","created":1735689600,"model":"m","system_fingerprint":"fp_fake","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\":\".\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}`,
		`{"id":"chatcmpl-fake0","object":"chat.completion.chunk","created":1735689600,"model":"m","system_fingerprint":"fp_fake","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}`,
		`{"id":"chatcmpl-fake0","object":"chat.completion.chunk","created":1735689600,"model":"m","system_fingerprint":"fp_fake","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`,
		`[DONE]`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestStreamWithoutUsageHasNoUsageField(t *testing.T) {
	srv := New(t)
	got := events(t, srv.URL, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	for _, e := range got[:len(got)-1] {
		var m map[string]any
		if err := json.Unmarshal([]byte(e), &m); err != nil {
			t.Fatal(err)
		}
		if _, ok := m["usage"]; ok {
			t.Errorf("event %s has a usage field, want none without stream_options", e)
		}
	}
	if n := len(got); n != 4 || got[n-1] != "[DONE]" {
		t.Errorf("events = %q, want role, content, finish, [DONE]", got)
	}
}

func TestNonStreamWithGoOpenAI(t *testing.T) {
	srv := New(t, Reply{
		Reasoning: []string{"hm"}, Content: []string{"4", "2"},
		ToolCalls:    []ToolCall{{ID: "call_x", Name: "f", Arguments: `{}`}},
		PromptTokens: 1, CompletionTokens: 2,
	})
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = srv.BaseURL()
	resp, err := openai.NewClientWithConfig(cfg).CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model:    "m",
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}},
	})
	if err != nil {
		t.Fatalf("CreateChatCompletion() error = %v", err)
	}
	msg := resp.Choices[0].Message
	if msg.Content != "42" || msg.ReasoningContent != "hm" || resp.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("message = %+v, finish %q; want content 42, reasoning hm, tool_calls", msg, resp.Choices[0].FinishReason)
	}
	if len(msg.ToolCalls) != 1 || msg.ToolCalls[0].ID != "call_x" || msg.ToolCalls[0].Function.Name != "f" {
		t.Errorf("tool calls = %+v, want call_x f", msg.ToolCalls)
	}
	if resp.Usage.TotalTokens != 3 {
		t.Errorf("usage = %+v, want total 3", resp.Usage)
	}
	if got := srv.Requests()[0].Messages[0].Content; got != "hi" {
		t.Errorf("recorded message = %q, want %q", got, "hi")
	}
}

func TestErrorShape(t *testing.T) {
	srv := New(t, Reply{Status: 404, Error: "no such model", ErrorCode: "model_not_found"})
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = srv.BaseURL()
	_, err := openai.NewClientWithConfig(cfg).CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model: "m", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}},
	})
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("error = %v, want an *openai.APIError", err)
	}
	if apiErr.HTTPStatusCode != 404 || apiErr.Message != "no such model" || apiErr.Type != "invalid_request_error" || apiErr.Code != "model_not_found" {
		t.Errorf("error = %+v, want 404 invalid_request_error model_not_found", apiErr)
	}
}

func TestModels(t *testing.T) {
	srv := New(t)
	srv.SetModels("a", "b")
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = srv.BaseURL()
	list, err := openai.NewClientWithConfig(cfg).ListModels(context.Background())
	if err != nil {
		t.Fatalf("ListModels() error = %v", err)
	}
	var ids []string
	for _, m := range list.Models {
		ids = append(ids, m.ID)
	}
	if !cmp.Equal(ids, []string{"a", "b"}) {
		t.Errorf("models = %v, want [a b]", ids)
	}
}

func TestCutEndsWithoutDone(t *testing.T) {
	srv := New(t, Reply{Content: []string{"a"}, Cut: true})
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","stream":true,"messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("reading a cut stream: error = %v, want io.ErrUnexpectedEOF", err)
	}
	if strings.Contains(string(body), "[DONE]") {
		t.Errorf("cut stream %q contains [DONE]", body)
	}
}

func TestQuirkWireFormats(t *testing.T) {
	const streamReq = `{"model":"m","stream":true,"messages":[]}`
	tests := []struct {
		name  string
		reply Reply
		req   string
		want  []string // lines of the body after the role chunk
	}{
		{
			"llama.cpp error field",
			Reply{StreamError: "boom", ErrorField: true}, streamReq,
			[]string{`error: {"code":500,"message":"boom","type":"server_error"}`, "", "data: [DONE]", ""},
		},
		{
			"Ollama's calls at one index",
			Reply{SameIndex: true, ToolCalls: []ToolCall{{ID: "call_a", Name: "f", Arguments: `{}`}, {ID: "call_b", Name: "g", Arguments: `{"x":1}`}}}, streamReq,
			[]string{
				`data: {"id":"chatcmpl-fake0","object":"chat.completion.chunk","created":1735689600,"model":"m","system_fingerprint":"fp_fake","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":"{}"}}]},"logprobs":null,"finish_reason":null}]}`, "",
				`data: {"id":"chatcmpl-fake0","object":"chat.completion.chunk","created":1735689600,"model":"m","system_fingerprint":"fp_fake","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_b","type":"function","function":{"name":"g","arguments":"{\"x\":1}"}}]},"logprobs":null,"finish_reason":null}]}`, "",
				`data: {"id":"chatcmpl-fake0","object":"chat.completion.chunk","created":1735689600,"model":"m","system_fingerprint":"fp_fake","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}`, "",
				"data: [DONE]", "",
			},
		},
		{
			"OpenRouter error in a 200",
			Reply{StreamError: "Provider returned error", ErrorIn200: true}, `{"model":"m","messages":[]}`,
			[]string{`{"error":{"code":null,"message":"Provider returned error","param":null,"type":"server_error"}}`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := New(t, tc.reply)
			resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(tc.req))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Errorf("status = %d, want 200", resp.StatusCode)
			}
			lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
			if strings.HasPrefix(lines[0], "data: ") {
				lines = lines[2:] // the role chunk and its blank line
			}
			if diff := cmp.Diff(tc.want, lines); diff != "" {
				t.Errorf("body lines (-want +got):\n%s", diff)
			}
		})
	}
}
