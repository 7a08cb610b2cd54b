package classify

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// punct stands in the folded text for a non-ASCII rune that is neither a
// letter, a digit nor a space (« » – … ×): a non-word byte that no keyword
// folded from ordinary text contains.
const punct = 0x1a

// foldEntry is what one rune of U+0000..U+017F becomes: n bytes of b, or a
// space when n is 0.
type foldEntry struct {
	n uint8
	b [2]byte
}

// foldTable folds ASCII, Latin-1 Supplement and Latin Extended-A, the
// ranges of French and of most Latin-script languages, to lowercase ASCII
// without accents, so that "Détaillé", "DETAILLE" and "détaille" all read
// "detaille". Runes above it go through unicode.ToLower (rare in this
// product's traffic, and still matched case-insensitively).
var foldTable = buildFoldTable()

// isWord reports whether a byte of folded text belongs to a word. Every byte
// of a multi-byte rune in folded text is a word byte, because foldRune
// turns every non-ASCII rune that is not a letter, a digit or a mark into a
// space, an apostrophe or punct.
var isWord = func() (t [256]bool) {
	for b := range 256 {
		t[b] = b >= 0x80 || b == '_' || '0' <= b && b <= '9' || 'a' <= b && b <= 'z'
	}
	return t
}()

// asciiWord folds an ASCII word byte (letter, digit, underscore) to
// lowercase and maps every other byte to 0: the scan's inner loop.
var asciiWord = func() (t [256]byte) {
	for b := range 128 {
		switch {
		case 'A' <= b && b <= 'Z':
			t[b] = byte(b + 'a' - 'A')
		case 'a' <= b && b <= 'z', '0' <= b && b <= '9', b == '_':
			t[b] = byte(b)
		}
	}
	return t
}()

// Base letters of U+00C0..U+00FF, one entry per code point; "#" marks the
// two symbols of the range (× and ÷).
const latin1Letters = "a a a a a a ae c e e e e i i i i d n o o o o o # o u u u u y th ss " +
	"a a a a a a ae c e e e e i i i i d n o o o o o # o u u u u y th y"

// Base letters of U+0100..U+017F (Latin Extended-A), one per code point.
const latinExtALetters = "a a a a a a c c c c c c c c d d d d e e e e e e e e e e " +
	"g g g g g g g g h h h h i i i i i i i i i i ij ij j j k k k " +
	"l l l l l l l l l l n n n n n n n n n o o o o o o oe oe r r r r r r " +
	"s s s s s s s s t t t t t t u u u u u u u u u u u u w w y y y z z z z z z s"

func buildFoldTable() (t [0x180]foldEntry) {
	set := func(r rune, s string) {
		if s == "#" {
			t[r] = foldEntry{n: 1, b: [2]byte{punct}}
			return
		}
		e := foldEntry{n: uint8(len(s))}
		copy(e.b[:], s)
		t[r] = e
	}
	for r := range rune(0x80) {
		switch {
		case r == ' ' || '\t' <= r && r <= '\r':
			t[r] = foldEntry{} // space
		case 'A' <= r && r <= 'Z':
			set(r, string(r+'a'-'A'))
		case r == 0:
			set(r, "#")
		default:
			set(r, string(r))
		}
	}
	// U+0080..U+00BF: controls and symbols, plus NBSP (a space in French
	// typography: "pourquoi ?") and a few letters (ª º µ).
	for r := rune(0x80); r < 0xc0; r++ {
		switch {
		case unicode.IsSpace(r):
			t[r] = foldEntry{}
		case r == 0xaa:
			set(r, "a")
		case r == 0xba:
			set(r, "o")
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			set(r, string(utf8.AppendRune(nil, unicode.ToLower(r))))
		default:
			set(r, "#")
		}
	}
	fill := func(first rune, letters string) {
		for i, s := range strings.Fields(letters) {
			set(first+rune(i), s)
		}
	}
	fill(0xc0, latin1Letters)
	fill(0x100, latinExtALetters)
	return t
}

// foldRune returns what rune r becomes in folded text: n bytes of b, or a
// space when n is 0, or nothing when n is negative (a combining accent of
// decomposed text, e + U+0301, which is dropped so that it folds like é).
// Every byte of folded text that is 0x80 or above belongs to a letter, a
// digit or a mark, which is what lets isWord judge single bytes.
func foldRune(r rune) (b [4]byte, n int) {
	switch {
	case r < 0x180:
		e := foldTable[r]
		b[0], b[1] = e.b[0], e.b[1]
		return b, int(e.n)
	case 0x300 <= r && r <= 0x36f:
		return b, -1
	case r == '\u2018' || r == '\u2019' || r == '\u02bc': // typographic apostrophes
		b[0] = '\''
		return b, 1
	case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
		if l := unicode.ToLower(r); l < 0x180 {
			return foldRune(l) // K (Kelvin) is k, Å (Angstrom) is a
		} else {
			return b, utf8.EncodeRune(b[:], l)
		}
	case unicode.IsSpace(r):
		return b, 0
	default:
		b[0] = punct
		return b, 1
	}
}

// fold appends to buf the text s lowercased, without accents, with every
// run of whitespace turned into one space. Keywords are folded with it, and
// it is the reference that the single pass of scan must agree with.
func fold(buf []byte, s string) []byte {
	space := false
	for _, r := range s {
		b, n := foldRune(r)
		switch {
		case n < 0:
		case n == 0:
			if !space {
				buf = append(buf, ' ')
			}
			space = true
		default:
			buf = append(buf, b[:n]...)
			space = false
		}
	}
	return buf
}
