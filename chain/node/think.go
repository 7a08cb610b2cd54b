package node

import "strings"

// The tags some models (qwen3, deepseek-r1 served without a reasoning
// parser) wrap their hidden reasoning in, at the head of their content.
// Models whose chat template ends the prompt with <think> write only the
// closing tag.
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// thinkSpace is the whitespace eaten around the tags. It is ASCII only on
// purpose: a multi-byte space split across two pieces would otherwise be
// judged differently depending on where the upstream cut the stream.
const thinkSpace = " \t\r\n\f\v"

// callOpen is the tag a text tool call opens with, and jsonSpace the space
// JSON allows, as judge.ParseTextCalls reads them: the splitter ends a
// reasoning at a call written in it. They are spelled here again, as the
// splitter belongs to the node layer, which does not import the judges.
const (
	callOpen  = "<tool_call>"
	jsonSpace = " \t\r\n"
)

type thinkState uint8

const (
	// thinkLooking: at the head of the content; leading whitespace and a
	// possible prefix of <think> or </think> are held back.
	thinkLooking thinkState = iota
	// thinkEatLead: just after <think>; whitespace before the reasoning is dropped.
	thinkEatLead
	// thinkInside: inside the reasoning; a possible prefix of </think> is held back.
	thinkInside
	// thinkEatTrail: just after </think>; whitespace before the content is dropped.
	thinkEatTrail
	// thinkDone: everything else is content and passes straight through.
	thinkDone
	// thinkWatch: content that did not open with <think>; a </think>
	// before any <think> or text tool call ends reasoning the prompt
	// opened. A possible prefix of either tag is held back.
	thinkWatch
)

// thinkOpener is who opened the think block, as far as the content tells.
type thinkOpener uint8

const (
	openerUnknown thinkOpener = iota
	openerModel               // the content began with <think>
	openerPrompt              // a </think> ended a block no <think> opened
)

// ThinkSplitter separates leading <think>…</think> reasoning from content across streamed pieces.
//
// Only a think block at the head of the content counts (leading whitespace
// is tolerated); a <think> later in the text is content, as the model meant
// it. A text tool call (<tool_call>{…) inside the block ends it too: the
// call is content. Tags may be split across pieces at any byte. Content
// that cannot start a think block passes through at once: bytes are held
// back only while they could still be the start of a tag. Whitespace right
// after either tag is dropped, as Ollama's own parser does, so a reply does
// not start with the blank lines that follow </think>. An unclosed think
// block at the end of the stream was reasoning.
//
// A model whose chat template ends the prompt with <think> (DeepSeek-R1 and
// its distills, QwQ, Qwen3's thinking models) writes "reasoning</think>
// answer". A </think> that comes before any <think> or text tool call
// therefore ends reasoning too, as in vLLM's deepseek_r1 reasoning parser:
// what of it was not yet returned as content is returned as reasoning.
// Content returned before that </think> cannot be taken back; a splitter
// started Inside, for a node known to answer so (PromptOpened), returns it
// as reasoning from the first byte.
//
// The zero value is ready to use; a ThinkSplitter serves one stream.
type ThinkSplitter struct {
	// Inside starts the stream inside a think block the prompt opened: the
	// content up to </think> is reasoning. A <think> at its head is taken as
	// the block's own opening tag all the same.
	Inside bool

	state  thinkState
	held   string
	opener thinkOpener
	// sent: thinkWatch has returned content, so that a </think> now ends
	// reasoning in mid-text and its leading space is not trimmed.
	sent bool
	// prev is the last byte thinkWatch returned, for named.
	prev byte
	// code: thinkWatch has returned an odd number of backticks, so that
	// what follows is inside a code span or block, where a </think> is
	// text (code that strips a reasoning model's block), not a tag.
	code bool
}

