package chain_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/config"
	"chainproxy/internal/fakeollama"
	"chainproxy/internal/fakeopenai"
	"chainproxy/internal/nodetest"
	"chainproxy/store"
	"chainproxy/tools"
)

// say is one scripted model answer, spoken in either wire format.
type say struct {
	content []string
	// reasoning are reasoning pieces (reasoning_content, Ollama's thinking).
	reasoning []string
	calls     []sayCall
	// hang keeps the stream open after the content until the client goes
	// away (streams only).
	hang bool
	// status, when set, answers this HTTP error (500: the server's own
	// message) before anything is streamed.
	status int
}

type sayCall struct{ name, args string }

// fakeNode is a fake upstream of either protocol.
type fakeNode interface {
	// messages are the contents of every message of every request, in order.
	messages() [][]string
	canceled() <-chan struct{}
}

type openaiNode struct{ *fakeopenai.Server }

func (n openaiNode) messages() [][]string {
	var out [][]string
	for _, r := range n.Requests() {
		var m []string
		for _, msg := range r.Messages {
			m = append(m, msg.Role+": "+msg.Content)
		}
		out = append(out, m)
	}
	return out
}
func (n openaiNode) canceled() <-chan struct{} { return n.Canceled() }

type ollamaNode struct{ *fakeollama.Server }

func (n ollamaNode) messages() [][]string {
	var out [][]string
	for _, r := range n.Requests() {
		var m []string
		for _, msg := range r.Messages {
			m = append(m, msg.Role+": "+msg.Content)
		}
		out = append(out, m)
	}
	return out
}
func (n ollamaNode) canceled() <-chan struct{} { return n.Canceled() }

// startNode serves script (the last answer repeats) in the provider's wire
// format and returns the node's configuration line.
func startNode(t *testing.T, provider, name string, script []say) (fakeNode, string) {
	t.Helper()
	switch provider {
	case config.ProviderOpenAI:
		var replies []fakeopenai.Reply
		for _, s := range script {
			r := fakeopenai.Reply{Content: s.content, Reasoning: s.reasoning, Hang: s.hang, Status: s.status}
			if s.status != 0 {
				r.Error, r.ErrorType = "The server had an error while processing your request.", "server_error"
			}
			for _, c := range s.calls {
				r.ToolCalls = append(r.ToolCalls, fakeopenai.ToolCall{Name: c.name, Arguments: c.args})
			}
			replies = append(replies, r)
		}
		f := fakeopenai.New(t, replies...)
		return openaiNode{f}, fmt.Sprintf("  - {name: %s, provider: openai, base_url: %q, model: m-%s, timeout: 10s}\n", name, f.BaseURL(), name)
	default:
		var replies []fakeollama.Reply
		for _, s := range script {
			r := fakeollama.Reply{Content: s.content, Thinking: s.reasoning, Hang: s.hang, Status: s.status}
			if s.status != 0 {
				r.Error = "llama runner process has terminated: exit status 2"
			}
			for _, c := range s.calls {
				var args map[string]any
				if err := json.Unmarshal([]byte(c.args), &args); err != nil {
					t.Fatalf("script of %s: %v", name, err)
				}
				r.ToolCalls = append(r.ToolCalls, fakeollama.ToolCall{Name: c.name, Args: args})
			}
			replies = append(replies, r)
		}
		f := fakeollama.New(t, replies...)
		return ollamaNode{f}, fmt.Sprintf("  - {name: %s, provider: ollama, base_url: %q, model: m-%s, timeout: 10s}\n", name, f.URL, name)
	}
}

// textRun is a reflexive run over OL1 (tools), M1 and M2 served by fakes.
type textRun struct {
	res    *chain.Result
	err    error
	deltas string // the content the client saw streamed
	nodes  map[string]fakeNode
}

func runWire(t *testing.T, provider string, stream bool, scripts map[string][]say) textRun {
	t.Helper()
	return runWireAs(t, chain.ModelReflexive, provider, stream, scripts)
}

