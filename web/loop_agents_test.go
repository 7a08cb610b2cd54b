package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/config"
	"chainproxy/internal/fakeollama"
	"chainproxy/internal/fakeopenai"
	"chainproxy/internal/nodetest"
	"chainproxy/store"
	"chainproxy/tools"
)

// The loop tests run the founding case of the anti-loop through real agent
// clients: a small model in OL1 that calls the client's own shell tool
// over and over, each call "succeeding". The client runs every call it is
// given and sends the result back; the chain resumes in OL1. OL1 has
// turns to spare (max_turns 12), so what stops the loop is the anti-loop,
// not the budget.

const loopChain = "chain:\n  stages: [{node: OL1, max_turns: 12, tools: true}, {node: M1, max_turns: 1}, {node: M2, max_turns: 1}]\n  max_total_turns: 14\n  simple_node: OL1\n" +
	"model_aliases:\n  \"claude-*\": chain/reflexive\n"

// loopAnswer is M2's answer, which the client must print.
const loopAnswer = "Chain answer after the loop."

// loopClient is a real agent client driven against the proxy.
type loopClient struct {
	name string
	// call is the client's shell tool called with cmd, as the model writes it.
	call func(cmd string) fakeollama.ToolCall
	// run runs the client in dir against base (the proxy's URL) with prompt,
	// and returns what it printed.
	run func(t *testing.T, base, dir, prompt string) string
}

func loopClients(t *testing.T) []loopClient {
	var out []loopClient
	ctx := func(t *testing.T) context.Context {
		c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		t.Cleanup(cancel)
		return c
	}
	out = append(out, loopClient{
		name: "claude",
		call: func(cmd string) fakeollama.ToolCall {
			return fakeollama.ToolCall{Name: "Bash", Args: map[string]any{"command": cmd, "description": "Run " + cmd}}
		},
		run: func(t *testing.T, base, dir, prompt string) string {
			cmd := exec.CommandContext(ctx(t), clientBin(t, "claude"), "-p", prompt, "--model", "chain/reflexive", "--allowedTools", "Bash")
			cmd.Dir = dir
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "SHELL=/bin/bash",
				"ANTHROPIC_BASE_URL=" + base, "ANTHROPIC_API_KEY=sk-test",
				"DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1"}
			cmd.Stdin = strings.NewReader("")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("claude -p: %v\n%s", err, out)
			}
			return string(out)
		},
	}, loopClient{
		name: "codex",
		call: func(cmd string) fakeollama.ToolCall {
			return fakeollama.ToolCall{Name: "exec_command", Args: map[string]any{"cmd": cmd}}
		},
		run: func(t *testing.T, base, dir, prompt string) string {
			home := t.TempDir()
			cfg := "model = \"chain/reflexive\"\nmodel_provider = \"chainproxy\"\n\n[model_providers.chainproxy]\nname = \"chainproxy\"\nbase_url = \"" + base + "/v1\"\nwire_api = \"responses\"\n"
			if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.CommandContext(ctx(t), clientBin(t, "codex"), "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", prompt)
			cmd.Dir = dir
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CODEX_HOME=" + home}
			cmd.Stdin = strings.NewReader("")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("codex exec: %v\n%s", err, out)
			}
			return string(out)
		},
	}, loopClient{
		name: "qwen",
		call: func(cmd string) fakeollama.ToolCall {
			// Without node-pty (not installed here), Qwen Code runs the
			// command with child_process and reads its output until the
			// "exit" event, which may come before the output: a fast `ls`
			// then comes back "(empty)" now and then. The pause lets the
			// output arrive first, so that one command gives one result.
			return fakeollama.ToolCall{Name: "run_shell_command", Args: map[string]any{"command": cmd + "; sleep 0.1"}}
		},
		run: func(t *testing.T, base, dir, prompt string) string {
			cmd := exec.CommandContext(ctx(t), qwenBin(t), "--auth-type", "openai", "--openai-api-key", "sk-test",
				"--openai-base-url", base+"/v1", "-m", "chain/reflexive", "--yolo", prompt)
			cmd.Dir = dir
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "NO_COLOR=1", "TERM=dumb", "QWEN_CODE_SUPPRESS_YOLO_WARNING=1"}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("qwen: %v\n%s", err, out)
			}
			return string(out)
		},
	})
	return out
}