// Feed takes the next piece of streamed content and returns what of it is
// known to be content and reasoning so far.
func (s *ThinkSplitter) Feed(piece string) (content, reasoning string) {
	rest := piece
	for {
		switch s.state {
		case thinkDone:
			return rest, reasoning

		case thinkLooking:
			text := s.held + rest
			t := strings.TrimLeft(text, thinkSpace)
			switch {
			case strings.HasPrefix(t, thinkOpen):
				s.held, s.state, rest = "", thinkEatLead, t[len(thinkOpen):]
				s.opener = openerModel
			case strings.HasPrefix(thinkOpen, t), len(t) < len(thinkClose) && strings.HasPrefix(thinkClose, t):
				// Whitespace only, or a prefix of a tag: wait for more.
				s.held = text
				return "", ""
			case s.Inside:
				s.held, s.state, rest = "", thinkEatLead, t
			default:
				s.held, s.state, rest = "", thinkWatch, text
			}

		case thinkEatLead:
			rest = strings.TrimLeft(rest, thinkSpace)
			if rest == "" {
				return "", ""
			}
			s.state = thinkInside

		case thinkInside:
			text := s.held + rest
			i := strings.Index(text, thinkClose)
			if j, open := callIn(text); j >= 0 && (i < 0 || j < i) {
				if open {
					// "<tool_call>" and only space yet: a call or prose?
					s.held = text[j:]
					return "", text[:j]
				}
				// Qwen3 may open a tool call without closing its
				// reasoning: the call ends it, as in Ollama's own qwen3
				// parser (model/parsers/qwen3.go), and is content, where
				// the text calls are read.
				reasoning = text[:j]
				s.held, s.state, rest = "", thinkDone, text[j:]
				s.closed()
				continue
			}
			if i >= 0 {
				reasoning = text[:i]
				s.held, s.state, rest = "", thinkEatTrail, text[i+len(thinkClose):]
				s.closed()
				continue
			}
			n := max(partialSuffix(text, thinkClose), partialSuffix(text, callOpen))
			s.held = text[len(text)-n:]
			return "", text[:len(text)-n]

		case thinkWatch:
			if s.held == "" && strings.IndexByte(rest, '<') < 0 {
				// No tag can start here: the usual piece of a plain answer.
				s.returned(rest)
				return rest, ""
			}
			text := s.held + rest
			s.held = ""
			i := strings.Index(text, thinkClose)
			o := strings.Index(text, thinkOpen)
			j, open := callIn(text)
			switch {
			case j >= 0 && open && before(j, i) && before(j, o):
				// "<tool_call>" and only space yet: a call ends the
				// watch, prose does not.
				s.held = text[j:]
				text = text[:j]
			case o >= 0 && before(o, i), j >= 0 && before(j, i), i >= 0 && (named(text, i, s.prev) || s.code != oddTicks(text[:i])):
				// The model's own <think>, a tool call, or the tag named
				// in prose (`</think>`, "</think>") or written in code:
				// the rest is content as written.
				s.state = thinkDone
			case i >= 0 && i+len(thinkClose) == len(text):
				// The tag ends what came so far: the next byte tells a
				// closing tag, which every template-opened model writes
				// at a line's end ("…</think>\n\n"), from the tag named in
				// a sentence.
				s.held = text
				return "", ""
			case i >= 0 && text[i+len(thinkClose)] != '\n' && text[i+len(thinkClose)] != '\r':
				// "the </think> tag": named in a sentence, content.
				s.state = thinkDone
			case i >= 0:
				reasoning, rest = s.reasoningBefore(text, i), text[i+len(thinkClose):]
				s.state, s.opener = thinkEatTrail, openerPrompt
				continue
			default:
				n := max(partialSuffix(text, thinkClose), partialSuffix(text, thinkOpen), partialSuffix(text, callOpen))
				s.held, text = text[len(text)-n:], text[:len(text)-n]
			}
			s.returned(text)
			return text, ""

		case thinkEatTrail:
			rest = strings.TrimLeft(rest, thinkSpace)
			if rest == "" {
				return "", reasoning
			}
			s.state = thinkDone
		}
	}
}

