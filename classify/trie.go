package classify

// trie is a byte trie of the folded patterns stored as a dense transition
// table over byte classes: only bytes that occur in some pattern get a
// class, every other byte is class 0 and leads nowhere; the space is always
// class 1, so that a walk can fold whitespace runs by class. With the
// default keywords and the built-in tools that is 27 classes and 241 states
// (26 KB).
//
// A state is named by its row, the offset of its transitions in next
// (state number × nclasses), so a step is one load and one add; the row of
// an accepting state carries acceptBit. Row 0 is the dead state.
type trie struct {
	class [256]uint16
	// rawClass[b] is the class of ASCII byte b after folding (A is a,
	// whitespace is a space), so walks read ASCII text as is.
	rawClass [128]uint16
	// first[b] is the state after the root reads ASCII byte b.
	first [128]int32
	// start2 has bit b0<<7|b1 set when a pattern may start with the ASCII
	// bytes b0 b1: see mayStart.
	start2   [128 * 128 / 64]uint64
	nclasses int
	rootRow  int32
	// next[row+class] is the state reached from state row by a byte of
	// that class.
	next []int32
	// accept[row/nclasses], for an accepting state, is k<<1 | 1 when its
	// pattern k ends with a word byte (so the next byte must not be one)
	// and k<<1 otherwise.
	accept []int32
}

const (
	dead       = 0
	spaceClass = 1
	acceptBit  = 1 << 30
)

func newTrie(patterns []pattern) *trie {
	t := &trie{nclasses: 2}
	t.class[' '] = spaceClass
	for _, p := range patterns {
		for i := range len(p.text) {
			if b := p.text[i]; t.class[b] == 0 {
				t.class[b] = uint16(t.nclasses)
				t.nclasses++
			}
		}
	}
	nc := t.nclasses
	// Build with state numbers (0 dead, 1 root), then turn them into rows.
	next := make([]int32, 2*nc)
	accept := []int32{-1, -1}
	for k, p := range patterns {
		s := 1
		for i := range len(p.text) {
			at := s*nc + int(t.class[p.text[i]])
			if next[at] == dead {
				next[at] = int32(len(accept))
				accept = append(accept, -1)
				next = append(next, make([]int32, nc)...)
			}
			s = int(next[at])
		}
		a := int32(k) << 1
		if p.wordEnd {
			a |= 1
		}
		accept[s] = a
	}
	if len(next) >= acceptBit {
		panic("classify: keyword trie too large") // over a billion bytes of keywords
	}
	row := func(s int32) int32 {
		if s == dead {
			return 0
		}
		r := s * int32(nc)
		if accept[s] >= 0 {
			r |= acceptBit
		}
		return r
	}
	for i, s := range next {
		next[i] = row(s)
	}
	t.next, t.accept, t.rootRow = next, accept, int32(nc)
	for b := range 128 {
		f := foldTable[b]
		fb := f.b[0]
		if f.n == 0 {
			fb = ' '
		}
		t.rawClass[b] = t.class[fb]
		t.first[b] = t.step(t.rootRow, t.rawClass[b])
	}
	for b0 := range 128 {
		s := t.first[b0]
		for b1 := range 128 {
			// A one-byte pattern ("?") may start whatever follows.
			if s != dead && (s&acceptBit != 0 || t.step(s, t.rawClass[b1]) != dead) {
				k := b0<<7 | b1
				t.start2[k/64] |= 1 << (k % 64)
			}
		}
	}
	return t
}

// step returns the state after state row reads a byte of class cls.
func (t *trie) step(row int32, cls uint16) int32 {
	return t.next[int(row&^acceptBit)+int(cls)]
}

// startsWith reports whether some pattern starts with folded byte b.
func (t *trie) startsWith(b byte) bool { return t.step(t.rootRow, t.class[b]) != dead }

// acceptCode returns accept's entry for the accepting state row.
func (t *trie) acceptCode(row int32) int32 { return t.accept[int(row&^acceptBit)/t.nclasses] }

// mayStart reports whether a pattern may start at message[i], an ASCII
// byte: its first two bytes lead somewhere in the trie. Most words that
// start like a keyword ("a", "cache") do not go on like one; this saves
// them a call to walk, which decides.
func (t *trie) mayStart(message string, i int) bool {
	b0 := int(message[i] & 0x7f)
	if i+1 == len(message) || message[i+1] >= 0x80 {
		return t.first[b0] != dead
	}
	k := b0<<7 | int(message[i+1])
	return t.start2[k/64]&(1<<(k%64)) != 0
}