// loopProxy starts a proxy over the upstreams with loopChain, its
// anti-loop and resume state in memory, behind a recorder of the chain
// traces it answers with.
func loopProxy(t *testing.T, u *agentUpstreams) (*httptest.Server, *chainTraces) {
	t.Helper()
	var y strings.Builder
	y.WriteString("nodes:\n")
	for _, n := range u.nodes {
		fmt.Fprintf(&y, "  - {name: %s, provider: %s, base_url: %q, model: %s, timeout: 10s, max_queue: 8, context_window: 65536}\n", n.Name, n.Provider, n.BaseURL, n.Model)
	}
	cfg, err := config.Parse([]byte(y.String() + loopChain))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Server.MaxBodyBytes = 4 << 20
	cfg.Tools.Root = t.TempDir()
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	set := nodetest.Build(t, cfg, nil)
	st := store.NewMemory(0, 10)
	eng, err := chain.New(cfg, chain.Deps{Nodes: set, Tools: reg, Resume: st,
		Guard: antiloop.NewGuard(st, cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL)})
	if err != nil {
		t.Fatal(err)
	}
	rec := &chainTraces{next: New(Options{Config: cfg, Engine: eng, Traces: st, Keepalive: time.Hour})}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	return srv, rec
}

// chainTraces keeps the chain trace of every answer, whatever the front:
// the "chain" member of its JSON body or of any of its stream's events.
type chainTraces struct {
	next   http.Handler
	mu     sync.Mutex
	traces []chain.Trace
}

func (rec *chainTraces) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tw := &teeWriter{ResponseWriter: w}
	rec.next.ServeHTTP(tw, r)
	var last *chain.Trace
	for _, line := range bytes.Split(tw.buf.Bytes(), []byte("\n")) {
		line = bytes.TrimPrefix(bytes.TrimSpace(line), []byte("data: "))
		var v any
		if json.Unmarshal(line, &v) != nil {
			continue
		}
		if raw := findChain(v); raw != nil {
			b, _ := json.Marshal(raw)
			var tr chain.Trace
			if json.Unmarshal(b, &tr) == nil {
				last = &tr
			}
		}
	}
	if last != nil {
		rec.mu.Lock()
		rec.traces = append(rec.traces, *last)
		rec.mu.Unlock()
	}
}

func findChain(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if c, ok := v["chain"].(map[string]any); ok && c["stages"] != nil {
			return c
		}
		for _, x := range v {
			if c := findChain(x); c != nil {
				return c
			}
		}
	case []any:
		for _, x := range v {
			if c := findChain(x); c != nil {
				return c
			}
		}
	}
	return nil
}

func (rec *chainTraces) last(t *testing.T) chain.Trace {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.traces) == 0 {
		t.Fatal("no answer carried a chain trace")
	}
	return rec.traces[len(rec.traces)-1]
}

// ol1Turns counts OL1's turns that called tools, in the conversation its
// upstream receives: the script's clock.
func ol1Turns(req *api.ChatRequest) int {
	n := 0
	for _, m := range req.Messages {
		if m.Role == "assistant" && len(m.ToolCalls) > 0 {
			n++
		}
	}
	return n
}

