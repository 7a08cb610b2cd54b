package chain_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/chain/mock"
	"chainproxy/chain/node"
	"chainproxy/config"
	"chainproxy/internal/nodetest"
	"chainproxy/store"
	"chainproxy/tools"
)

// recorder keeps every request a node received.
type recorder struct {
	node.Backend
	mu   sync.Mutex
	reqs []node.Request
}

func (r *recorder) Chat(ctx context.Context, req *node.Request, fn func(node.Chunk) error) error {
	r.mu.Lock()
	cp := *req
	cp.Messages = append([]chain.Message(nil), req.Messages...)
	r.reqs = append(r.reqs, cp)
	r.mu.Unlock()
	return r.Backend.Chat(ctx, req, fn)
}

func (r *recorder) requests() []node.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]node.Request(nil), r.reqs...)
}

type harness struct {
	engine *chain.Engine
	nodes  map[string]*recorder
	cfg    *config.Config
}

// newHarness builds an engine over mock nodes scripted by yamlText, with a
// small workspace for the built-in tools.
func newHarness(t *testing.T, yamlText string) *harness {
	t.Helper()
	root := t.TempDir()
	for name, body := range map[string]string{"a.txt": "alpha\n", "b.txt": "bravo\n", "sub/c.txt": "charlie\n"} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Parse([]byte(yamlText))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	cfg.Tools.Root = root
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{nodes: map[string]*recorder{}, cfg: cfg}
	record := func(n config.Node) node.Backend {
		rec := &recorder{Backend: mock.New(n)}
		h.nodes[n.Name] = rec
		return rec
	}
	mem := store.NewMemory(1000, 10)
	h.engine, err = chain.New(cfg, chain.Deps{
		Nodes: nodetest.Build(t, cfg, map[string]node.Provider{config.ProviderMock: record}),
		Tools: reg,
		Guard: antiloop.NewGuard(mem, cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL),
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) run(t *testing.T, model, msg string) (*chain.Result, []chain.Event, error) {
	t.Helper()
	var events []chain.Event
	res, err := h.engine.Run(context.Background(), &chain.RunRequest{
		TraceID: "t", Model: model, Conversation: t.Name(),
		Messages: []chain.Message{{Role: "user", Content: msg}},
	}, func(ev chain.Event) error { events = append(events, ev); return nil })
	return res, events, err
}

const threeNodes = `
nodes:
  - name: OL1
    provider: mock
    mock:
      turns:
        - tool_calls: [{name: list_dir, args: {path: "."}}]
        - tool_calls: [{name: read_file, args: {path: a.txt}}, {name: read_file, args: {path: b.txt}}]
        - content: "OL1 notes: two files."
      scenarios:
        - when: loop
          turns:
            - tool_calls: [{name: list_dir, args: {path: "."}}]
        - when: wander
          turns:
            - tool_calls: [{name: list_dir, args: {path: "."}}]
            - tool_calls: [{name: list_dir, args: {path: sub}}]
            - tool_calls: [{name: read_file, args: {path: a.txt}}]
            - tool_calls: [{name: read_file, args: {path: b.txt}}]
            - tool_calls: [{name: read_file, args: {path: sub/c.txt}}]
        - when: batch
          turns:
            - tool_calls: [{name: list_dir, args: {path: "."}}, {name: list_dir, args: {path: "."}}, {name: list_dir, args: {path: "."}}]
            - content: "done"
        - when: badformat
          turns:
            - tool_calls: [{name: move_file, args: {from: a}}]
            - tool_calls: [{name: ls, args: {}}]
            - tool_calls: [{name: list_dir, raw_args: "{path: .}"}]
            - content: "never reached"
        - when: fixformat
          turns:
            - tool_calls: [{name: ls, args: {}}]
            - tool_calls: [{name: list_dir, args: {path: "."}}]
            - content: "corrected"
  - name: M1
    provider: mock
    mock:
      turns:
        - content: "M1 synthesis."
          reasoning: "M1 hidden thinking"
  - name: M2
    provider: mock
    mock:
      turns:
        - content: "M2 final answer."
          reasoning: "M2 hidden thinking"
chain:
  simple_node: OL1
`

func TestReflexiveChain(t *testing.T) {
	h := newHarness(t, threeNodes)
	res, events, err := h.run(t, chain.ModelReflexive, "compare a and b")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Message.Content, "M2 final answer."; got != want {
		t.Errorf("reply = %q, want %q", got, want)
	}
	tr := res.Trace
	type stageSummary struct {
		node, status string
		turns, tools int
	}
	var got []stageSummary
	for _, s := range tr.Stages {
		got = append(got, stageSummary{s.Node, s.Status, s.Turns, len(s.ToolsUsed)})
	}
	want := []stageSummary{{"OL1", "ok", 3, 3}, {"M1", "ok", 1, 0}, {"M2", "ok", 1, 0}}
	if !equalSlices(got, want) {
		t.Errorf("stages = %+v, want %+v", got, want)
	}
	if tr.Turns != 5 || tr.Mode != chain.ModeReflexive {
		t.Errorf("trace turns, mode = %d, %s; want 5, reflexive", tr.Turns, tr.Mode)
	}
	// M1 received OL1's tool calls with their results, from every turn.
	m1 := h.nodes["M1"].requests()[0]
	sys := m1.Messages[len(m1.Messages)-1].Content
	for _, want := range []string{`list_dir {"path":"."}`, "a.txt", `read_file {"path":"a.txt"}`, "alpha", "bravo", "OL1 notes: two files."} {
		if !strings.Contains(sys, want) {
			t.Errorf("M1's context lacks %q:\n%s", want, sys)
		}
	}
	if len(m1.Tools) != 0 {
		t.Errorf("M1 was offered tools %v; only tool stages get tools", m1.Tools)
	}
	// M2 received M1's synthesis and the evidence it rested on.
	m2msgs := h.nodes["M2"].requests()[0].Messages
	m2 := m2msgs[len(m2msgs)-1].Content
	for _, want := range []string{"M1 synthesis.", "bravo"} {
		if !strings.Contains(m2, want) {
			t.Errorf("M2's context lacks %q", want)
		}
	}
	if strings.Contains(m2, "M1 hidden thinking") || strings.Contains(res.Message.Content, "thinking") {
		t.Error("hidden reasoning leaked into a stage context or the reply")
	}
	// The user's message reaches every stage last, after the findings.
	if last := m1.Messages[len(m1.Messages)-1]; last.Role != "user" || !strings.HasSuffix(last.Content, "\n\ncompare a and b") {
		t.Errorf("M1's last message = %+v", last)
	}
	// Only the answering stage streams deltas.
	var kinds []string
	for _, ev := range events {
		if ev.Kind == chain.EventDelta && ev.Node != "M2" {
			t.Errorf("delta from %s: only the answering stage streams", ev.Node)
		}
		if ev.Kind != chain.EventDelta && ev.Kind != chain.EventTool {
			kinds = append(kinds, ev.Kind+":"+ev.Node)
		}
	}
	wantKinds := []string{"classified:", "stage_start:OL1", "turn:OL1", "turn:OL1", "turn:OL1", "stage_end:OL1",
		"stage_start:M1", "turn:M1", "stage_end:M1", "stage_start:M2", "turn:M2", "stage_end:M2"}
	if !equalSlices(kinds, wantKinds) {
		t.Errorf("events = %v\nwant %v", kinds, wantKinds)
	}
}

func TestLoopingStageStopsAtSecondCall(t *testing.T) {
	h := newHarness(t, threeNodes)
	res, _, err := h.run(t, chain.ModelReflexive, "loop forever please")
	if err != nil {
		t.Fatal(err)
	}
	ol1 := res.Trace.Stages[0]
	if ol1.Status != chain.StageStoppedRepeat || ol1.Turns != 2 {
		t.Errorf("OL1 = %s after %d turns, want stopped_repeat after 2", ol1.Status, ol1.Turns)
	}
	var statuses []string
	for _, u := range ol1.ToolsUsed {
		statuses = append(statuses, u.Name+":"+u.Status)
	}
	if want := []string{"list_dir:ok", "list_dir:blocked"}; !equalSlices(statuses, want) {
		t.Errorf("OL1 tools = %v, want %v (list_dir runs once)", statuses, want)
	}
	if res.Trace.Turns > 8 {
		t.Errorf("chain used %d turns, budget 8", res.Trace.Turns)
	}
	if res.Message.Content != "M2 final answer." {
		t.Errorf("reply = %q; the chain must still answer", res.Message.Content)
	}
}

func TestSimpleModeLoopGetsFinalCallWithoutTools(t *testing.T) {
	h := newHarness(t, threeNodes)
	res, _, err := h.run(t, chain.ModelSimple, "loop please")
	if err != nil {
		t.Fatal(err)
	}
	st := res.Trace.Stages[0]
	if len(res.Trace.Stages) != 1 || st.Node != "OL1" || st.Status != chain.StageStoppedRepeat {
		t.Fatalf("stages = %+v, want OL1 stopped_repeat alone", res.Trace.Stages)
	}
	// Two stage turns, and the final tool-less call counts only globally.
	if st.Turns != 2 || res.Trace.Turns != 3 {
		t.Errorf("stage turns %d, chain turns %d; want 2 and 3", st.Turns, res.Trace.Turns)
	}
	reqs := h.nodes["OL1"].requests()
	final := reqs[len(reqs)-1]
	if len(final.Tools) != 0 {
		t.Errorf("final call offered %d tools, want none", len(final.Tools))
	}
	if res.Message.Content == "" {
		t.Error("empty answer after the final call")
	}
}

func TestBudgets(t *testing.T) {
	tests := []struct {
		name      string
		yaml      string
		model     string
		msg       string
		wantTurns []int
		wantStat  []string
		maxTotal  int
	}{
		{
			name: "stage budget stops a wandering OL1", yaml: threeNodes, model: chain.ModelReflexive, msg: "wander",
			wantTurns: []int{4, 1, 1}, wantStat: []string{"stopped_budget", "ok", "ok"}, maxTotal: 8,
		},
		{
			name:  "global budget keeps a turn for each later stage",
			yaml:  threeNodes + "  max_total_turns: 4\n",
			model: chain.ModelReflexive, msg: "wander",
			wantTurns: []int{2, 1, 1}, wantStat: []string{"stopped_budget", "ok", "ok"}, maxTotal: 4,
		},
		{
			name: "simple mode keeps one turn for the final answer", yaml: threeNodes + "  max_total_turns: 3\n",
			model: chain.ModelSimple, msg: "wander",
			wantTurns: []int{2}, wantStat: []string{"stopped_budget"}, maxTotal: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.yaml)
			res, _, err := h.run(t, tt.model, tt.msg)
			if err != nil {
				t.Fatal(err)
			}
			var turns []int
			var stat []string
			for _, s := range res.Trace.Stages {
				turns, stat = append(turns, s.Turns), append(stat, s.Status)
			}
			if !equalSlices(turns, tt.wantTurns) || !equalSlices(stat, tt.wantStat) {
				t.Errorf("turns %v statuses %v, want %v %v", turns, stat, tt.wantTurns, tt.wantStat)
			}
			if res.Trace.Turns > tt.maxTotal {
				t.Errorf("chain turns %d > budget %d", res.Trace.Turns, tt.maxTotal)
			}
			if res.Message.Content == "" {
				t.Error("no answer")
			}
		})
	}
}

