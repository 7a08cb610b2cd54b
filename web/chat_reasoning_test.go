package web

import (
	"net/http"
	"testing"

	"chainproxy/config"
	"chainproxy/internal/fakeollama"
)

// TestChatReasoningHandedBack: an assistant message of the history
// keeps its reasoning_content, the field the proxy's own answers carry
// it in, when a client echoes the message back, as the README's OpenAI
// SDK loop does (messages.append(msg.model_dump(exclude_none=True))).
// An Ollama node gets it back as the message's thinking, as Ollama's own
// OpenAI layer passes a message's reasoning (openai/openai.go
// FromChatRequest at ollama/ollama 00988753: Thinking: msg.Reasoning) and
// as the Anthropic front hands back thinking blocks: the templates of
// reasoning models (qwen3, gpt-oss) show a tool-calling turn's thinking
// to the model on the next turn, and without it the model has lost why
// it made the call.
func TestChatReasoningHandedBack(t *testing.T) {
	for _, model := range []string{"A", "chain/simple"} {
		f := fakeollama.New(t, fakeollama.Reply{Content: []string{"Sunny: no coat."}})
		_, srv := wireProxy(t, []config.Node{ollamaNode("A", f.URL)}, oneStage)
		body := `{"model":"` + model + `","messages":[` +
			`{"role":"user","content":"What should I wear in Paris?"},` +
			`{"role":"assistant","content":null,"refusal":null,"reasoning_content":"The user wants clothes advice; I need the weather first.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
			`{"role":"tool","tool_call_id":"call_1","content":"sunny, 24°C"}],` +
			`"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`
		status, raw, _ := chatPost(t, srv.URL, body)
		if status != http.StatusOK {
			t.Fatalf("%s: status %d: %s", model, status, raw)
		}
		reqs := f.Requests()
		if len(reqs) != 1 {
			t.Fatalf("%s: %d model calls, want 1", model, len(reqs))
		}
		var found bool
		for _, m := range reqs[0].Messages {
			if m.Role == "assistant" && len(m.ToolCalls) == 1 {
				found = true
				if m.Thinking != "The user wants clothes advice; I need the weather first." {
					t.Errorf("%s: the node got the tool-calling turn with thinking %q", model, m.Thinking)
				}
			}
		}
		if !found {
			t.Errorf("%s: no assistant tool call in %+v", model, reqs[0].Messages)
		}
	}
}
