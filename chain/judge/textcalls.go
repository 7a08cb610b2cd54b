package judge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"chainproxy/memory"
	"chainproxy/tools"
)

// The tags Qwen and Hermes-style models wrap a tool call in when the server
// does not parse them (a chat template without a tool parser).
const (
	callOpen  = "<tool_call>"
	callClose = "</tool_call>"
)

// TextCalls is what a model's content held in the way of text tool calls.
type TextCalls struct {
	Calls []memory.ToolCall
	// Rest is the content without the calls, trimmed.
	Rest string
	// Bad says why content that looks like a call could not be read; ""
	// when there was none.
	Bad string
	// BadName is the tool name such a call seems to use, "" when unknown.
	BadName string
	// BadText is the start of that call as written, for the model to see.
	BadText string
}

// ParseTextCalls finds the tool calls a model wrote in content:
// <tool_call>{"name":…,"arguments":…}</tool_call> (one or more, with text
// around them; a missing closing tag at the end is tolerated), design 003's
// [TOOL:name:{json}], and, when bare is set, content that is only a JSON
// object or array of {"name","arguments"}, bare or alone in a Markdown code
// fence (Qwen2.5-Coder's way, see unfence). Arguments may be an object or a
// JSON string holding one. bare is for calls that offer tools: a JSON answer
// to a call without tools is an answer, and there only design 003's exact
// spelling "[TOOL:" counts, so that prose like "[Tool: hammer]" stays.
//
// Content that starts like a call and does not parse is reported in Bad,
// and the call-looking text is left out of Rest all the same: raw tags are
// never an answer.
func ParseTextCalls(content string, bare bool) TextCalls {
	var out TextCalls
	rest := content
	if strings.Contains(rest, callOpen) {
		rest = out.tags(rest)
	}
	if bare && strings.IndexByte(rest, '[') >= 0 || strings.Contains(rest, "[TOOL:") {
		tc, r := tools.ParseTextCalls(rest)
		for _, c := range tc {
			out.Calls = append(out.Calls, memory.ToolCall{Name: c.Name, Arguments: c.Arguments})
		}
		rest = r
		if loc := toolMarker.FindStringIndex(rest); loc != nil {
			// An unfinished [TOOL:…]: drop it with what follows.
			out.fail("a [TOOL:name:{json}] call is not finished", rest[loc[0]:])
			rest = rest[:loc[0]]
		}
	}
	if bare && len(out.Calls) == 0 && out.Bad == "" {
		t := strings.TrimSpace(rest)
		if body, ok := unfence(t); ok {
			t = body
		}
		if t != "" && (t[0] == '{' || t[0] == '[') {
			calls, err := decodeCalls(t)
			switch {
			case err == nil:
				out.Calls, rest = calls, ""
			case errors.Is(err, errNotCall):
			case callShaped(t):
				out.fail(err.Error(), t)
				rest = ""
			}
		}
	}
	out.Rest = rest
	if len(out.Calls) > 0 || out.Bad != "" || len(rest) != len(content) {
		out.Rest = strings.TrimSpace(rest)
	}
	return out
}

// fence opens and closes a Markdown code block.
const fence = "```"

// unfence returns the body of t when t is one Markdown code fence whose
// language is none, json or xml: a call written so is still a call. Small
// models do write them so: Qwen2.5-Coder puts its calls in a ```json fence
// rather than in <tool_call> tags (vllm-project/vllm#32926), and llama.cpp's
// Hermes 2 Pro parser unwraps the same fences (common/chat.cpp,
// common_chat_parse_hermes_2_pro). Text around the fence makes it an
// answer that shows JSON, not a call.
func unfence(t string) (string, bool) {
	nl := strings.IndexByte(t, '\n')
	if nl < 0 || !strings.HasPrefix(t, fence) || !strings.HasSuffix(t[nl:], fence) || !fenceLang(t[len(fence):nl]) {
		return "", false
	}
	return strings.TrimSpace(t[nl+1 : len(t)-len(fence)]), true
}

// fenceLang reports whether a fence's info string names a language a call
// is written in: none, json or xml (llama.cpp's "```(?:xml|json)?").
func fenceLang(info string) bool {
	switch strings.TrimSpace(info) {
	case "", "json", "xml":
		return true
	}
	return false
}

