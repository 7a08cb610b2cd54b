package openai

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"chainproxy/chain/node"
	"chainproxy/internal/fakeopenai"
)

// TestChatErrorsOutsideOpenAIShape checks that the message of an error a
// server reports its own way, with status 200, reaches the user instead of
// "stream ended before a finish_reason" or "answer without choices".
func TestChatErrorsOutsideOpenAIShape(t *testing.T) {
	tests := []struct {
		name  string
		reply fakeopenai.Reply
		whole bool
	}{
		{"llama.cpp error field in a stream", fakeopenai.Reply{Content: []string{"par"}, StreamError: "the request exceeds the available context size, try increasing it", ErrorField: true}, false},
		{"OpenRouter error body of a 200", fakeopenai.Reply{StreamError: "Provider returned error", ErrorIn200: true}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeopenai.New(t, tc.reply)
			req := userRequest("hi")
			req.Whole = tc.whole
			_, err := collect(t.Context(), New(nodeAt(srv.BaseURL()), nil), req)
			var ue *node.UpstreamError
			if !errors.As(err, &ue) || ue.Kind != node.KindProtocol || ue.Message != tc.reply.StreamError {
				t.Errorf("Chat() error = %v, want a protocol error with the upstream's message %q", err, tc.reply.StreamError)
			}
		})
	}
}

// lmStudio answers as LM Studio's server does on a path it does not serve:
// status 200 and an error object (lmstudio-ai/lmstudio-bug-tracker#618),
// here for every path outside /v1.
func lmStudio(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Powered-By", "Express")
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Write([]byte(`{"error":"Unexpected endpoint or method. (` + r.Method + " " + r.URL.Path + `)"}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestLMStudioWithoutV1(t *testing.T) {
	// base_url without /v1: what the server says must reach the user, and
	// the probe must not find the node ready.
	b := New(nodeAt(lmStudio(t).URL), nil)
	_, err := collect(t.Context(), b, userRequest("hi"))
	if want := "Unexpected endpoint or method. (POST /chat/completions)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Chat() error = %v, want it to say %q", err, want)
	}
	_, err = b.Describe(t.Context())
	if want := "Unexpected endpoint or method. (GET /models)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Describe() error = %v, want it to say %q", err, want)
	}
}

func TestChatParallelCallsAtOneIndex(t *testing.T) {
	// Ollama's /v1 streams each call of a batch whole, every one at index
	// 0 with its own id: they are two calls, not one with both arguments.
	srv := fakeopenai.New(t, fakeopenai.Reply{SameIndex: true, ToolCalls: []fakeopenai.ToolCall{
		{ID: "call_a", Name: "read_file", Arguments: `{"path":"a.go"}`},
		{ID: "call_b", Name: "list_dir", Arguments: `{"path":"."}`},
	}})
	got, err := collect(t.Context(), New(nodeAt(srv.BaseURL()), nil), userRequest("hi"))
	if err != nil {
		t.Fatalf("Chat() error = %v", err)
	}
	want := []node.ToolCall{
		{ID: "call_a", Name: "read_file", Arguments: `{"path":"a.go"}`},
		{ID: "call_b", Name: "list_dir", Arguments: `{"path":"."}`},
	}
	if diff := cmp.Diff(want, got.calls); diff != "" || got.finish != "tool_calls" {
		t.Errorf("tool calls (-want +got):\n%s; finish %q", diff, got.finish)
	}
}

func TestStreamCallsSharingAnIndex(t *testing.T) {
	tests := []struct {
		name   string
		events []string
		want   []node.ToolCall
	}{
		{
			"new id at a taken index, arguments in pieces",
			[]string{
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"name":"f","arguments":""}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":1}"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_b","function":{"name":"g","arguments":"{\"b\":"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"2}"}}]}}]}`,
			},
			[]node.ToolCall{{ID: "call_a", Name: "f", Arguments: `{"a":1}`}, {ID: "call_b", Name: "g", Arguments: `{"b":2}`}},
		},
		{
			"id in a later fragment of the same call",
			[]string{
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"arguments":"}"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"arguments":""}}]}}]}`,
			},
			[]node.ToolCall{{ID: "call_a", Name: "f", Arguments: `{}`}},
		},
		{
			"index order wins over arrival",
			[]string{
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","function":{"name":"g","arguments":"{}"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"name":"f","arguments":"{}"}}]}}]}`,
			},
			[]node.ToolCall{{ID: "call_a", Name: "f", Arguments: `{}`}, {ID: "call_b", Name: "g", Arguments: `{}`}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s Stream
			for _, e := range append(tc.events, `{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`) {
				if _, err := s.Add([]byte(e)); err != nil {
					t.Fatalf("Add(%s) error = %v", e, err)
				}
			}
			last, _ := s.Finish()
			if diff := cmp.Diff(tc.want, last.ToolCalls); diff != "" {
				t.Errorf("tool calls (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStreamNamesCountAsCalls: a hostile upstream's tool calls cost the
// proxy no more than MaxCallsBytes, however long their names and IDs:
// these are held as long as the arguments.
func TestStreamNamesCountAsCalls(t *testing.T) {
	const limit = 4 << 10
	long := strings.Repeat("n", 1<<10)
	s := Stream{MaxArgs: 100, MaxCallsBytes: limit}
	for i := range 64 {
		e := fmt.Sprintf(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"id":"%s%d","function":{"name":"%s","arguments":"{}"}}]}}]}`, i, long, i, long)
		if _, err := s.Add([]byte(e)); err != nil {
			t.Fatal(err)
		}
	}
	held := 0
	for _, pc := range s.calls {
		held += len(pc.id) + len(pc.name) + pc.args.Len()
	}
	if held > limit || !s.over {
		t.Errorf("calls hold %d bytes, over %v; want at most %d, over", held, s.over, limit)
	}
}
