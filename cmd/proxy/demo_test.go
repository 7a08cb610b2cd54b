package main

import (
	"os"
	"strings"
	"testing"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/store"
	"chainproxy/tools"
)

// TestDemoScenariosTellTheTruth: in the demo's loop and format scenarios,
// OL1 really ends as the answer says, and M2's answer says so.
func TestDemoScenariosTellTheTruth(t *testing.T) {
	cfg, err := demoConfig("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Tools.Root, err = demoWorkspace(); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(cfg.Tools.Root)
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	mem := store.NewMemory(100, 10)
	eng, err := chain.New(cfg, chain.Deps{Backends: backends(cfg), Tools: reg, Guard: antiloop.NewGuard(mem, cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL)})
	if err != nil {
		t.Fatal(err)
	}
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
