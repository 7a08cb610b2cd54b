package antiloop

import (
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The rules of a repetition loop (issue 25). A segment repeated back to
// back is a loop when:
//
//   - it has LongSegment characters or more and comes LongCopies times;
//   - it is shorter, has a letter, and comes ShortCopies times or more over
//     ShortSpan characters or more ("All set. " chanted, "and and and");
//   - inside a fenced code block, whatever its length, it comes CodeCopies
//     times (six identical lines of a model definition are code, not a
//     loop).
//
// A segment without a letter (a table rule, a separator, a drawing) and a
// run of table rows are never loops. Lines are also compared with their
// list marker ("12.", "12)", "-", "*", "+") and surrounding whitespace
// taken off, so that a step written 80 times as "1. …", "2. …" is caught
// although no two of its bytes-exact lines are equal.
const (
	LongSegment = 20
	LongCopies  = 5
	ShortCopies = 10
	ShortSpan   = 200
	CodeCopies  = 20
)

const (
	// maxPeriod bounds the byte segment searched for, so that each look
	// costs a bounded scan.
	maxPeriod = 2048
	// tailLen is how much of the end of the text is looked for earlier: a
	// text that ends p-periodic has its last tailLen bytes p bytes back.
	tailLen = 20
	// lookStep is how often, in bytes of the text, a new byte run is looked
	// for. The looks fall at fixed offsets of the text, never at a chunk's
	// end, so that the verdict does not depend on how the text was cut.
	lookStep = 40
	// maxLines is the longest block of lines, in lines, whose repetition is
	// followed, and ringLines how many lines are remembered: a line is
	// compared with the maxLines before it.
	maxLines  = 6
	ringLines = 8
	never     = int(^uint(0) >> 1)
)

// Loop is a repetition loop found in a text.
type Loop struct {
	// Start is where the run of copies starts, Keep where the text is cut:
	// after the first copy.
	Start, Keep int
	// Segment is the repeated segment's length in characters (list markers
	// left out for lines), Copies how many times it came in a row, Lines how
	// many lines it spans when it was found by comparing lines (0: found
	// byte for byte).
	Segment, Copies, Lines int
}

// Repeats finds repetition loops in a text that grows, streamed or whole:
// the same algorithm judges both, and its verdict does not depend on how the
// text was cut into pieces. It keeps O(1) state (under 512 bytes), does
// O(1) amortized work per byte between looks, and a bounded scan every
// lookStep bytes.
//
// The zero value is ready to use; a Repeats serves one text. After a loop is
// found it reports that loop and looks no further.
type Repeats struct {
	done int // bytes of the text judged
	look int // offset of the next look for a byte run
	free int // Plain

	// The byte run the text ends in, if any: a period of per bytes since
	// start; due is where it becomes a loop (never: it cannot).
	per, start, due int
	seg             int // the period in characters

	code      bool // inside a fenced code block
	lineStart int  // where the line being read starts

	lines [ringLines]line
	n     int           // lines seen (ring index: n % ringLines)
	eq    [maxLines]int // eq[q-1]: lines in a row equal to the line q back
	// first[q-1] is where the run of blocks of q lines starts, and
	// firstEnd[q-1] where its first block ends, the cut if it is a loop.
	first, firstEnd [maxLines]int
	// runes[q-1] is the length of a block of the run of blocks of q lines,
	// letters[q-1] whether it has a letter: the copies are equal, so they
	// are measured once a run (0: not yet).
	runes   [maxLines]int
	letters [maxLines]bool
	// lineHold is where the copy that would complete a loop of lines
	// starts, while the text may be writing it (never when none).
	lineHold int

	found Loop
	loop  bool
}

// line is what is remembered of one non-blank line: offsets into the text,
// which only grows, so that lines are compared in place. They are 32-bit,
// which halves the ring; lines past 2 GiB are not compared.
type line struct {
	start, end  int32 // the line's offsets, end at its newline
	key, keyEnd int32 // what is compared: the line without marker and spaces
	code        bool  // in a code block, or a fence
	table       bool  // a table row: never part of a loop
}

// Scan judges text, which extends the text of the previous call (Scan and
// End are given the same text, growing), and reports the loop found so far.
func (d *Repeats) Scan(text string) (Loop, bool) {
	if d.loop || len(text) <= d.done {
		return d.found, d.loop
	}
	if d.look == 0 {
		d.look, d.due, d.lineHold = lookStep, never, never
	}
	for d.done < len(text) && !d.loop {
		end := len(text)
		nl := strings.IndexByte(text[d.done:], '\n')
		if nl >= 0 {
			end = d.done + nl + 1
		}
		d.bytes(text, end)
		if !d.loop && nl >= 0 && d.done == end {
			d.endLine(text, end-1)
		}
	}
	d.setFree()
	return d.found, d.loop
}

// Plain is how long the text may grow with nothing in it to judge, as
// long as no newline comes: Scan would find no run to look for, none to
// follow, no line and nothing to hold back before that length. A caller
// streaming the text may pass such bytes on without calling Scan, whose
// next call judges them with the same verdict. While a run is followed,
// per is its period: each new byte must then equal the byte per bytes
// before it. Plain is 0 once a loop is found.
func (d *Repeats) Plain() (end, per int) { return d.free, d.per }

// Took records that the text grew to n bytes by bytes its caller checked
// as Plain says (before its end, no newline, each equal to the byte per
// before it while a run is followed): Scan need not read them again.
func (d *Repeats) Took(n int) { d.done = n }

// setFree records Plain: the next look for a run, where the followed run
// becomes a loop, or what must be held back, whichever comes first.
func (d *Repeats) setFree() {
	d.free = min(d.due, d.Hold())
	if d.per == 0 {
		d.free = min(d.free, d.look)
	}
	if d.loop {
		d.free = 0
	}
}

// End judges the text's last line, which no newline ends, once the text is
// complete, and reports the loop found.
func (d *Repeats) End(text string) (Loop, bool) {
	d.Scan(text)
	if !d.loop && d.lineStart < len(text) {
		d.endLine(text, len(text))
	}
	d.setFree()
	return d.found, d.loop
}

// Hold is where the copy that would complete a loop starts, when the text
// ends in a run that may become one: a streamed text shown up to there only
// never shows the copy that makes the loop. It is len(text) or more when
// nothing needs holding.
func (d *Repeats) Hold() int {
	h := d.lineHold
	if d.per > 0 && d.due != never {
		h = min(h, d.due-d.per)
	}
	return h
}

// bytes judges text[d.done:end] byte by byte: it follows the run the text
// ends in, and looks for a new one at every look offset.
func (d *Repeats) bytes(text string, end int) {
	for d.done < end {
		if d.per == 0 {
			if d.look > end {
				d.done = end
				return
			}
			d.done = d.look
			d.look += lookStep
			d.find(text[:d.done])
			continue
		}
		// Follow the run: each byte must equal the one a period back.
		i, stop := d.done, min(end, d.due)
		for i < stop && text[i] == text[i-d.per] {
			i++
		}
		d.done = i
		switch {
		case i >= d.due:
			d.report(Loop{Start: d.start, Keep: d.start + d.per, Segment: d.seg, Copies: (i - d.start) / d.per})
			return
		case i < stop:
			// Broken: a new run is looked for from the next look on.
			d.per, d.due = 0, never
			d.look = max(d.look, (i/lookStep+1)*lookStep)
		}
	}
}

// find looks for two copies or more of a segment at the end of s, and
// follows the run it finds.
func (d *Repeats) find(s string) {
	p, start, ok := findRun(s)
	if !ok {
		return
	}
	d.per, d.start = p, start
	d.seg = utf8.RuneCountInString(s[len(s)-p:])
	d.setDue(s[len(s)-p:])
	if len(s) >= d.due {
		// Already a loop (the look came after the copy that made it).
		d.due = len(s)
	}
}

// setDue is where the followed run becomes a loop, by the rules, given
// one copy of its segment.
func (d *Repeats) setDue(seg string) {
	d.due = never
	if !hasLetter(seg) || tableSegment(seg) {
		return
	}
	d.due = d.start + need(d.seg, d.code)*d.per
}

// need is how many copies of a segment of runes characters make a loop.
func need(runes int, code bool) int {
	switch {
	case code:
		return CodeCopies
	case runes >= LongSegment:
		return LongCopies
	}
	return max(ShortCopies, (ShortSpan+runes-1)/runes)
}

// findRun reports whether s ends in two copies or more of a segment of at
// most maxPeriod bytes, with the shortest such period and where the run
// starts. It looks for the last tailLen bytes earlier in s, nearest first,
// from their rarest byte: IndexByte skips prose at vector speed when the
// byte is rare. It allocates nothing.
func findRun(s string) (per, start int, ok bool) {
	n := len(s)
	if n < tailLen+1 {
		return 0, 0, false
	}
	tail := s[n-tailLen:]
	lo := max(0, n-tailLen-min(maxPeriod, n/2))
	at := rarest(tail)
	c := tail[at]
	// A second byte, compared before the whole tail: most places the rare
	// byte is found at are not the tail, and one byte tells.
	at2 := tailLen - 1
	if at == at2 {
		at2 = 0
	}
	c2 := tail[at2]
	var near [4]int
	found := 0
	for i := lo + at; i < n-tailLen+at; {
		j := strings.IndexByte(s[i:n-tailLen+at], c)
		if j < 0 {
			break
		}
		i += j
		if st := i - at; s[st+at2] == c2 && s[st:st+tailLen] == tail {
			near[found%len(near)] = st
			found++
		}
		i++
	}
	for k := 0; k < min(found, len(near)); k++ {
		p := n - tailLen - near[(found-1-k)%len(near)] // nearest first
		if 2*p > n {
			return 0, 0, false
		}
		if s[n-2*p:n-p] == s[n-p:] {
			start := n - 2*p
			for start > 0 && s[start-1] == s[start-1+p] {
				start--
			}
			return p, start, true
		}
	}
	return 0, 0, false
}

// trimLeft and trimRight take ASCII whitespace off a line before it is
// compared: plain loops, as the lines are short and strings.Trim would
// build its byte set on every call.
func trimLeft(s string) string {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return s[i:]
}

func trimRight(s string) string {
	i := len(s)
	for i > 0 && isSpace(s[i-1]) {
		i--
	}
	return s[:i]
}

func isSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\r' || b == '\v' || b == '\f' || b == '\n'
}

