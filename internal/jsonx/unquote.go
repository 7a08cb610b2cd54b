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
	b := make([]byte, 0, len(s))
	start := 0 // s[start:r] is text still to copy as it is
	for r := 0; r < len(s); {
		c := s[r]
		if plain[c] {
			r++
			continue
		}
		if c >= utf8.RuneSelf {
			if twoByte(s, r) {
				r += 2
				continue
			}
			rr, size := utf8.DecodeRune(s[r:])
			if rr != utf8.RuneError || size != 1 {
				r += size
				continue
			}
			b = append(b, s[start:r]...)
			b = append(b, "\uFFFD"...) // not UTF-8
			r++
			start = r
			continue
		}
		b = append(b, s[start:r]...)
		if c != '\\' || r+1 >= len(s) {
			return "", false // a quote, a control character, a lone backslash
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
				rr1 := getu4(s[r:])
				if dec := utf16.DecodeRune(rr, rr1); rr1 >= 0 && dec != unicode.ReplacementChar {
					r += 6
					rr = dec
				} else {
					rr = unicode.ReplacementChar
				}
			}
			b = utf8.AppendRune(b, rr)
			start = r
			continue
		default:
			return "", false
		}
		r += 2
		start = r
	}
	b = append(b, s[start:]...)
	return string(b), true
}

// twoByte reports whether s[i:] starts with a two-byte UTF-8 sequence,
// which is always valid: most accented letters. Read inline, it spares
// them utf8.DecodeRune.
func twoByte[T string | []byte](s T, i int) bool {
	return s[i] >= 0xC2 && s[i] <= 0xDF && i+1 < len(s) && s[i+1]&0xC0 == 0x80
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