// returned records text that thinkWatch returned as content.
func (s *ThinkSplitter) returned(text string) {
	if text != "" {
		s.sent, s.prev = true, text[len(text)-1]
		s.code = s.code != oddTicks(text)
	}
}

// oddTicks reports whether s holds an odd number of backticks: a code span
// or a fenced block ("```") it opens and does not close.
func oddTicks(s string) bool { return strings.Count(s, "`")%2 == 1 }

// closed records that the think block ended: one the content did not open
// was opened by the prompt.
func (s *ThinkSplitter) closed() {
	if s.opener == openerUnknown {
		s.opener = openerPrompt
	}
}

// PromptOpened reports what the content fed so far shows of the node's
// chat template: opened once a think block the content did not open ended
// (a </think> came before any <think>), not opened once the content began
// with its own <think>. known is false while nothing tells: no tag yet, or
// still inside a block started Inside.
func (s *ThinkSplitter) PromptOpened() (opened, known bool) {
	return s.opener == openerPrompt, s.opener != openerUnknown
}

// Flush ends the stream and returns what was held back: a partial tag or
// bare whitespace was content, or reasoning when the block was opened
// Inside; a partial </think> inside an unclosed think block was reasoning.
// The splitter is reset for another stream, Inside kept.
func (s *ThinkSplitter) Flush() (content, reasoning string) {
	switch s.state {
	case thinkLooking:
		if s.Inside {
			reasoning = strings.TrimLeft(s.held, thinkSpace)
		} else {
			content = s.held
		}
	case thinkInside:
		reasoning = s.held
	case thinkWatch:
		if i := len(s.held) - len(thinkClose); i >= 0 && s.held[i:] == thinkClose {
			// Held for the byte after it, and the answer ended there: a
			// closing tag, nothing after the reasoning.
			reasoning = s.reasoningBefore(s.held, i)
		} else {
			content = s.held
		}
	}
	*s = ThinkSplitter{Inside: s.Inside}
	return content, reasoning
}

// reasoningBefore is the reasoning a stray </think> at text[i] ends: what
// of it was not returned as content, without the space that opened the
// answer.
func (s *ThinkSplitter) reasoningBefore(text string, i int) string {
	if s.sent {
		return text[:i]
	}
	return strings.TrimLeft(text[:i], thinkSpace)
}

// callIn returns where a text tool call starts in text: a <tool_call> tag
// whose body starts with "{" or "[", as judge.ParseTextCalls reads it (a tag
// followed by prose is the model writing about the tag). open reports a
// tag followed by nothing but space so far, which may still be either. It
// returns -1 when there is none.
func callIn(text string) (at int, open bool) {
	for from := 0; ; {
		k := strings.Index(text[from:], callOpen)
		if k < 0 {
			return -1, false
		}
		k += from
		body := strings.TrimLeft(text[k+len(callOpen):], jsonSpace)
		switch {
		case body == "":
			return k, true
		case body[0] == '{' || body[0] == '[':
			return k, false
		}
		from = k + len(callOpen)
	}
}

// named reports whether the </think> at text[i] is the tag named in prose
// rather than written as one: right after a backtick or a quote (prev is
// the byte before text, for i == 0). A model that does not think writes
// about the tag so; taking it for the end of reasoning would turn the
// answer before it into reasoning and start the node's next answers
// inside a block.
func named(text string, i int, prev byte) bool {
	if i > 0 {
		prev = text[i-1]
	}
	return prev == '`' || prev == '"' || prev == '\''
}

// before reports whether index a comes before index b, which may be -1 (none).
func before(a, b int) bool { return b < 0 || a < b }

// partialSuffix returns the length of the longest suffix of text that is a
// proper prefix of tag.
func partialSuffix(text, tag string) int {
	for n := min(len(text), len(tag)-1); n > 0; n-- {
		if strings.HasSuffix(text, tag[:n]) {
			return n
		}
	}
	return 0
}