func TestBatchDuplicates(t *testing.T) {
	h := newHarness(t, threeNodes)
	res, _, err := h.run(t, chain.ModelReflexive, "batch")
	if err != nil {
		t.Fatal(err)
	}
	var statuses []string
	for _, u := range res.Trace.Stages[0].ToolsUsed {
		statuses = append(statuses, u.Status)
	}
	if want := []string{"ok", "duplicate", "duplicate"}; !equalSlices(statuses, want) {
		t.Errorf("statuses = %v, want %v", statuses, want)
	}
	used := res.Trace.Stages[0].ToolsUsed
	// The model is told it is a duplicate, and gets the executed result.
	if !strings.HasSuffix(used[1].Result, "\n"+used[0].Result) || !strings.HasPrefix(used[1].Result, "[duplicate:") || used[0].Result == "" {
		t.Errorf("duplicates must say so and carry the executed call's result: %q vs %q", used[1].Result, used[0].Result)
	}
}

func TestFormatErrors(t *testing.T) {
	t.Run("three in a row stop the stage", func(t *testing.T) {
		h := newHarness(t, threeNodes)
		res, _, err := h.run(t, chain.ModelReflexive, "badformat")
		if err != nil {
			t.Fatal(err)
		}
		ol1 := res.Trace.Stages[0]
		if ol1.Status != chain.StageStoppedFormatErrors || ol1.Turns != 3 {
			t.Errorf("OL1 = %s after %d turns, want stopped_format_errors after 3", ol1.Status, ol1.Turns)
		}
		for _, u := range ol1.ToolsUsed {
			if u.Status != chain.ToolError {
				t.Errorf("%s status %s, want error", u.Name, u.Status)
			}
		}
		// The model was told what went wrong and which tools exist.
		second := h.nodes["OL1"].requests()[1]
		fb := second.Messages[len(second.Messages)-1]
		if fb.Role != "tool" || !strings.Contains(fb.Content, "move_file") || !strings.Contains(fb.Content, "list_dir, read_file, search_files") {
			t.Errorf("feedback = %+v", fb)
		}
	})
	t.Run("a good call resets the count", func(t *testing.T) {
		h := newHarness(t, threeNodes)
		res, _, err := h.run(t, chain.ModelReflexive, "fixformat")
		if err != nil {
			t.Fatal(err)
		}
		if ol1 := res.Trace.Stages[0]; ol1.Status != chain.StageOK || ol1.Turns != 3 {
			t.Errorf("OL1 = %s after %d turns, want ok after 3", ol1.Status, ol1.Turns)
		}
	})
}

