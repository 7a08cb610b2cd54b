package tools

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// TextCall is a tool call a model wrote as text instead of a native call.
type TextCall struct {
	Name string
	// Arguments is the JSON text as written, "{}" when there was none. It
	// may be invalid JSON; Check reports that to the model like any other
	// malformed call.
	Arguments string
}

// ParseTextCalls finds the tool calls small models write as text,
// `[TOOL:list_dir:{"path":"."}]`, and returns them in order with the content
// they were removed from. It tolerates `[TOOL:name]` without arguments, a
// lower-case "tool", and whitespace (newlines included) around every part.
// Arguments are an object or array matched bracket by bracket, strings and
// escapes respected, so a "]" inside them does not end the call; anything
// else up to the next "]" is taken as written.
//
// When no call is found the content is returned unchanged; otherwise the
// rest is trimmed of the space the calls leave behind.
func ParseTextCalls(content string) (calls []TextCall, rest string) {
	var b strings.Builder
	last := 0
	for i := 0; i < len(content); {
		j := strings.IndexByte(content[i:], '[')
		if j < 0 {
			break
		}
		start := i + j
		call, end, ok := parseTextCall(content, start)
		if !ok {
			i = start + 1
			continue
		}
		b.WriteString(content[last:start])
		calls = append(calls, call)
		last, i = end, end
	}
	if len(calls) == 0 {
		return nil, content
	}
	b.WriteString(content[last:])
	return calls, strings.TrimSpace(b.String())
}

// parseTextCall parses one call whose "[" is at s[start]; end is just past
// its closing "]".
func parseTextCall(s string, start int) (call TextCall, end int, ok bool) {
	p := skipSpace(s, start+1)
	if len(s)-p < 4 || !strings.EqualFold(s[p:p+4], "TOOL") {
		return call, 0, false
	}
	p = skipSpace(s, p+4)
	if p >= len(s) || s[p] != ':' {
		return call, 0, false
	}
	p = skipSpace(s, p+1)
	n := p
	for n < len(s) && isNameByte(s[n]) {
		n++
	}
	if n == p {
		return call, 0, false
	}
	call.Name = s[p:n]
	call.Arguments = "{}"
	p = skipSpace(s, n)
	if p >= len(s) {
		return call, 0, false
	}
	switch s[p] {
	case ']':
		return call, p + 1, true
	case ':':
	default:
		return call, 0, false
	}
	p = skipSpace(s, p+1)
	if p >= len(s) {
		return call, 0, false
	}
	if s[p] == ']' {
		return call, p + 1, true
	}
	if s[p] == '{' || s[p] == '[' {
		if e, ok := matchBrackets(s, p); ok {
			q := skipSpace(s, e)
			if q < len(s) && s[q] == ']' {
				call.Arguments = s[p:e]
				return call, q + 1, true
			}
		}
	}
	// Not a balanced object: keep the text up to the next "]" as written so
	// the model is told its arguments are malformed rather than ignored.
	k := strings.IndexByte(s[p:], ']')
	if k < 0 {
		return call, 0, false
	}
	call.Arguments = strings.TrimSpace(s[p : p+k])
	if call.Arguments == "" {
		call.Arguments = "{}"
	}
	return call, p + k + 1, true
}

// matchBrackets returns the index just past the bracket that closes the one
// at s[p], skipping over JSON strings.
func matchBrackets(s string, p int) (int, bool) {
	depth := 0
	inString := false
	for i := p; i < len(s); i++ {
		c := s[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1, true
			}
		}
	}
	return 0, false
}

func skipSpace(s string, p int) int {
	for p < len(s) && (s[p] == ' ' || s[p] == '\t' || s[p] == '\n' || s[p] == '\r') {
		p++
	}
	return p
}

// isNameByte accepts OpenAI's function-name alphabet, [a-zA-Z0-9_-].
func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// Truncate caps s at limit bytes, cut on a UTF-8 boundary, and appends a note
// of what was cut, "\n… [truncated: 12345 more bytes]". The note comes on top
// of limit. A string within limit is returned unchanged.
func Truncate(s string, limit int) string {
	limit = max(limit, 0)
	if len(s) <= limit {
		return s
	}
	return truncate(s, limit, int64(len(s)))
}

// truncate cuts s, a prefix of something total bytes long, at limit bytes.
func truncate(s string, limit int, total int64) string {
	cut := runeCut(s, limit)
	return s[:cut] + fmt.Sprintf("\n… [truncated: %d more bytes]", total-int64(cut))
}

// runeCut returns the largest index ≤ limit that does not split a rune. On
// invalid UTF-8 it gives up after a rune's length and cuts at limit.
func runeCut(s string, limit int) int {
	if limit >= len(s) {
		return len(s)
	}
	for cut := limit; cut > limit-utf8.UTFMax && cut >= 0; cut-- {
		if utf8.RuneStart(s[cut]) {
			return cut
		}
	}
	return limit
}