// endLine judges the line that ends at end (its newline, or the text's
// end): fences, then the runs of equal lines.
func (d *Repeats) endLine(text string, end int) {
	raw := text[d.lineStart:end]
	d.lineStart = end + 1
	left := trimLeft(raw)
	t := trimRight(left)
	if t == "" {
		return
	}
	fence := strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")
	if fence {
		d.code = !d.code
	}
	if d.per > 0 && d.due != never {
		// The fence state may have changed what the followed run needs.
		d.due = d.start + need(d.seg, d.code)*d.per
	}
	// What is compared, found by lengths: each trim on the left keeps a
	// suffix of the line, which ends at end.
	k := trimLeft(stripMarker(t))
	at := end - len(left) + len(t) - len(k)
	key := trimRight(k)
	if end > math.MaxInt32 {
		return
	}
	l := line{start: int32(end - len(raw)), end: int32(end), key: int32(at), keyEnd: int32(at + len(key)), code: d.code || fence, table: t[0] == '|'}
	d.lines[d.n%ringLines] = l
	d.n++
	d.lineHold = never
	if l.table {
		d.eq = [maxLines]int{}
		return
	}
	for q := 1; q <= maxLines; q++ {
		if d.n <= q || !d.same(text, key, &d.lines[uint(d.n-1-q)%ringLines]) {
			d.eq[q-1] = 0
			continue
		}
		d.eq[q-1]++
		if d.eq[q-1] == 1 {
			// A run starts: its first block is the q lines before this one.
			d.runes[q-1], d.letters[q-1] = 0, false
			d.first[q-1] = int(d.lines[(d.n-1-q)%ringLines].start)
			d.firstEnd[q-1] = int(d.lines[(d.n-2)%ringLines].end)
		}
		if d.eq[q-1]%q != 0 || d.shorter(q) {
			continue
		}
		// The last copies·q lines are copies of a block of q lines.
		copies := d.eq[q-1]/q + 1
		if d.runes[q-1] == 0 {
			for k := d.n - q; k < d.n; k++ {
				b := d.lines[k%ringLines]
				key := text[b.key:b.keyEnd]
				d.runes[q-1] += utf8.RuneCountInString(key) + 1 // and its newline
				d.letters[q-1] = d.letters[q-1] || hasLetter(key)
			}
		}
		if !d.letters[q-1] {
			continue
		}
		code := false
		for k := d.n - q; k < d.n; k++ {
			code = code || d.lines[k%ringLines].code
		}
		runes := d.runes[q-1]
		want := need(runes, code)
		switch {
		case copies >= want:
			d.report(Loop{
				Start: d.first[q-1], Keep: d.firstEnd[q-1],
				Segment: runes - 1, Copies: copies, Lines: q,
			})
			return
		case copies == want-1:
			d.lineHold = min(d.lineHold, end+1)
		}
	}
}

