package classify

import (
	"strings"
	"unicode/utf8"
)

// signals is what the pass over a message finds besides keywords.
type signals struct {
	runes     int // runes of the original message
	questions int // question marks that end a sentence
	listItems int // lines that start with 1. 2) - * or • and a blank
}

// scan finds what Classify needs in message in one pass over the original
// text, plus two cheap ones for questions and list items (which jump from
// '?' to '?' and from line to line with strings.IndexByte). It appends the
// index of each pattern found to hits, once, in order of first appearance.
//
// Keywords are matched against the folded text (see fold) without writing
// it anywhere: the pass visits the positions where a keyword may start,
// which are word starts and non-word runes, never the inside of a word (the
// start boundary), and from each one whose first two bytes can begin a
// keyword, walk follows the trie, folding as it reads. Inside an ASCII
// word, which is most bytes of any text, a byte costs a table lookup and a
// test.
func (c *Classifier) scan(message string, hits []int32) (signals, []int32) {
	t := c.trie
	runes := 0
	prevWord := false // the last folded byte was a word byte
	for i := 0; i < len(message); {
		b := message[i]
		if b < utf8.RuneSelf {
			if asciiWord[b] != 0 {
				if !prevWord && t.mayStart(message, i) {
					hits = c.walk(message, i, hits)
				}
				j := i + 1
				for j < len(message) && asciiWord[message[j]] != 0 {
					j++
				}
				runes += j - i
				i = j
				prevWord = true
				continue
			}
			if t.mayStart(message, i) {
				hits = c.walk(message, i, hits)
			}
			runes++
			i++
			prevWord = false
			continue
		}
		f, n, size := decodeFold(message, i)
		if n >= 0 {
			w := n > 0 && isWord[f[0]]
			// No pattern starts with a space (they are trimmed).
			if n > 0 && (!w || !prevWord) && t.startsWith(f[0]) {
				hits = c.walk(message, i, hits)
			}
			prevWord = w
		} // else a dropped combining accent: the previous byte stays the previous one
		runes++
		i += size
	}
	return signals{runes: runes, questions: countQuestions(message), listItems: countListItems(message)}, hits
}

// walk follows the trie from message[i:], folding as it reads: ASCII bytes
// through the trie's raw-byte classes (case and whitespace already folded),
// other runes through foldRune. A run of whitespace reads as one space. A
// pattern that ends with a word byte matches only if the folded text has no
// word byte next.
func (c *Classifier) walk(message string, i int, hits []int32) []int32 {
	t := c.trie
	next := t.next
	s := t.rootRow
	prevSpace := false
	for j := i; j < len(message); {
		if b := message[j]; b < utf8.RuneSelf {
			j++
			cls := t.rawClass[b]
			if cls == spaceClass {
				if prevSpace {
					continue
				}
				prevSpace = true
			} else {
				prevSpace = false
			}
			if s = next[int(s&^acceptBit)+int(cls)]; s == dead {
				return hits
			}
		} else {
			f, n, size := decodeFold(message, j)
			j += size
			switch {
			case n < 0:
				continue
			case n == 0:
				if prevSpace {
					continue
				}
				prevSpace = true
				f[0], n = ' ', 1
			default:
				prevSpace = false
			}
			for _, fb := range f[:n] {
				if s = next[int(s&^acceptBit)+int(t.class[fb])]; s == dead {
					return hits
				}
			}
		}
		// A match can only end on a rune boundary: folded runes are whole
		// UTF-8 sequences or ASCII, and UTF-8 is prefix-free.
		if s&acceptBit != 0 {
			if a := t.acceptCode(s); a&1 == 0 || !wordNext(message[j:]) {
				hits = addHit(hits, a>>1)
			}
		}
	}
	return hits
}

// wordNext reports whether the folded text of s starts with a word byte.
func wordNext(s string) bool {
	for len(s) > 0 {
		if s[0] < utf8.RuneSelf {
			return asciiWord[s[0]] != 0
		}
		f, n, size := decodeFold(s, 0)
		if n >= 0 {
			return n > 0 && isWord[f[0]]
		}
		s = s[size:] // a dropped combining accent
	}
	return false
}

// decodeFold decodes the non-ASCII rune at s[i] and folds it (see
// foldRune). The two-byte sequences of U+0080..U+017F, where the accented
// letters of French are, go straight to the table.
func decodeFold(s string, i int) (f [4]byte, n, size int) {
	if b := s[i]; 0xc2 <= b && b <= 0xc5 && i+1 < len(s) && s[i+1]&0xc0 == 0x80 {
		e := &foldTable[rune(b&0x1f)<<6|rune(s[i+1]&0x3f)]
		f[0], f[1] = e.b[0], e.b[1]
		return f, int(e.n), 2
	}
	r, size := utf8.DecodeRuneInString(s[i:])
	f, n = foldRune(r)
	return f, n, size
}

// countQuestions counts the question marks that end a question: "Why??
// How?" is two. A '?' counts when a word rune came since the last counted
// one and no word rune follows it at once (past further '?'), so the '?' of
// "x.com/s?q=go" does not.
func countQuestions(s string) int {
	n, from := 0, 0 // from: where the current question began
	for i := 0; ; {
		k := strings.IndexByte(s[i:], '?')
		if k < 0 {
			return n
		}
		q := i + k
		i = q + 1
		for i < len(s) && s[i] == '?' {
			i++
		}
		if wordNext(s[i:]) {
			continue // glued to a word: not a sentence end
		}
		if hasWord(s[from:q]) {
			n++
			from = i
		}
	}
}

// hasWord reports whether the folded text of s holds a word byte.
func hasWord(s string) bool {
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			if asciiWord[s[i]] != 0 {
				return true
			}
			i++
			continue
		}
		f, n, size := decodeFold(s, i)
		if n > 0 && isWord[f[0]] {
			return true
		}
		i += size
	}
	return false
}

// countListItems counts the lines that start, after blanks, with a list
// marker ("1.", "12)", "-", "*", "•") followed by a blank.
func countListItems(s string) int {
	n := 0
	for {
		if isListItem(s) {
			n++
		}
		k := strings.IndexByte(s, '\n')
		if k < 0 {
			return n
		}
		s = s[k+1:]
	}
}

// isListItem reports whether line (up to the end of s) starts like a list
// item.
func isListItem(line string) bool {
	i := 0
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	line = line[i:]
	switch {
	case strings.HasPrefix(line, "-"), strings.HasPrefix(line, "*"):
		line = line[1:]
	case strings.HasPrefix(line, "•"):
		line = line[len("•"):]
	default:
		d := 0
		for d < len(line) && d < 4 && '0' <= line[d] && line[d] <= '9' {
			d++
		}
		if d == 0 || d > 3 || d == len(line) || line[d] != '.' && line[d] != ')' {
			return false
		}
		line = line[d+1:]
	}
	return strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "\u00a0")
}

// addHit appends k to hits unless it is there already.
func addHit(hits []int32, k int32) []int32 {
	for _, h := range hits {
		if h == k {
			return hits
		}
	}
	return append(hits, k)
}
