package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"chainproxy/config"
)

// TestStreamRelaysEachChunk checks that a chunk reaches the client before
// the upstream sends the next, for both wire formats: the upstream waits
// for the client to have read each content chunk before it writes the
// following one, so a proxy holding chunks back (to fill a buffer, or to
// batch writes) would stall.
func TestStreamRelaysEachChunk(t *testing.T) {
	const n = 5
	tests := []struct {
		name string
		path string
		// piece writes content text, or the end of the answer when last.
		piece func(w io.Writer, text string, last bool)
		node  func(url string) config.Node
	}{
		{"openai SSE", "/v1/chat/completions", func(w io.Writer, text string, last bool) {
			event := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"m","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}` + "\n\n"
			if last {
				fmt.Fprintf(w, event, `{}`, `"stop"`)
				io.WriteString(w, "data: [DONE]\n\n")
				return
			}
			fmt.Fprintf(w, event, fmt.Sprintf(`{"content":%q}`, text), "null")
		}, func(url string) config.Node { return openaiNode("A", url+"/v1") }},
		{"ollama NDJSON", "/api/chat", func(w io.Writer, text string, last bool) {
			if last {
				io.WriteString(w, `{"model":"m","created_at":"2025-01-01T00:00:00Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":3,"eval_count":5}`+"\n")
				return
			}
			fmt.Fprintf(w, `{"model":"m","created_at":"2025-01-01T00:00:00Z","message":{"role":"assistant","content":%q},"done":false}`+"\n", text)
		}, func(url string) config.Node { return ollamaNode("A", url) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			received := make(chan string)
			upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != tt.path {
					http.NotFound(w, r)
					return
				}
				for i := range n {
					want := fmt.Sprintf("word%d ", i)
					tt.piece(w, want, false)
					w.(http.Flusher).Flush()
					select {
					case got := <-received:
						if got != want {
							t.Errorf("client got %q, want %q", got, want)
						}
					case <-time.After(5 * time.Second):
						t.Errorf("chunk %d not relayed within 5 s: the proxy holds chunks back", i)
						return
					case <-r.Context().Done():
						return
					}
				}
				tt.piece(w, "", true)
			}))
			defer upstream.Close()
			// No keepalive comment within the test: its flush would hide a
			// held chunk.
			client, _, _ := wireProxyAdmission(t, []config.Node{tt.node(upstream.URL)}, oneStage, time.Hour)

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			stream, err := client.CreateChatCompletionStream(ctx, goopenai.ChatCompletionRequest{
				Model:    "A",
				Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "hi"}},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer stream.Close()
			got := 0
			for {
				resp, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if len(resp.Choices) > 0 && resp.Choices[0].Delta.Content != "" {
					got++
					select {
					case received <- resp.Choices[0].Delta.Content:
					case <-ctx.Done():
						t.Fatal(ctx.Err())
					}
				}
			}
			if got != n {
				t.Errorf("content chunks = %d, want %d", got, n)
			}
		})
	}
}
