package chain

import (
	"encoding/json"
	"testing"
)

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
		if got := clientFileTool(Tool{Name: "t", Parameters: json.RawMessage(tt.params)}); got != tt.want {
			t.Errorf("clientFileTool(%s) = %v, want %v", tt.params, got, tt.want)
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
		if got := clientError(tt.res); got != tt.want {
			t.Errorf("clientError(%q) = %v, want %v", tt.res, got, tt.want)
		}
	}
}