// same reports whether line b of text reads key once its marker and spaces
// are left out.
func (d *Repeats) same(text, key string, b *line) bool {
	return int(b.keyEnd-b.key) == len(key) && text[b.key:b.keyEnd] == key
}

// shorter reports whether the run of blocks of q lines is a run of a
// shorter block, which judges it: "A", "A", "A", "A" is four copies of one
// line, not two of two.
func (d *Repeats) shorter(q int) bool {
	for k := 1; k < q; k++ {
		if q%k == 0 && d.eq[k-1] >= d.eq[q-1] {
			return true
		}
	}
	return false
}

// report records loop l, found where the text first holds it: the
// copies are counted there, so that the verdict is the same however the
// text was cut.
func (d *Repeats) report(l Loop) {
	d.found, d.loop = l, true
}

// stripMarker takes a list marker off the start of a trimmed line: "12.",
// "12)", "-", "*" or "+", followed by a space.
func stripMarker(t string) string {
	i := 0
	for i < len(t) && i < 9 && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	switch {
	case i > 0 && i < len(t) && (t[i] == '.' || t[i] == ')'):
		i++
	case i == 0 && len(t) > 0 && (t[0] == '-' || t[0] == '*' || t[0] == '+'):
		i = 1
	default:
		return t
	}
	if i == len(t) || t[i] == ' ' || t[i] == '\t' {
		return t[i:]
	}
	return t
}

