package web

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"chainproxy/config"
	"chainproxy/internal/fakeollama"
	"chainproxy/internal/fakeopenai"
	"chainproxy/store"
)

// claudeCodeScript is OL1 for Claude Code: asked to run something, it
// calls Claude Code's own Bash tool once, then writes notes from the
// command's output; asked anything else, it answers.
func claudeCodeScript(req *api.ChatRequest) fakeollama.Reply {
	if !strings.Contains(lastUser(req), "run") {
		return fakeollama.Reply{Content: []string{"2 + 2 = 4, says the chain."}}
	}
	for _, m := range req.Messages {
		if m.Role == "tool" {
			return fakeollama.Reply{Content: []string{"notes: the command printed " + strings.TrimSpace(m.Content)}}
		}
	}
	return fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{{Name: "Bash", Args: map[string]any{"command": "echo chain-resumed-ok", "description": "Print a marker"}}}}
}

// TestClaudeCode runs Claude Code (`claude -p`, the native binary from npm)
// against the proxy as a user changing only ANTHROPIC_BASE_URL would, with
// telemetry, the updater and other traffic off and a throwaway HOME: a
// plain answer through chain/auto, and an agent turn where the chain asks
// Claude Code to run its Bash tool and Claude Code's result resumes the
// chain.
func TestClaudeCode(t *testing.T) {
	needClients(t)
	claude := clientBin(t, "claude")
	for _, tc := range []struct {
		name, model, prompt, want string
		toolRan                   bool
	}{
		{"plain answer", "chain/auto", "What is 2+2?", "2 + 2 = 4, says the chain.", false},
		{"agent turn", "chain/reflexive", "run the check command and tell me what it printed", "Chain answer for Claude Code.", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &agentUpstreams{
				ol1: fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply { return claudeCodeScript(req) }),
				m1:  fakeopenai.New(t, fakeopenai.Reply{Content: []string{"analysis done"}}),
				m2:  fakeopenai.New(t, fakeopenai.Reply{Content: []string{"Chain answer for Claude Code."}}),
			}
			// Claude Code's system prompt and tools are about 20k tokens:
			// the node runs with a 64k window, set in the configuration as
			// docs/claude-code.md says (Ollama's default would not take it).
			u.ol1.SetWindow(4096, 4)
			ol1 := ollamaNode("OL1", u.ol1.URL)
			ol1.ContextWindow = 65536
			u.nodes = []config.Node{ol1, openaiNode("M1", u.m1.BaseURL()), openaiNode("M2", u.m2.BaseURL())}
			// Claude Code asks for its small model by its own name for
			// background work: the aliases a user would set.
			srv := agentProxy(t, u, "model_aliases:\n  \"claude-*haiku*\": chain/simple\n  \"claude-*\": chain/auto\n", store.NewMemory(0, 10))

			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, claude, "-p", tc.prompt, "--model", tc.model, "--allowedTools", "Bash")
			cmd.Dir = t.TempDir()
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "SHELL=/bin/bash",
				"ANTHROPIC_BASE_URL=" + srv.URL, "ANTHROPIC_API_KEY=sk-test",
				"DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1"}
			cmd.Stdin = strings.NewReader("")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("claude -p: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("claude printed:\n%s\nwant %q", out, tc.want)
			}
			ran := false
			for _, req := range u.ol1.Requests() {
				for _, m := range req.Messages {
					if m.Role == "tool" && strings.Contains(m.Content, "chain-resumed-ok") {
						ran = true
					}
				}
			}
			if ran != tc.toolRan {
				t.Errorf("OL1 saw the command's output: %v, want %v\nclaude printed:\n%s", ran, tc.toolRan, out)
			}
		})
	}
}
