package web

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRelayNeverReturnsUnofferedCalls: a node relayed with the client's
// tools that asks for a tool the client did not offer (OL1's script calls
// list_dir) answers in text instead of passing the call on.
func TestRelayNeverReturnsUnofferedCalls(t *testing.T) {
	s := newTestServer(t, testConfig)
	resp := s.post(t, "/v1/chat/completions", `{"model":"OL1","messages":[{"role":"user","content":"what is the weather?"}],
		"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`)
	body := readAll(t, resp.Body)
	var out chatResponse
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("POST = %d %s, want 200", resp.StatusCode, body)
	}
	msg := out.Choices[0].Message
	if len(msg.ToolCalls) != 0 {
		t.Errorf("tool calls = %+v, want none (list_dir was not offered)", msg.ToolCalls)
	}
	if msg.Content == nil || *msg.Content == "" {
		t.Errorf("content empty, want a text answer; body %s", body)
	}
	if !strings.Contains(string(body), "not passed on: the client did not offer this tool") {
		t.Errorf("trace does not record the dropped call: %s", body)
	}
}