// runWireAs is runWire with the request's model: chain/simple answers
// with OL1, offered the tools.
func runWireAs(t *testing.T, model, provider string, stream bool, scripts map[string][]say) textRun {
	t.Helper()
	var y strings.Builder
	y.WriteString("nodes:\n")
	out := textRun{nodes: map[string]fakeNode{}}
	for _, name := range []string{"OL1", "M1", "M2"} {
		n, line := startNode(t, provider, name, scripts[name])
		out.nodes[name] = n
		y.WriteString(line)
	}
	y.WriteString("chain:\n  simple_node: OL1\n  stages:\n    - {node: OL1, max_turns: 4, tools: true}\n    - {node: M1, max_turns: 1}\n    - {node: M2, max_turns: 1}\n")
	eng := engineOf(t, y.String())
	out.res, out.deltas, out.err = runEmit(t, eng, stream, &chain.RunRequest{
		TraceID: "t", Model: model, Conversation: t.Name(),
		Messages: []chain.Message{{Role: "user", Content: "what is in a.txt?"}},
	})
	return out
}

// engineOf builds an engine from a configuration's YAML whose nodes are
// fakes of either protocol, over a workspace holding a.txt, with the
// in-memory store for the guard and resumption.
func engineOf(t *testing.T, yamlText string) *chain.Engine {
	t.Helper()
	cfg, err := config.Parse([]byte(yamlText))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Root = t.TempDir()
	if err := os.WriteFile(filepath.Join(cfg.Tools.Root, "a.txt"), []byte("alpha\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	set := nodetest.Build(t, cfg, nil)
	mem := store.NewMemory(1000, 10)
	eng, err := chain.New(cfg, chain.Deps{Nodes: set, Tools: reg, Resume: mem, Guard: antiloop.NewGuard(mem, cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL)})
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// runEmit runs req on eng, streamed or not, and returns what the client
// saw streamed with the result.
func runEmit(t *testing.T, eng *chain.Engine, stream bool, req *chain.RunRequest) (*chain.Result, string, error) {
	t.Helper()
	var emit func(chain.Event) error
	var deltas strings.Builder
	if stream {
		emit = func(ev chain.Event) error {
			if ev.Kind == chain.EventDelta {
				deltas.WriteString(ev.Content)
			}
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := eng.Run(ctx, req, emit)
	return res, deltas.String(), err
}

// forEachWire runs f in both wire formats, streamed and not.
func forEachWire(t *testing.T, f func(t *testing.T, provider string, stream bool)) {
	for _, provider := range []string{config.ProviderOpenAI, config.ProviderOllama} {
		for _, stream := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/stream=%v", provider, stream), func(t *testing.T) {
				f(t, provider, stream)
			})
		}
	}
}

// stageSummary is what a test checks of a stage.
type stageSummary struct{ status, tools string }

func summarize(tr chain.Trace) []stageSummary {
	var out []stageSummary
	for _, s := range tr.Stages {
		var uses []string
		for _, u := range s.ToolsUsed {
			uses = append(uses, u.Name+":"+u.Status)
		}
		out = append(out, stageSummary{s.Status, strings.Join(uses, ",")})
	}
	return out
}

const (
	m1Text = "M1 synthesis: a.txt holds alpha."
	m2Text = "M2 answer: a.txt holds the word alpha."
)

// TestTextToolCalls: a model that writes its calls as text, in each of the
// three formats, has them run; the raw call never reaches M1 or the client.
func TestTextToolCalls(t *testing.T) {
	tests := []struct {
		name string
		call []string // OL1's first answer, streamed in pieces
	}{
		{"qwen tags", []string{"Let me read it.\n<tool", `_call>{"name": "read_file", "arguments": {"path": "a.txt"}}`, "</tool_call>"}},
		{"bare json", []string{`{"name":"read_file",`, `"arguments":"{\"path\":\"a.txt\"}"}`}},
		{"design 003", []string{`[TOOL:read_file:{"path":"a.txt"}]`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachWire(t, func(t *testing.T, provider string, stream bool) {
				run := runWire(t, provider, stream, map[string][]say{
					"OL1": {{content: tt.call}, {content: []string{"OL1 notes: a.txt says alpha."}}},
					"M1":  {{content: []string{m1Text}}},
					"M2":  {{content: []string{m2Text}}},
				})
				if run.err != nil {
					t.Fatal(run.err)
				}
				want := []stageSummary{{"ok", "read_file:ok"}, {"ok", ""}, {"ok", ""}}
				if got := summarize(run.res.Trace); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("stages = %v, want %v", got, want)
				}
				// OL1 got the file's content back as a tool result.
				ol1 := run.nodes["OL1"].messages()
				if len(ol1) != 2 || !strings.Contains(strings.Join(ol1[1], "\n"), "alpha") {
					t.Errorf("OL1's second request lacks the tool result: %q", ol1)
				}
				m1 := strings.Join(run.nodes["M1"].messages()[0], "\n")
				for _, raw := range []string{"<tool_call>", "[TOOL:", `"arguments"`} {
					if strings.Contains(m1, raw) {
						t.Errorf("M1's context holds the raw call %q:\n%s", raw, m1)
					}
				}
				if !strings.Contains(m1, "OL1 notes: a.txt says alpha.") {
					t.Errorf("M1's context lacks OL1's notes:\n%s", m1)
				}
				if run.res.Message.Content != m2Text || stream && run.deltas != m2Text {
					t.Errorf("reply %q, streamed %q; want %q", run.res.Message.Content, run.deltas, m2Text)
				}
			})
		})
	}
}

// TestTextToolCallsAnswering: the answering stage, offered tools, streams
// its prose while holding back its text calls: the client sees the words
// around a call and the answer, never the call.
func TestTextToolCallsAnswering(t *testing.T) {
	tests := []struct {
		name  string
		call  []string
		shown string // what the client sees of the calling turn, and the break after it
	}{
		{"qwen tags", []string{"Let me ", "read it.\n<tool", `_call>{"name": "read_file", "arguments": {"path": "a.txt"}}`, "</tool_call>"}, "Let me read it.\n\n"},
		{"bare json", []string{" {", `"name":"read_file",`, `"arguments":{"path":"a.txt"}}`}, ""},
		{"design 003", []string{"Reading. [TO", `OL:read_file:{"path":"a.txt"}]`}, "Reading. \n\n"},
	}
	const answer = "a.txt holds alpha."
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachWire(t, func(t *testing.T, provider string, stream bool) {
				run := runWireAs(t, chain.ModelSimple, provider, stream, map[string][]say{
					"OL1": {{content: tt.call}, {content: []string{answer}}},
				})
				if run.err != nil {
					t.Fatal(run.err)
				}
				if got := summarize(run.res.Trace); len(got) != 1 || got[0] != (stageSummary{"ok", "read_file:ok"}) {
					t.Errorf("stages = %v, want one ok stage that ran read_file", got)
				}
				// The reply is the answering turn's text: the calling turn's
				// words were streamed, a paragraph before it.
				if run.res.Message.Content != answer {
					t.Errorf("reply = %q, want the answering turn's %q", run.res.Message.Content, answer)
				}
				if stream && strings.TrimSpace(run.deltas) != strings.TrimSpace(tt.shown+answer) {
					t.Errorf("streamed %q, want %q", run.deltas, tt.shown+answer)
				}
			})
		})
	}
}

