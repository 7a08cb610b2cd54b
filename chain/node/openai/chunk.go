package openai

import (
	"bytes"

	gojson "github.com/goccy/go-json"
)

// contentSpan is where a decoded event's delta content was read: the
// string token at data[start:end], n the number of content fields read.
type contentSpan struct{ start, end, n int }

// decodeChunkSpan decodes the usual event of a chat stream into sc, and
// says where its content was: choices whose delta carries content or
// reasoning, the index and the finish reason, every other field skipped
// without being decoded. Decoding each chunk was the largest cost of a
// streamed relay (issue 24: 138,000 of the 415,000 instructions a stream
// request cost more than a bare reverse proxy), most of it spent on fields
// the proxy never reads (id, model, logprobs…).
//
// When model is not nil, the event's "model" is read into it too (the
// answering model, for the call's span).
//
// It reports false, having written nothing a caller may use, for anything
// it does not read itself: tool calls, an error event, a key that
// matches a read field only case-insensitively (as encoding/json would
// match it), a number or literal out of its grammar, nesting deeper than
// maxSkipDepth. The caller then decodes the event with the general
// decoder, so that both give the same result (FuzzDecodeChunk).
func decodeChunkSpan(data []byte, sc *streamChunk, model *string) (contentSpan, bool) {
	d := chunkDecoder{data: data}
	return d.decode(sc, model)
}

// decodeWhole decodes an unstreamed answer as decodeChunkSpan decodes an
// event, each choice's message read into its Delta, and the model into
// *model: the usual answer, text without tool calls, costs a walk of its
// bytes rather than goccy/go-json's decoder. It reports false for anything
// else, which the caller gives to the general decoder (FuzzDecodeWhole).
func decodeWhole(data []byte, sc *streamChunk, model *string) bool {
	d := chunkDecoder{data: data, whole: true}
	_, ok := d.decode(sc, model)
	return ok
}

func (d *chunkDecoder) decode(sc *streamChunk, model *string) (contentSpan, bool) {
	choices := false
	if !d.object(func(key []byte) bool {
		switch {
		case string(key) == "choices":
			// A second list would be merged into the first's elements
			// by the general decoder: it decides.
			if choices {
				return false
			}
			choices = true
			return d.choices(sc)
		case string(key) == "usage":
			// null in a content chunk; the counts in the last one.
			return d.usage(sc)
		case foldsTo(key, "usage"):
			// Another spelling, which the general decoder reads too: a
			// null clears what "usage" set; anything else is left to it.
			if !d.null() {
				return false
			}
			sc.Usage = nil
			return true
		case foldsTo(key, "error"):
			if !d.null() {
				return false
			}
			sc.Error = rawNull // as the general decoder keeps it
			return true
		case foldsTo(key, "choices"):
			return false
		case model != nil && string(key) == "model":
			return d.str(model)
		case model != nil && foldsTo(key, "model"):
			return false
		}
		return d.skip()
	}) {
		return contentSpan{}, false
	}
	d.space()
	return d.content, d.i == len(d.data)
}

// rawNull is a raw null: read only.
var rawNull = []byte("null")

// maxSkipDepth bounds the nesting of a skipped value.
const maxSkipDepth = 32

// chunkDecoder reads one JSON value of an event at a time.
type chunkDecoder struct {
	data    []byte
	i       int
	content contentSpan
	// whole reads an unstreamed answer: its choices hold a "message"
	// where a stream's events hold a "delta".
	whole bool
}