// tableSegment reports whether the repeated segment is made of table rows:
// each of its lines, read cyclically from a newline, starts with "|".
func tableSegment(seg string) bool {
	p := len(seg)
	rows := false
	for j := 0; j < p; j++ {
		if seg[j] != '\n' {
			continue
		}
		k := (j + 1) % p
		for n := 0; n < p && (seg[k] == ' ' || seg[k] == '\t'); n++ {
			k = (k + 1) % p
		}
		switch seg[k] {
		case '\n', '\r':
		case '|':
			rows = true
		default:
			return false
		}
	}
	return rows
}

// rarest is the index of the byte of s that is least common in text, by
// byteRank, the first of them on a tie. Without a branch on the ranks,
// which are random to the branch predictor.
func rarest(s string) int {
	best := uint(byteRank[s[0]]) << 16
	for i := 1; i < len(s); i++ {
		best = min(best, uint(byteRank[s[i]])<<16|uint(i))
	}
	return int(best & 0xffff)
}

// byteRank orders bytes by how common they are in prose, the most common
// highest: the space, then lower-case letters by their frequency in
// English and French. Every other byte (capitals, digits, punctuation,
// UTF-8 continuation bytes) ranks 0: they are rare enough.
var byteRank = func() (r [256]uint8) {
	const common = "zqxjkvbpygfwmucldhrsnioate " // least common first
	for i := range len(common) {
		r[common[i]] = uint8(i + 1)
	}
	return r
}()

// hasLetter reports whether s has a letter: a repeated run of digits,
// spaces and punctuation is a table or a drawing, not a model chanting.
func hasLetter(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			// Past ASCII: unicode decides, from here.
			for _, r := range s[i:] {
				if unicode.IsLetter(r) {
					return true
				}
			}
			return false
		}
		if 'a' <= c|0x20 && c|0x20 <= 'z' {
			return true
		}
	}
	return false
}
