package realollama_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// okSchema is a schema whose answer has no free text: Ollama turns it into
// a grammar (v0.17.4 llm/server.go, llama.SchemaToGrammar) that the tiny
// model's sampling cannot leave. Its whitespace rule allows at most 22
// blanks in a row, under Ollama's token repeat limit of 30, and the
// answer's few gaps fit in 200 tokens.
var okSchema = map[string]any{
	"type":                 "object",
	"properties":           map[string]any{"ok": map[string]any{"type": "boolean"}},
	"required":             []string{"ok"},
	"additionalProperties": false,
}

// postRaw posts body to the proxy's path and returns the status and body.
func postRaw(t *testing.T, url string, body any) (int, []byte) {
	t.Helper()
	data, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// TestStructuredOutput: a schema the client sends as OpenAI's
// response_format json_schema or as Ollama's format reaches the answering
// node as Ollama's format, which the real server accepts and holds the
// answer to: the content parses as the schema's object. Through a chain,
// only the answering stage is held to it.
func TestStructuredOutput(t *testing.T) {
	f := setup(t)
	question := []map[string]any{{"role": "user", "content": "is it ok?"}}
	for _, model := range []string{"plain", "tools", "chain/reflexive"} {
		for _, front := range []string{"openai", "ollama"} {
			t.Run(model+"/"+front, func(t *testing.T) {
				var status int
				var out []byte
				var content string
				if front == "openai" {
					status, out = postRaw(t, f.proxy+"/v1/chat/completions", map[string]any{
						"model": model, "messages": question, "max_tokens": 200, "temperature": 0, "seed": 1,
						"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "answer", "strict": true, "schema": okSchema}},
					})
					var r struct {
						Choices []struct{ Message struct{ Content string } }
					}
					if json.Unmarshal(out, &r) == nil && len(r.Choices) == 1 {
						content = r.Choices[0].Message.Content
					}
				} else {
					status, out = postRaw(t, f.proxy+"/api/chat", map[string]any{
						"model": model, "messages": question, "stream": false, "format": okSchema,
						"options": map[string]any{"num_predict": 200, "temperature": 0, "seed": 1},
					})
					var r struct{ Message struct{ Content string } }
					if json.Unmarshal(out, &r) == nil {
						content = r.Message.Content
					}
				}
				if status != http.StatusOK {
					t.Fatalf("status %d: %.2000s", status, out)
				}
				var answer map[string]any
				if err := json.Unmarshal([]byte(content), &answer); err != nil {
					t.Fatalf("content %q is not JSON: %v", content, err)
				}
				if _, ok := answer["ok"].(bool); !ok || len(answer) != 1 {
					t.Errorf("content %q does not follow the schema (one boolean, ok)", content)
				}
			})
		}
	}
}

// TestRepeatLimit: Ollama v0.17.4 aborts a generation once the model has
// written the same token (blanks trimmed) more than 30 times in a row, and
// then ends its stream, with HTTP 200, without the done line (llm/server.go,
// Completion: "prediction aborted, token repeat limit reached" is only
// logged, and ctx.Err(), nil, returned; reported in ollama/ollama#8786, and
// changed by ollama/ollama#18374, after v0.17.4, into the error "prediction
// aborted, token repeat limit reached"). Format "json" meets it at once:
// Ollama's JSON grammar lets whitespace go on without end, and the tiny
// model takes it. The client must learn that cause, as from a later
// Ollama, rather than a protocol error that blames a broken stream.
func TestRepeatLimit(t *testing.T) {
	f := setup(t)
	question := []map[string]any{{"role": "user", "content": "hi"}}
	// The real server first: the stream ends without its done line.
	status, out := postRaw(t, f.ollama.URL+"/api/chat", map[string]any{
		"model": "tiny-plain", "messages": question, "format": "json",
		"options": map[string]any{"num_predict": 200, "temperature": 0, "seed": 1},
	})
	if status != http.StatusOK || bytes.Contains(out, []byte(`"done":true`)) {
		t.Fatalf("Ollama answered %d, with a done line: the repeat limit was not met; the test cannot show what follows:\n%.1000s", status, out)
	}
	for _, stream := range []bool{false, true} {
		for _, front := range []string{"openai", "ollama"} {
			t.Run(fmt.Sprintf("%s/stream=%v", front, stream), func(t *testing.T) {
				var status int
				var out []byte
				if front == "openai" {
					status, out = postRaw(t, f.proxy+"/v1/chat/completions", map[string]any{
						"model": "plain", "messages": question, "stream": stream, "max_tokens": 200, "temperature": 0, "seed": 1,
						"response_format": map[string]any{"type": "json_object"},
					})
				} else {
					status, out = postRaw(t, f.proxy+"/api/chat", map[string]any{
						"model": "plain", "messages": question, "stream": stream, "format": "json",
						"options": map[string]any{"num_predict": 200, "temperature": 0, "seed": 1},
					})
				}
				t.Logf("status %d: %.300s … %s", status, out, out[max(0, len(out)-400):])
				if !strings.Contains(string(out), "token repeat limit") {
					t.Errorf("the answer does not say Ollama stopped at its token repeat limit")
				}
				if strings.Contains(string(out), "stream ended before its done line") {
					t.Errorf("the answer blames a cut stream for what was Ollama's repeat limit")
				}
			})
		}
	}
}