func (d *chunkDecoder) space() {
	for d.i < len(d.data) {
		switch d.data[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek returns the next byte that is not space, 0 at the end.
func (d *chunkDecoder) peek() byte {
	if d.i < len(d.data) && d.data[d.i] > ' ' {
		return d.data[d.i] // servers write no space between tokens
	}
	d.space()
	if d.i < len(d.data) {
		return d.data[d.i]
	}
	return 0
}

// object reads an object, calling field with each key, positioned on its
// value, which field must read.
func (d *chunkDecoder) object(field func(key []byte) bool) bool {
	if d.peek() != '{' {
		return false
	}
	d.i++
	if d.peek() == '}' {
		d.i++
		return true
	}
	for {
		if d.peek() != '"' {
			return false
		}
		key, ok := d.plainString()
		if !ok || d.peek() != ':' {
			return false
		}
		d.i++
		if !field(key) {
			return false
		}
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return true
		default:
			return false
		}
	}
}

// choices reads the choices array.
func (d *chunkDecoder) choices(sc *streamChunk) bool {
	if d.null() {
		sc.Choices = nil
		return true
	}
	sc.Choices = sc.Choices[:0]
	msg := "delta"
	if d.whole {
		msg = "message"
	}
	return d.array(func() bool {
		sc.Choices = append(sc.Choices, streamChoice{})
		ch := &sc.Choices[len(sc.Choices)-1]
		return d.object(func(key []byte) bool {
			switch string(key) {
			case "index":
				return d.int(&ch.Index)
			case msg:
				return d.delta(&ch.Delta)
			case "finish_reason":
				return d.str(&ch.FinishReason)
			}
			if foldsTo(key, "index", msg, "finish_reason") {
				return false
			}
			return d.skip()
		})
	})
}

// usage reads the usage object, or null. A second one, which the general
// decoder would merge into the first, is left to it.
func (d *chunkDecoder) usage(sc *streamChunk) bool {
	if d.null() {
		sc.Usage = nil
		return true
	}
	if sc.Usage != nil {
		return false
	}
	u := &usage{}
	sc.Usage = u
	return d.object(func(key []byte) bool {
		switch string(key) {
		case "prompt_tokens":
			return d.count(&u.PromptTokens)
		case "completion_tokens":
			return d.count(&u.CompletionTokens)
		case "total_tokens":
			return d.count(&u.TotalTokens)
		}
		if foldsTo(key, "prompt_tokens", "completion_tokens", "total_tokens") {
			return false
		}
		return d.skip() // prompt_tokens_details and the like
	})
}

// array reads an array, calling elem positioned on each element, which
// elem must read.
func (d *chunkDecoder) array(elem func() bool) bool {
	if d.peek() != '[' {
		return false
	}
	d.i++
	if d.peek() == ']' {
		d.i++
		return true
	}
	for {
		if !elem() {
			return false
		}
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			return true
		default:
			return false
		}
	}
}

// delta reads a choice's delta.
func (d *chunkDecoder) delta(m *answerMessage) bool {
	if d.null() {
		return true
	}
	return d.object(func(key []byte) bool {
		switch string(key) {
		case "content":
			d.peek()
			start := d.i
			ok := d.str(&m.Content)
			d.content = contentSpan{start, d.i, d.content.n + 1}
			return ok
		case "reasoning_content":
			return d.str(&m.ReasoningContent)
		case "reasoning":
			return d.str(&m.Reasoning)
		}
		if foldsTo(key, "content", "reasoning_content", "reasoning", "tool_calls") {
			return false
		}
		return d.skip()
	})
}

// null reads a null, if one is next.
func (d *chunkDecoder) null() bool {
	if d.peek() == 'n' && bytes.HasPrefix(d.data[d.i:], []byte("null")) {
		d.i += 4
		return true
	}
	return false
}

// str reads a string or null (which leaves *s as it is, as the general
// decoder does). A string with escapes is decoded by the general decoder:
// they are rare in a token-sized chunk but for "\n".
func (d *chunkDecoder) str(s *string) bool {
	if d.null() {
		return true
	}
	if d.peek() != '"' {
		return false
	}
	start := d.i
	raw, ok := d.plainString()
	if ok {
		*s = string(raw)
		return true
	}
	d.i = start
	end, ok := d.stringEnd()
	if !ok {
		return false
	}
	d.i = end
	return gojson.Unmarshal(d.data[start:end], s) == nil
}

// plainString reads a string without escapes or control characters and
// returns its bytes; it reports false, leaving d.i anywhere, for any
// other.
func (d *chunkDecoder) plainString() ([]byte, bool) {
	start := d.i + 1
	for i := start; i < len(d.data); i++ {
		switch c := d.data[i]; {
		case c == '"':
			d.i = i + 1
			return d.data[start:i], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// stringEnd returns where the string at d.i ends, after its closing quote.
func (d *chunkDecoder) stringEnd() (int, bool) {
	for i := d.i + 1; i < len(d.data); i++ {
		switch c := d.data[i]; {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if i+1 >= len(d.data) {
				return 0, false
			}
			switch d.data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+5 >= len(d.data) || !isHex(d.data[i+2]) || !isHex(d.data[i+3]) || !isHex(d.data[i+4]) || !isHex(d.data[i+5]) {
					return 0, false
				}
				i += 5
			default:
				return 0, false
			}
		case c < 0x20:
			return 0, false
		}
	}
	return 0, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// int reads a small non-negative integer or null.
func (d *chunkDecoder) int(n *int) bool {
	if d.null() {
		return true
	}
	v, digits := 0, 0
	for d.i < len(d.data) && '0' <= d.data[d.i] && d.data[d.i] <= '9' && digits < 9 {
		v = v*10 + int(d.data[d.i]-'0')
		d.i++
		digits++
	}
	if digits == 0 || digits > 1 && d.data[d.i-digits] == '0' {
		return false
	}
	if d.i < len(d.data) {
		switch d.data[d.i] {
		case '.', 'e', 'E', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			return false
		}
	}
	*n = v
	return true
}

// count reads a token count as count.UnmarshalJSON reads it: the usual
// small integer at once, any other value through parseCount.
func (d *chunkDecoder) count(c *count) bool {
	if d.null() {
		return true
	}
	start := d.i
	var n int
	if d.int(&n) {
		*c = count(n)
		return true
	}
	d.i = start
	if !d.skip() {
		return false
	}
	if n, ok := parseCount(d.data[start:d.i]); ok {
		*c = n
	}
	return true
}

// skip reads any value without decoding it, checking its grammar: strings,
// numbers, literals, and objects and arrays up to maxSkipDepth deep.
func (d *chunkDecoder) skip() bool { return d.skipDepth(0) }

func (d *chunkDecoder) skipDepth(depth int) bool {
	switch c := d.peek(); {
	case c == '"':
		end, ok := d.stringEnd()
		d.i = end
		return ok
	case c == '{':
		return depth < maxSkipDepth && d.object(func([]byte) bool { return d.skipDepth(depth + 1) })
	case c == '[':
		return depth < maxSkipDepth && d.array(func() bool { return d.skipDepth(depth + 1) })
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.null()
	case c == '-' || '0' <= c && c <= '9':
		return d.number()
	}
	return false
}

func (d *chunkDecoder) literal(s string) bool {
	if !bytes.HasPrefix(d.data[d.i:], []byte(s)) {
		return false
	}
	d.i += len(s)
	return true
}

// number reads a number as JSON's grammar has it.
func (d *chunkDecoder) number() bool {
	b := d.data
	i := d.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	d.i = i
	return true
}

// foldsTo reports whether key matches one of names case-insensitively, as
// encoding/json (and goccy/go-json after it) would match it to a field.
func foldsTo(key []byte, names ...string) bool {
	for _, n := range names {
		if len(key) == len(n) && bytes.EqualFold(key, []byte(n)) {
			return true
		}
	}
	return false
}

// chunkTemplate is the last content event of a stream read whole, cut
// around its content string. Servers write every content event of a stream
// alike but for the text (the id, model, created, index, logprobs and
// finish_reason repeat byte for byte), so an event whose bytes before and
// after its content string are the template's, with a plain string
// between, decodes as the template's event with that text: decodeChunkSpan
// would read the same bytes the same way, and the string the same way as
// the template's. That skips reading about 150 bytes of JSON per event
// (FuzzChunkTemplate checks it against the general decoder).
type chunkTemplate struct {
	ok         bool
	head, tail []byte       // copies of the event before and after the string
	choice     streamChoice // the event's one choice, its content aside
}

// match decodes data into sc when it is the template's event with another
// text.
func (t *chunkTemplate) match(data []byte, sc *streamChunk) bool {
	if !t.ok || len(data) < len(t.head)+len(t.tail)+2 ||
		!bytes.Equal(data[:len(t.head)], t.head) || !bytes.Equal(data[len(data)-len(t.tail):], t.tail) {
		return false
	}
	str := data[len(t.head) : len(data)-len(t.tail)]
	if str[0] != '"' || str[len(str)-1] != '"' {
		return false
	}
	text := str[1 : len(str)-1]
	for _, c := range text {
		if c == '"' || c == '\\' || c < 0x20 {
			return false
		}
	}
	sc.Choices = append(sc.Choices[:0], t.choice)
	sc.Choices[0].Delta.Content = string(text)
	return true
}

// learn makes data, just decoded into sc with its content at span, the
// template, when it is a plain content event: one choice, one content
// field holding a string without escapes, nothing else to report.
func (t *chunkTemplate) learn(data []byte, sc *streamChunk, span contentSpan) {
	t.ok = span.n == 1 && len(sc.Choices) == 1 && sc.Choices[0].Index == 0 && sc.Usage == nil && sc.Error == nil &&
		span.end-span.start >= 2 && data[span.start] == '"' && bytes.IndexByte(data[span.start+1:span.end-1], '\\') < 0
	if !t.ok {
		return
	}
	t.head = append(t.head[:0], data[:span.start]...)
	t.tail = append(t.tail[:0], data[span.end:]...)
	t.choice = sc.Choices[0]
	t.choice.Delta.Content = ""
}
