package web

import (
	"bytes"
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
)

// TestCodexViewImage runs `codex exec` (the native binary from npm)
// against a vision node that asks it to view a PNG file with its
// view_image tool: Codex answers with a function_call_output whose output
// is an array holding an input_image part (codex-rs core
// tools/handlers/view_image.rs, FunctionCallOutputBody::ContentItems).
func TestCodexViewImage(t *testing.T) {
	needClients(t)
	codex := clientBin(t, "codex")
	pic := pngBytes(t)
	dir := t.TempDir()
	shot := filepath.Join(dir, "shot.png")
	if err := os.WriteFile(shot, pic, 0o644); err != nil {
		t.Fatal(err)
	}
	f := fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply {
		for _, m := range req.Messages {
			if len(m.Images) > 0 {
				return fakeollama.Reply{Content: []string{"The picture has a red pixel."}}
			}
		}
		return fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{{Name: "view_image", Args: map[string]any{"path": shot}}}}
	})
	f.SetModel("a-model", "completion", "tools", "vision")
	_, srv := wireProxy(t, []config.Node{ollamaNode("A", f.URL)}, oneStage)
	home := t.TempDir()
	cfg := "model = \"A\"\nmodel_provider = \"chainproxy\"\n\n[model_providers.chainproxy]\nname = \"chainproxy\"\nbase_url = \"" + srv.URL + "/v1\"\nwire_api = \"responses\"\n"
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, codex, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "what is in shot.png?")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CODEX_HOME=" + home}
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("codex exec: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "The picture has a red pixel.") {
		t.Errorf("codex printed:\n%s\nwant the node's answer about the picture", out)
	}
	seen := false
	for _, req := range f.Requests() {
		for _, m := range req.Messages {
			for _, img := range m.Images {
				seen = seen || len(img) > 0 && bytes.HasPrefix(img, []byte("\x89PNG"))
			}
		}
	}
	if !seen {
		t.Errorf("the node never got the picture")
	}
}

// TestDecodeFunctionCallOutputImage: the images of function_call_output
// items go in one user message after the run of tool messages, which
// stay together after the calls they answer.
func TestDecodeFunctionCallOutputImage(t *testing.T) {
	body := `{"model":"m","input":[{"type":"message","role":"user","content":"look"},` +
		`{"type":"function_call","call_id":"c1","name":"view_image","arguments":"{\"path\":\"a.png\"}"},` +
		`{"type":"function_call","call_id":"c2","name":"shell","arguments":"{}"},` +
		`{"type":"function_call_output","call_id":"c1","output":[{"type":"input_image","image_url":"data:image/png;base64,aGk="}]},` +
		`{"type":"function_call_output","call_id":"c2","output":"ok"},` +
		`{"type":"message","role":"user","content":"and?"}]}`
	req, err := decodeResponsesRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range req.items {
		s := m.Role + ":" + m.Content
		if len(m.ToolCalls) > 0 {
			s += "[" + itoa(len(m.ToolCalls)) + " calls]"
		}
		for _, p := range m.Parts {
			s += "(" + p.Kind + " " + p.Param + ")"
		}
		got = append(got, s)
	}
	want := "user:look|assistant:[2 calls]|tool:|tool:ok|user:(image input[3].output[0].image_url)|user:and?"
	if g := strings.Join(got, "|"); g != want {
		t.Errorf("messages:\n got %s\nwant %s", g, want)
	}
}
