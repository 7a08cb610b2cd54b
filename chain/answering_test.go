package chain_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/chain/mock"
	"chainproxy/chain/node"
	"chainproxy/config"
	"chainproxy/internal/fakeollama"
	"chainproxy/internal/nodetest"
	"chainproxy/store"
)

// wireEngine builds an engine over OL1, M1 and M2 served by fakes of
// provider, each playing its replies (the last repeats), with stages
// (chain.stages' YAML) and a workspace holding a.txt.
func wireEngine(t *testing.T, provider, stages string, scripts map[string][]say) *chain.Engine {
	t.Helper()
	var y strings.Builder
	y.WriteString("nodes:\n")
	for _, name := range []string{"OL1", "M1", "M2"} {
		_, line := startNode(t, provider, name, scripts[name])
		y.WriteString(line)
	}
	y.WriteString("chain:\n  stages:\n" + stages)
	return engineOf(t, y.String())
}

const threeStages = "    - {node: OL1, max_turns: 4, tools: true}\n    - {node: M1, max_turns: 3}\n    - {node: M2, max_turns: 2}\n"

// TestFailedAnsweringStageFallsBack: when M2, the answering stage, fails,
// the reply is the best answer the earlier stages have, and M2's error in
// the trace says whose it is. A thinking model may answer with reasoning
// only and no content (Ollama's message.thinking, api/types.go; vLLM's
// reasoning_content): M1 is then degenerate, with nothing to give, and
// OL1's findings are the best answer there is, not a "No answer" note.
// The upstream failures are a 500 in each wire format (Ollama's
// {"error": …} body, OpenAI's error object).
func TestFailedAnsweringStageFallsBack(t *testing.T) {
	notes := say{content: []string{"OL1 notes: a.txt holds alpha."}}
	listed := say{calls: []sayCall{{"read_file", `{"path":"a.txt"}`}}}
	failed := say{status: 500}
	tests := []struct {
		name     string
		m1       say
		statuses []string
		reply    string
		m2Error  string // the end of M2's error
	}{
		{"M1 answered", say{content: []string{"M1 synthesis: alpha."}}, []string{"ok", "ok", "failed"},
			"M1 synthesis: alpha.", "; answered with M1's answer"},
		{"M1 only reasoned", say{reasoning: []string{"Let me think about a.txt."}}, []string{"ok", "degenerate", "failed"},
			"OL1 notes: a.txt holds alpha.", "; answered with OL1's answer"},
		{"M1 failed too", failed, []string{"ok", "failed", "failed"},
			"OL1 notes: a.txt holds alpha.", "; answered with OL1's answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachWire(t, func(t *testing.T, provider string, stream bool) {
				eng := wireEngine(t, provider, threeStages, map[string][]say{"OL1": {listed, notes}, "M1": {tt.m1}, "M2": {failed}})
				res, deltas, err := runEmit(t, eng, stream, &chain.RunRequest{TraceID: "t", Model: chain.ModelReflexive, Conversation: t.Name(),
					Messages: []chain.Message{{Role: "user", Content: "what is in a.txt?"}}})
				if err != nil {
					t.Fatal(err)
				}
				var statuses []string
				for _, s := range res.Trace.Stages {
					statuses = append(statuses, s.Status)
				}
				if !equalSlices(statuses, tt.statuses) {
					t.Errorf("statuses = %v, want %v", statuses, tt.statuses)
				}
				if res.Message.Content != tt.reply || res.FinishReason != "stop" {
					t.Errorf("reply = %q (%s), want %q (stop)", res.Message.Content, res.FinishReason, tt.reply)
				}
				if stream && deltas != tt.reply {
					t.Errorf("streamed %q, want %q delivered whole", deltas, tt.reply)
				}
				if m2 := res.Trace.Stages[2]; !strings.HasSuffix(m2.Error, tt.m2Error) || !strings.Contains(m2.Error, "500") {
					t.Errorf("M2's error = %q, want its cause and %q", m2.Error, tt.m2Error)
				}
			})
		})
	}
}

