package web

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"chainproxy/config"
	"chainproxy/internal/fakeollama"
)

// TestMessagesToolResultImage: Claude Code's Read tool answers for an
// image file with a tool_result whose content is an image block
// ({"type": "tool_result", "content": [{"type": "image", "source":
// {"type": "base64", …}}]}: mapToolResultToToolResultBlockParam in Claude
// Code 2.1.331), which Anthropic's API takes (ToolResultBlockParam's
// content holds text, image, document and search_result blocks). Refused
// with a 400, every later request of the session, which carries that
// result again, failed as well. The result's text goes to the tool
// message and its images to the user message after it, where every front
// puts images, so that a vision node sees the picture.
func TestMessagesToolResultImage(t *testing.T) {
	pic := pngBytes(t)
	b64 := base64.StdEncoding.EncodeToString(pic)
	img := `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + b64 + `"}}`
	for _, tc := range []struct {
		name, content string
		// tool is the tool message's text; text, the user message's.
		tool, text string
	}{
		{"image only", `[` + img + `]`, "", ""},
		{"text and image, then the user's text", `[{"type":"text","text":"shot.png, 2x2"},` + img + `]`, "shot.png, 2x2", "and now?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fakeollama.New(t, fakeollama.Reply{Content: []string{"A red pixel."}})
			f.SetModel("a-model", "completion", "tools", "vision")
			_, srv := wireProxy(t, []config.Node{ollamaNode("A", f.URL)}, oneStage)
			after := ""
			if tc.text != "" {
				after = `,{"type":"text","text":"` + tc.text + `"}`
			}
			body := fmt.Sprintf(`{"model":"A","max_tokens":100,"messages":[{"role":"user","content":"look at shot.png"},`+
				`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"/w/shot.png"}}]},`+
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":%s}%s]}],`+
				`"tools":[{"name":"Read","input_schema":{"type":"object"}}]}`, tc.content, after)
			resp, err := httpPost(srv.URL+"/v1/messages", body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.status != 200 {
				t.Fatalf("status %d: %s", resp.status, resp.body)
			}
			reqs := f.Requests()
			if len(reqs) != 1 {
				t.Fatalf("the node got %d calls", len(reqs))
			}
			msgs := reqs[0].Messages
			if n := len(msgs); n != 4 || msgs[2].Role != "tool" || msgs[3].Role != "user" {
				t.Fatalf("the node received %d messages %+v, want user, assistant, tool, user", n, msgs)
			}
			if msgs[2].Content != tc.tool || msgs[3].Content != tc.text {
				t.Errorf("tool message %q, user message %q; want %q, %q", msgs[2].Content, msgs[3].Content, tc.tool, tc.text)
			}
			if len(msgs[3].Images) != 1 || !bytes.Equal(msgs[3].Images[0], pic) {
				t.Errorf("the user message after the result has %d images, want the picture", len(msgs[3].Images))
			}
		})
	}
}

// TestClaudeCodeReadImage runs Claude Code (`claude -p`, the native
// binary from npm) against the proxy with a vision node that asks it to
// Read a PNG file: Claude Code's image tool_result reaches the node as
// the picture, and its answer is Claude Code's.
func TestClaudeCodeReadImage(t *testing.T) {
	needClients(t)
	claude := clientBin(t, "claude")
	pic := pngBytes(t)
	dir := t.TempDir()
	shot := filepath.Join(dir, "shot.png")
	if err := os.WriteFile(shot, pic, 0o644); err != nil {
		t.Fatal(err)
	}
	f := fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply {
		for _, m := range req.Messages {
			for _, img := range m.Images {
				if bytes.Equal(img, pic) {
					return fakeollama.Reply{Content: []string{"The picture has a red pixel."}}
				}
			}
		}
		if len(req.Tools) == 0 {
			return fakeollama.Reply{Content: []string{"a title"}} // Claude Code's background requests
		}
		return fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{{Name: "Read", Args: map[string]any{"file_path": shot}}}}
	})
	f.SetModel("a-model", "completion", "tools", "vision")
	f.SetContextLength(65536)
	_, srv := wireProxy(t, []config.Node{ollamaNode("A", f.URL)}, oneStage+"model_aliases:\n  \"claude-*\": A\n")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, claude, "-p", "what is in shot.png?", "--model", "A", "--allowedTools", "Read")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "SHELL=/bin/bash",
		"ANTHROPIC_BASE_URL=" + srv.URL, "ANTHROPIC_API_KEY=sk-test",
		"DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1"}
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("claude -p: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "The picture has a red pixel.") {
		t.Errorf("claude printed:\n%s\nwant the node's answer about the picture", out)
	}
}
