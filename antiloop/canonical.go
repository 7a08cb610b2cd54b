package antiloop

import (
	"bytes"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrInvalidJSON reports tool arguments that are not one valid JSON value.
var ErrInvalidJSON = errors.New("invalid JSON")

// maxDepth is the nesting limit of encoding/json, so that both accept and
// refuse the same documents.
const maxDepth = 10000

// maxPooledBuf is the largest buffer kept in the pool: a rare huge argument
// object must not pin its memory for the life of the process.
const maxPooledBuf = 64 << 10

// Canonical returns the canonical JSON form of the JSON value args, the form
// that signatures hash:
//
//   - object keys are sorted at every depth, byte-wise on their decoded
//     value; when a key repeats, the last value wins (as with encoding/json);
//   - there is no insignificant whitespace;
//   - numbers are normalised without going through float64, so 1, 1.0, 1e0
//     and 10e-1 are all written 1, and big integers stay exact. Values from
//     1e-6 up to 1e21 are written in plain decimal, others in exponent form
//     (1e+21, 1.5e-7): the same text encoding/json writes for a float64, but
//     with every significant digit of the input kept. -0 is written 0;
//   - strings are decoded and re-encoded: escapes become the characters they
//     stand for ("\u00e9" and "é" are one string), and the output escapes only
//     what JSON requires (" \ and control characters, \n style where one
//     exists) plus U+2028 and U+2029, as encoding/json does without HTML
//     escaping. Everything else is kept byte for byte: no Unicode
//     normalisation, no case folding. Invalid UTF-8 and lone surrogates
//     become U+FFFD, as when encoding/json decodes them.
//
// Empty or whitespace-only input canonicalises as {}, because models send ""
// for a call without arguments. Anything else that is not exactly one JSON
// value, or that nests deeper than 10000 levels (encoding/json's limit),
// returns an error wrapping [ErrInvalidJSON].
func Canonical(args []byte) ([]byte, error) {
	c := getCanon()
	defer putCanon(c)
	out, err := c.run(c.out[:0], args)
	c.out = out
	if err != nil {
		return nil, err
	}
	return bytes.Clone(out), nil
}

// AppendCanonical appends the [Canonical] form of args to dst, for a caller
// building a larger key around it without an extra copy.
func AppendCanonical(dst, args []byte) ([]byte, error) {
	c := getCanon()
	defer putCanon(c)
	out, err := c.run(c.out[:0], args)
	c.out = out
	if err != nil {
		return dst, err
	}
	return append(dst, out...), nil
}

// canon is the state of one canonicalisation. It is pooled so that a
// signature costs no allocation once the buffers have grown.
//
// It works in two passes so that the work stays linear even for deeply
// nested objects whose keys are out of order. The parse writes every scalar
// and key in canonical form into out, in input order, and records each value
// as a node. Objects whose keys were out of order (or repeated) are marked
// dirty, with their members sorted in the node tree; only then does emit
// write the tree again in key order, copying each clean subtree whole.
type canon struct {
	in    []byte
	pos   int
	depth int
	out   []byte     // pass 1 output; the result when nothing is dirty
	tmp   []byte     // scratch: decoded strings, pass 2 output
	num   []byte     // scratch: significant digits of a number
	keys  []byte     // decoded keys of the objects being parsed
	stack []childRef // children of the containers being parsed
	nodes []node     // every value parsed
	kids  []int      // children of finished containers, in output order
}

// node is one parsed value.
type node struct {
	kind       byte // '{', '[' or 0 for a scalar
	dirty      bool // emit must rebuild it: an object inside is reordered
	start, end int  // the value's pass 1 bytes in out
	key        int  // for an object member, where its "key": starts in out
	kids, nkid int  // its children: c.kids[kids : kids+nkid]
}

// childRef is a child of a container being parsed, with its decoded key in
// c.keys when the container is an object. prefix holds the key's first 8
// bytes, big-endian and zero-padded, so that most comparisons are one
// integer compare.
type childRef struct {
	node, k0, k1 int
	prefix       uint64
}

func keyPrefix8(k []byte) uint64 {
	var p uint64
	for i := range 8 {
		p <<= 8
		if i < len(k) {
			p |= uint64(k[i])
		}
	}
	return p
}

// compareKeys orders two members by decoded key, byte-wise.
func compareKeys(keys []byte, a, b *childRef) int {
	switch {
	case a.prefix < b.prefix:
		return -1
	case a.prefix > b.prefix:
		return 1
	}
	// Equal prefixes: the keys share 8 bytes or differ only by padding.
	return bytes.Compare(keys[a.k0:a.k1], keys[b.k0:b.k1])
}

var canonPool = sync.Pool{New: func() any {
	return &canon{out: make([]byte, 0, 512), tmp: make([]byte, 0, 512)}
}}

func getCanon() *canon { return canonPool.Get().(*canon) }

func putCanon(c *canon) {
	c.in = nil
	if cap(c.out) > maxPooledBuf || cap(c.tmp) > maxPooledBuf || cap(c.keys) > maxPooledBuf ||
		cap(c.num) > maxPooledBuf || cap(c.nodes) > maxPooledBuf/32 {
		return
	}
	canonPool.Put(c)
}

// run appends the canonical form of in to dst. The returned slice may use
// c.tmp's array: the caller stores it back into c.out.
func (c *canon) run(dst, in []byte) ([]byte, error) {
	c.in, c.pos, c.depth, c.out = in, 0, 0, dst
	c.keys, c.stack, c.nodes, c.kids = c.keys[:0], c.stack[:0], c.nodes[:0], c.kids[:0]
	c.skipWS()
	if c.pos == len(in) {
		return append(c.out, "{}"...), nil
	}
	prefix := len(dst)
	root, err := c.value()
	if err != nil {
		return c.out, err
	}
	c.skipWS()
	if c.pos != len(in) {
		return c.out, c.errAt("after top-level value")
	}
	if !c.nodes[root].dirty {
		return c.out, nil
	}
	out := c.emit(append(c.tmp[:0], c.out[:prefix]...), root)
	c.tmp = c.out
	return out, nil
}

// emit appends node i in canonical order.
func (c *canon) emit(dst []byte, i int) []byte {
	n := &c.nodes[i]
	if !n.dirty {
		return append(dst, c.out[n.start:n.end]...)
	}
	closer := byte('}')
	if n.kind == '[' {
		closer = ']'
	}
	dst = append(dst, n.kind)
	for j, k := range c.kids[n.kids : n.kids+n.nkid] {
		if j > 0 {
			dst = append(dst, ',')
		}
		if n.kind == '{' {
			dst = append(dst, c.out[c.nodes[k].key:c.nodes[k].start]...)
		}
		dst = c.emit(dst, k)
	}
	return append(dst, closer)
}

func (c *canon) errAt(context string) error {
	if c.pos >= len(c.in) {
		return fmt.Errorf("%w: unexpected end of input %s", ErrInvalidJSON, context)
	}
	return fmt.Errorf("%w: invalid character %q at offset %d %s", ErrInvalidJSON, c.in[c.pos], c.pos, context)
}

func (c *canon) skipWS() {
	if c.pos < len(c.in) && c.in[c.pos] > ' ' {
		return // the common case: no whitespace at all
	}
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

// value parses one value and returns its node.
func (c *canon) value() (int, error) {
	c.skipWS()
	if c.pos >= len(c.in) {
		return 0, c.errAt("looking for a value")
	}
	start := len(c.out)
	var err error
	switch b := c.in[c.pos]; {
	case b == '{':
		return c.object()
	case b == '[':
		return c.array()
	case b == '"':
		err = c.stringValue()
	case b == '-' || (b >= '0' && b <= '9'):
		err = c.number()
	case b == 't':
		err = c.literal("true")
	case b == 'f':
		err = c.literal("false")
	case b == 'n':
		err = c.literal("null")
	default:
		err = c.errAt("looking for a value")
	}
	if err != nil {
		return 0, err
	}
	c.nodes = append(c.nodes, node{start: start, end: len(c.out)})
	return len(c.nodes) - 1, nil
}

func (c *canon) literal(lit string) error {
	if len(c.in)-c.pos < len(lit) || string(c.in[c.pos:c.pos+len(lit)]) != lit {
		// Point at the first byte that differs.
		for i := 0; i < len(lit) && c.pos < len(c.in) && c.in[c.pos] == lit[i]; i++ {
			c.pos++
		}
		return c.errAt("in literal " + lit)
	}
	c.pos += len(lit)
	c.out = append(c.out, lit...)
	return nil
}

func (c *canon) array() (int, error) {
	if c.depth++; c.depth > maxDepth {
		return 0, fmt.Errorf("%w: nesting deeper than %d", ErrInvalidJSON, maxDepth)
	}
	c.pos++ // [
	start, base := len(c.out), len(c.stack)
	c.out = append(c.out, '[')
	c.skipWS()
	if c.pos < len(c.in) && c.in[c.pos] == ']' {
		c.pos++
	} else {
		for {
			v, err := c.value()
			if err != nil {
				return 0, err
			}
			c.stack = append(c.stack, childRef{node: v})
			c.skipWS()
			if c.pos >= len(c.in) {
				return 0, c.errAt("after array element")
			}
			if c.in[c.pos] == ',' {
				c.pos++
				c.out = append(c.out, ',')
				continue
			}
			if c.in[c.pos] == ']' {
				c.pos++
				break
			}
			return 0, c.errAt("after array element")
		}
	}
	c.out = append(c.out, ']')
	n := node{kind: '[', start: start, end: len(c.out), kids: len(c.kids)}
	for _, ch := range c.stack[base:] {
		c.kids = append(c.kids, ch.node)
		n.dirty = n.dirty || c.nodes[ch.node].dirty
	}
	n.nkid = len(c.kids) - n.kids
	c.stack = c.stack[:base]
	c.depth--
	c.nodes = append(c.nodes, n)
	return len(c.nodes) - 1, nil
}

func (c *canon) object() (int, error) {
	if c.depth++; c.depth > maxDepth {
		return 0, fmt.Errorf("%w: nesting deeper than %d", ErrInvalidJSON, maxDepth)
	}
	c.pos++ // {
	start, base, keyBase := len(c.out), len(c.stack), len(c.keys)
	c.out = append(c.out, '{')
	c.skipWS()
	if c.pos < len(c.in) && c.in[c.pos] == '}' {
		c.pos++
	} else {
		for {
			c.skipWS()
			if c.pos >= len(c.in) || c.in[c.pos] != '"' {
				return 0, c.errAt("looking for an object key")
			}
			keyAt, k0 := len(c.out), len(c.keys)
			if err := c.key(); err != nil {
				return 0, err
			}
			k1 := len(c.keys)
			c.skipWS()
			if c.pos >= len(c.in) || c.in[c.pos] != ':' {
				return 0, c.errAt("after object key")
			}
			c.pos++
			c.out = append(c.out, ':')
			v, err := c.value()
			if err != nil {
				return 0, err
			}
			c.nodes[v].key = keyAt
			c.stack = append(c.stack, childRef{node: v, k0: k0, k1: k1, prefix: keyPrefix8(c.keys[k0:k1])})
			c.skipWS()
			if c.pos >= len(c.in) {
				return 0, c.errAt("after object member")
			}
			if c.in[c.pos] == ',' {
				c.pos++
				c.out = append(c.out, ',')
				continue
			}
			if c.in[c.pos] == '}' {
				c.pos++
				break
			}
			return 0, c.errAt("after object member")
		}
	}
	c.out = append(c.out, '}')
	n := node{kind: '{', start: start, end: len(c.out), kids: len(c.kids)}
	members := c.stack[base:]
	n.dirty = !c.sortMembers(members)
	for i, m := range members {
		if n.dirty && i+1 < len(members) && bytes.Equal(c.keys[m.k0:m.k1], c.keys[members[i+1].k0:members[i+1].k1]) {
			continue // a later duplicate wins
		}
		c.kids = append(c.kids, m.node)
		n.dirty = n.dirty || c.nodes[m.node].dirty
	}
	n.nkid = len(c.kids) - n.kids
	c.stack, c.keys = c.stack[:base], c.keys[:keyBase]
	c.depth--
	c.nodes = append(c.nodes, n)
	return len(c.nodes) - 1, nil
}

// sortMembers sorts ms by key, stably so that among equal keys the last one
// stays last. It reports whether ms already had strictly increasing keys
// (no move, no duplicate), the common case.
func (c *canon) sortMembers(ms []childRef) bool {
	keys := c.keys
	inOrder := true
	for i := 1; i < len(ms); i++ {
		if compareKeys(keys, &ms[i-1], &ms[i]) >= 0 {
			inOrder = false
			break
		}
	}
	if inOrder {
		return true
	}
	if len(ms) <= 12 {
		// Insertion sort without an indirect call per comparison: tool
		// arguments rarely have more keys than this.
		for i := 1; i < len(ms); i++ {
			m := ms[i]
			j := i
			for ; j > 0 && compareKeys(keys, &ms[j-1], &m) > 0; j-- {
				ms[j] = ms[j-1]
			}
			ms[j] = m
		}
	} else {
		slices.SortStableFunc(ms, func(a, b childRef) int {
			return compareKeys(keys, &a, &b)
		})
	}
	return false
}

// scanString checks the string whose opening quote is at c.pos and returns
// the bounds of its raw content. plain reports content whose canonical
// encoding is itself: no escapes, valid UTF-8, no U+2028 or U+2029.
func (c *canon) scanString() (start, end int, plain bool, err error) {
	in := c.in
	i := c.pos + 1
	start, plain = i, true
	for i < len(in) {
		// Skip the bytes that need no attention, most of any string.
		for i < len(in) && plainByte[in[i]] {
			i++
		}
		if i >= len(in) {
			break
		}
		b := in[i]
		if b < utf8.RuneSelf {
			switch {
			case b == '"':
				c.pos = i + 1
				return start, i, plain, nil
			case b == '\\':
				plain = false
				if i+1 >= len(in) {
					c.pos = len(in)
					return 0, 0, false, c.errAt("in string escape")
				}
				switch in[i+1] {
				case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
					i += 2
				case 'u':
					for j := i + 2; j < i+6; j++ {
						if j >= len(in) || !isHex(in[j]) {
							c.pos = j
							return 0, 0, false, c.errAt("in \\u escape")
						}
					}
					i += 6
				default:
					c.pos = i + 1
					return 0, 0, false, c.errAt("in string escape")
				}
			case b < 0x20:
				c.pos = i
				return 0, 0, false, c.errAt("in string")
			default:
				i++
			}
			continue
		}
		r, size := utf8.DecodeRune(in[i:])
		if (r == utf8.RuneError && size == 1) || r == '\u2028' || r == '\u2029' {
			plain = false
		}
		i += size
	}
	c.pos = len(in)
	return 0, 0, false, c.errAt("in string")
}

func (c *canon) stringValue() error {
	start, end, plain, err := c.scanString()
	if err != nil {
		return err
	}
	if plain {
		c.out = append(c.out, c.in[start-1:end+1]...)
		return nil
	}
	c.tmp = appendUnquoted(c.tmp[:0], c.in[start:end])
	c.out = appendQuoted(c.out, c.tmp)
	return nil
}

// key reads an object key: its decoded value goes to c.keys (for sorting),
// its canonical encoding to c.out.
func (c *canon) key() error {
	start, end, plain, err := c.scanString()
	if err != nil {
		return err
	}
	if plain {
		c.keys = append(c.keys, c.in[start:end]...)
		c.out = append(c.out, c.in[start-1:end+1]...)
		return nil
	}
	k0 := len(c.keys)
	c.keys = appendUnquoted(c.keys, c.in[start:end])
	c.out = appendQuoted(c.out, c.keys[k0:])
	return nil
}

// plainByte marks the ASCII bytes that a string holds as they are: printable,
// not a quote or a backslash.
var plainByte = func() (t [256]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

func isHex(b byte) bool {
	return (b >= '0' && b <= '9') || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F')
}

func hex4(s []byte) rune {
	var r rune
	for _, b := range s[:4] {
		switch {
		case b >= '0' && b <= '9':
			b -= '0'
		case b >= 'a' && b <= 'f':
			b -= 'a' - 10
		default:
			b -= 'A' - 10
		}
		r = r<<4 | rune(b)
	}
	return r
}

// appendUnquoted appends the decoded value of the raw string content s,
// which scanString has validated. It decodes as encoding/json does: a
// surrogate pair is one rune, a lone surrogate and each invalid UTF-8 byte
// become U+FFFD.
func appendUnquoted(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		b := s[i]
		if b == '\\' {
			switch s[i+1] {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r := hex4(s[i+2:])
				i += 6
				if utf16.IsSurrogate(r) {
					if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
						if d := utf16.DecodeRune(r, hex4(s[i+2:])); d != utf8.RuneError {
							dst = utf8.AppendRune(dst, d)
							i += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				dst = utf8.AppendRune(dst, r)
				continue
			default: // " \ /
				dst = append(dst, s[i+1])
			}
			i += 2
			continue
		}
		if b < utf8.RuneSelf {
			dst = append(dst, b)
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, "\uFFFD"...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// appendQuoted appends the canonical JSON encoding of the valid UTF-8
// string s: what encoding/json writes with HTML escaping off.
func appendQuoted(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == '\u2028' || r == '\u2029' {
			// Valid JSON, but not valid JavaScript: escaped like encoding/json.
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			start = i + size
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// number reads a JSON number and appends its canonical form.
func (c *canon) number() error {
	in := c.in
	i := c.pos
	start := i
	neg := false
	if in[i] == '-' {
		neg = true
		i++
	}
	intStart := i
	switch {
	case i < len(in) && in[i] == '0':
		i++
	case i < len(in) && in[i] >= '1' && in[i] <= '9':
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
	default:
		c.pos = i
		return c.errAt("in number")
	}
	intEnd := i
	fracStart, fracEnd := i, i
	if i < len(in) && in[i] == '.' {
		i++
		fracStart = i
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
		if i == fracStart {
			c.pos = i
			return c.errAt("after decimal point in number")
		}
		fracEnd = i
	}
	expNeg, expStart, expEnd, hasExp := false, i, i, false
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		hasExp = true
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			expNeg = in[i] == '-'
			i++
		}
		expStart = i
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
		if i == expStart {
			c.pos = i
			return c.errAt("in exponent of number")
		}
		expEnd = i
	}
	c.pos = i
	if fracStart == fracEnd && !hasExp && intEnd-intStart <= 21 {
		// A plain integer below 1e21 is already canonical, except -0.
		if in[intStart] == '0' {
			c.out = append(c.out, '0')
		} else {
			c.out = append(c.out, in[start:intEnd]...)
		}
		return nil
	}
	c.slowNumber(neg, in[intStart:intEnd], in[fracStart:fracEnd], in[expStart:expEnd], expNeg)
	return nil
}

// slowNumber writes the number sign·intPart.fracPart·10^±exp, all parts
// validated digit strings, in canonical form.
func (c *canon) slowNumber(neg bool, intPart, frac, exp []byte, expNeg bool) {
	// The value is 0.D × 10^point, with D the significant digits.
	digits := c.num[:0]
	point := int64(len(intPart))
	for _, part := range [2][]byte{intPart, frac} {
		for _, d := range part {
			if len(digits) == 0 && d == '0' {
				point--
				continue
			}
			digits = append(digits, d)
		}
	}
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
	}
	c.num = digits
	if len(digits) == 0 {
		c.out = append(c.out, '0')
		return
	}
	for len(exp) > 1 && exp[0] == '0' {
		exp = exp[1:]
	}
	if neg {
		c.out = append(c.out, '-')
	}
	if len(exp) > 18 {
		// An exponent beyond int64: exact arithmetic on the rare path.
		e, _ := new(big.Int).SetString(string(exp), 10)
		if expNeg {
			e.Neg(e)
		}
		e.Add(e, big.NewInt(point-1))
		c.appendMantissa(digits)
		if e.Sign() < 0 {
			c.out = append(c.out, "e-"...)
			e.Neg(e)
		} else {
			c.out = append(c.out, "e+"...)
		}
		c.out = e.Append(c.out, 10)
		return
	}
	var e int64 // at most 18 digits: no overflow
	for _, d := range exp {
		e = e*10 + int64(d-'0')
	}
	if expNeg {
		e = -e
	}
	point += e
	n := int64(len(digits))
	if point < -5 || point > 21 {
		// Outside [1e-6, 1e21): exponent form, as encoding/json does.
		c.appendMantissa(digits)
		if x := point - 1; x < 0 {
			c.out = append(c.out, "e-"...)
			c.out = strconv.AppendInt(c.out, -x, 10)
		} else {
			c.out = append(c.out, "e+"...)
			c.out = strconv.AppendInt(c.out, x, 10)
		}
		return
	}
	switch {
	case point <= 0:
		c.out = append(c.out, '0', '.')
		for range -point {
			c.out = append(c.out, '0')
		}
		c.out = append(c.out, digits...)
	case point < n:
		c.out = append(c.out, digits[:point]...)
		c.out = append(c.out, '.')
		c.out = append(c.out, digits[point:]...)
	default:
		c.out = append(c.out, digits...)
		for range point - n {
			c.out = append(c.out, '0')
		}
	}
}

func (c *canon) appendMantissa(digits []byte) {
	c.out = append(c.out, digits[0])
	if len(digits) > 1 {
		c.out = append(c.out, '.')
		c.out = append(c.out, digits[1:]...)
	}
}
