package classify

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// UserMessage is a user message as the classifier reads it: its text, and
// how many image and file parts it had beside it. Only the text is judged:
// the parts are set aside, and the reasons say so.
type UserMessage struct {
	Text          string
	Images, Files int
	// Lead is where the last of several text parts starts in Text (0 for
	// one): the parts before it are context the client attached.
	Lead int
}

// Judged is what the classifier judges of a request: the words of the
// newest user message that has words of the user's.
type Judged struct {
	Words
	// Images and Files count the parts of the judged message set aside.
	Images, Files int
	// Skipped counts the newer user messages passed over because all they
	// held was set aside (injected blocks, a client's tool result), and
	// SkippedAside says what that was.
	Skipped      int
	SkippedAside []Aside
	// Background names the client's own background request the newest
	// user message is (see backgroundRequests), "" for a user's.
	Background string
}

// Judge finds the words to judge in the user messages of a request, which
// next returns newest first (and false after the oldest): those of the
// first message that has words of the user's once blocks are set aside. A message that held only blocks is passed
// over for the one before it, so every request of an agent turn (whose
// follow-ups add tool results and injected context, never the user's
// words) is judged on the words that started it. An empty message, with
// nothing set aside, is judged as it is.
//
// next is a function rather than an iter.Seq because the loop body of a
// range over an unknown function escapes, with the variables it shares: a
// few allocations on every request.
//
// Image and file parts are set aside as blocks are: a message that is only
// a picture is passed over like one that is only blocks.
func (b *Blocks) Judge(next func() (UserMessage, bool)) Judged {
	var j Judged
	for first := true; ; first = false {
		m, ok := next()
		if !ok {
			return j
		}
		if first {
			if j.Background = Background(m.Text); j.Background != "" {
				return j
			}
		}
		w := b.lastPart(m)
		if w.Text != "" || len(w.Aside) == 0 && m.Images == 0 && m.Files == 0 {
			j.Words, j.Images, j.Files = w, m.Images, m.Files
			return j
		}
		j.Skipped++
		for _, a := range w.Aside {
			j.SkippedAside = addAside(j.SkippedAside, a)
		}
		if m.Images > 0 {
			j.SkippedAside = addAside(j.SkippedAside, Aside{Name: imagePartName, Count: m.Images})
		}
		if m.Files > 0 {
			j.SkippedAside = addAside(j.SkippedAside, Aside{Name: filePartName, Count: m.Files})
		}
	}
}

// lastPart reads the words of m. When m came as several text parts and
// the ones before its last hold words of their own (not only injected
// blocks), those are context the client attached, as Continue attaches
// each @-mention (a file as a fenced block, a folder, docs) as a text part
// before the user's words: only the last part is judged, and the earlier
// ones are set aside whole. Clients whose earlier parts are only blocks
// (Qwen Code's and Claude Code's reminders) are read as one text, and so
// are parts that a block runs across (Zed's agent sends "<context>…", the
// files and "</context>" as parts of their own, after the words). opencode
// puts the words first and the files the user mentions after them, each
// announced by a part of its own: from the first, the message is set aside.
func (b *Blocks) lastPart(m UserMessage) Words {
	if m.Lead <= 0 || m.Lead >= len(m.Text) {
		return b.Words(m.Text)
	}
	if i := strings.Index(m.Text, opencodeRead); i > 0 {
		w := b.Words(m.Text[:i])
		w.Aside = append(w.Aside, Aside{Name: opencodeReadName, Count: strings.Count(m.Text[i:], opencodeRead), Bytes: len(m.Text) - i})
		return w
	}
	if b.crosses(m.Text, m.Lead) {
		return b.Words(m.Text)
	}
	last := b.Words(m.Text[m.Lead:])
	if last.Text == "" || b.Words(m.Text[:m.Lead]).Text == "" {
		return b.Words(m.Text)
	}
	last.Aside = append(last.Aside, Aside{Name: attachedName, Count: 1, Bytes: m.Lead})
	return last
}

// crosses reports whether a pair of known tags in s opens before at and
// closes after it.
func (b *Blocks) crosses(s string, at int) bool {
	var pairBuf [16]pair
	for _, p := range b.pair(s, pairBuf[:0]) {
		if p.open.start < at && p.close.end > at {
			return true
		}
	}
	return false
}

// attachedName names, in Aside, the text parts before the last one.
const attachedName = "attached context"

// Names, in Aside, of the parts of a message other than its text.
const (
	imagePartName = "image part"
	filePartName  = "file part"
)

func addAside(list []Aside, a Aside) []Aside {
	for i := range list {
		if list[i].Name == a.Name {
			list[i].Count += a.Count
			list[i].Bytes += a.Bytes
			return list
		}
	}
	return append(list, a)
}

// quoteRunes is how much of the words judged a reason quotes.
const quoteRunes = 80