// TestMalformedTextCall: content that looks like a call but does not parse
// is a format error fed back to the model; three in a row stop the stage.
func TestMalformedTextCall(t *testing.T) {
	broken := say{content: []string{`<tool_call>{"name": "read_file", "arguments": {"path": "a.txt"}</tool_call>`}}
	good := say{content: []string{`<tool_call>{"name": "read_file", "arguments": {"path": "a.txt"}}</tool_call>`}}
	notes := say{content: []string{"OL1 notes: alpha."}}
	tests := []struct {
		name   string
		ol1    []say
		status string
		tools  string
		asks   int // requests OL1 received
	}{
		{"fixed after feedback", []say{broken, good, notes}, "ok", "read_file:error,read_file:ok", 3},
		{"three in a row", []say{broken, broken, broken, notes}, "stopped_format_errors", "read_file:error,read_file:error,read_file:error", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachWire(t, func(t *testing.T, provider string, stream bool) {
				run := runWire(t, provider, stream, map[string][]say{
					"OL1": tt.ol1,
					"M1":  {{content: []string{m1Text}}},
					"M2":  {{content: []string{m2Text}}},
				})
				if run.err != nil {
					t.Fatal(run.err)
				}
				ol1 := run.res.Trace.Stages[0]
				if got := summarize(run.res.Trace)[0]; got.status != tt.status || got.tools != tt.tools {
					t.Errorf("OL1 = %+v, want %s with %s", got, tt.status, tt.tools)
				}
				if !strings.Contains(ol1.ToolsUsed[0].Result, "could not be read") {
					t.Errorf("the model was told %q", ol1.ToolsUsed[0].Result)
				}
				asks := run.nodes["OL1"].messages()
				if len(asks) != tt.asks {
					t.Fatalf("OL1 was called %d times, want %d", len(asks), tt.asks)
				}
				second := asks[1]
				if last := second[len(second)-1]; !strings.HasPrefix(last, "user: error: your tool call could not be read") {
					t.Errorf("OL1's second request ends with %q, want the format error", last)
				}
				if m1 := strings.Join(run.nodes["M1"].messages()[0], "\n"); strings.Contains(m1, "<tool_call>") {
					t.Errorf("M1's context holds a raw tag:\n%s", m1)
				}
				if run.res.Message.Content != m2Text {
					t.Errorf("reply %q, want %q", run.res.Message.Content, m2Text)
				}
			})
		})
	}
}