// toolMarker is the start of a [TOOL:…] call, spelled as tools.ParseTextCalls
// accepts it.
var toolMarker = regexp.MustCompile(`(?i)\[\s*tool\s*:`)

// fail records the first call that could not be read.
func (t *TextCalls) fail(why, raw string) {
	if t.Bad != "" {
		return
	}
	t.Bad = why
	t.BadText = tools.Truncate(strings.TrimSpace(raw), 300)
	if m := nameField.FindStringSubmatch(raw); m != nil {
		t.BadName = m[1]
	} else if m := toolName.FindStringSubmatch(raw); m != nil {
		t.BadName = m[1]
	}
}

var (
	nameField = regexp.MustCompile(`"name"\s*:\s*"([A-Za-z0-9_.-]{1,64})"`)
	toolName  = regexp.MustCompile(`(?i)\[\s*tool\s*:\s*([A-Za-z0-9_-]{1,64})`)
)

// tags takes the <tool_call> calls out of s and returns the rest. A tag
// whose body does not start with "{" or "[" is prose about the tag, not a
// call, and stays.
func (t *TextCalls) tags(s string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); {
		j := strings.Index(s[i:], callOpen)
		if j < 0 {
			break
		}
		start := i + j
		body := start + len(callOpen)
		k := body + len(s[body:]) - len(strings.TrimLeft(s[body:], jsonSpace))
		if k < len(s) && s[k] != '{' && s[k] != '[' {
			i = body
			continue
		}
		end := len(s)
		inner := s[body:]
		if c := strings.Index(inner, callClose); c >= 0 {
			inner, end = inner[:c], body+c+len(callClose)
		}
		calls, err := decodeCalls(strings.TrimSpace(inner))
		if err != nil {
			t.fail("the call in <tool_call> could not be read: "+err.Error(), inner)
		}
		t.Calls = append(t.Calls, calls...)
		b.WriteString(s[last:start])
		last, i = end, end
	}
	b.WriteString(s[last:])
	return b.String()
}

const jsonSpace = " \t\r\n"

// errNotCall: valid JSON, but not the shape of a call.
var errNotCall = errors.New("not a tool call")

// wireCall is a call as models write it: {"name","arguments"}, the
// "parameters" of Llama 3's template, or OpenAI's {"function":{…}}.
type wireCall struct {
	Name       string          `json:"name"`
	Arguments  json.RawMessage `json:"arguments"`
	Parameters json.RawMessage `json:"parameters"`
	Function   *wireCall       `json:"function"`
}

