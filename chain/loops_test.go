package chain_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/ollama/ollama/api"
	openaiapi "github.com/sashabaranov/go-openai"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/config"
	"chainproxy/internal/fakeollama"
	"chainproxy/internal/fakeopenai"
	"chainproxy/internal/nodetest"
	"chainproxy/internal/redistest"
	"chainproxy/store"
	"chainproxy/tools"
)

// The loop corpus (testdata/loops.yaml) is a list of rows, each one
// scripted model behaviour and the outcome the chain must give. The format,
// all of it plain data so that new rows need no code:
//
//	# one row:
//	- name: what the model does              (the subtest name)
//	  job: [..]           optional: job_status answers these in turn (the last repeats)
//	  busy: n             optional: lookup answers its first n calls 503 "busy, try again"
//	  m2_tools: true      optional: M2, the answering stage, is offered the tools too
//	  client_tools: [..]  optional: names of client tools ({"type":"object"} schemas)
//	  mode: simple        optional: send the requests as chain/simple (default
//	                      chain/reflexive)
//	  history: [..]       optional: messages before the scripted turns:
//	                      {role, content, id (tool_call_id), calls: [{id, name, args}]}
//	  requests:           one or more requests, in one conversation, in order
//	    - script:         per node (OL1, M1, M2), its replies in call order; the
//	                      last repeats; a node without a script answers
//	                      "<node> answer" (M2) or "<node> notes"
//	        OL1:
//	          - content:  text the model writes (may hold anything: tags,
//	                      JSON, [TOOL:…], a chanted sentence)
//	            reasoning: optional: its reasoning (reasoning_content on the
//	                      OpenAI wire, thinking on Ollama's)
//	            chunk: n  optional: content and reasoning stream in pieces of
//	                      n bytes (default: one piece each)
//	            calls: [{name, args}]  native tool calls; args is the JSON text
//	                      as written (sent verbatim on the OpenAI wire, decoded
//	                      to an object on the Ollama wire)
//	      edit: {path: s} optional: before the request, these workspace files
//	                      are written by hand (outside the proxy's tools)
//	      client: [..]    optional: the client runs the tool calls the response
//	                      ends with and sends back these results, in order; the
//	                      next request continues that conversation
//	      want:
//	        stages: [..]  every stage's status, in order
//	        runs: {tool: n}  how many times each tool really ran, counted from
//	                      the start of the row; a tool not named ran 0 times
//	        tools: [..]   optional: the status of every tool call of the
//	                      request, all stages flattened, in order
//	        told: {i: s}  optional: the text the model received for call i
//	                      (same numbering) contains s
//	        answer: s     optional: the final answer contains s
//	        at_most: {s: n}  optional: s occurs at most n times in the answer
//	                      and in what was streamed; the streamed text may then
//	                      go on past the answer (a loop's copies before the cut)
//	        finish: s     optional: the finish reason ("stop" by default)
//
// Every row runs in eight variants: Ollama and OpenAI wire formats,
// streamed and whole, anti-loop state in memory and in a real Redis.
type loopRow struct {
	Name        string        `yaml:"name"`
	Job         []string      `yaml:"job"`
	Busy        int           `yaml:"busy"`
	M2Tools     bool          `yaml:"m2_tools"`
	ClientTools []string      `yaml:"client_tools"`
	Mode        string        `yaml:"mode"`
	History     []loopMessage `yaml:"history"`
	Requests    []loopRequest `yaml:"requests"`
}

type loopMessage struct {
	Role    string     `yaml:"role"`
	Content string     `yaml:"content"`
	ID      string     `yaml:"id"`
	Calls   []loopCall `yaml:"calls"`
}

type loopCall struct {
	ID   string `yaml:"id"`
	Name string `yaml:"name"`
	Args string `yaml:"args"`
}

type loopTurn struct {
	Content   string     `yaml:"content"`
	Reasoning string     `yaml:"reasoning"`
	Chunk     int        `yaml:"chunk"`
	Calls     []loopCall `yaml:"calls"`
}

