package judge

import (
	"strings"
	"testing"
	"unicode/utf8"

	"chainproxy/memory"
)

func TestParseTextCalls(t *testing.T) {
	type call = memory.ToolCall
	tests := []struct {
		name    string
		in      string
		bare    bool
		calls   []call
		rest    string
		bad     bool
		badName string
	}{
		{"plain answer", "The answer is 42.", true, nil, "The answer is 42.", false, ""},
		{"untrimmed answer kept as is", "  hi\n", true, nil, "  hi\n", false, ""},
		{"qwen tag", `<tool_call>{"name":"read_file","arguments":{"path":"a.txt"}}</tool_call>`, true,
			[]call{{Name: "read_file", Arguments: `{"path":"a.txt"}`}}, "", false, ""},
		{"qwen tag with newlines and text around", "Let me look.\n<tool_call>\n{\"name\": \"list_dir\", \"arguments\": {\"path\": \".\"}}\n</tool_call>\n", true,
			[]call{{Name: "list_dir", Arguments: `{"path": "."}`}}, "Let me look.", false, ""},
		{"two tags", `<tool_call>{"name":"a","arguments":{}}</tool_call><tool_call>{"name":"b","arguments":{"x":1}}</tool_call>`, true,
			[]call{{Name: "a", Arguments: `{}`}, {Name: "b", Arguments: `{"x":1}`}}, "", false, ""},
		{"unclosed tag at the end", `<tool_call>{"name":"a","arguments":{"p":"q"}}`, true,
			[]call{{Name: "a", Arguments: `{"p":"q"}`}}, "", false, ""},
		{"arguments as a string", `<tool_call>{"name":"a","arguments":"{\"p\":1}"}</tool_call>`, true,
			[]call{{Name: "a", Arguments: `{"p":1}`}}, "", false, ""},
		{"parameters", `<tool_call>{"name":"a","parameters":{"p":1}}</tool_call>`, true,
			[]call{{Name: "a", Arguments: `{"p":1}`}}, "", false, ""},
		{"openai function shape", `<tool_call>{"type":"function","function":{"name":"a","arguments":"{}"}}</tool_call>`, true,
			[]call{{Name: "a", Arguments: `{}`}}, "", false, ""},
		{"tag in tool-less call stripped", `Here: <tool_call>{"name":"a","arguments":{}}</tool_call>`, false,
			[]call{{Name: "a", Arguments: `{}`}}, "Here:", false, ""},
		{"broken tag", `<tool_call>{"name":"read_file","arguments":{"path":"a.txt"}</tool_call>`, true,
			nil, "", true, "read_file"},
		{"tag with no name", `<tool_call>{"arguments":{}}</tool_call> ok`, true, nil, "ok", true, ""},
		{"tag mentioned in prose", "Qwen writes <tool_call> tags around its calls.", true,
			nil, "Qwen writes <tool_call> tags around its calls.", false, ""},
		{"bare object", `{"name":"list_dir","arguments":{"path":"."}}`, true,
			[]call{{Name: "list_dir", Arguments: `{"path":"."}`}}, "", false, ""},
		{"bare array", " [{\"name\":\"a\",\"arguments\":{}}, {\"name\":\"b\",\"arguments\":\"{}\"}]\n", true,
			[]call{{Name: "a", Arguments: `{}`}, {Name: "b", Arguments: `{}`}}, "", false, ""},
		{"bare object without tools is an answer", `{"name":"list_dir","arguments":{}}`, false,
			nil, `{"name":"list_dir","arguments":{}}`, false, ""},
		{"json answer of another shape", `{"name":"Ada","age":36}`, true, nil, `{"name":"Ada","age":36}`, false, ""},
		{"json array answer", `[1, 2, 3]`, true, nil, `[1, 2, 3]`, false, ""},
		{"broken bare call", `{"name":"list_dir","arguments":{"path":"."}`, true, nil, "", true, "list_dir"},
		{"broken json that is no call", `{oops`, true, nil, `{oops`, false, ""},
		{"design 003", `Looking. [TOOL:list_dir:{"path":"."}]`, true,
			[]call{{Name: "list_dir", Arguments: `{"path":"."}`}}, "Looking.", false, ""},
		{"unfinished design 003", `Looking. [TOOL:list_dir:{"path":"."}`, true, nil, "Looking.", true, "list_dir"},
		{"markdown link", "See [the docs](https://x) and [tool](y).", true, nil, "See [the docs](https://x) and [tool](y).", false, ""},
		{"design 003 without tools", `Done. [TOOL:read_file:{"path":"a.txt"}]`, false,
			[]call{{Name: "read_file", Arguments: `{"path":"a.txt"}`}}, "Done.", false, ""},
		{"prose marker without tools", "Pick [Tool: hammer] first.", false, nil, "Pick [Tool: hammer] first.", false, ""},
		{"prose marker with tools is a call", "Pick [Tool: hammer] first.", true,
			[]call{{Name: "hammer", Arguments: "{}"}}, "Pick  first.", false, ""},
		// Qwen2.5-Coder writes its calls in a ```json fence rather than in
		// <tool_call> tags (vllm-project/vllm#32926: 100% of its calls
		// without a format instruction; ardanlabs/kronk#950), and
		// llama.cpp's Hermes 2 Pro parser unwraps such a fence
		// (common/chat.cpp, common_chat_parse_hermes_2_pro: "```(?:xml|json)?\n").
		{"call in a json fence", "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"notes.md\"}}\n```", true,
			[]call{{Name: "read_file", Arguments: `{"path": "notes.md"}`}}, "", false, ""},
		{"call in a plain fence, closer on its line", "\n```\n{\"name\": \"list_dir\", \"arguments\": {}} ```\n", true,
			[]call{{Name: "list_dir", Arguments: `{}`}}, "", false, ""},
		{"calls in an xml fence", "```xml\n[{\"name\": \"a\", \"arguments\": {}}]\n```", true,
			[]call{{Name: "a", Arguments: `{}`}}, "", false, ""},
		{"broken call in a fence", "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}\n```", true,
			nil, "", true, "read_file"},
		{"fenced json of another shape is an answer", "```json\n{\"name\": \"Ada\", \"age\": 36}\n```", true,
			nil, "```json\n{\"name\": \"Ada\", \"age\": 36}\n```", false, ""},
		{"fenced call without tools is an answer", "```json\n{\"name\": \"a\", \"arguments\": {}}\n```", false,
			nil, "```json\n{\"name\": \"a\", \"arguments\": {}}\n```", false, ""},
		{"python fence is an answer", "```python\nprint({\"name\": 1})\n```", true,
			nil, "```python\nprint({\"name\": 1})\n```", false, ""},
		// Llama 3.x writes several calls as objects separated by "; "
		// (vLLM's llama3_json parser, vllm/entrypoints/openai/tool_parsers/
		// llama_tool_parser.py); Qwen2.5-Coder one per line.
		{"llama calls separated by semicolons", `{"name": "read_file", "parameters": {"path": "a.txt"}}; {"name": "list_dir", "parameters": {"path": "."}}`, true,
			[]call{{Name: "read_file", Arguments: `{"path": "a.txt"}`}, {Name: "list_dir", Arguments: `{"path": "."}`}}, "", false, ""},
		{"calls one per line in a fence", "```json\n{\"name\": \"a\", \"arguments\": {}}\n{\"name\": \"b\", \"arguments\": {\"x\": 1}}\n```", true,
			[]call{{Name: "a", Arguments: `{}`}, {Name: "b", Arguments: `{"x": 1}`}}, "", false, ""},
		{"json lines of another shape are an answer", "{\"a\": 1}\n{\"b\": 2}", true, nil, "{\"a\": 1}\n{\"b\": 2}", false, ""},
		{"a call then prose is broken", `{"name": "a", "arguments": {}} and then I answer.`, true, nil, "", true, "a"},
		{"a call then a broken one", `{"name": "a", "arguments": {}}; {"name": "b", "arguments": {`, true, nil, "", true, "a"},
		{"fenced call with prose after is an answer", "```json\n{\"name\": \"a\", \"arguments\": {}}\n```\nThat is how to call it.", true,
			nil, "```json\n{\"name\": \"a\", \"arguments\": {}}\n```\nThat is how to call it.", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseTextCalls(tt.in, tt.bare)
			if len(got.Calls) != len(tt.calls) {
				t.Fatalf("ParseTextCalls(%q).calls = %+v, want %+v", tt.in, got.Calls, tt.calls)
			}
			for i := range tt.calls {
				if got.Calls[i] != tt.calls[i] {
					t.Errorf("call %d = %+v, want %+v", i, got.Calls[i], tt.calls[i])
				}
			}
			if got.Rest != tt.rest {
				t.Errorf("rest = %q, want %q", got.Rest, tt.rest)
			}
			if (got.Bad != "") != tt.bad || got.BadName != tt.badName {
				t.Errorf("bad, badName = %q, %q; want bad %v, name %q", got.Bad, got.BadName, tt.bad, tt.badName)
			}
		})
	}
}

