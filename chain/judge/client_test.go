package judge_test

import (
	"encoding/json"
	"testing"

	"chainproxy/chain/judge"
	"chainproxy/chain/node"
	"chainproxy/chain/trace"
)

// TestClientCalls: client tools are volatile. A call runs again while
// its result changes, and is a loop when its last two results were the
// same or it ran max_polls times; spelling, defaults and nulls do not make
// a call new.
func TestClientCalls(t *testing.T) {
	tools := []node.Tool{{Name: "status", Parameters: json.RawMessage(`{"type":"object","properties":{"job":{"type":"string"},"verbose":{"type":"boolean","default":false}}}`)}}
	history := func(results ...string) []node.Message {
		msgs := []node.Message{{Role: "user", Content: "is it done?"}}
		for i, r := range results {
			id := "c" + string(rune('0'+i))
			msgs = append(msgs,
				node.Message{Role: "assistant", ToolCalls: []node.ToolCall{{ID: id, Name: "status", Arguments: `{"job":"j"}`}}},
				node.Message{Role: "tool", ToolCallID: id, Content: r})
		}
		return msgs
	}
	call := func(id, args string) node.ToolCall { return node.ToolCall{ID: id, Name: "status", Arguments: args} }
	tests := []struct {
		name    string
		history []node.Message
		calls   []node.ToolCall
		want    []string
	}{
		{"first call", history(), []node.ToolCall{call("n", `{"job":"j"}`)}, []string{trace.ToolOK}},
		{"results changing", history("10%", "50%"), []node.ToolCall{call("n", `{"job":"j"}`)}, []string{trace.ToolOK}},
		{"same result twice", history("10%", "10%"), []node.ToolCall{call("n", `{"job":"j"}`)}, []string{trace.ToolBlocked}},
		{"same result twice, call spelled otherwise", history("10%", "10%"), []node.ToolCall{call("n", `{ "verbose": false, "job": "j", "x": null }`)}, []string{trace.ToolBlocked}},
		{"an old repeat, then progress", history("10%", "10%", "50%"), []node.ToolCall{call("n", `{"job":"j"}`)}, []string{trace.ToolOK}},
		// Codex heads each command's result with a chunk ID and the wall
		// time, new at every run (codex-rs core/src/tools/context.rs).
		{"same Codex output twice", history(
			"Chunk ID: 3f9a1c\nWall time: 0.0102 seconds\nProcess exited with code 0\nOutput:\na.go\nb.go\n",
			"Chunk ID: 77b2e0\nWall time: 0.0087 seconds\nProcess exited with code 0\nOutput:\na.go\nb.go\n"),
			[]node.ToolCall{call("n", `{"job":"j"}`)}, []string{trace.ToolBlocked}},
		{"max polls", history("1", "2", "3", "4"), []node.ToolCall{call("n", `{"job":"j"}`)}, []string{trace.ToolBlocked}},
		{"batch duplicate", history(), []node.ToolCall{call("a", `{"job":"j"}`), call("b", `{"job":"j","verbose":false}`), call("c", `{"job":"k"}`)}, []string{trace.ToolOK, trace.ToolDuplicate, trace.ToolOK}},
		{"unparsable arguments are passed on", history("1", "1"), []node.ToolCall{call("n", `{job`)}, []string{trace.ToolOK}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := judge.ClientCalls(tt.calls, tools, judge.ClientHistoryOf(tt.history, tools), 4)
			for i, j := range got {
				if j.Status != tt.want[i] {
					t.Errorf("call %d: status %q (%s), want %q", i, j.Status, j.Reason, tt.want[i])
				}
			}
		})
	}
}

// A client tool works on files when an argument names a path or a shell
// command: the tools of Qwen Code, Claude Code, Codex CLI and opencode do;
// a weather tool does not.
func TestClientFileTool(t *testing.T) {
	tests := []struct {
		params string
		want   bool
	}{
		{`{"type":"object","properties":{"file_path":{"type":"string"},"limit":{"type":"integer"}}}`, true}, // Qwen Code's read_file, Claude Code's Read
		{`{"type":"object","properties":{"path":{"type":"string"}}}`, true},                                 // list_directory, LS
		{`{"type":"object","properties":{"filePath":{"type":"string"}}}`, true},                             // opencode's read
		{`{"type":"object","properties":{"paths":{"type":"array"}}}`, true},                                 // read_many_files
		{`{"type":"object","properties":{"notebook_path":{"type":"string"}}}`, true},                        // NotebookEdit
		{`{"type":"object","properties":{"command":{"type":"array"},"workdir":{"type":"string"}}}`, true},   // Codex CLI's shell
		{`{"type":"object","properties":{"city":{"type":"string"}}}`, false},
		{`{"type":"object","properties":{"url":{"type":"string"},"prompt":{"type":"string"}}}`, false},
		{``, false},
		{`not json`, false},
	}
	for _, tt := range tests {
		if got := judge.ClientFileTool(node.Tool{Name: "t", Parameters: json.RawMessage(tt.params)}); got != tt.want {
			t.Errorf("ClientFileTool(%s) = %v, want %v", tt.params, got, tt.want)
		}
	}
}

// A client's tool result is an error when its text says so, in each
// client's way; a result that merely mentions an error is not.
func TestClientError(t *testing.T) {
	tests := []struct {
		res  string
		want bool
	}{
		{"Error: city not found", true},                                 // LangChain, the AI SDK, the Anthropic front's is_error
		{"error: timeout", true},                                        //
		{"<tool_use_error>File does not exist.</tool_use_error>", true}, // Claude Code
		{"params must have required property 'file_path'", true},        // Qwen Code's validator
		{"params/limit must be integer", true},                          //
		{"Value of params must be an object", true},                     //
		{"sunny, 24°C", false},
		{"3 errors found in main.go", false},
		{"params: none", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := judge.ClientError(tt.res); got != tt.want {
			t.Errorf("ClientError(%q) = %v, want %v", tt.res, got, tt.want)
		}
	}
}