// pieces cuts s into pieces of n bytes (one piece when n is 0); none when
// s is empty.
func pieces(s string, n int) []string {
	if s == "" {
		return nil
	}
	if n <= 0 {
		return []string{s}
	}
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

type loopRequest struct {
	Script map[string][]loopTurn `yaml:"script"`
	Edit   map[string]string     `yaml:"edit"`
	Client []string              `yaml:"client"`
	Want   struct {
		Stages []string       `yaml:"stages"`
		Runs   map[string]int `yaml:"runs"`
		Tools  []string       `yaml:"tools"`
		Told   map[int]string `yaml:"told"`
		Answer string         `yaml:"answer"`
		AtMost map[string]int `yaml:"at_most"`
		Finish string         `yaml:"finish"`
	} `yaml:"want"`
}

const loopConfig = `
chain:
  stages:
    - {node: OL1, max_turns: 6, tools: true}
    - {node: M1, max_turns: 3, tools: true}
    - {node: M2, max_turns: 2}
  max_total_turns: 14
  simple_node: OL1
`

// toolsServer serves the corpus's HTTP tools. It is built per row, so that
// the job's answers start over.
func toolsServer(t *testing.T, root string, job []string, busy int) *httptest.Server {
	var mu sync.Mutex
	polls, lookups := 0, 0
	mux := http.NewServeMux()
	mux.HandleFunc("POST /lookup", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		lookups++
		n := lookups
		mu.Unlock()
		if n <= busy {
			http.Error(w, "busy, try again", http.StatusServiceUnavailable)
			return
		}
		var a struct{ ID float64 }
		if err := json.NewDecoder(r.Body).Decode(&a); err != nil {
			t.Errorf("lookup: %v", err)
		}
		fmt.Fprintf(w, "record %v", a.ID)
	})
	mux.HandleFunc("POST /job", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if len(job) == 0 {
			io.WriteString(w, "done")
			return
		}
		io.WriteString(w, job[min(polls, len(job)-1)])
		polls++
	})
	mux.HandleFunc("POST /write", func(w http.ResponseWriter, r *http.Request) {
		var a struct{ Path, Content string }
		if err := json.NewDecoder(r.Body).Decode(&a); err != nil {
			t.Errorf("write: %v", err)
		}
		p := filepath.Join(root, filepath.FromSlash(a.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Errorf("write: %v", err)
		}
		if err := os.WriteFile(p, []byte(a.Content), 0o644); err != nil {
			t.Errorf("write: %v", err)
		}
		io.WriteString(w, "written")
	})
	mux.HandleFunc("POST /reset", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "reset done") })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func httpTools(base string) []config.HTTPTool {
	return []config.HTTPTool{
		{Name: "lookup", Description: "Look a record up.", URL: base + "/lookup", ReadOnly: true, Parameters: map[string]any{
			"type":       "object",
			"properties": map[string]any{"id": map[string]any{"type": "number"}, "verbose": map[string]any{"type": "boolean", "default": false}},
			"required":   []any{"id"},
		}},
		{Name: "job_status", Description: "Status of a job.", URL: base + "/job", ReadOnly: true, Volatile: true, Parameters: map[string]any{
			"type": "object", "properties": map[string]any{"job": map[string]any{"type": "string"}},
		}},
		{Name: "write_file", Description: "Write a file.", URL: base + "/write", Parameters: map[string]any{
			"type":       "object",
			"properties": map[string]any{"path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}},
			"required":   []any{"path", "content"},
		}},
		{Name: "reset", Description: "Reset the workspace state.", URL: base + "/reset", Parameters: map[string]any{"type": "object"}},
	}
}

// countingTools counts the calls that really ran, by tool name.
type countingTools struct {
	*tools.Registry
	mu   sync.Mutex
	runs map[string]int
}

func (c *countingTools) Call(ctx context.Context, name string, args []byte) (string, error) {
	c.mu.Lock()
	c.runs[name]++
	c.mu.Unlock()
	return c.Registry.Call(ctx, name, args)
}

func (c *countingTools) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.runs {
		out[k] = v
	}
	return out
}

// scripts hands each node the current request's replies in call order.
type scripts struct {
	mu    sync.Mutex
	cur   map[string][]loopTurn
	calls map[string]int
}

func (s *scripts) set(script map[string][]loopTurn) {
	s.mu.Lock()
	s.cur, s.calls = script, map[string]int{}
	s.mu.Unlock()
}

func (s *scripts) next(node string) loopTurn {
	s.mu.Lock()
	defer s.mu.Unlock()
	turns := s.cur[node]
	n := s.calls[node]
	s.calls[node]++
	if len(turns) == 0 {
		if node == "M2" {
			return loopTurn{Content: "M2 answer"}
		}
		return loopTurn{Content: node + " notes"}
	}
	return turns[min(n, len(turns)-1)]
}