func TestCallSafe(t *testing.T) {
	tests := []struct {
		name    string
		content string
		from    int
		bare    bool
		want    int
	}{
		{"prose", "Hello there", 0, true, 11},
		{"leading space only", "  \n", 0, true, 0},
		{"bare object", ` {"na`, 0, true, 0},
		{"object without tools", `{"na`, 0, false, 4},
		{"array of objects", "[ {", 0, true, 0},
		{"open bracket", "[", 0, true, 0},
		{"array of numbers", "[1, 2]", 0, true, 6},
		{"tag prefix", "Let me look. <tool_", 0, true, 13},
		{"whole tag", "Hi <tool_call>{", 0, true, 3},
		{"not a tag", "a <b> c", 0, true, 7},
		{"TOOL prefix", "ok [ To", 0, true, 3},
		{"TOOL marker", "ok [TOOL:", 0, true, 3},
		{"link", "ok [to be] done", 0, true, 15},
		{"from skips shown text", "<tool_call> is a tag. <b", 22, true, 24},
		{"prose marker without tools", "ok [Tool: x", 0, false, 11},
		{"exact marker without tools", "ok [TOO", 0, false, 3},
		// A fenced call (see TestParseTextCalls) is held like a bare one
		// while it may still be one.
		{"fence prefix", " `", 0, true, 0},
		{"json fence opening", "```js", 0, true, 0},
		{"json fence then object", "```json\n  {\"na", 0, true, 0},
		{"plain fence then array", "```\n[{", 0, true, 0},
		{"python fence", "```py", 0, true, 5},
		{"json fence then prose", "```json\nnot", 0, true, 11},
		{"json fence without tools", "```json\n{", 0, false, 9},
		{"backticks in prose", "`x` is", 0, true, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := callSafe(tt.content, tt.from, tt.bare); got != tt.want {
				t.Errorf("callSafe(%q, %d, %v) = %d, want %d", tt.content, tt.from, tt.bare, got, tt.want)
			}
		})
	}
}