// TestLoopAgents: a small model loops on the client's shell tool through
// Claude Code, Codex CLI and Qwen Code, and the anti-loop stops it across
// the round trips as it stops a server tool: the same command again with
// the same result, an A, B alternation, a batch holding one command twice,
// a failing command retried the same way. The stage ends stopped_repeat,
// the call that repeated says so, M1 and M2 answer and the client prints
// the answer. Honest work (a listing after a write, a re-read after an
// edit) runs to its end. A command whose output always changes is run
// antiloop.max_polls times, then refused until three refused turns end the
// stage stopped_no_progress.
func TestLoopAgents(t *testing.T) {
	needClients(t)
	type step []string // the commands of one turn
	for _, tc := range []struct {
		name  string
		steps []step // OL1's turns, over and over when loop is set
		loop  bool
		// runs is how many commands the client ran; stop is OL1's status.
		runs int
		stop string
		// own names a client whose own loop guard halts the run first.
		own string
	}{
		{"same command every turn", []step{{"ls"}}, true, 2, chain.StageStoppedRepeat, ""},
		{"A, B alternation", []step{{"ls"}, {"cat a.txt"}}, true, 3, chain.StageStoppedRepeat, ""},
		{"the same command twice in each batch", []step{{"ls", "ls"}}, true, 2, chain.StageStoppedRepeat, ""},
		{"a failing command retried", []step{{"cat missing.txt"}}, true, 2, chain.StageStoppedRepeat, ""},
		// A command whose output changes every run (a clock) is polled at
		// most antiloop.max_polls (5) times; asked again and again after
		// that, it is refused each time, and three refused turns in a row
		// end the stage as three refused server calls do.
		// Qwen Code halts such a run itself at the fifth identical call in
		// a row (TOOL_CALL_LOOP_THRESHOLD in its loopDetectionService),
		// before the proxy could refuse it.
		{"a clock polled on and on", []step{{"date +%s%N"}}, true, 5, chain.StageStoppedNoProgress, "qwen"},
		{"a listing after a write", []step{{"ls"}, {"echo two > b.txt"}, {"ls"}}, false, 3, chain.StageOK, ""},
		{"a re-read after an edit", []step{{"cat a.txt"}, {"echo two > a.txt"}, {"cat a.txt"}}, false, 3, chain.StageOK, ""},
	} {
		for _, c := range loopClients(t) {
			t.Run(c.name+"/"+tc.name, func(t *testing.T) {
				if c.name == tc.own {
					t.Skipf("%s's own loop guard halts this run first", c.name)
				}
				u := &agentUpstreams{
					ol1: fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply {
						n := ol1Turns(req)
						if n >= len(tc.steps) && !tc.loop {
							return fakeollama.Reply{Content: []string{"notes: done"}}
						}
						var calls []fakeollama.ToolCall
						for _, cmd := range tc.steps[n%len(tc.steps)] {
							calls = append(calls, c.call(cmd))
						}
						return fakeollama.Reply{ToolCalls: calls}
					}),
					m1: fakeopenai.New(t, fakeopenai.Reply{Content: []string{"analysis done"}}),
					m2: fakeopenai.New(t, fakeopenai.Reply{Content: []string{loopAnswer}}),
				}
				u.nodes = []config.Node{ollamaNode("OL1", u.ol1.URL), openaiNode("M1", u.m1.BaseURL()), openaiNode("M2", u.m2.BaseURL())}
				srv, rec := loopProxy(t, u)
				dir := t.TempDir()
				if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\n"), 0o644); err != nil {
					t.Fatal(err)
				}

				out := c.run(t, srv.URL, dir, "look around the folder and run what it needs")
				if !strings.Contains(out, loopAnswer) {
					t.Errorf("%s printed:\n%s\nwant the chain's answer", c.name, out)
				}
				tr := rec.last(t)
				ol1 := tr.Stages[0]
				runs := 0
				for _, u := range ol1.ToolsUsed {
					if u.Status == chain.ToolOK || u.Status == chain.ToolError {
						runs++
					}
				}
				if ol1.Status != tc.stop || runs != tc.runs {
					t.Errorf("OL1 %s with %d commands run, want %s with %d: %s", ol1.Status, runs, tc.stop, tc.runs, stageSummary(&tr))
				}
				if len(tr.Stages) != 3 || tr.Stages[2].Status != chain.StageOK {
					t.Errorf("stages: %s, want M1 and M2 to answer", stageSummary(&tr))
				}
				if tc.stop == chain.StageStoppedRepeat {
					// The call that repeated says why the stage stopped, for
					// the trace and for M1, which reads OL1's evidence.
					if !toldOL1(ol1, "the same call returned the same result before in this stage") {
						t.Errorf("no call of OL1 says it repeated: %s", stageSummary(&tr))
					}
				}
				if tc.stop == chain.StageStoppedNoProgress && !toldOL1(ol1, "already ran 5 times in this stage") {
					t.Errorf("no refused call of OL1 says why: %s", stageSummary(&tr))
				}
			})
		}
	}
}

// toldOL1 reports whether one of the stage's calls carries note in its
// result, which OL1's model, or M1 reading OL1's evidence, was given.
func toldOL1(st chain.StageTrace, note string) bool {
	for _, u := range st.ToolsUsed {
		if strings.Contains(u.Result, note) {
			return true
		}
	}
	return false
}
