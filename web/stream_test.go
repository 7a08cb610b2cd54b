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
// the upstream sends the next: the upstream waits for the client to have
// read each content chunk before it writes the following one, so a proxy
// holding chunks back (to fill a buffer, or to batch writes) would stall.
func TestStreamRelaysEachChunk(t *testing.T) {
	const n = 5
	received := make(chan string)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		event := func(delta, finish string) {
			fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1735689600,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, finish)
			w.(http.Flusher).Flush()
		}
		for i := range n {
			want := fmt.Sprintf("word%d ", i)
			event(fmt.Sprintf(`{"content":%q}`, want), "null")
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
		event(`{}`, `"stop"`)
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer upstream.Close()
	// No keepalive comment within the test: its flush would hide a held chunk.
	client, _, _ := wireProxyAdmission(t, []config.Node{openaiNode("A", upstream.URL+"/v1")}, oneStage, time.Hour)

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
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Choices) > 0 && resp.Choices[0].Delta.Content != "" {
			select {
			case received <- resp.Choices[0].Delta.Content:
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
		}
	}
}