// FuzzParseTextCalls checks that the parser never panics, that rest only
// holds bytes of the content, that a found call has a name, and that no
// <tool_call> with a JSON body is left in an answer.
func FuzzParseTextCalls(f *testing.F) {
	for _, s := range []string{
		`<tool_call>{"name":"a","arguments":{"p":1}}</tool_call>`,
		`x <tool_call>{"name":"a"`,
		`<tool_call>[{"name":"a","arguments":"{}"}]</tool_call>`,
		`{"name":"a","arguments":null}`,
		`[{"name":"a","parameters":{}}]`,
		`[TOOL:a:{"p":"]"}] [tool : b`,
		`{"function":{"name":"a","arguments":"{"}}`,
	} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, bare bool) {
		got := ParseTextCalls(s, bare)
		for _, c := range got.Calls {
			if c.Name == "" {
				t.Errorf("ParseTextCalls(%q) made a call without a name", s)
			}
		}
		if len(got.Rest) > len(s) {
			t.Errorf("ParseTextCalls(%q).Rest = %q, longer than the content", s, got.Rest)
		}
		if i := strings.Index(got.Rest, callOpen); i >= 0 {
			body := strings.TrimLeft(got.Rest[i+len(callOpen):], jsonSpace)
			if body != "" && (body[0] == '{' || body[0] == '[') {
				t.Errorf("ParseTextCalls(%q).Rest = %q keeps a call tag", s, got.Rest)
			}
		}
		if utf8.ValidString(s) && !utf8.ValidString(got.Rest) {
			t.Errorf("ParseTextCalls(%q).Rest = %q is not valid UTF-8", s, got.Rest)
		}
		for from := 0; from <= len(s); from += 1 + len(s)/7 {
			if n := callSafe(s, from, bare); n < from && n != 0 || n > len(s) {
				t.Errorf("callSafe(%q, %d) = %d", s, from, n)
			}
		}
	})
}