func workspace(t *testing.T) string {
	root := t.TempDir()
	files := map[string]string{"notes.md": "first draft", "docs/guide.md": "the guide"}
	for c := 'a'; c <= 'o'; c++ {
		files[string(c)+".txt"] = "file " + string(c)
	}
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// fakeUpstream starts a fake upstream of the given wire format for node n,
// whose replies come from sc, and points n at it: a fake is a base_url,
// built into a backend by node.Build as the proxy's are.
func fakeUpstream(t *testing.T, wire string, n *config.Node, sc *scripts) {
	name := n.Name
	switch wire {
	case "ollama":
		srv := fakeollama.NewFunc(t, func(_ int, _ *api.ChatRequest) fakeollama.Reply {
			turn := sc.next(name)
			r := fakeollama.Reply{Content: pieces(turn.Content, turn.Chunk), Thinking: pieces(turn.Reasoning, turn.Chunk)}
			for _, c := range turn.Calls {
				var args map[string]any
				if err := json.Unmarshal([]byte(c.Args), &args); err != nil {
					t.Errorf("%s: Ollama sends arguments as an object; %q is not one: %v", name, c.Args, err)
				}
				r.ToolCalls = append(r.ToolCalls, fakeollama.ToolCall{Name: c.Name, Args: args})
			}
			return r
		})
		n.Provider, n.BaseURL = config.ProviderOllama, srv.URL
	default:
		srv := fakeopenai.NewFunc(t, func(call int, _ *openaiapi.ChatCompletionRequest) fakeopenai.Reply {
			turn := sc.next(name)
			r := fakeopenai.Reply{Content: pieces(turn.Content, turn.Chunk), Reasoning: pieces(turn.Reasoning, turn.Chunk)}
			for i, c := range turn.Calls {
				r.ToolCalls = append(r.ToolCalls, fakeopenai.ToolCall{ID: fmt.Sprintf("call_%s_%d_%d", name, call, i), Name: c.Name, Arguments: c.Args})
			}
			return r
		})
		n.Provider, n.BaseURL = config.ProviderOpenAI, srv.BaseURL()
	}
}

func loadLoopRows(t *testing.T) []loopRow {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "loops.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []loopRow
	if err := yaml.UnmarshalWithOptions(data, &rows, yaml.Strict()); err != nil {
		t.Fatalf("testdata/loops.yaml: %v", err)
	}
	return rows
}

// TestLoopCorpus runs every row of testdata/loops.yaml in every variant.
func TestLoopCorpus(t *testing.T) {
	rows := loadLoopRows(t)
	redis := redistest.Start(t)
	rstore, err := store.NewRedis(redis.URL(), 10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rstore.Close() })
	stores := map[string]antiloop.Store{"memory": nil, "redis": rstore}
	for _, wire := range []string{"ollama", "openai"} {
		for _, stream := range []bool{true, false} {
			for _, stName := range []string{"memory", "redis"} {
				variant := fmt.Sprintf("%s/stream=%v/%s", wire, stream, stName)
				t.Run(variant, func(t *testing.T) {
					t.Parallel()
					for _, row := range rows {
						t.Run(row.Name, func(t *testing.T) {
							st := stores[stName]
							if st == nil {
								st = store.NewMemory(10000, 10)
							}
							runLoopRow(t, row, wire, stream, st, variant+"/"+row.Name)
						})
					}
				})
			}
		}
	}
}

