package mock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"chainproxy/chain"
	"chainproxy/chain/node"
	"chainproxy/config"
)

func play(t *testing.T, script config.MockScript, msgs []chain.Message, tools bool) (string, []chain.ToolCall, error) {
	t.Helper()
	req := &node.Request{Messages: msgs}
	if tools {
		req.Tools = []chain.Tool{{Name: "list_dir"}}
	}
	var content strings.Builder
	var calls []chain.ToolCall
	err := New(config.Node{Name: "OL1", Mock: &script}).Chat(context.Background(), req, func(c node.Chunk) error {
		content.WriteString(c.Content)
		calls = append(calls, c.ToolCalls...)
		return nil
	})
	return content.String(), calls, err
}

func TestScript(t *testing.T) {
	script := config.MockScript{
		Turns: []config.MockTurn{
			{Content: "looking", ToolCalls: []config.MockToolCall{{Name: "list_dir", Args: map[string]any{"path": "."}}}},
			{Content: "answer to {user} from {tools} results"},
		},
		Scenarios: []config.MockScenario{
			{When: "LOOP", Turns: []config.MockTurn{{ToolCalls: []config.MockToolCall{{Name: "list_dir", RawArgs: "{bad"}}}}},
			{When: "hello", System: "Analysis Stage", Turns: []config.MockTurn{{Content: "as a stage"}}},
			{System: "review stage", Turns: []config.MockTurn{{Content: "reviewing"}}},
		},
		Final: "final after {tools}",
	}
	user := chain.Message{Role: "user", Content: "hello"}
	afterOne := []chain.Message{user, {Role: "assistant"}, {Role: "tool", Content: "x"}}
	tests := []struct {
		name        string
		msgs        []chain.Message
		tools       bool
		wantContent string
		wantCalls   string
	}{
		{"first turn", []chain.Message{user}, true, "looking", `call_0_0 list_dir {"path":"."}`},
		{"tools not offered: no calls", []chain.Message{user}, false, "looking", ""},
		{"second turn", afterOne, true, "answer to hello from 1 results", ""},
		{"the last turn repeats", append(afterOne, chain.Message{Role: "assistant"}), true, "answer to hello from 1 results", ""},
		{"scenario, case-insensitive", []chain.Message{{Role: "user", Content: "please loop"}}, true, "", "call_0_0 list_dir {bad"},
		{"scenario on the system message too", []chain.Message{{Role: "system", Content: "You are the analysis stage."}, user}, true, "as a stage", ""},
		{"system alone", []chain.Message{{Role: "system", Content: "You are the review stage."}, {Role: "user", Content: "anything"}}, true, "reviewing", ""},
		{"system not matched: the default turns", []chain.Message{{Role: "system", Content: "You may use the tools."}, user}, true, "looking", `call_0_0 list_dir {"path":"."}`},
		{"final call without tools", []chain.Message{{Role: "user", Content: "loop"}, {Role: "assistant"}, {Role: "tool"}}, false, "final after 1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			content, calls, err := play(t, script, tt.msgs, tt.tools)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range calls {
				got = append(got, c.ID+" "+c.Name+" "+c.Arguments)
			}
			if content != tt.wantContent || strings.Join(got, ";") != tt.wantCalls {
				t.Errorf("content %q calls %q, want %q %q", content, got, tt.wantContent, tt.wantCalls)
			}
		})
	}
}

func TestFailuresAndCancel(t *testing.T) {
	_, _, err := play(t, config.MockScript{Offline: true}, []chain.Message{{Role: "user"}}, false)
	var ue *node.UpstreamError
	if !errors.As(err, &ue) || !ue.Offline() {
		t.Errorf("offline: %v", err)
	}
	_, _, err = play(t, config.MockScript{Turns: []config.MockTurn{{Fail: "boom"}}}, []chain.Message{{Role: "user"}}, false)
	if !errors.As(err, &ue) || ue.Status != 500 || !strings.Contains(err.Error(), "boom") {
		t.Errorf("fail: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := New(config.Node{Name: "A", Mock: &config.MockScript{Delay: time.Hour}})
	if err := b.Chat(ctx, &node.Request{}, func(node.Chunk) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestIdleBeforeEachDelay(t *testing.T) {
	script := config.MockScript{ChunkDelay: time.Millisecond, Turns: []config.MockTurn{{Content: "one two three"}}}
	var seq []string
	req := &node.Request{Messages: []chain.Message{{Role: "user", Content: "hi"}}, Idle: func() { seq = append(seq, "idle") }}
	err := New(config.Node{Name: "A", Mock: &script}).Chat(context.Background(), req, func(c node.Chunk) error {
		if c.Content != "" {
			seq = append(seq, strings.TrimSpace(c.Content))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(seq, ","), "one,idle,two,idle,three"; got != want {
		t.Errorf("sequence = %s, want %s", got, want)
	}
}