// reasons appends to r the reasons that say what was judged: the words
// (quoted), each kind of block set aside, and the messages skipped.
func (j *Judged) reasons(r []string) []string {
	if j.Text == "" {
		r = append(r, "no words of the user's to judge")
	} else {
		r = append(r, quote(j.Text))
	}
	for _, a := range j.Aside {
		r = append(r, asideReason(a))
	}
	if j.Images > 0 {
		r = append(r, partsReason(j.Images, imagePartName))
	}
	if j.Files > 0 {
		r = append(r, partsReason(j.Files, filePartName))
	}
	if j.Around > 0 {
		b := make([]byte, 0, 64)
		b = append(b, "ignored "...)
		b = appendSize(b, j.Around)
		b = append(b, " of text around <"...)
		b = append(b, j.Wrapper...)
		r = append(r, string(append(b, '>')))
	}
	if j.Skipped > 0 {
		b := make([]byte, 0, 96)
		b = append(b, "skipped "...)
		b = strconv.AppendInt(b, int64(j.Skipped), 10)
		b = append(b, " later user message"...)
		if j.Skipped > 1 {
			b = append(b, 's')
		}
		b = append(b, " with no words of the user's ("...)
		for i, a := range j.SkippedAside {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendAsideName(b, a.Name)
		}
		r = append(r, string(append(b, ')')))
	}
	return r
}

// judgedPrefix opens the reason that quotes the words judged.
const judgedPrefix = `text judged: "`

// quote is the reason that quotes the words judged: their first 80 runes,
// each run of white space as one space, "…" when cut.
func quote(text string) string {
	var buf [16 + quoteRunes*4 + 8]byte
	b := append(buf[:0], judgedPrefix...)
	n := 0
	space := false
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		i += size
		if isSpace(r) {
			space = true
			continue
		}
		if n == quoteRunes {
			b = append(b, "…"...)
			space = false
			break
		}
		if space && n > 0 {
			if n+1 == quoteRunes {
				b = append(b, "…"...)
				break
			}
			b = append(b, ' ')
			n++
		}
		space = false
		b = utf8.AppendRune(b, r)
		n++
	}
	return string(append(b, '"'))
}

// Unquoted is reason without the user's words: the reason that quotes the
// words judged says only that they were ("text judged"); every other
// reason names no more than counts, sizes, keywords and tags, and is
// returned as it is. It is the form of the reasons that leave the proxy
// where its content must not (an exported span without
// telemetry.capture_content).
func Unquoted(reason string) string {
	if strings.HasPrefix(reason, judgedPrefix) {
		return "text judged"
	}
	return reason
}

func isSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '\v', '\f', 0x85, 0xa0, 0x2028, 0x2029, 0x202f, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// asideReason says what was set aside of one name: "ignored 1
// <system-reminder> block, 9.6 KB".
func asideReason(a Aside) string {
	if a.Name == attachedName {
		// "ignored the text parts before the last (attached context), 3.1 KB"
		b := append(make([]byte, 0, 80), "ignored the text parts before the last (attached context), "...)
		return string(appendSize(b, a.Bytes))
	}
	b := make([]byte, 0, 64)
	b = append(b, "ignored "...)
	b = strconv.AppendInt(b, int64(a.Count), 10)
	b = append(b, ' ')
	b = appendAsideName(b, a.Name)
	b = append(b, " block"...)
	if a.Count > 1 {
		b = append(b, 's')
	}
	b = append(b, ", "...)
	return string(appendSize(b, a.Bytes))
}

// partsReason says what parts of the judged message were set aside: "set
// aside 1 image part".
func partsReason(n int, name string) string {
	b := make([]byte, 0, 32)
	b = append(b, "set aside "...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, ' ')
	b = append(b, name...)
	if n > 1 {
		b = append(b, 's')
	}
	return string(b)
}

// appendAsideName writes a tag name in its brackets; the names of whole
// messages ("AGENTS.md", "tool result") and of parts as they are.
func appendAsideName(b []byte, name string) []byte {
	if name == agentsMDName || name == toolResultName || name == aiderName || name == owuiRAGName || name == owuiCodeName || name == imagePartName || name == filePartName || name == attachedName || name == zedContextName || name == opencodeReadName {
		return append(b, name...)
	}
	b = append(b, '<')
	b = append(b, name...)
	return append(b, '>')
}

// appendSize writes a size in bytes as "812 B" or, from 1 KB (1024 bytes)
// on, in KB with one decimal: "9.6 KB".
func appendSize(b []byte, n int) []byte {
	if n < 1024 {
		b = strconv.AppendInt(b, int64(n), 10)
		return append(b, " B"...)
	}
	tenths := (n*10 + 512) / 1024
	b = strconv.AppendInt(b, int64(tenths/10), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(tenths%10), 10)
	return append(b, " KB"...)
}
