package chain_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/config"
	"chainproxy/internal/nodetest"
	"chainproxy/store"
	"chainproxy/tools"
)

const resumeNodes = `
nodes:
  - name: OL1
    provider: mock
    mock:
      turns:
        - tool_calls:
            - {id: c1, name: get_weather, args: {city: Paris}}
            - {id: c2, name: read_file, args: {path: a.txt}}
        - content: "notes"
  - {name: M1, provider: mock, mock: {turns: [{content: analysis}]}}
  - {name: M2, provider: mock, mock: {turns: [{content: answer}]}}
chain:
  stages: [{node: OL1, max_turns: 3, tools: true}, {node: M1, max_turns: 1}, {node: M2, max_turns: 1}]
`

// resumeHarness is newHarness with a resume store, unless mem is nil.
func resumeHarness(t *testing.T, mem *store.Memory) *harness {
	t.Helper()
	h := newHarness(t, resumeNodes)
	reg, err := tools.New(h.cfg.Tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	deps := chain.Deps{Nodes: nodetest.Build(t, h.cfg, ownMocks(t, h.nodes)), Tools: reg, Guard: antiloop.NewGuard(store.NewMemory(0, 0), h.cfg.Antiloop.SignatureTTL, h.cfg.Antiloop.CallIDTTL)}
	if mem != nil {
		deps.Resume = mem
	}
	if h.engine, err = chain.New(h.cfg, deps); err != nil {
		t.Fatal(err)
	}
	return h
}

func stagesOf(tr chain.Trace) string {
	var b []string
	for _, s := range tr.Stages {
		var uses []string
		for _, u := range s.ToolsUsed {
			uses = append(uses, u.Name+":"+u.Status)
		}
		b = append(b, s.Node+":"+s.Status+"["+strings.Join(uses, ",")+"]")
	}
	return strings.Join(b, " ")
}

// TestResumeEdges: what the client sends back, and what the engine can
// find, decide how the chain goes on; it never fails the request.
func TestResumeEdges(t *testing.T) {
	weather := chain.Tool{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object"}`)}
	// The client's read_file replaces the server's.
	readFile := chain.Tool{Name: "read_file", Parameters: json.RawMessage(`{"type":"object"}`)}
	tests := []struct {
		name        string
		store       bool
		client      []chain.Tool
		results     map[string]string // by tool name; absent: not sent back
		firstStages string
		wantStages  string
		wantReason  string
	}{
		{
			name: "results ok and error", store: true, client: []chain.Tool{weather},
			results:     map[string]string{"get_weather": "Error: weather service down"},
			firstStages: "OL1:awaiting_client[read_file:ok,get_weather:client]",
			wantStages:  "OL1:ok[read_file:ok,get_weather:error] M1:ok[] M2:ok[]",
			wantReason:  "resumed in stage OL1",
		},
		{
			name: "a result not sent back", store: true, client: []chain.Tool{weather, readFile},
			results:     map[string]string{"get_weather": "sunny"},
			firstStages: "OL1:awaiting_client[get_weather:client,read_file:client]",
			wantStages:  "OL1:ok[get_weather:ok,read_file:error] M1:ok[] M2:ok[]",
			wantReason:  "client tool read_file replaces the server tool read_file",
		},
		{
			// Which result is missing does not matter: the chain is
			// found by any of the calls it waits for.
			name: "only a later call's result sent back", store: true, client: []chain.Tool{weather, readFile},
			results:     map[string]string{"read_file": "alpha"},
			firstStages: "OL1:awaiting_client[get_weather:client,read_file:client]",
			wantStages:  "OL1:ok[get_weather:error,read_file:ok] M1:ok[] M2:ok[]",
			wantReason:  "resumed in stage OL1",
		},
		{
			name: "no resume store", store: false, client: []chain.Tool{weather},
			results:     map[string]string{"get_weather": "sunny"},
			firstStages: "OL1:awaiting_client[read_file:ok,get_weather:client]",
			// A new chain: OL1 answers from the result in its conversation.
			wantStages: "OL1:ok[] M1:ok[] M2:ok[]",
			wantReason: "no resume store: the chain starts again",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mem *store.Memory
			if tt.store {
				mem = store.NewMemory(0, 0)
			}
			h := resumeHarness(t, mem)
			msgs := []chain.Message{{Role: "user", Content: "weather and notes"}}
			run := func(msgs []chain.Message) *chain.Result {
				t.Helper()
				res, err := h.engine.Run(context.Background(), &chain.RunRequest{TraceID: "t", Model: chain.ModelReflexive, Conversation: "conv", Messages: msgs, ClientTools: tt.client}, nil)
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			first := run(msgs)
			if got := stagesOf(first.Trace); got != tt.firstStages || first.FinishReason != "tool_calls" {
				t.Fatalf("first: %s %s, want tool_calls %s", first.FinishReason, got, tt.firstStages)
			}
			msgs = append(msgs, first.Message)
			for _, c := range first.Message.ToolCalls {
				if res, ok := tt.results[c.Name]; ok {
					msgs = append(msgs, chain.Message{Role: "tool", ToolCallID: c.ID, Content: res})
				}
			}
			second := run(msgs)
			if got := stagesOf(second.Trace); got != tt.wantStages {
				t.Errorf("follow-up: %s, want %s", got, tt.wantStages)
			}
			reqs := h.nodes["OL1"].requests()
			if last := reqs[len(reqs)-1].Messages; last[len(last)-1].Role != "tool" {
				t.Errorf("OL1's last call ends with %+v, want the client's result", last[len(last)-1])
			}
			if !strings.Contains(strings.Join(append(first.Trace.Reasons, second.Trace.Reasons...), "|"), tt.wantReason) {
				t.Errorf("reasons %q then %q, want %q", first.Trace.Reasons, second.Trace.Reasons, tt.wantReason)
			}
		})
	}
}

// TestResumeOtherConversation: a follow-up from another conversation with
// the same tool-call IDs does not resume the first one's chain.
func TestResumeOtherConversation(t *testing.T) {
	h := resumeHarness(t, store.NewMemory(0, 0))
	tools := []chain.Tool{{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object"}`)}}
	msgs := []chain.Message{{Role: "user", Content: "weather"}}
	first, err := h.engine.Run(context.Background(), &chain.RunRequest{Model: chain.ModelReflexive, Conversation: "alice", Messages: msgs, ClientTools: tools}, nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs = append(msgs, first.Message, chain.Message{Role: "tool", ToolCallID: first.Message.ToolCalls[0].ID, Content: "sunny"})
	res, err := h.engine.Run(context.Background(), &chain.RunRequest{Model: chain.ModelReflexive, Conversation: "mallory", Messages: msgs, ClientTools: tools}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := strings.Join(res.Trace.Reasons, "|"); strings.Contains(r, "resumed") || !strings.Contains(r, "nothing to resume") {
		t.Errorf("reasons = %q, want a new chain", res.Trace.Reasons)
	}
}

// TestClientToolChoiceNoneInChain: tool_choice none keeps the client's
// tools from the chain's stages, so the chain never pauses for the client.
func TestClientToolChoiceNoneInChain(t *testing.T) {
	h := resumeHarness(t, store.NewMemory(0, 0))
	res, err := h.engine.Run(context.Background(), &chain.RunRequest{
		Model: chain.ModelReflexive, Conversation: "c", Messages: []chain.Message{{Role: "user", Content: "weather"}},
		ClientTools: []chain.Tool{{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object"}`)}}, ToolChoice: chain.ToolChoice{Mode: "none"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.FinishReason != "stop" || len(res.Message.ToolCalls) != 0 {
		t.Errorf("finish %q with %d calls, want stop with none", res.FinishReason, len(res.Message.ToolCalls))
	}
	for _, tl := range h.nodes["OL1"].requests()[0].Tools {
		if tl.Name == "get_weather" {
			t.Error("OL1 was offered the client's tool under tool_choice none")
		}
	}
	if r := strings.Join(res.Trace.Reasons, "|"); !strings.Contains(r, "client tools not offered: tool_choice none") {
		t.Errorf("reasons = %q", res.Trace.Reasons)
	}
}

// BenchmarkClientRoundTrip is an agent's two requests: the chain paused at
// OL1's client call, its state saved, then found, decoded and resumed.
func BenchmarkClientRoundTrip(b *testing.B) {
	cfg, err := config.Parse([]byte(resumeNodes))
	if err != nil {
		b.Fatal(err)
	}
	cfg.Tools.Root = b.TempDir()
	if err := os.WriteFile(filepath.Join(cfg.Tools.Root, "a.txt"), []byte("alpha\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		b.Fatal(err)
	}
	mem := store.NewMemory(0, 0)
	eng, err := chain.New(cfg, chain.Deps{Nodes: nodetest.Build(b, cfg, nodetest.Mocks), Tools: reg, Resume: mem, Guard: antiloop.NewGuard(mem, 0, 0)})
	if err != nil {
		b.Fatal(err)
	}
	client := []chain.Tool{{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object"}`)}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		msgs := []chain.Message{{Role: "user", Content: "weather and notes"}}
		first, err := eng.Run(ctx, &chain.RunRequest{Model: chain.ModelReflexive, Conversation: "c", Messages: msgs, ClientTools: client}, nil)
		if err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, first.Message, chain.Message{Role: "tool", ToolCallID: first.Message.ToolCalls[0].ID, Content: "sunny"})
		res, err := eng.Run(ctx, &chain.RunRequest{Model: chain.ModelReflexive, Conversation: "c", Messages: msgs, ClientTools: client}, nil)
		if err != nil || res.FinishReason != "stop" {
			b.Fatalf("follow-up: %v %v", res, err)
		}
	}
}

// TestResumeGlobalBudget: the chain's max_total_turns counts the turns of
// every round trip: OL1 gets what the later stages leave it, across requests.
func TestResumeGlobalBudget(t *testing.T) {
	const yaml = `
nodes:
  - name: OL1
    provider: mock
    mock:
      turns:
        - tool_calls: [{name: get_weather, args: {city: Paris}}]
        - tool_calls: [{name: get_weather, args: {city: Lyon}}]
        - tool_calls: [{name: get_weather, args: {city: Nice}}]
  - {name: M1, provider: mock, mock: {turns: [{content: analysis}]}}
  - {name: M2, provider: mock, mock: {turns: [{content: answer}]}}
chain:
  max_total_turns: 4
  stages: [{node: OL1, max_turns: 3, tools: true}, {node: M1, max_turns: 1}, {node: M2, max_turns: 1}]
`
	h := newHarness(t, yaml)
	reg, err := tools.New(h.cfg.Tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	mem := store.NewMemory(0, 0)
	if h.engine, err = chain.New(h.cfg, chain.Deps{Nodes: nodetest.Build(t, h.cfg, ownMocks(t, h.nodes)), Tools: reg, Resume: mem, Guard: antiloop.NewGuard(mem, 0, 0)}); err != nil {
		t.Fatal(err)
	}
	client := []chain.Tool{{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object"}`)}}
	msgs := []chain.Message{{Role: "user", Content: "weather"}}
	var res *chain.Result
	trips := 0
	for {
		res, err = h.engine.Run(context.Background(), &chain.RunRequest{Model: chain.ModelReflexive, Conversation: "c", Messages: msgs, ClientTools: client}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.FinishReason != "tool_calls" {
			break
		}
		if trips++; trips > 3 {
			t.Fatal("more than 3 round trips")
		}
		msgs = append(msgs, res.Message, chain.Message{Role: "tool", ToolCallID: res.Message.ToolCalls[0].ID, Content: "sunny " + string(rune('0'+trips))})
	}
	if got, want := stagesOf(res.Trace), "OL1:stopped_budget[get_weather:ok,get_weather:ok] M1:ok[] M2:ok[]"; got != want || res.Trace.Turns != 4 || trips != 2 {
		t.Errorf("after %d round trips: %s, %d turns; want 2 round trips, %s, 4 turns", trips, got, res.Trace.Turns, want)
	}
}

// TestResumedTraceShowsTheClientWait: a resumed chain's trace keeps the
// first request's time base, so the client's round trip is a span on its
// timeline: the client call lasts from the pause to the follow-up, and the
// resumed turn starts after it (fake time: testing/synctest).
func TestResumedTraceShowsTheClientWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := resumeHarness(t, store.NewMemory(0, 0))
		tools := []chain.Tool{{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object"}`)}}
		msgs := []chain.Message{{Role: "user", Content: "weather"}}
		run := func(msgs []chain.Message) *chain.Result {
			t.Helper()
			res, err := h.engine.Run(context.Background(), &chain.RunRequest{Model: chain.ModelReflexive, Conversation: "c", Messages: msgs, ClientTools: tools}, nil)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		first := run(msgs)
		const wait = 7 * time.Second // the client runs its tool
		time.Sleep(wait)
		msgs = append(msgs, first.Message, chain.Message{Role: "tool", ToolCallID: first.Message.ToolCalls[0].ID, Content: "sunny"})
		second := run(msgs)
		ol1 := second.Trace.Stages[0]
		var weather chain.ToolUse
		for _, u := range ol1.ToolsUsed {
			if u.Name == "get_weather" {
				weather = u
			}
		}
		if !weather.Client || weather.DurationMS < wait.Milliseconds() {
			t.Errorf("get_weather = client %v, %d ms; want a client call lasting the %v wait", weather.Client, weather.DurationMS, wait)
		}
		if n := len(ol1.Calls); n != 2 || ol1.Calls[1].StartMS < weather.StartMS+weather.DurationMS {
			t.Errorf("OL1 calls = %+v, want the resumed call after the round trip (ends at %d ms)", ol1.Calls, weather.StartMS+weather.DurationMS)
		}
		if m1 := second.Trace.Stages[1]; m1.StartMS < wait.Milliseconds() {
			t.Errorf("M1 starts at %d ms, want after the %v wait", m1.StartMS, wait)
		}
	})
}