func TestFailures(t *testing.T) {
	failing := `
nodes:
  - {name: OL1, provider: mock, mock: {turns: [{fail: "boom"}]}}
  - {name: M1, provider: mock, mock: {offline: true}}
  - {name: M2, provider: mock, mock: {turns: [{fail: "bang"}]}}
`
	t.Run("every stage failed", func(t *testing.T) {
		h := newHarness(t, failing)
		_, _, err := h.run(t, chain.ModelReflexive, "compare")
		var fl *chain.Failure
		if !errors.As(err, &fl) || !errors.Is(err, chain.ErrAllStagesFailed) {
			t.Fatalf("err = %v, want a Failure of every stage", err)
		}
		var stat []string
		for _, s := range fl.Trace.Stages {
			stat = append(stat, s.Status)
		}
		if want := []string{"failed", "skipped_offline", "failed"}; !equalSlices(stat, want) {
			t.Errorf("statuses = %v, want %v", stat, want)
		}
		if fl.Trace.Stages[0].Error == "" {
			t.Error("a failed stage should say why")
		}
	})
	t.Run("last stage failed: the previous one answers", func(t *testing.T) {
		h := newHarness(t, strings.Replace(threeNodes, `content: "M2 final answer."`, `fail: "down"`, 1))
		res, events, err := h.run(t, chain.ModelReflexive, "compare")
		if err != nil {
			t.Fatal(err)
		}
		if res.Message.Content != "M1 synthesis." {
			t.Errorf("reply = %q, want M1's synthesis", res.Message.Content)
		}
		var deltas []string
		for _, ev := range events {
			if ev.Kind == chain.EventDelta && ev.Content != "" {
				deltas = append(deltas, ev.Content)
			}
		}
		if strings.Join(deltas, "") != "M1 synthesis." {
			t.Errorf("streamed %q, want M1's synthesis delivered whole", deltas)
		}
	})
}

