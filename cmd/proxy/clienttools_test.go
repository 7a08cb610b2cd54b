package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// qwenTools are client tools shaped as Qwen Code 0.24.4 sends them (names,
// parameters and required fields of web/testdata/agents/qwen-code-*.json,
// descriptions shortened): its files are the client's, by absolute path.
const qwenTools = `[
 {"type":"function","function":{"name":"read_file","description":"Reads and returns the content of a specified file. The file_path argument MUST be an absolute path.",
  "parameters":{"type":"object","properties":{"file_path":{"type":"string"},"offset":{"type":["integer","null"]},"limit":{"type":["integer","null"]}},"required":["file_path"]}}},
 {"type":"function","function":{"name":"list_directory","description":"Lists the names of files and subdirectories directly within a specified directory path.",
  "parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}},
 {"type":"function","function":{"name":"run_shell_command","description":"Executes a given shell command as bash -c <command>.",
  "parameters":{"type":"object","properties":{"command":{"type":"string"},"is_background":{"type":"boolean"}},"required":["command"]}}}
]`

// chainTrace is what these tests read of a trace.
type chainTrace struct {
	Reasons []string
	Stages  []struct {
		Node      string
		ToolsUsed []struct {
			Name, Status, Result string
			Client               bool
		} `json:"tools_used"`
	}
}

// chatWithTools posts a non-streamed chat completion carrying qwenTools and
// returns the answer's message and trace.
func chatWithTools(t *testing.T, base, model string, msgs []map[string]any) (map[string]any, chainTrace) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "messages": msgs, "tools": json.RawMessage(qwenTools)})
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	var doc struct {
		Choices []struct {
			Message map[string]any `json:"message"`
		}
		Chain chainTrace
	}
	if err := json.Unmarshal(data, &doc); err != nil || len(doc.Choices) != 1 {
		t.Fatalf("answer %s: %v", data, err)
	}
	return doc.Choices[0].Message, doc.Chain
}

// toolStatuses lists the trace's tool uses as "name status".
func toolStatuses(tr chainTrace) []string {
	var out []string
	for _, s := range tr.Stages {
		for _, u := range s.ToolsUsed {
			out = append(out, u.Name+" "+u.Status)
		}
	}
	return out
}

// TestClientFileToolsHideTheServers: Qwen Code brings its own file tools
// (read_file by file_path, list_directory, a shell), which work on its
// machine; the proxy's built-in file tools work on tools.root. The chain is
// offered the client's and none of the built-ins: OL1's list_dir, the
// proxy's folder, is refused as a tool it was not offered rather than
// listing another filesystem than the one read_file reads. Its read_file
// with the built-in's schema ("path") goes to the client, which refuses it
// as Qwen Code does; that result is an error in the trace, not ok. And in
// simple mode a call passed to the client is recorded as sent to it, as in
// the chain. tools.file_tools_with_client_tools brings the built-ins back.
func TestClientFileToolsHideTheServers(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "proxy-only.md"), []byte("the proxy's file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`
nodes:
  - name: OL1
    provider: mock
    model: small
    mock:
      turns:
        - tool_calls: [{name: list_dir, args: {path: "."}}]
        - tool_calls: [{name: read_file, args: {path: "README.md"}}]
        - content: "OL1 found nothing it could read."
  - {name: M1, provider: mock, model: mid, mock: {turns: [{content: "M1 synthesis."}]}}
  - {name: M2, provider: mock, model: big, mock: {turns: [{content: "M2 answer."}]}}
  - name: S
    provider: mock
    model: small
    mock:
      turns:
        - tool_calls: [{name: read_file, args: {file_path: "/home/user/demo/README.md"}}]
chain:
  stages: [{node: OL1, max_turns: 4, tools: true}, {node: M1, max_turns: 1}, {node: M2, max_turns: 1}]
  simple_node: S
tools:
  root: %q
`, root)
	base := startWired(t, cfg)

	msgs := []map[string]any{{"role": "user", "content": "Read README.md, then explain step by step why its design scales."}}
	msg, tr := chatWithTools(t, base, "chain/reflexive", msgs)
	calls, _ := msg["tool_calls"].([]any)
	if len(calls) != 1 {
		t.Fatalf("first answer %v, want the read_file call passed to the client", msg)
	}
	if got, want := toolStatuses(tr), []string{"list_dir error", "read_file client"}; !slices.Equal(got, want) {
		t.Errorf("tools used %q, want %q", got, want)
	}
	if u := tr.Stages[0].ToolsUsed[0]; !strings.Contains(u.Result, "unknown tool") || strings.Contains(u.Result, "proxy-only.md") {
		t.Errorf("list_dir result %q, want it refused as not offered, not the proxy's folder", u.Result)
	}
	if !slices.ContainsFunc(tr.Reasons, func(r string) bool { return strings.Contains(r, "list_dir, read_file, search_files") }) {
		t.Errorf("reasons %q, want the built-in file tools named as not offered", tr.Reasons)
	}

	// Qwen Code validates the call against its own schema: its tool
	// message is the validator's text, no error flag on this wire.
	call := calls[0].(map[string]any)
	msgs = append(msgs, msg, map[string]any{"role": "tool", "tool_call_id": call["id"], "content": "params must have required property 'file_path'"})
	_, tr = chatWithTools(t, base, "chain/reflexive", msgs)
	var got []string
	for _, s := range tr.Stages {
		for _, u := range s.ToolsUsed {
			if u.Name == "read_file" {
				got = append(got, u.Status)
			}
		}
	}
	if !slices.Equal(got, []string{"error"}) {
		t.Errorf("read_file after the client refused it: statuses %q (tools %q), want [error]", got, toolStatuses(tr))
	}

	// Simple mode: the call goes to the client, as the chain's does.
	_, tr = chatWithTools(t, base, "chain/simple", []map[string]any{{"role": "user", "content": "Show me README.md."}})
	if len(tr.Stages) != 1 || len(tr.Stages[0].ToolsUsed) != 1 {
		t.Fatalf("simple trace %+v, want one client call", tr)
	}
	if u := tr.Stages[0].ToolsUsed[0]; u.Status != "client" || !u.Client {
		t.Errorf("simple mode client call: status %q client %v, want client true", u.Status, u.Client)
	}

	// The old behaviour, asked for: the built-ins beside the client's.
	beside := startWired(t, cfg+"  file_tools_with_client_tools: true\n")
	_, tr = chatWithTools(t, beside, "chain/reflexive", msgs[:1])
	if got, want := toolStatuses(tr), []string{"list_dir ok", "read_file client"}; !slices.Equal(got, want) {
		t.Errorf("with tools.file_tools_with_client_tools: tools used %q, want %q", got, want)
	}
}
