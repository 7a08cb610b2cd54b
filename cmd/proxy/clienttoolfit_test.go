package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"

	"chainproxy/internal/fakeollama"
)

// agentTools are client tools as an agent sends them on its first
// request: each with a long description and described parameters (Claude
// Code 2.1 sends 12 tools in 31,931 characters of schemas, issue 42),
// together far more than a 4,096-token window holds. The last, which the
// question's words do not name, is the one the model needs in the
// find_tools cases.
func agentTools(n int) (string, []string) {
	base := []string{"read_file", "write_file", "list_directory", "run_shell_command", "search_web", "fetch_url",
		"git_commit", "git_diff", "send_email", "create_calendar_event", "query_database"}
	var tools, names []string
	for i := range n {
		name := base[i%len(base)]
		switch {
		case i == n-1:
			name = "translate_text"
		case i >= len(base):
			name = fmt.Sprintf("%s_%d", name, i/len(base))
		}
		names = append(names, name)
		desc := strings.ReplaceAll(name, "_", " ") + " for the agent. " + strings.Repeat("Use it carefully, and only when the task needs it; prefer the dedicated tool. ", 30)
		tools = append(tools, fmt.Sprintf(`{"type":"function","function":{"name":%q,"description":%q,"parameters":{"type":"object","properties":{"target":{"type":"string","description":%q},"mode":{"type":"string","description":%q}},"required":["target"]}}}`,
			name, desc, strings.Repeat("What the tool works on. ", 15), strings.Repeat("How it works. ", 15)))
	}
	return "[" + strings.Join(tools, ",") + "]", names
}

// agentModel scripts a small model that calls the client tool it needs
// when it is offered, else asks find_tools for it (or, stubborn, first
// calls it by name anyway), and answers with the tool's result once the
// client sent it.
func agentModel(need map[string]string) func(int, *api.ChatRequest) fakeollama.Reply {
	return func(_ int, req *api.ChatRequest) fakeollama.Reply {
		first := req.Messages[0].Content
		for _, m := range req.Messages {
			if m.Role == "user" {
				first = m.Content
				break
			}
		}
		tool := ""
		for key, name := range need {
			if strings.Contains(first, key) {
				tool = name
			}
		}
		last := req.Messages[len(req.Messages)-1]
		if last.Role == "tool" && last.ToolName != "find_tools" {
			return fakeollama.Reply{Content: []string{"The client's tool said: " + last.Content}}
		}
		offered := map[string]bool{}
		for _, t := range req.Tools {
			offered[t.Function.Name] = true
		}
		asked := false
		for _, m := range req.Messages {
			for _, c := range m.ToolCalls {
				asked = asked || c.Function.Name == "find_tools"
			}
		}
		args := map[string]any{"target": "README.md"}
		switch {
		case offered[tool]:
			return fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{{Name: tool, Args: args}}}
		case strings.Contains(first, "stubborn") && !strings.Contains(last.Content, "not available"):
			return fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{{Name: tool, Args: args}}}
		case offered["find_tools"] && !asked:
			return fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{{Name: "find_tools", Args: map[string]any{"query": strings.ReplaceAll(tool, "_", " ")}}}}
		}
		return fakeollama.Reply{Content: []string{"I was not offered " + tool + "."}}
	}
}

// fitTrace is what these tests read of a trace.
type fitTrace struct {
	Mode   string
	Stages []struct {
		Status  string
		ToolFit *struct {
			Offered, Of int
			Compact     bool
			Withheld    []string
			Found       []string
			Reason      string
		} `json:"tool_fit"`
		ToolsUsed []struct {
			Name, Status, Result string
			Client               bool
		} `json:"tools_used"`
	}
}

// postAgent posts a non-streamed chat completion with the client's tools
// and returns its status, message and trace.
func postAgent(t *testing.T, base, model, tools string, msgs []map[string]any) (int, map[string]any, fitTrace, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "messages": msgs, "tools": json.RawMessage(tools)})
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var doc struct {
		Choices []struct {
			Message      map[string]any `json:"message"`
			FinishReason string         `json:"finish_reason"`
		}
		Chain fitTrace
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("answer %s: %v", data, err)
	}
	if len(doc.Choices) != 1 {
		return resp.StatusCode, nil, doc.Chain, string(data)
	}
	return resp.StatusCode, doc.Choices[0].Message, doc.Chain, string(data)
}

// toolNames lists the names of the tools a node's request offered.
func toolNames(req api.ChatRequest) []string {
	var out []string
	for _, t := range req.Tools {
		out = append(out, t.Function.Name)
	}
	return out
}

