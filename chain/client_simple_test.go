package chain_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"chainproxy/chain"
)

const clientNodes = `
nodes:
  - name: OL1
    provider: mock
    mock:
      turns:
        - tool_calls:
            - {id: c1, name: get_weather, args: {city: Paris}}
            - {id: c2, name: get_weather, args: {city: Paris}}
            - {id: c3, name: get_time, args: {tz: UTC}}
        - content: "It is sunny."
      scenarios:
        # The scripts answer the proxy's own re-asks, as a model would.
        - when: must answer by calling
          turns:
            - tool_calls: [{id: c9, name: get_time, args: {tz: UTC}}]
        - when: do not call it again
          turns:
            - tool_calls: [{id: c10, name: get_weather, args: {city: Paris}}]
        - when: chatty
          turns:
            - content: "I would rather talk."
  - {name: M1, provider: mock, mock: {turns: [{content: x}]}}
  - {name: M2, provider: mock, mock: {turns: [{content: y}]}}
`

var clientTools = []chain.Tool{
	{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)},
	{Name: "get_time", Parameters: json.RawMessage(`{"type":"object","properties":{"tz":{"type":"string"}}}`)},
}

func runClient(t *testing.T, h *harness, msgs []chain.Message, choice chain.ToolChoice) *chain.Result {
	t.Helper()
	res, err := h.engine.Run(context.Background(), &chain.RunRequest{
		// Simple mode: the reflexive chain's client tools are resume_test.go's.
		Model: chain.ModelSimple, Conversation: t.Name(), Messages: msgs, ClientTools: clientTools, ToolChoice: choice,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestClientToolsBatchDedup(t *testing.T) {
	h := newHarness(t, clientNodes)
	res := runClient(t, h, []chain.Message{{Role: "user", Content: "weather and time"}}, chain.ToolChoice{Mode: "auto"})
	if res.FinishReason != "tool_calls" {
		t.Fatalf("finish = %s, want tool_calls", res.FinishReason)
	}
	var names []string
	for _, c := range res.Message.ToolCalls {
		names = append(names, c.ID+":"+c.Name)
	}
	if want := []string{"c1:get_weather", "c3:get_time"}; !equalSlices(names, want) {
		t.Errorf("calls = %v, want %v (the duplicate dropped)", names, want)
	}
	if res.Trace.Mode != chain.ModeSimple || res.Trace.Reasons[0] != "forced by model chain/simple" {
		t.Errorf("trace = %+v", res.Trace)
	}
	var stat []string
	for _, u := range res.Trace.Stages[0].ToolsUsed {
		stat = append(stat, u.Status)
	}
	if want := []string{"client", "duplicate", "client"}; !equalSlices(stat, want) {
		t.Errorf("tool statuses = %v, want %v", stat, want)
	}
}

func TestClientToolChoice(t *testing.T) {
	t.Run("none sends no tools", func(t *testing.T) {
		h := newHarness(t, clientNodes)
		res := runClient(t, h, []chain.Message{{Role: "user", Content: "weather"}}, chain.ToolChoice{Mode: "none"})
		if len(res.Message.ToolCalls) != 0 || res.FinishReason != "stop" {
			t.Errorf("result = %+v", res.Message)
		}
		if got := h.nodes["OL1"].requests()[0].Tools; len(got) != 0 {
			t.Errorf("upstream got %d tools, want none", len(got))
		}
	})
	t.Run("named function is the only tool, and is asked for again", func(t *testing.T) {
		h := newHarness(t, clientNodes)
		res := runClient(t, h, []chain.Message{{Role: "user", Content: "chatty"}}, chain.ToolChoice{Mode: "function", Name: "get_time"})
		reqs := h.nodes["OL1"].requests()
		if len(reqs) != 2 {
			t.Fatalf("upstream calls = %d, want 2 (one re-ask)", len(reqs))
		}
		if len(reqs[0].Tools) != 1 || reqs[0].Tools[0].Name != "get_time" {
			t.Errorf("offered %v, want only get_time", reqs[0].Tools)
		}
		if last := reqs[1].Messages[len(reqs[1].Messages)-1]; !strings.Contains(last.Content, "get_time") {
			t.Errorf("re-ask = %q", last.Content)
		}
		if len(res.Message.ToolCalls) != 1 || res.Message.ToolCalls[0].Name != "get_time" {
			t.Errorf("calls = %+v", res.Message.ToolCalls)
		}
	})
}

func TestClientHistoryLoopGuard(t *testing.T) {
	h := newHarness(t, clientNodes)
	call := func(id string) []chain.Message {
		return []chain.Message{
			{Role: "assistant", ToolCalls: []chain.ToolCall{{ID: id, Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
			{Role: "tool", ToolCallID: id, Content: "sunny"},
		}
	}
	msgs := []chain.Message{{Role: "user", Content: "weather"}}
	msgs = append(msgs, call("h1")...)
	msgs = append(msgs, call("h2")...)
	msgs = append(msgs, chain.Message{Role: "user", Content: "weather again"})
	res := runClient(t, h, msgs, chain.ToolChoice{Mode: "auto"})
	reqs := h.nodes["OL1"].requests()
	if len(reqs) != 2 {
		t.Fatalf("upstream calls = %d, want 2 (one re-ask)", len(reqs))
	}
	note := reqs[1].Messages[len(reqs[1].Messages)-1].Content
	if !strings.Contains(note, "already made 2 times") || !strings.Contains(note, "h1, h2") {
		t.Errorf("re-ask note = %q", note)
	}
	// The model insisted: the client gets an explanation, not the call.
	if len(res.Message.ToolCalls) != 0 || res.FinishReason != "stop" || !strings.Contains(res.Message.Content, "avoid a loop") {
		t.Errorf("result = %+v %s", res.Message, res.FinishReason)
	}
	blocked := 0
	for _, u := range res.Trace.Stages[0].ToolsUsed {
		if u.Status == chain.ToolBlocked {
			blocked++
		}
	}
	if blocked != 2 {
		t.Errorf("trace shows %d blocked calls, want 2 (ask and insist)", blocked)
	}
}

// TestClientFindTools: in simple mode a client's tools too large for its
// node's window are offered beside find_tools, which the proxy answers:
// a turn that asks find_tools beside a client call passes the client call
// on alone (the client never sees find_tools); a find_tools query asked
// twice is a repeat, which stops the stage, and the model answers without
// tools.
func TestClientFindTools(t *testing.T) {
	var big []chain.Tool
	for i := range 60 {
		big = append(big, chain.Tool{
			Name:        fmt.Sprintf("tool_%d", i),
			Description: fmt.Sprintf("Works on widget %d. ", i) + strings.Repeat("Use it only when the task needs it. ", 40),
			Parameters:  json.RawMessage(`{"type":"object","properties":{"target":{"type":"string"}}}`),
		})
	}
	for _, tc := range []struct {
		name, mock string   // the model's script
		calls      []string // the client's calls
		content    string   // the answer, when no call
		uses       []string // the trace's tool uses
		status     string
	}{
		{
			name:  "beside a client call",
			mock:  `turns: [{tool_calls: [{id: f1, name: find_tools, args: {query: widget 59}}, {id: c1, name: tool_0, args: {target: a}}]}]`,
			calls: []string{"tool_0"}, uses: []string{"find_tools blocked", "tool_0 client"}, status: chain.StageOK,
		},
		{
			name:    "asked twice",
			mock:    `turns: [{tool_calls: [{id: f1, name: find_tools, args: {query: widget 59}}]}, {tool_calls: [{id: f2, name: find_tools, args: {query: widget 59}}]}], final: "No tool helps."`,
			content: "No tool helps.", uses: []string{"find_tools ok", "find_tools blocked"}, status: chain.StageStoppedRepeat,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, `
nodes:
  - {name: OL1, provider: mock, context_window: 4096, mock: {`+tc.mock+`}}
  - {name: M1, provider: mock, mock: {turns: [{content: x}]}}
  - {name: M2, provider: mock, mock: {turns: [{content: y}]}}
`)
			res, err := h.engine.Run(context.Background(), &chain.RunRequest{
				Model: chain.ModelSimple, Messages: []chain.Message{{Role: "user", Content: "work on the widgets"}}, ClientTools: big,
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			var calls []string
			for _, c := range res.Message.ToolCalls {
				calls = append(calls, c.Name)
			}
			if !equalSlices(calls, tc.calls) || res.Message.Content != tc.content {
				t.Errorf("answer = %v %q, want %v %q", calls, res.Message.Content, tc.calls, tc.content)
			}
			st := res.Trace.Stages[0]
			var uses []string
			for _, u := range st.ToolsUsed {
				uses = append(uses, u.Name+" "+u.Status)
			}
			if !equalSlices(uses, tc.uses) || st.Status != tc.status {
				t.Errorf("tools used = %v, status %s; want %v, %s", uses, st.Status, tc.uses, tc.status)
			}
			if st.ToolFit == nil || len(st.ToolFit.Withheld) == 0 {
				t.Errorf("tool_fit = %+v, want tools withheld", st.ToolFit)
			}
			offered := h.nodes["OL1"].requests()[0].Tools
			if n := len(offered); n == 0 || n == len(big) || offered[n-1].Name != "find_tools" {
				t.Errorf("first call offered %d tools, want some of %d and find_tools last", n, len(big))
			}
		})
	}
}
