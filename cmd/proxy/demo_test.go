package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/classify"
	"chainproxy/store"
	"chainproxy/tools"
)

// demoEngine is the engine -demo runs, on a fresh demo workspace, with the
// mock nodes' delays removed: the tests check the scripts, not their pace.
func demoEngine(t *testing.T) *chain.Engine { return demoEngineOver(t, "") }

// demoEngineOver is demoEngine with a -config file over the demo.
func demoEngineOver(t *testing.T, path string) *chain.Engine {
	t.Helper()
	cfg, err := demoConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Tools.Root, err = demoWorkspace(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(cfg.Tools.Root) })
	for i := range cfg.Nodes {
		cfg.Nodes[i].Mock.Delay, cfg.Nodes[i].Mock.ChunkDelay = 0, 0
	}
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	mem := store.NewMemory(100, 10)
	set, err := buildNodes(cfg)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := chain.New(cfg, chain.Deps{Nodes: set, Tools: reg, Guard: antiloop.NewGuard(mem, cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL),
		Classifier: classify.New(cfg.Classify, reg.Names())})
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// TestDemoScenariosTellTheTruth: in the demo's loop and format scenarios,
// OL1 really ends as the answer says, and M2's answer says so.
func TestDemoScenariosTellTheTruth(t *testing.T) {
	eng := demoEngine(t)
	tests := []struct {
		question   string
		ol1Status  string
		ol1Tools   []string // name:status of each call
		answerSays []string
	}{
		{"loop: compare the files", chain.StageStoppedRepeat, []string{"list_dir:ok", "list_dir:blocked"}, []string{"listed the workspace once", "blocked", "stopped_repeat", "No file was read"}},
		{"format: compare the files", chain.StageStoppedFormatErrors, []string{"move_file:error", "ls:error", "list_dir:error"}, []string{"move_file and ls", "not JSON", "three format errors", "stopped_format_errors"}},
	}
	for _, tt := range tests {
		t.Run(tt.question, func(t *testing.T) {
			res, err := eng.Run(t.Context(), &chain.RunRequest{TraceID: "t", Model: chain.ModelReflexive, Conversation: tt.question,
				Messages: []chain.Message{{Role: "user", Content: tt.question}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ol1 := res.Trace.Stages[0]
			var calls []string
			for _, u := range ol1.ToolsUsed {
				calls = append(calls, u.Name+":"+u.Status)
			}
			if ol1.Status != tt.ol1Status || strings.Join(calls, " ") != strings.Join(tt.ol1Tools, " ") {
				t.Errorf("OL1 = %s with %q, want %s with %q", ol1.Status, calls, tt.ol1Status, tt.ol1Tools)
			}
			for _, w := range tt.answerSays {
				if !strings.Contains(res.Message.Content, w) {
					t.Errorf("M2's answer %q does not say %q", res.Message.Content, w)
				}
			}
		})
	}
}

// TestDemoDegenerateScenarios plays the demo's "chant" and "echo" scripts
// through the engine: M2's answer is degenerate in both, cut after its
// first sentence in one and replaced by M1's synthesis in the other.
func TestDemoDegenerateScenarios(t *testing.T) {
	eng := demoEngine(t)
	tests := []struct {
		msg, reply, errPrefix string
	}{
		{"chant about the plan", "The plan covers the first risk and the second risk still needs a rollback step. ", "repetition loop"},
		{"echo the plan", "Synthesis: notes.md states the goals", "verbatim copy of M1's answer; answered with M1's answer"},
	}
	for _, tt := range tests {
		t.Run(tt.msg, func(t *testing.T) {
			var streamed strings.Builder
			res, err := eng.Run(t.Context(), &chain.RunRequest{
				TraceID: "t", Model: chain.ModelReflexive, Conversation: tt.msg,
				Messages: []chain.Message{{Role: "user", Content: tt.msg}},
			}, func(ev chain.Event) error {
				if ev.Kind == chain.EventDelta {
					streamed.WriteString(ev.Content)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			m2 := res.Trace.Stages[2]
			if m2.Status != chain.StageDegenerate || !strings.HasPrefix(m2.Error, tt.errPrefix) {
				t.Errorf("M2 = %s (%q), want degenerate (%q…)", m2.Status, m2.Error, tt.errPrefix)
			}
			if !strings.HasPrefix(res.Message.Content, tt.reply) {
				t.Errorf("reply = %q, want %q…", res.Message.Content, tt.reply)
			}
			if n := strings.Count(streamed.String(), "rollback step."); n >= 5 {
				t.Errorf("the client saw %d copies", n)
			}
		})
	}
}

// TestDemoScenariosEndAsListed: each story the banner and the cockpit list
// ends with the status they promise, through the demo's own engine; the
// weather story, with get_weather offered by the client, pauses for it and
// then resumes to an answer.
func TestDemoScenariosEndAsListed(t *testing.T) {
	eng := demoEngine(t)
	for _, sc := range demoScenarios {
		t.Run(sc.Word, func(t *testing.T) {
			req := &chain.RunRequest{TraceID: "t", Model: chain.ModelReflexive, Conversation: sc.Word,
				Messages: []chain.Message{{Role: "user", Content: sc.Word + ": compare the files in the workspace"}}}
			if sc.ClientTool != "" {
				req.ClientTools = []chain.Tool{{Name: sc.ClientTool, Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}}
			}
			res, err := eng.Run(t.Context(), req, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := endStatus(res.Trace); got != sc.Status {
				t.Errorf("chain ends %s (%s), want %s", got, stagesLine(res.Trace), sc.Status)
			}
		})
	}
}

// endStatus is the traces view's status of a finished chain: awaiting the
// client, else the first stage stop or degenerate answer, else ok.
func endStatus(tr chain.Trace) string {
	status := chain.StageOK
	for _, st := range tr.Stages {
		switch {
		case st.Status == chain.StageAwaitingClient:
			return st.Status
		case status == chain.StageOK && (strings.HasPrefix(st.Status, "stopped_") || st.Status == chain.StageDegenerate):
			status = st.Status
		}
	}
	return status
}

func stagesLine(tr chain.Trace) string {
	var b []string
	for _, st := range tr.Stages {
		b = append(b, st.Node+":"+st.Status)
	}
	return strings.Join(b, " ")
}

// TestDemoScenariosListedEverywhere: the stories of demoScenarios are the
// ones demo.yaml scripts, the banner prints and the cockpit's empty state
// lists, each with its one line.
func TestDemoScenariosListedEverywhere(t *testing.T) {
	var banner strings.Builder
	demoBanner(&banner, "127.0.0.1:8080")
	page, err := os.ReadFile(filepath.Join("..", "..", "web", "static", "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range demoScenarios {
		if !strings.Contains(string(demoYAML), "when: "+sc.Word+"\n") {
			t.Errorf("demo.yaml has no scenario %q", sc.Word)
		}
		if line := sc.Word + " " + sc.Shows + " → " + sc.Status; !strings.Contains(strings.Join(strings.Fields(banner.String()), " "), line) {
			t.Errorf("banner lacks %q:\n%s", line, banner.String())
		}
		if !strings.Contains(string(page), `data-scenario="`+sc.Word+`"`) {
			t.Errorf("index.html does not list the scenario %q", sc.Word)
		}
	}
}

// TestDemoSimpleAnswerIsHonest: a short question answered by M1 alone says
// it is the demo and echoes the question, never a canned synthesis.
func TestDemoSimpleAnswerIsHonest(t *testing.T) {
	eng := demoEngine(t)
	for _, q := range []string{"What time zone is Paris in?", "What is 2+2?"} {
		t.Run(q, func(t *testing.T) {
			res, err := eng.Run(t.Context(), &chain.RunRequest{TraceID: "t", Model: chain.ModelAuto, Conversation: q,
				Messages: []chain.Message{{Role: "user", Content: q}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := res.Message.Content
			if res.Trace.Mode != chain.ModeSimple || !strings.Contains(got, "This is the demo") || !strings.Contains(got, `"`+q+`"`) || strings.Contains(got, "Synthesis") {
				t.Errorf("%s answer = %q, want a simple-mode demo note echoing the question", res.Trace.Mode, got)
			}
		})
	}
}

// TestDemoScenarioFromTheUsersWords: the demo picks its scenario from the
// words the classifier judges. An agent client's injected block that says
// "loop" picks nothing, the user's own "loop" picks the loop scenario, and
// a block named in classify.ignore_blocks is set aside too.
func TestDemoScenarioFromTheUsersWords(t *testing.T) {
	reminder := "<system-reminder>\nSkills: use /loop to run a prompt in a loop; format files with /format.\n</system-reminder>"
	tests := []struct {
		name    string
		content string
		extra   string // a -config file over the demo
		mode    string
		reply   string // how the answer starts
	}{
		{"injected block says loop", reminder + "Hello there", "", chain.ModeSimple, "This is the demo: M1"},
		{"injected block, analytical question", reminder + "Compare the two files", "", chain.ModeReflexive, "**Answer** (reviewed by M2): the workspace's notes.md"},
		{"the user says loop", reminder + "loop: compare the files", "", chain.ModeReflexive, "**Answer** (reviewed by M2): OL1 listed the workspace once"},
		{"configured block says loop", "<team-notes>loop</team-notes>Compare the two files", "classify:\n  ignore_blocks: [team-notes]\n", chain.ModeReflexive, "**Answer** (reviewed by M2): the workspace's notes.md"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.extra != "" {
				path = t.TempDir() + "/extra.yaml"
				if err := os.WriteFile(path, []byte(tt.extra), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			eng := demoEngineOver(t, path)
			res, err := eng.Run(t.Context(), &chain.RunRequest{TraceID: "t", Model: chain.ModelAuto, Conversation: tt.name,
				Messages: []chain.Message{{Role: "user", Content: tt.content}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Trace.Mode != tt.mode || !strings.HasPrefix(res.Message.Content, tt.reply) {
				t.Errorf("Run(%q) = %s %q, want %s %q… (reasons %q)", tt.content, res.Trace.Mode, res.Message.Content, tt.mode, tt.reply, res.Trace.Reasons)
			}
		})
	}
}
