package web

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"chainproxy/config"
	"chainproxy/internal/fakeollama"
)

// TestResponsesTextFormat: text.format asks for structured output, as
// `codex exec --output-schema` does ({"type": "json_schema", "name":
// "codex_output_schema", "schema": …, "strict": true}; codex-rs
// codex-api) and the openai SDKs' responses.parse: the answering node
// gets it as Ollama's format (the schema, or "json" for json_object),
// and the response echoes text.format as OpenAI's does, streamed or not.
func TestResponsesTextFormat(t *testing.T) {
	schema := `{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"],"additionalProperties":false}`
	for _, tc := range []struct {
		name, format string
		// sent is the format the node gets ("" for none).
		sent string
	}{
		{"json_schema", `{"type":"json_schema","name":"codex_output_schema","schema":` + schema + `,"strict":true}`, schema},
		{"json_object", `{"type":"json_object"}`, `"json"`},
		{"text", `{"type":"text"}`, ""},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(tc.name, func(t *testing.T) {
				f := fakeollama.New(t, fakeollama.Reply{Content: []string{`{"answer":"4"}`}})
				_, srv := wireProxy(t, []config.Node{ollamaNode("A", f.URL)}, oneStage)
				x := responsesPost(t, srv.URL, map[string]any{"model": "A", "input": "2+2?", "stream": stream,
					"text": json.RawMessage(`{"format":` + tc.format + `,"verbosity":"medium"}`)})
				if x.status != 200 {
					t.Fatalf("status %d: %s", x.status, x.raw)
				}
				reqs := f.Requests()
				if len(reqs) != 1 {
					t.Fatalf("%d upstream calls, want 1", len(reqs))
				}
				if got := string(reqs[0].Format); !sameJSON(t, got, tc.sent) {
					t.Errorf("the node got format %s, want %s", got, tc.sent)
				}
				echoed, _ := json.Marshal(x.obj["text"].(map[string]any)["format"])
				if !sameJSON(t, string(echoed), tc.format) {
					t.Errorf("response text.format = %s, want %s", echoed, tc.format)
				}
			})
		}
	}
}

// TestCodexOutputSchema runs `codex exec --output-schema` (the native
// binary from npm) against the proxy: the node answering gets the schema
// as its format.
func TestCodexOutputSchema(t *testing.T) {
	needClients(t)
	codex := clientBin(t, "codex")
	schema := `{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"],"additionalProperties":false}`
	f := fakeollama.New(t, fakeollama.Reply{Content: []string{`{"answer":"4"}`}})
	_, srv := wireProxy(t, []config.Node{ollamaNode("A", f.URL)}, oneStage)
	home, dir := t.TempDir(), t.TempDir()
	cfg := "model = \"A\"\nmodel_provider = \"chainproxy\"\n\n[model_providers.chainproxy]\nname = \"chainproxy\"\nbase_url = \"" + srv.URL + "/v1\"\nwire_api = \"responses\"\n"
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	schemaFile := filepath.Join(dir, "schema.json")
	if err := os.WriteFile(schemaFile, []byte(schema), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, codex, "exec", "--skip-git-repo-check", "--output-schema", schemaFile, "what is 2+2?")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CODEX_HOME=" + home}
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("codex exec: %v\n%s", err, out)
	}
	reqs := f.Requests()
	if len(reqs) == 0 {
		t.Fatalf("no upstream call; codex printed:\n%s", out)
	}
	if got := string(reqs[len(reqs)-1].Format); !sameJSON(t, got, schema) {
		t.Errorf("the node got format %s, want the schema %s; codex printed:\n%s", got, schema, out)
	}
}

// sameJSON reports whether a and b hold the same JSON value ("" only
// equals "").
func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	if a == "" || b == "" {
		return a == b
	}
	var va, vb any
	if err := json.Unmarshal([]byte(a), &va); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &vb); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}
