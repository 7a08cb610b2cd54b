package ollama

import (
	"testing"

	"chainproxy/internal/fakeollama"
)

// TestChatWhole: asked for a whole answer, the backend sends "stream":
// false and reads Ollama's single-object reply as the same chunks.
func TestChatWhole(t *testing.T) {
	srv := fakeollama.New(t, fakeollama.Reply{Thinking: []string{"hm"}, Content: []string{"Hel", "lo"}, PromptEvalCount: 4, EvalCount: 2,
		ToolCalls: []fakeollama.ToolCall{{Name: "list_dir", Args: map[string]any{"path": "."}}}})
	req := userRequest("hi")
	req.Whole = true
	res, err := collect(t.Context(), New(nodeAt(srv.URL), nil), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.content != "Hello" || res.reasoning != "hm" || len(res.calls) != 1 || res.finish != "tool_calls" || res.usage == nil || res.usage.TotalTokens != 6 {
		t.Errorf("got %+v", res)
	}
	if s := srv.Bodies()[0]["stream"]; s != false {
		t.Errorf("upstream asked with stream = %v, want false", s)
	}
}