// TestDegenerateAnswers: an empty final answer, a copy of an earlier
// stage's and a chanted sentence are degenerate; empty and copied final
// answers are replaced by M1's.
func TestDegenerateAnswers(t *testing.T) {
	notes := say{content: []string{"OL1 notes: alpha."}}
	sentence := "The file a.txt holds the word alpha, nothing else. "
	chant := make([]string, 60)
	for i := range chant {
		chant[i] = sentence
	}
	tests := []struct {
		name      string
		m1, m2    say
		stages    []string
		errPrefix string // M2's error
		reply     string
	}{
		{"empty M2", say{content: []string{m1Text}}, say{}, []string{"ok", "ok", "degenerate"},
			"empty answer; answered with M1's answer", m1Text},
		{"M2 copies M1", say{content: []string{m1Text}}, say{content: []string{"M1 synthesis: ", "a.txt holds alpha.\n"}}, []string{"ok", "ok", "degenerate"},
			"verbatim copy of M1's answer; answered with M1's answer", m1Text},
		{"M1 copies OL1, M2 fine", say{content: []string{"OL1 notes: alpha."}}, say{content: []string{m2Text}}, []string{"ok", "degenerate", "ok"},
			"", m2Text},
		{"M2 chants", say{content: []string{m1Text}}, say{content: chant}, []string{"ok", "ok", "degenerate"},
			"repetition loop: a 51-character segment came", sentence},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachWire(t, func(t *testing.T, provider string, stream bool) {
				m2 := tt.m2
				run := runWire(t, provider, stream, map[string][]say{"OL1": {notes}, "M1": {tt.m1}, "M2": {m2}})
				if run.err != nil {
					t.Fatal(run.err)
				}
				var got []string
				for _, s := range run.res.Trace.Stages {
					got = append(got, s.Status)
				}
				if fmt.Sprint(got) != fmt.Sprint(tt.stages) {
					t.Errorf("stages = %v, want %v", got, tt.stages)
				}
				if e := run.res.Trace.Stages[2].Error; !strings.HasPrefix(e, tt.errPrefix) || (tt.errPrefix == "") != (e == "") {
					t.Errorf("M2's error = %q, want %q…", e, tt.errPrefix)
				}
				if run.res.Message.Content != tt.reply {
					t.Errorf("reply = %q, want %q", run.res.Message.Content, tt.reply)
				}
				if stream && tt.name != "M2 chants" && run.deltas != tt.reply {
					t.Errorf("streamed %q, want %q", run.deltas, tt.reply)
				}
			})
		})
	}
}

