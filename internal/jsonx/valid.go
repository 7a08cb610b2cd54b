// Package jsonx holds the JSON the proxy reads and writes by hand on its
// hot paths, where encoding/json's generic machinery costs more than the
// work: checking a request body before it is decoded, and escaping the
// strings of the bodies and events it frames itself. Both give the answers
// encoding/json gives; the tests compare them with it.
package jsonx

import "unicode/utf8"

// maxDepth is encoding/json's nesting limit: a body nested deeper is
// refused, by encoding/json and here.
const maxDepth = 10000

// Valid reports whether data is one JSON value in UTF-8, with white space
// around it: what utf8.Valid(data) && encoding/json.Valid(data) report, in
// one pass and about four times faster. Like encoding/json, it refuses
// values nested more than 10,000 deep.
//
// It keeps its own stack rather than recursing: the validators that recurse
// (gjson's, segmentio's) take a goroutine's stack past its 1 GB limit on a
// 16 MB body of brackets, which kills the process; a request body may be up
// to server.max_body_bytes.
func Valid(data []byte) bool {
	// The open containers, innermost last: true for an object. Most
	// bodies nest a few levels; the array spares them an allocation.
	var small [32]bool
	stack := small[:0]
	i := skipSpace(data, 0)
	for {
		// A value starts at i.
		if i >= len(data) {
			return false
		}
		switch c := data[i]; {
		case c == '{' || c == '[':
			if len(stack) == maxDepth {
				return false
			}
			i = skipSpace(data, i+1)
			if i < len(data) && (c == '{' && data[i] == '}' || c == '[' && data[i] == ']') {
				i++ // empty: a whole value
				break
			}
			stack = append(stack, c == '{')
			if c == '{' {
				if i = member(data, i); i < 0 {
					return false
				}
			}
			continue
		case c == '"':
			if i = str(data, i); i < 0 {
				return false
			}
		case c == '-' || c >= '0' && c <= '9':
			if i = number(data, i); i < 0 {
				return false
			}
		case c == 't':
			if i = literal(data, i, "true"); i < 0 {
				return false
			}
		case c == 'f':
			if i = literal(data, i, "false"); i < 0 {
				return false
			}
		case c == 'n':
			if i = literal(data, i, "null"); i < 0 {
				return false
			}
		default:
			return false
		}
		// A value ended before i: close what it ends, or go to the next.
		for {
			i = skipSpace(data, i)
			if len(stack) == 0 {
				return i == len(data)
			}
			if i >= len(data) {
				return false
			}
			obj := stack[len(stack)-1]
			c := data[i]
			if c == ',' {
				i = skipSpace(data, i+1)
				if obj {
					if i = member(data, i); i < 0 {
						return false
					}
				}
				break
			}
			if obj && c != '}' || !obj && c != ']' {
				return false
			}
			stack = stack[:len(stack)-1]
			i++
		}
	}
}

// member reads an object member's name and colon at i, and returns where
// its value starts (white space skipped), or -1.
func member(data []byte, i int) int {
	if i >= len(data) || data[i] != '"' {
		return -1
	}
	if i = str(data, i); i < 0 {
		return -1
	}
	i = skipSpace(data, i)
	if i >= len(data) || data[i] != ':' {
		return -1
	}
	return skipSpace(data, i+1)
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\n' || data[i] == '\r' || data[i] == '\t') {
		i++
	}
	return i
}

// plain marks the bytes a string holds as they are: ASCII but the quote,
// the backslash and control characters.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str reads the string starting at data[i] == '"' and returns the index
// after its closing quote, or -1; its text must be UTF-8.
func str(data []byte, i int) int {
	i++
	for {
		for i < len(data) && plain[data[i]] {
			i++
		}
		if i >= len(data) {
			return -1
		}
		switch c := data[i]; {
		case c == '"':
			return i + 1
		case c == '\\':
			if i+1 >= len(data) {
				return -1
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(data) {
					return -1
				}
				for _, h := range data[i+2 : i+6] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return -1
					}
				}
				i += 6
			default:
				return -1
			}
		case c >= utf8.RuneSelf:
			if twoByte(data, i) {
				i += 2
				continue
			}
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				return -1
			}
			i += size
		default:
			return -1 // a control character
		}
	}
}

// number reads the number starting at i and returns the index after it, or
// -1: an optional minus, 0 or digits not starting with 0, an optional
// fraction, an optional exponent.
func number(data []byte, i int) int {
	if data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && data[i] >= '1' && data[i] <= '9':
		i = digits(data, i)
	default:
		return -1
	}
	if i < len(data) && data[i] == '.' {
		j := digits(data, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := digits(data, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(data []byte, i int) int {
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		i++
	}
	return i
}

func literal(data []byte, i int, lit string) int {
	if len(data)-i < len(lit) || string(data[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}
