package jsonx

import (
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Unquote returns the text of the JSON string token raw, as
// encoding/json.Unmarshal decodes it into a string: escapes resolved, a
// lone surrogate and invalid UTF-8 replaced by U+FFFD. It reports false
// when raw is not exactly one string token, with white space around.
//
// It is encoding/json's unquote (decode.go), which is not exported, made
// to check the token itself and to copy runs of plain bytes at once: a
// message's text with a newline or a quote, nearly every one in an agent's
// conversation, was decoded by a second full Unmarshal.
func Unquote(raw []byte) (string, bool) {
	i, j := skipSpace(raw, 0), len(raw)
	for j > i && (raw[j-1] == ' ' || raw[j-1] == '\n' || raw[j-1] == '\r' || raw[j-1] == '\t') {
		j--
	}
	raw = raw[i:j]
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	s := raw[1 : len(raw)-1]
	b := make([]byte, 0, len(s)+utf8.UTFMax)
	for r := 0; r < len(s); {
		start := r
		for r < len(s) && plain[s[r]] {
			r++
		}
		b = append(b, s[start:r]...)
		if r == len(s) {
			break
		}
		switch c := s[r]; {
		case c == '\\':
			if r+1 >= len(s) {
				return "", false
			}
			switch s[r+1] {
			case '"', '\\', '/':
				b = append(b, s[r+1])
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				rr := getu4(s[r:])
				if rr < 0 {
					return "", false
				}
				r += 6
				if utf16.IsSurrogate(rr) {
					if rr1 := getu4(s[r:]); rr1 >= 0 {
						if dec := utf16.DecodeRune(rr, rr1); dec != unicode.ReplacementChar {
							r += 6
							b = utf8.AppendRune(b, dec)
							continue
						}
					}
					rr = unicode.ReplacementChar
				}
				b = utf8.AppendRune(b, rr)
				continue
			default:
				return "", false
			}
			r += 2
		case c < utf8.RuneSelf:
			return "", false // a quote or a control character
		default:
			// Multi-byte: kept when well formed, else U+FFFD.
			rr, size := utf8.DecodeRune(s[r:])
			if rr == utf8.RuneError && size == 1 {
				b = append(b, "\uFFFD"...)
			} else {
				b = append(b, s[r:r+size]...)
			}
			r += size
		}
	}
	return string(b), true
}

// getu4 decodes \uXXXX at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