// TestChantStreamCancelled streams 60 copies of a sentence and then holds
// the stream open: the client sees fewer than five copies, and the upstream
// call is cancelled at detection rather than left to run.
func TestChantStreamCancelled(t *testing.T) {
	sentence := "The file a.txt holds the word alpha, nothing else. "
	chant := make([]string, 60)
	for i := range chant {
		chant[i] = sentence
	}
	for _, provider := range []string{config.ProviderOpenAI, config.ProviderOllama} {
		t.Run(provider, func(t *testing.T) {
			run := runWire(t, provider, true, map[string][]say{
				"OL1": {{content: []string{"OL1 notes."}}},
				"M1":  {{content: []string{m1Text}}},
				"M2":  {{content: chant, hang: true}},
			})
			if run.err != nil {
				t.Fatal(run.err)
			}
			if n := strings.Count(run.deltas, strings.TrimSpace(sentence)); n >= 5 || n == 0 {
				t.Errorf("the client saw %d copies, want 1 to 4", n)
			}
			select {
			case <-run.nodes["M2"].canceled():
			case <-time.After(10 * time.Second):
				t.Fatal("M2's upstream call was not cancelled")
			}
			if st := run.res.Trace.Stages[2]; st.Status != chain.StageDegenerate {
				t.Errorf("M2 = %s, want degenerate", st.Status)
			}
		})
	}
}

// TestThinkLoopStreamCancelled: a reasoning model that loops in its
// reasoning and would go on until max_tokens is cut at detection: the
// upstream call is cancelled, the stage is degenerate, and the client gets
// M1's answer.
func TestThinkLoopStreamCancelled(t *testing.T) {
	thought := make([]string, 400)
	for i := range thought {
		thought[i] = "Let me read a.txt once more. "
	}
	for _, provider := range []string{config.ProviderOpenAI, config.ProviderOllama} {
		t.Run(provider, func(t *testing.T) {
			run := runWire(t, provider, true, map[string][]say{
				"OL1": {{content: []string{"OL1 notes."}}},
				"M1":  {{content: []string{m1Text}}},
				"M2":  {{reasoning: thought, hang: true}},
			})
			if run.err != nil {
				t.Fatal(run.err)
			}
			select {
			case <-run.nodes["M2"].canceled():
			case <-time.After(10 * time.Second):
				t.Fatal("M2's upstream call was not cancelled")
			}
			st := run.res.Trace.Stages[2]
			if st.Status != chain.StageDegenerate || !strings.HasPrefix(st.Error, "reasoning: repetition loop") {
				t.Errorf("M2 = %s (%q), want degenerate for a reasoning loop", st.Status, st.Error)
			}
			if run.res.Message.Content != m1Text || run.deltas != m1Text {
				t.Errorf("reply %q, streamed %q; want M1's answer %q", run.res.Message.Content, run.deltas, m1Text)
			}
			if n := strings.Count(st.Reasoning, "Let me read a.txt once more."); n != 1 {
				t.Errorf("the trace keeps %d copies of the looping thought, want 1", n)
			}
		})
	}
}
