package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"
	goopenai "github.com/sashabaranov/go-openai"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"chainproxy/config"
	"chainproxy/internal/fakeollama"
	"chainproxy/internal/fakeopenai"
)

// spanText is every string a span exports, each labelled with where it is:
// its name, its attributes (array elements too), its status message, its
// events and their attributes, its links' attributes. What a collector
// stores of a span is in it.
func spanText(s *tracepb.Span) map[string]string {
	out := map[string]string{"name": s.GetName(), "status": s.GetStatus().GetMessage()}
	add := func(where string, kvs []*commonpb.KeyValue) {
		for _, kv := range kvs {
			out[where+kv.GetKey()] = fmt.Sprint(value(kv.GetValue()))
		}
	}
	add("", s.GetAttributes())
	for i, e := range s.GetEvents() {
		out[fmt.Sprintf("event %d", i)] = e.GetName()
		add(fmt.Sprintf("event %d ", i), e.GetAttributes())
	}
	for i, l := range s.GetLinks() {
		add(fmt.Sprintf("link %d ", i), l.GetAttributes())
	}
	return out
}

// Markers the content checks look for: the user's words, a tool call's
// arguments (the model's words), and the input a node's error message
// quotes back.
const (
	userMark = "zq-user-4471"
	argsMark = "zq-args-9052"
)

// TestTelemetryNoContentWithoutCapture: with telemetry.capture_content
// false, no span of any front exports the user's words or a tool call's
// arguments: not the classifier's reasons (which quote the words judged
// in the trace), not a node's error message quoting the request (vLLM's
// validation errors do), not a tool's. With capture_content true they are
// there: the reasons quote the words, the tool span carries the arguments.
// The proxy runs as main runs it, its spans exported over OTLP.
func TestTelemetryNoContentWithoutCapture(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000")
	question := "Compare the notes of " + userMark + " with the plan"
	fronts := []struct{ path, body, span string }{
		{"/v1/chat/completions", `{"model":"chain/auto","messages":[{"role":"user","content":%q}]}`, "POST /v1/chat/completions"},
		{"/v1/messages", `{"model":"chain/auto","max_tokens":100,"messages":[{"role":"user","content":%q}]}`, "POST /v1/messages"},
		{"/api/chat", `{"model":"chain/auto","stream":false,"messages":[{"role":"user","content":%q}]}`, "POST /api/chat"},
		{"/v1/responses", `{"model":"chain/auto","input":%q}`, "POST /v1/responses"},
	}
	for _, capture := range []bool{false, true} {
		t.Run(fmt.Sprintf("capture=%v", capture), func(t *testing.T) {
			endpoint, rec := startReceiver(t, config.ProtocolHTTP)
			ol := fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply {
				if !slices.ContainsFunc(req.Messages, func(m api.Message) bool { return m.Role == "tool" }) {
					return fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{{Name: "read_file", Args: map[string]any{"path": argsMark + ".md"}}}}
				}
				return fakeollama.Reply{Content: []string{"the notes say little"}}
			})
			// A node that refuses the request, quoting it, as vLLM's
			// validation errors do.
			oa := fakeopenai.NewFunc(t, func(_ int, req *goopenai.ChatCompletionRequest) fakeopenai.Reply {
				last := req.Messages[len(req.Messages)-1].Content
				return fakeopenai.Reply{Status: http.StatusInternalServerError, Error: "cannot take input: " + last}
			})
			oa.SetModels("mid")
			root := t.TempDir()
			if err := os.WriteFile(filepath.Join(root, "plan.md"), []byte("plan\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			proxy := startWiredStop(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, base_url: %q, model: small}
  - {name: M1, provider: openai, base_url: %q, model: mid}
chain:
  stages: [{node: OL1, max_turns: 2, tools: true}, {node: M1, max_turns: 1}]
  simple_node: OL1
tools: {root: %q}
telemetry: {endpoint: %q, capture_content: %v}
`, ol.URL, oa.BaseURL(), root, endpoint, capture))
			for _, f := range fronts {
				resp, err := http.Post(proxy.url+f.path, "application/json", strings.NewReader(fmt.Sprintf(f.body, question)))
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("POST %s: status %d: %s", f.path, resp.StatusCode, body)
				}
			}
			proxy.stop()
			spans := rec.snapshot()
			found := map[string]bool{}
			for _, s := range spans {
				for where, text := range spanText(s) {
					for _, mark := range []string{userMark, argsMark} {
						if !strings.Contains(text, mark) {
							continue
						}
						found[s.GetName()+" "+where] = true
						if !capture {
							t.Errorf("span %q %s exports %s without capture_content: %.200s", s.GetName(), where, mark, text)
						}
					}
				}
			}
			if !capture {
				// The reasons keep what is not content.
				for _, f := range fronts {
					for _, s := range spans {
						if got, want := fmt.Sprint(attrs(s)["chain.reasons"]), "[keyword: compare text judged]"; s.GetName() == f.span && got != want {
							t.Errorf("span %q chain.reasons = %s, want %s", f.span, got, want)
						}
					}
				}
				return
			}
			// With capture_content the content is exported, the reasons
			// quoting the words judged on every front.
			for _, f := range fronts {
				if !found[f.span+" chain.reasons"] {
					t.Errorf("span %q: no chain.reasons quoting the user's words with capture_content; found %v", f.span, found)
				}
			}
			if !found["execute_tool read_file gen_ai.tool.call.arguments"] {
				t.Errorf("no tool span carrying the call's arguments with capture_content; found %v", found)
			}
		})
	}
}