func runLoopRow(t *testing.T, row loopRow, wire string, stream bool, st antiloop.Store, conv string) {
	conf := loopConfig
	if row.M2Tools {
		conf = strings.Replace(conf, "{node: M2, max_turns: 2}", "{node: M2, max_turns: 2, tools: true}", 1)
	}
	cfg, err := config.Parse([]byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	root := workspace(t)
	cfg.Tools.Root = root
	cfg.Tools.HTTP = httpTools(toolsServer(t, root, row.Job, row.Busy).URL)
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	runner := &countingTools{Registry: reg, runs: map[string]int{}}
	sc := &scripts{}
	for i := range cfg.Nodes {
		fakeUpstream(t, wire, &cfg.Nodes[i], sc)
	}
	deps := chain.Deps{Nodes: nodetest.Build(t, cfg, nil), Tools: runner,
		Guard: antiloop.NewGuard(st, cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL)}
	if rs, ok := st.(chain.ResumeStore); ok { // a chain waiting on the client resumes from the same store
		deps.Resume = rs
	}
	eng, err := chain.New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	var clientTools []chain.Tool
	for _, name := range row.ClientTools {
		clientTools = append(clientTools, chain.Tool{Name: name, Parameters: json.RawMessage(`{"type":"object"}`)})
	}
	var history []chain.Message
	for _, m := range row.History {
		msg := chain.Message{Role: m.Role, Content: m.Content, ToolCallID: m.ID}
		for _, c := range m.Calls {
			msg.ToolCalls = append(msg.ToolCalls, chain.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Args})
		}
		history = append(history, msg)
	}
	if len(history) == 0 {
		history = []chain.Message{{Role: "user", Content: "please look into notes.md and the job, then sum up what you found"}}
	}
	for i, rq := range row.Requests {
		for name, body := range rq.Edit {
			if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(name)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		sc.set(rq.Script)
		model := chain.ModelReflexive
		if row.Mode == "simple" {
			model = chain.ModelSimple
		}
		req := &chain.RunRequest{TraceID: "loops", Model: model, Conversation: conv,
			Messages: history, ClientTools: clientTools}
		var emit func(chain.Event) error
		var streamed strings.Builder
		if stream {
			emit = func(ev chain.Event) error {
				if ev.Kind == chain.EventDelta {
					streamed.WriteString(ev.Content)
				}
				return nil
			}
		}
		res, err := eng.Run(context.Background(), req, emit)
		if err != nil {
			t.Fatalf("request %d: Run: %v", i, err)
		}
		checkLoopRequest(t, i, rq, res, runner.counts())
		if len(rq.Client) > 0 {
			if len(res.Message.ToolCalls) == 0 {
				t.Fatalf("request %d: the row sends client results, but the response asked for no call", i)
			}
			asked := res.Message
			asked.Role = "assistant"
			history = append(slices.Clone(history), asked)
			for j, c := range asked.ToolCalls {
				history = append(history, chain.Message{Role: "tool", ToolCallID: c.ID, Name: c.Name, Content: rq.Client[min(j, len(rq.Client)-1)]})
			}
		}
		// A loop cut while streaming was shown up to the copy that made it
		// a loop: the answer is its start (at_most bounds the rest).
		cut := rq.Want.AtMost != nil && strings.HasPrefix(streamed.String(), res.Message.Content)
		if stream && len(res.Message.ToolCalls) == 0 && streamed.String() != res.Message.Content && !cut {
			t.Errorf("request %d: streamed %q, answer %q", i, streamed.String(), res.Message.Content)
		}
		for sub, n := range rq.Want.AtMost {
			for what, text := range map[string]string{"streamed": streamed.String(), "answer": res.Message.Content} {
				if got := strings.Count(text, sub); got > n {
					t.Errorf("request %d: %q occurs %d times in the %s text, want at most %d", i, sub, got, what, n)
				}
			}
		}
	}
}

func checkLoopRequest(t *testing.T, i int, rq loopRequest, res *chain.Result, runs map[string]int) {
	t.Helper()
	w := rq.Want
	var stages, statuses []string
	var told []string
	for _, s := range res.Trace.Stages {
		stages = append(stages, s.Status)
		for _, u := range s.ToolsUsed {
			statuses = append(statuses, u.Status)
			told = append(told, u.Result)
		}
	}
	if !equalSlices(stages, w.Stages) {
		t.Errorf("request %d: stage statuses = %v, want %v", i, stages, w.Stages)
	}
	for name, n := range runs {
		if n != w.Runs[name] {
			t.Errorf("request %d: %s ran %d times, want %d", i, name, n, w.Runs[name])
		}
	}
	for name, n := range w.Runs {
		if _, ran := runs[name]; !ran && n != 0 {
			t.Errorf("request %d: %s ran %d times, want %d", i, name, runs[name], n)
		}
	}
	if w.Tools != nil && !equalSlices(statuses, w.Tools) {
		t.Errorf("request %d: tool statuses = %v, want %v", i, statuses, w.Tools)
	}
	for k, s := range w.Told {
		if k >= len(told) {
			t.Errorf("request %d: no call %d (only %d)", i, k, len(told))
			continue
		}
		if !strings.Contains(told[k], s) {
			t.Errorf("request %d: call %d was told %q, want it to contain %q", i, k, told[k], s)
		}
	}
	finish := w.Finish
	if finish == "" {
		finish = "stop"
	}
	if res.FinishReason != finish {
		t.Errorf("request %d: finish reason %q, want %q", i, res.FinishReason, finish)
	}
	if finish == "stop" && res.Message.Content == "" {
		t.Errorf("request %d: the chain did not answer", i)
	}
	if !strings.Contains(res.Message.Content, w.Answer) {
		t.Errorf("request %d: answer %q, want it to contain %q", i, res.Message.Content, w.Answer)
	}
}