// decodeCalls reads a JSON call, an array of calls, or calls written one
// after the other. It returns errNotCall for valid JSON of another shape,
// and a syntax error otherwise.
func decodeCalls(s string) ([]memory.ToolCall, error) {
	if s == "" {
		return nil, errors.New("it is empty")
	}
	var raws []json.RawMessage
	if s[0] == '[' {
		if err := json.Unmarshal([]byte(s), &raws); err != nil {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		if len(raws) == 0 {
			return nil, errNotCall
		}
	} else if json.Valid([]byte(s)) {
		raws = []json.RawMessage{json.RawMessage(s)}
	} else if raws = jsonSequence(s); raws == nil {
		var v any
		err := json.Unmarshal([]byte(s), &v)
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	calls := make([]memory.ToolCall, 0, len(raws))
	for _, raw := range raws {
		c, ok := decodeCall(raw)
		if !ok {
			return nil, errNotCall
		}
		calls = append(calls, c)
	}
	return calls, nil
}

// jsonSequence splits s into the JSON objects written one after the
// other in it, separated by whitespace or by ";": Llama 3.x writes several
// calls as {…}; {…} (vLLM's llama3_json tool parser splits them on ";"),
// Qwen2.5-Coder one per line. It returns nil when s is not only such
// objects.
func jsonSequence(s string) []json.RawMessage {
	var out []json.RawMessage
	for s != "" {
		if s[0] != '{' {
			return nil
		}
		dec := json.NewDecoder(strings.NewReader(s))
		var raw json.RawMessage
		if dec.Decode(&raw) != nil {
			return nil
		}
		out = append(out, raw)
		s = strings.TrimLeft(s[dec.InputOffset():], jsonSpace)
		if rest, ok := strings.CutPrefix(s, ";"); ok {
			s = strings.TrimLeft(rest, jsonSpace)
		}
	}
	return out
}

// decodeCall reads one {"name","arguments"} object.
func decodeCall(raw json.RawMessage) (memory.ToolCall, bool) {
	var w wireCall
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' || json.Unmarshal(t, &w) != nil {
		return memory.ToolCall{}, false
	}
	if w.Name == "" && w.Function != nil {
		w = *w.Function
	}
	args := w.Arguments
	if args == nil {
		args = w.Parameters
	}
	if w.Name == "" || args == nil {
		return memory.ToolCall{}, false
	}
	c := memory.ToolCall{Name: w.Name, Arguments: string(args)}
	switch args[0] {
	case '"':
		// Arguments sent as a JSON string, as OpenAI's wire format has them.
		var s string
		if json.Unmarshal(args, &s) == nil {
			c.Arguments = s
		}
	case 'n':
		c.Arguments = "{}"
	}
	return c, true
}

// callShaped reports whether invalid JSON was meant as a call: it names
// the fields of one.
func callShaped(s string) bool {
	return strings.Contains(s, `"name"`) && (strings.Contains(s, `"arguments"`) || strings.Contains(s, `"parameters"`))
}

// callSafe returns how much of streamed content can be shown without
// showing part of a text tool call: content before from is already shown,
// and the result is where a call starts or may still start (len(content)
// when nowhere). With bare set, content whose first non-space byte opens a
// JSON object or array of objects, or a code fence that may hold one, is
// held whole: it may be a call.
func callSafe(content string, from int, bare bool) int {
	if from == 0 {
		t := strings.TrimLeft(content, jsonSpace)
		if t == "" {
			return 0
		}
		if bare && (t[0] == '{' || t[0] == '[' && openArray(t) || openFence(t)) {
			return 0
		}
	}
	// A plain loop: what is scanned is mostly one streamed token, too
	// short for IndexAny's set-up to pay.
	for i := from; i < len(content); i++ {
		if c := content[i]; (c == '<' || c == '[') && mayStartCall(content[i:], !bare) {
			return i
		}
	}
	return len(content)
}

// openArray reports whether t, starting with "[", may be a JSON array of
// objects: "[" then "{", or nothing yet.
func openArray(t string) bool {
	t = strings.TrimLeft(t[1:], jsonSpace)
	return t == "" || t[0] == '{'
}

// openFence reports whether t may still be a code fence that unfence
// reads as a call: "```", a language fenceLang accepts (or the start of
// one), and on the next line a JSON object or array of objects, or
// nothing yet.
func openFence(t string) bool {
	if len(t) < len(fence) {
		return t == fence[:len(t)]
	}
	if t[:len(fence)] != fence {
		return false
	}
	info, body, complete := strings.Cut(t[len(fence):], "\n")
	if !complete {
		info = strings.TrimSpace(info)
		return strings.HasPrefix("json", info) || strings.HasPrefix("xml", info)
	}
	if !fenceLang(info) {
		return false
	}
	body = strings.TrimLeft(body, jsonSpace)
	return body == "" || body[0] == '{' || body[0] == '[' && openArray(body)
}

// mayStartCall reports whether s, starting with "<" or "[", is or may
// still become the start of a <tool_call> tag or a [TOOL: marker; exact:
// the marker spelled exactly so (see ParseTextCalls).
func mayStartCall(s string, exact bool) bool {
	if s[0] == '<' {
		n := min(len(s), len(callOpen))
		return s[:n] == callOpen[:n]
	}
	if exact {
		const marker = "[TOOL:"
		n := min(len(s), len(marker))
		return s[:n] == marker[:n]
	}
	const word = "tool"
	p := skipJSONSpace(s, 1)
	for k := 0; k < len(word); k, p = k+1, p+1 {
		if p >= len(s) {
			return true
		}
		if s[p]|0x20 != word[k] {
			return false
		}
	}
	p = skipJSONSpace(s, p)
	return p >= len(s) || s[p] == ':'
}

func skipJSONSpace(s string, p int) int {
	for p < len(s) && strings.IndexByte(jsonSpace, s[p]) >= 0 {
		p++
	}
	return p
}
