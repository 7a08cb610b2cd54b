package web

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"chainproxy/config"
	"chainproxy/internal/fakeollama"
	"chainproxy/internal/fakeopenai"
	"chainproxy/store"
)

// codexScript is OL1 for Codex: asked to run something, it calls Codex's
// exec_command tool once, then writes notes from the command's output.
func codexScript(req *api.ChatRequest) fakeollama.Reply {
	last := lastUser(req)
	if !strings.Contains(last, "run") {
		return fakeollama.Reply{Content: []string{"notes: a greeting"}}
	}
	for _, m := range req.Messages {
		if m.Role == "tool" {
			return fakeollama.Reply{Content: []string{"notes: the command printed " + strings.TrimSpace(m.Content)}}
		}
	}
	return fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{{Name: "exec_command", Args: map[string]any{"cmd": "echo chain-resumed-ok"}}}}
}

func lastUser(req *api.ChatRequest) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			return req.Messages[i].Content
		}
	}
	return ""
}

// TestCodexCLI runs Codex CLI (`codex exec`, the native binary from npm)
// against the proxy with wire_api = "responses", as a user changing only
// its model provider's base_url would: a plain answer, and an agent turn
// where the chain asks Codex to run a command and Codex's output resumes
// the chain.
func TestCodexCLI(t *testing.T) {
	needClients(t)
	codex := clientBin(t, "codex")
	for _, tc := range []struct {
		name, prompt string
		toolRan      bool
	}{
		{"plain answer", "say hi", false},
		{"agent turn", "run the check command", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &agentUpstreams{
				ol1: fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply { return codexScript(req) }),
				m1:  fakeopenai.New(t, fakeopenai.Reply{Content: []string{"analysis done"}}),
				m2:  fakeopenai.New(t, fakeopenai.Reply{Content: []string{"Chain answer for Codex."}}),
			}
			u.nodes = []config.Node{ollamaNode("OL1", u.ol1.URL), openaiNode("M1", u.m1.BaseURL()), openaiNode("M2", u.m2.BaseURL())}
			srv := agentProxy(t, u, "", store.NewMemory(0, 10))

			home := t.TempDir()
			cfg := "model = \"chain/reflexive\"\nmodel_provider = \"chainproxy\"\n\n[model_providers.chainproxy]\nname = \"chainproxy\"\nbase_url = \"" + srv.URL + "/v1\"\nwire_api = \"responses\"\n"
			if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, codex, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", tc.prompt)
			cmd.Dir = t.TempDir()
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CODEX_HOME=" + home}
			cmd.Stdin = strings.NewReader("")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("codex exec: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), "Chain answer for Codex.") {
				t.Errorf("codex printed:\n%s\nwant the chain's answer", out)
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
				t.Errorf("OL1 saw the command's output: %v, want %v\ncodex printed:\n%s", ran, tc.toolRan, out)
			}
		})
	}
}
