package web

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"chainproxy/config"
	"chainproxy/internal/fakeopenai"
)

// TestResponsesStreamContextLength: a prompt no node can take, found once
// the stream is under way (a reflexive run's stream opens as its first
// stage starts), ends the stream with response.failed whose error code is
// context_length_exceeded, as OpenAI's does. Codex reads that code as
// fatal (ContextWindowExceeded) and any other as retryable: with
// server_error it sent the same prompt again and again (codex-rs
// codex-api/src/sse/responses.rs, is_context_window_error and its test
// context_window_error_is_fatal, from a captured OpenAI event).
func TestResponsesStreamContextLength(t *testing.T) {
	refusing := fakeopenai.New(t, fakeopenai.Reply{Status: 400, Error: "This model's maximum context length is 1024 tokens. However, you requested 14000 tokens.", ErrorType: "invalid_request_error", ErrorCode: "context_length_exceeded"})
	_, srv := wireProxy(t, []config.Node{openaiNode("A", refusing.BaseURL())}, oneStage)
	// Not responsesPost: OpenAPI's list of codes lacks this one.
	body, _ := json.Marshal(map[string]any{"model": "chain/auto", "input": "hello", "stream": true})
	req, _ := http.NewRequest("POST", srv.URL+"/v1/responses", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Chain-Mode", "reflexive")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s, want the stream under way", resp.StatusCode, raw)
	}
	frames := sseFrames(t, raw)
	last := frames[len(frames)-1]
	_, data, _ := strings.Cut(last, "\ndata: ")
	var ev struct {
		Type     string
		Response struct {
			Status string
			Error  struct{ Code, Message string }
		}
	}
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		t.Fatalf("last frame %q: %v", last, err)
	}
	if ev.Type != "response.failed" || ev.Response.Status != "failed" || ev.Response.Error.Code != "context_length_exceeded" || !strings.Contains(ev.Response.Error.Message, "node A") {
		t.Errorf("last event %s, want response.failed with code context_length_exceeded naming the node", data)
	}
}
