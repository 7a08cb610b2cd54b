package web

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ollama/ollama/api"

	"chainproxy/config"
	"chainproxy/internal/fakeollama"
	"chainproxy/internal/oaischema"
)

// stateProxy is a one-node proxy whose Ollama upstream records the
// messages of each request, so that a test sees what a continued
// conversation put before the model.
func stateProxy(t *testing.T) (url string, prompts func() [][]api.Message) {
	t.Helper()
	var (
		mu   sync.Mutex
		seen [][]api.Message
	)
	up := fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply {
		mu.Lock()
		seen = append(seen, req.Messages)
		mu.Unlock()
		return fakeollama.Reply{Content: []string{"noted"}}
	})
	_, srv := wireProxy(t, []config.Node{ollamaNode("A", up.URL)}, oneStage)
	return srv.URL, func() [][]api.Message {
		mu.Lock()
		defer mu.Unlock()
		return append([][]api.Message(nil), seen...)
	}
}

func mentions(msgs []api.Message, text string) bool {
	for _, m := range msgs {
		if strings.Contains(m.Content, text) {
			return true
		}
	}
	return false
}

// TestResponsesConversationRefused: conversation (a Conversations API id,
// a string or {"id": …}: CreateResponse.conversation in
// internal/oaischema/openai-chat.yaml) asks the server to prepend that
// conversation's items. The Agents SDK sends it for a run given a
// conversationId (agents-openai's openaiResponsesModel: `conversation:
// request.conversationId`). The proxy keeps no conversations: ignoring
// the field would answer without the history, so it is refused with a 400
// naming it. null is the field's default and goes on.
func TestResponsesConversationRefused(t *testing.T) {
	s := newTestServer(t, testConfig)
	for _, tc := range []struct {
		name string
		conv any
		want int
	}{
		{"id", "conv_123", 400},
		{"object", map[string]any{"id": "conv_123"}, 400},
		{"null", nil, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := responsesPost(t, s.URL, map[string]any{"model": "chain/simple", "input": "hi", "conversation": tc.conv})
			if x.status != tc.want {
				t.Fatalf("status %d, want %d: %s", x.status, tc.want, x.raw)
			}
			if tc.want == 400 {
				oaischema.Validate(t, "ErrorResponse", x.raw)
				if !bytes.Contains(x.raw, []byte(`"param":"conversation"`)) {
					t.Errorf("error does not name conversation: %s", x.raw)
				}
			}
		})
	}
}

// TestResponsesStoredStateBounded: a long agent session continued with
// previous_response_id 100 times. Each stored response holds the whole
// conversation, and the trace store bounds how many it keeps, not their
// size: a stored conversation larger than server.max_body_bytes (more than
// the client could send as its history) is not kept, and continuing it
// gets previous_response_not_found, on which the client starts over.
func TestResponsesStoredStateBounded(t *testing.T) {
	const limit = 16 << 10
	s := newTestServer(t, testConfig, func(c *config.Config) { c.Server.MaxBodyBytes = limit })
	ctx := t.Context()
	var previous any
	restarts := 0
	for turn := range 100 {
		body := map[string]any{"model": "chain/simple", "store": true, "input": fmt.Sprintf("turn %d: %s", turn, strings.Repeat("tool output ", 40))}
		if previous != nil {
			body["previous_response_id"] = previous
		}
		x := responsesPost(t, s.URL, body)
		if x.status == 404 && bytes.Contains(x.raw, []byte(`"previous_response_not_found"`)) {
			restarts++
			delete(body, "previous_response_id")
			x = responsesPost(t, s.URL, body)
		}
		if x.status != 200 {
			t.Fatalf("turn %d: %d %s", turn, x.status, x.raw)
		}
		id := x.obj["id"].(string)
		if doc, ok, _ := s.store.GetTrace(ctx, responseKey("", id)); ok && len(doc) > limit {
			t.Fatalf("turn %d: stored %d bytes, more than max_body_bytes %d", turn, len(doc), limit)
		}
		previous = id
	}
	if restarts == 0 {
		t.Error("the session never reached the bound")
	}
}

// TestResponsesInstructionsNotCarried: "When using along with
// previous_response_id, the instructions from a previous response will not
// be carried over to the next response" (CreateResponse.instructions in
// internal/oaischema/openai-chat.yaml). The continued conversation keeps
// the turns, with the new request's instructions alone.
func TestResponsesInstructionsNotCarried(t *testing.T) {
	url, prompts := stateProxy(t)
	first := responsesPost(t, url, map[string]any{"model": "A", "store": true, "input": "remember the word kiwi", "instructions": "Speak like a pirate."})
	if first.status != 200 {
		t.Fatalf("first: %d %s", first.status, first.raw)
	}
	second := responsesPost(t, url, map[string]any{"model": "A", "input": "what was the word?", "instructions": "Be terse.", "previous_response_id": first.obj["id"]})
	if second.status != 200 {
		t.Fatalf("second: %d %s", second.status, second.raw)
	}
	p := prompts()
	last := p[len(p)-1]
	if mentions(last, "pirate") || !mentions(last, "Be terse.") || !mentions(last, "kiwi") {
		t.Errorf("prompt = %+v: want the new instructions and the first turn, not the old instructions", last)
	}
	if second.obj["instructions"] != "Be terse." {
		t.Errorf("instructions echoed = %v", second.obj["instructions"])
	}
}