// TestSimpleClientToolsFitFourKWindow is issue 42's item 2 in simple mode:
// an agent client's own tools, far more than a 4,096-token Ollama node's
// share of its window, are chosen as a chain stage's are (compact, the
// most relevant, the others behind find_tools) rather than refused as a
// prompt too long. The client receives a call to one of its own tools,
// named as it named it, with the arguments the model gave; find_tools is
// the proxy's, answered by it and never shown to the client; a withheld
// tool the model calls by name is not passed on; and the client's
// follow-up with the tool's result is answered, the tool it called
// offered first.
func TestSimpleClientToolsFitFourKWindow(t *testing.T) {
	ol := fakeollama.NewFunc(t, agentModel(map[string]string{
		"read README.md": "read_file",
		"in French":      "translate_text",
	}))
	ol.SetWindow(4096, 4)
	base := startWired(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, base_url: %q, model: small}
chain:
  stages: [{node: OL1, max_turns: 2, tools: true}]
  simple_node: OL1
tools:
  root: ""
`, ol.URL))
	for _, tc := range []struct {
		name     string
		tools    int
		question string
		want     string // the client tool the client receives a call to
		find     bool   // the model finds it through find_tools first
		unoffer  bool   // and called it by name before, withheld
	}{
		{name: "twelve agent tools", tools: 12, question: "read README.md", want: "read_file"},
		{name: "withheld tool found", tools: 36, question: "say README.md in French", want: "translate_text", find: true},
		{name: "withheld tool called by name", tools: 36, question: "stubborn: say README.md in French", want: "translate_text", find: true, unoffer: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tools, names := agentTools(tc.tools)
			before := len(ol.Requests())
			msgs := []map[string]any{{"role": "user", "content": tc.question}}
			status, msg, tr, raw := postAgent(t, base, "chain/simple", tools, msgs)
			if status != http.StatusOK {
				t.Fatalf("status %d, want 200: %.800s", status, raw)
			}
			calls, _ := msg["tool_calls"].([]any)
			if len(calls) != 1 {
				t.Fatalf("tool calls = %v, want one call to %s", msg["tool_calls"], tc.want)
			}
			call := calls[0].(map[string]any)
			fn := call["function"].(map[string]any)
			if fn["name"] != tc.want || fn["arguments"] != `{"target":"README.md"}` {
				t.Errorf("call = %v %v, want %s {\"target\":\"README.md\"}", fn["name"], fn["arguments"], tc.want)
			}
			if tr.Mode != "simple" || len(tr.Stages) != 1 {
				t.Fatalf("trace = %+v, want one simple stage", tr)
			}
			st := tr.Stages[0]
			if fit := st.ToolFit; fit == nil || !fit.Compact || fit.Of != tc.tools || !strings.Contains(fit.Reason, "OL1's 4096-token window") {
				t.Fatalf("tool_fit = %+v, want the %d client tools fitted compact to OL1's window", fit, tc.tools)
			}
			reqs := ol.Requests()[before:]
			firstOffer := toolNames(reqs[0])
			if tc.find {
				if slices.Contains(firstOffer, tc.want) || !slices.Contains(firstOffer, "find_tools") {
					t.Errorf("first call offered %v, want %s withheld behind find_tools", firstOffer, tc.want)
				}
				if len(st.ToolFit.Withheld) == 0 || slices.Contains(st.ToolFit.Withheld, tc.want) {
					t.Errorf("tool_fit withheld = %v, want tools withheld, %s not among them once found", st.ToolFit.Withheld, tc.want)
				}
				if !slices.Contains(st.ToolFit.Found, tc.want) {
					t.Errorf("tool_fit found = %v, want %s", st.ToolFit.Found, tc.want)
				}
				if lastOffer := toolNames(reqs[len(reqs)-1]); !slices.Contains(lastOffer, tc.want) {
					t.Errorf("last call offered %v, want %s, found", lastOffer, tc.want)
				}
			}
			var uses []string
			for _, u := range st.ToolsUsed {
				uses = append(uses, u.Name+" "+u.Status)
			}
			want := []string{tc.want + " client"}
			if tc.find {
				want = append([]string{"find_tools ok"}, want...)
			}
			if tc.unoffer {
				want = append([]string{tc.want + " blocked"}, want...)
			}
			if !slices.Equal(uses, want) {
				t.Errorf("tools used = %v, want %v", uses, want)
			}
			for _, r := range reqs {
				for _, name := range toolNames(r) {
					if name != "find_tools" && !slices.Contains(names, name) {
						t.Errorf("OL1 was offered %q, not a client tool", name)
					}
				}
			}

			// The client runs the call and sends its result back: the
			// follow-up is answered, the tool it ran offered first.
			before = len(ol.Requests())
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{call}},
				map[string]any{"role": "tool", "tool_call_id": call["id"], "content": "RESULT-42"})
			status, msg, _, raw = postAgent(t, base, "chain/simple", tools, msgs)
			if status != http.StatusOK || msg["content"] != "The client's tool said: RESULT-42" {
				t.Fatalf("follow-up = %d %.800s, want the model's answer from the tool's result", status, raw)
			}
			if offer := toolNames(ol.Requests()[before]); !slices.Contains(offer, tc.want) {
				t.Errorf("follow-up offered %v, want %s, which the conversation called", offer, tc.want)
			}
		})
	}
}