// TestClientToolsSkipStagesWithoutTools: an agent's own tools go to the
// stages with tools only (README, "Agents and client tools": M1 and M2
// never see them), so a later stage whose model cannot take tools runs as
// it always does. Ollama reports a model's capabilities from its template
// (server/images.go, Model.Capabilities, ollama/ollama at
// 5dbb81b72c4b61b737e4970db711f7718e4efcc6): deepseek-r1's are
// "completion" and "thinking", no "tools", and Ollama refuses tools sent to
// it with a 400. The request must not fail with tools_unsupported at M1,
// after OL1 did its work, for tools M1 would never have been sent.
func TestClientToolsSkipStagesWithoutTools(t *testing.T) {
	ol1 := fakeollama.New(t, fakeollama.Reply{Content: []string{"OL1 notes: nothing to look up."}})
	m1 := fakeollama.New(t, fakeollama.Reply{Content: []string{"M1 synthesis."}})
	m1.SetModel("m-M1", "completion", "thinking")
	m2 := fakeollama.New(t, fakeollama.Reply{Content: []string{"M2 answer."}})
	var y strings.Builder
	y.WriteString("nodes:\n")
	for name, f := range map[string]*fakeollama.Server{"OL1": ol1, "M1": m1, "M2": m2} {
		fmt.Fprintf(&y, "  - {name: %s, provider: ollama, base_url: %q, model: m-%s, timeout: 10s}\n", name, f.URL, name)
	}
	y.WriteString("chain:\n  stages:\n" + threeStages)
	cfg, err := config.Parse([]byte(y.String()))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Root = ""
	set := nodetest.Build(t, cfg, nil)
	mem := store.NewMemory(1000, 10)
	eng, err := chain.New(cfg, chain.Deps{Nodes: set, Resume: mem, Guard: antiloop.NewGuard(mem, 0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"OL1", "M1", "M2"} {
		if err := eng.Probe(context.Background(), name); err != nil {
			t.Fatal(err)
		}
	}
	weather := chain.Tool{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}
	res, _, err := runEmit(t, eng, false, &chain.RunRequest{TraceID: "t", Model: chain.ModelReflexive, Conversation: "c",
		Messages: []chain.Message{{Role: "user", Content: "Weather in Paris, and what should I wear?"}}, ClientTools: []chain.Tool{weather}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Message.Content != "M2 answer." || stagesOf(res.Trace) != "OL1:ok[] M1:ok[] M2:ok[]" {
		t.Errorf("reply %q, stages %s; want M2's answer after three ok stages", res.Message.Content, stagesOf(res.Trace))
	}
	if got := ol1.Requests(); len(got) != 1 || len(got[0].Tools) != 1 || got[0].Tools[0].Function.Name != "get_weather" {
		t.Errorf("OL1 was not offered the client's tool: %+v", got)
	}
	if got := m1.Requests(); len(got) != 1 || len(got[0].Tools) != 0 {
		t.Errorf("M1 requests = %+v, want one without tools", got)
	}
}

// downUntil is a node that refuses connections, as a stopped server does,
// until up is called.
type downUntil struct {
	node.Backend
	node string
	mu   sync.Mutex
	down bool
}

func (d *downUntil) up() {
	d.mu.Lock()
	d.down = false
	d.mu.Unlock()
}

func (d *downUntil) refused() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.down {
		return &node.UpstreamError{Node: d.node, Kind: node.KindConnect, Message: "dial tcp 127.0.0.1:8000: connect: connection refused"}
	}
	return nil
}

func (d *downUntil) Probe(context.Context) error { return d.refused() }

func (d *downUntil) Chat(ctx context.Context, req *node.Request, fn func(node.Chunk) error) error {
	if err := d.refused(); err != nil {
		return err
	}
	return d.Backend.Chat(ctx, req, fn)
}

// TestOneAnsweringStage: a chain whose last node is remembered offline
// when it starts makes M1 the answering stage, which streams its answer to
// the client. If M2 comes back while M1 runs (its offline_for runs out, or
// GET /readyz probes it again, as a Kubernetes readiness probe does every
// 10 s), M2 must not answer as well: the client would get two answers
// glued into one stream, and a reply that is not what it saw.
func TestOneAnsweringStage(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			cfg, err := config.Parse([]byte(`
nodes:
  - {name: OL1, provider: mock, mock: {turns: [{content: "OL1 notes."}]}}
  - {name: M1, provider: mock, mock: {turns: [{content: "M1 answer."}]}}
  - {name: M2, provider: mock, mock: {turns: [{content: "M2 answer."}]}}
`))
			if err != nil {
				t.Fatal(err)
			}
			cfg.Tools.Root = ""
			m2 := &downUntil{Backend: mock.New(cfg.Nodes[2]), node: "M2", down: true}
			var eng *chain.Engine
			m1 := &hook{Backend: mock.New(cfg.Nodes[1]), before: func() {
				// M2 is back while M1 answers.
				m2.up()
				if err := eng.Probe(context.Background(), "M2"); err != nil {
					t.Error(err)
				}
			}}
			mem := store.NewMemory(1000, 10)
			eng, err = chain.New(cfg, chain.Deps{Nodes: nodetest.Build(t, cfg, ownMocks(t, map[string]node.Backend{"OL1": mock.New(cfg.Nodes[0]), "M1": m1, "M2": m2})),
				Guard: antiloop.NewGuard(mem, 0, 0)})
			if err != nil {
				t.Fatal(err)
			}
			if err := eng.Probe(context.Background(), "M2"); err == nil {
				t.Fatal("M2 answered its probe while down")
			}
			res, deltas, err := runEmit(t, eng, stream, &chain.RunRequest{TraceID: "t", Model: chain.ModelReflexive, Conversation: "c",
				Messages: []chain.Message{{Role: "user", Content: "compare the notes"}}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Message.Content != "M1 answer." || stream && deltas != "M1 answer." {
				t.Errorf("reply %q, streamed %q; want M1's answer alone", res.Message.Content, deltas)
			}
			if got := stagesOf(res.Trace); got != "OL1:ok[] M1:ok[] M2:skipped_offline[]" {
				t.Errorf("stages %s, want M2 skipped: M1 was the answering stage", got)
			}
		})
	}
}

// hook calls before ahead of each call to its backend.
type hook struct {
	node.Backend
	before func()
}

func (h *hook) Chat(ctx context.Context, req *node.Request, fn func(node.Chunk) error) error {
	h.before()
	return h.Backend.Chat(ctx, req, fn)
}