func TestModeDecision(t *testing.T) {
	h := newHarness(t, threeNodes)
	tests := []struct {
		model, forced, msg string
		tools              bool
		wantMode, reason   string
	}{
		{chain.ModelAuto, "", "hi", false, "simple", "short message"},
		{chain.ModelAuto, "", "Please compare these two files", false, "reflexive", "keyword: compare"},
		{chain.ModelSimple, "", "Please compare these two files", false, "simple", "forced by model chain/simple"},
		{chain.ModelAuto, "reflexive", "hi", false, "reflexive", "forced by header X-Chain-Mode"},
		{"OL1", "", "compare", false, "simple", "direct to node OL1"},
		{chain.ModelReflexive, "", "compare", true, "reflexive", "client tools offered to the stages with tools: get_weather"},
		{chain.ModelSimple, "", "compare", true, "simple", "forced by model chain/simple"},
	}
	for _, tt := range tests {
		t.Run(tt.model+"/"+tt.msg, func(t *testing.T) {
			req := &chain.RunRequest{Model: tt.model, ForcedMode: tt.forced, Messages: []chain.Message{{Role: "user", Content: tt.msg}}}
			if tt.tools {
				req.ClientTools = []chain.Tool{{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object"}`)}}
			}
			res, err := h.engine.Run(context.Background(), req, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Trace.Mode != tt.wantMode || !strings.Contains(strings.Join(res.Trace.Reasons, "|"), tt.reason) {
				t.Errorf("mode %s reasons %q, want %s with %q", res.Trace.Mode, res.Trace.Reasons, tt.wantMode, tt.reason)
			}
		})
	}
	if _, err := h.engine.Resolve("gpt-9"); !errors.Is(err, chain.ErrUnknownModel) {
		t.Errorf("Resolve(gpt-9) = %v, want ErrUnknownModel", err)
	}
}

// TestModeFromTheUsersWords: the client's scaffolding does not make a
// request reflexive. A long system prompt full of lists and questions,
// the tools a client offers, earlier turns and tool results are not
// judged; the words of the newest user message that has any are, and the
// follow-ups of an agent turn get its first request's mode.
func TestModeFromTheUsersWords(t *testing.T) {
	h := newHarness(t, threeNodes)
	system := strings.Repeat("Rules:\n1. Why? Read first.\n2. How? Compare and analyze step by step.\n", 200)
	earlier := strings.Repeat("Compare the designs and explain why, step by step. ", 20)
	tools := []chain.Tool{{Name: "read_file", Parameters: json.RawMessage(`{"type":"object"}`)}, {Name: "grep", Parameters: json.RawMessage(`{"type":"object"}`)}}
	question := "<system-reminder>\n" + strings.Repeat("- skill: compare, analyze, explain why? how?\n", 100) + "</system-reminder>\nWhat is 2+2?"
	tests := []struct {
		name string
		msgs []chain.Message
		want string
	}{
		{"first request", []chain.Message{
			{Role: "system", Content: system},
			{Role: "user", Content: earlier}, {Role: "assistant", Content: "Done."},
			{Role: "user", Content: question},
		}, chain.ModeSimple},
		{"follow-up with a tool result", []chain.Message{
			{Role: "system", Content: system},
			{Role: "user", Content: earlier}, {Role: "assistant", Content: "Done."},
			{Role: "user", Content: question},
			{Role: "assistant", ToolCalls: []chain.ToolCall{{ID: "c1", Name: "read_file", Arguments: `{"path":"a"}`}}},
			{Role: "tool", ToolCallID: "c1", Name: "read_file", Content: earlier},
		}, chain.ModeSimple},
		{"follow-up with injected context only", []chain.Message{
			{Role: "system", Content: system},
			{Role: "user", Content: question},
			{Role: "assistant", Content: "4"},
			{Role: "user", Content: "<system-reminder>The user opened main.go. Compare it step by step?</system-reminder>"},
		}, chain.ModeSimple},
		{"the earlier turn's words are not judged again", []chain.Message{
			{Role: "user", Content: earlier}, {Role: "assistant", Content: "Done."},
			{Role: "user", Content: "Thanks!"},
		}, chain.ModeSimple},
		{"the user's words still decide", []chain.Message{
			{Role: "system", Content: system},
			{Role: "user", Content: "<system-reminder>x</system-reminder>Compare Go and Rust."},
		}, chain.ModeReflexive},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := h.engine.Run(context.Background(), &chain.RunRequest{Model: chain.ModelAuto, Messages: tt.msgs, ClientTools: tools}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Trace.Mode != tt.want {
				t.Errorf("mode %s, want %s (reasons %q)", res.Trace.Mode, tt.want, res.Trace.Reasons)
			}
		})
	}
}

func equalSlices[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestDirectNodeIsAPlainRelay(t *testing.T) {
	h := newHarness(t, threeNodes)
	if _, _, err := h.run(t, "OL1", "loop"); err != nil {
		t.Fatal(err)
	}
	req := h.nodes["OL1"].requests()[0]
	if len(req.Tools) != 0 || req.Messages[0].Role != "user" {
		t.Errorf("direct call to OL1 got %d tools and first message %q; want the client's messages only", len(req.Tools), req.Messages[0].Role)
	}
	// chain/simple, by contrast, offers the server tools.
	if _, _, err := h.run(t, chain.ModelSimple, "hi"); err != nil {
		t.Fatal(err)
	}
	if reqs := h.nodes["OL1"].requests(); len(reqs[1].Tools) != 3 {
		t.Errorf("chain/simple offered %d tools, want 3", len(reqs[1].Tools))
	}
}

// TestBackgroundRequestNoServerTools: a client's own request (here Open
// WebUI's title) is answered in simple mode without the server's tools,
// which chain/auto and chain/simple offer to the user's own simple
// questions.
func TestBackgroundRequestNoServerTools(t *testing.T) {
	for _, model := range []string{chain.ModelAuto, chain.ModelSimple} {
		t.Run(model, func(t *testing.T) {
			h := newHarness(t, threeNodes)
			title := "### Task:\nGenerate a concise, 3-5 word title with an emoji summarizing the chat history.\n### Chat History:\n<chat_history>\nUSER: hi\n</chat_history>"
			res, events, err := h.run(t, model, title)
			if err != nil {
				t.Fatal(err)
			}
			if res.Trace.Mode != chain.ModeSimple || !slices.Contains(res.Trace.Reasons, "Open WebUI's title generation request: the client's own work, not the user's words") {
				t.Fatalf("mode %q, reasons %q", res.Trace.Mode, res.Trace.Reasons)
			}
			// The traces list names it, rather than by "### Task:".
			if q := events[0].Question; events[0].Kind != chain.EventClassified || q != "(Open WebUI's title generation request)" {
				t.Errorf("first event %v, question %q", events[0].Kind, q)
			}
			titleCalls := len(h.nodes["OL1"].requests())
			if _, _, err := h.run(t, model, "hi"); err != nil {
				t.Fatal(err)
			}
			reqs := h.nodes["OL1"].requests()
			for i, req := range reqs[:titleCalls] {
				if len(req.Tools) != 0 {
					t.Errorf("the title request's call %d was offered %d tools, want none", i, len(req.Tools))
				}
			}
			if n := len(reqs[titleCalls].Tools); n != 3 {
				t.Errorf("the user's question was offered %d tools, want the 3 server tools", n)
			}
		})
	}
}

// TestForcedChainNotForOwnRequests: a client's own request sent to
// chain/reflexive (Open WebUI sends its titles to the chat's model) is
// answered by one node, and the reasons say why the model's mode was not
// applied; the user's own requests keep it.
func TestForcedChainNotForOwnRequests(t *testing.T) {
	h := newHarness(t, threeNodes)
	title := "### Task:\nGenerate a concise, 3-5 word title with an emoji summarizing the chat history.\n### Chat History:\n<chat_history>\nUSER: compare a and b\n</chat_history>"
	res, _, err := h.run(t, chain.ModelReflexive, title)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Open WebUI's title generation request: the client's own work, not the user's words",
		"forced by model chain/reflexive: not for the client's own requests",
	}
	if res.Trace.Mode != chain.ModeSimple || len(res.Trace.Stages) != 1 || !slices.Equal(res.Trace.Reasons[:2], want) {
		t.Errorf("mode %q, %d stages, reasons %q; want one node and %q", res.Trace.Mode, len(res.Trace.Stages), res.Trace.Reasons, want)
	}
	res, _, err = h.run(t, chain.ModelReflexive, "hi")
	if err != nil {
		t.Fatal(err)
	}
	if res.Trace.Mode != chain.ModeReflexive {
		t.Errorf("the user's own request: mode %q, want the forced chain", res.Trace.Mode)
	}
}

func TestOneTurnBudgetStillAnswers(t *testing.T) {
	for _, model := range []string{chain.ModelSimple, chain.ModelReflexive} {
		t.Run(model, func(t *testing.T) {
			yaml := strings.Replace(threeNodes, "chain:\n  simple_node: OL1\n", "chain:\n  simple_node: OL1\n  stages: [{node: OL1, max_turns: 4, tools: true}]\n  max_total_turns: 1\n", 1)
			h := newHarness(t, yaml)
			res, _, err := h.run(t, model, "loop")
			if err != nil {
				t.Fatal(err)
			}
			if res.Trace.Turns != 1 || res.Message.Content == "" {
				t.Errorf("turns %d, answer %q: one turn must answer", res.Trace.Turns, res.Message.Content)
			}
			if reqs := h.nodes["OL1"].requests(); len(reqs[0].Tools) != 0 {
				t.Error("the only turn was offered tools")
			}
		})
	}
}

// TestIdleAfterEveryModelCall: a streaming writer holding back chunks is
// told when each model call ends, before tools run or the next stage
// starts, and every call carries the hook to its backend.
func TestIdleAfterEveryModelCall(t *testing.T) {
	h := newHarness(t, threeNodes)
	var seq []string
	res, err := h.engine.Run(context.Background(), &chain.RunRequest{
		TraceID: "t", Model: chain.ModelReflexive, Conversation: t.Name(),
		Messages: []chain.Message{{Role: "user", Content: "compare a.txt and b.txt"}},
		Idle:     func() { seq = append(seq, "idle") },
	}, func(ev chain.Event) error { seq = append(seq, ev.Kind); return nil })
	if err != nil {
		t.Fatal(err)
	}
	idles, sinceTurn := 0, false
	for _, k := range seq {
		switch k {
		case "idle":
			idles++
			sinceTurn = true
		case chain.EventTurn:
			sinceTurn = false
		case chain.EventTool:
			if !sinceTurn {
				t.Fatalf("a tool ran before the model call's Idle: %v", seq)
			}
		}
	}
	if idles != res.Trace.Turns {
		t.Errorf("Idle called %d times for %d model calls: %v", idles, res.Trace.Turns, seq)
	}
	for name, rec := range h.nodes {
		for i, req := range rec.requests() {
			if req.Idle == nil {
				t.Errorf("%s call %d: Request.Idle not set", name, i)
			}
		}
	}
}

// blockingRunner runs the registry's tools, but its first call waits for
// its context to end, as a slow tool does when the client goes away.
type blockingRunner struct {
	chain.ToolRunner
	started chan struct{}
	once    sync.Once
}

func (b *blockingRunner) Call(ctx context.Context, name string, args []byte) (string, error) {
	first := false
	b.once.Do(func() { first = true })
	if first {
		close(b.started)
		<-ctx.Done()
		return "", ctx.Err()
	}
	return b.ToolRunner.Call(ctx, name, args)
}

// TestCancelledToolCallIsReleased: a client that goes away while a tool runs
// leaves no "pending" claim behind, so its retry runs the call.
func TestCancelledToolCallIsReleased(t *testing.T) {
	cfg, err := config.Parse([]byte(`
nodes:
  - name: OL1
    provider: mock
    mock:
      turns:
        - tool_calls: [{name: list_dir, args: {path: "."}}]
        - content: "done"
chain:
  stages: [{node: OL1, max_turns: 4, tools: true}]
  simple_node: OL1
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Root = t.TempDir()
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	runner := &blockingRunner{ToolRunner: reg, started: make(chan struct{})}
	mem := store.NewMemory(1000, 10)
	eng, err := chain.New(cfg, chain.Deps{
		Nodes: nodetest.Build(t, cfg, nodetest.Mocks),
		Tools: runner,
		Guard: antiloop.NewGuard(mem, cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL),
	})
	if err != nil {
		t.Fatal(err)
	}
	req := func() *chain.RunRequest {
		return &chain.RunRequest{TraceID: "t", Model: chain.ModelSimple, Conversation: "conv",
			Messages: []chain.Message{{Role: "user", Content: "list the folder"}}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // exits once the tool has started, which the run below awaits
		<-runner.started
		cancel()
	}()
	if _, err := eng.Run(ctx, req(), nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("first run error = %v, want context.Canceled", err)
	}
	res, err := eng.Run(context.Background(), req(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if used := res.Trace.ToolsUsed(); len(used) != 1 || used[0].Status != chain.ToolOK {
		t.Errorf("retry's tool calls = %+v, want one that ran (ok)", used)
	}
}
