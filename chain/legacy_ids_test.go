package chain_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"chainproxy/chain"
	"chainproxy/store"
)

// TestClientCallNamedByCaller: a caller whose client answers one call a
// turn without an ID (the deprecated functions of Chat Completions) names
// the call the chain passes back, and the client's result under that name
// resumes the waiting stage. Only the turn's first client call goes out;
// the others are refused with a note the model reads, not left for a
// result that cannot come. Without a name, every call goes out with an ID
// of the chain's.
func TestClientCallNamedByCaller(t *testing.T) {
	tools := []chain.Tool{
		{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object"}`)},
		{Name: "read_file", Parameters: json.RawMessage(`{"type":"object"}`)},
	}
	for _, tt := range []struct {
		name, callID string
		next         string // the name the follow-up gives
		calls        int    // passed back to the client
		firstStages  string
		wantStages   string
	}{
		{
			name: "named", callID: "call_function_1", next: "call_function_3", calls: 1,
			firstStages: "OL1:awaiting_client[get_weather:client,read_file:blocked]",
			wantStages:  "OL1:ok[get_weather:ok,read_file:blocked] M1:ok[] M2:ok[]",
		},
		{
			name: "the chain's own IDs", calls: 2,
			firstStages: "OL1:awaiting_client[get_weather:client,read_file:client]",
			wantStages:  "OL1:ok[get_weather:ok,read_file:ok] M1:ok[] M2:ok[]",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := resumeHarness(t, store.NewMemory(0, 0))
			run := func(msgs []chain.Message, callID string) *chain.Result {
				t.Helper()
				res, err := h.engine.Run(context.Background(), &chain.RunRequest{Model: chain.ModelReflexive, Conversation: "conv", Messages: msgs, ClientTools: tools, ClientCallID: callID}, nil)
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			msgs := []chain.Message{{Role: "user", Content: "weather and notes"}}
			first := run(msgs, tt.callID)
			calls := first.Message.ToolCalls
			if got := stagesOf(first.Trace); got != tt.firstStages || len(calls) != tt.calls {
				t.Fatalf("first: %s with %d calls, want %s with %d", got, len(calls), tt.firstStages, tt.calls)
			}
			if tt.callID != "" && calls[0].ID != tt.callID {
				t.Errorf("the call passed back has the ID %q, want the caller's %q", calls[0].ID, tt.callID)
			}
			if tt.callID == "" && (!strings.HasPrefix(calls[0].ID, "call_") || calls[0].ID == calls[1].ID) {
				t.Errorf("calls %+v, want IDs of the chain's", calls)
			}
			msgs = append(msgs, first.Message)
			for _, c := range calls {
				msgs = append(msgs, chain.Message{Role: "tool", ToolCallID: c.ID, Name: c.Name, Content: "result of " + c.Name})
			}
			// The follow-up names the call it would be given next, as a
			// caller does on each request.
			second := run(msgs, tt.next)
			if got := stagesOf(second.Trace); got != tt.wantStages || !strings.Contains(strings.Join(second.Trace.Reasons, "|"), "resumed in stage OL1") {
				t.Errorf("follow-up: %s %q, want %s resumed", got, second.Trace.Reasons, tt.wantStages)
			}
			reqs := h.nodes["OL1"].requests()
			var notes []string
			for _, m := range reqs[len(reqs)-1].Messages {
				if m.Role == "tool" {
					notes = append(notes, m.Name+": "+m.Content)
				}
			}
			if tt.callID != "" && (len(notes) != 2 || !strings.Contains(strings.Join(notes, "|"), "read_file: not passed to the client: it takes one call a turn")) {
				t.Errorf("OL1's tool messages %q, want get_weather's result and read_file refused", notes)
			}
		})
	}
}
