package chain

import "strings"

// The tags some models (qwen3, deepseek-r1 served without a reasoning
// parser) wrap their hidden reasoning in, at the head of their content.
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// thinkSpace is the whitespace eaten around the tags. It is ASCII only on
// purpose: a multi-byte space split across two pieces would otherwise be
// judged differently depending on where the upstream cut the stream.
const thinkSpace = " \t\r\n\f\v"

type thinkState uint8

const (
	// thinkLooking: at the head of the content; leading whitespace and a
	// possible prefix of <think> are held back.
	thinkLooking thinkState = iota
	// thinkEatLead: just after <think>; whitespace before the reasoning is dropped.
	thinkEatLead
	// thinkInside: inside the reasoning; a possible prefix of </think> is held back.
	thinkInside
	// thinkEatTrail: just after </think>; whitespace before the content is dropped.
	thinkEatTrail
	// thinkDone: everything else is content and passes straight through.
	thinkDone
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
// The zero value is ready to use; a ThinkSplitter serves one stream.
type ThinkSplitter struct {
	state thinkState
	held  string
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
			case strings.HasPrefix(thinkOpen, t):
				// Whitespace only, or a prefix of <think>: wait for more.
				s.held = text
				return "", ""
			default:
				s.held, s.state = "", thinkDone
				return text, ""
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
				continue
			}
			if i >= 0 {
				reasoning = text[:i]
				s.held, s.state, rest = "", thinkEatTrail, text[i+len(thinkClose):]
				continue
			}
			n := max(partialSuffix(text, thinkClose), partialSuffix(text, callOpen))
			s.held = text[len(text)-n:]
			return "", text[:len(text)-n]

		case thinkEatTrail:
			rest = strings.TrimLeft(rest, thinkSpace)
			if rest == "" {
				return "", reasoning
			}
			s.state = thinkDone
		}
	}
}

// Flush ends the stream and returns what was held back: a partial <think> or
// bare whitespace was content; a partial </think> inside an unclosed think
// block was reasoning. The splitter is reset for another stream.
func (s *ThinkSplitter) Flush() (content, reasoning string) {
	switch s.state {
	case thinkLooking:
		content = s.held
	case thinkInside:
		reasoning = s.held
	}
	*s = ThinkSplitter{}
	return content, reasoning
}

// callIn returns where a text tool call starts in text: a <tool_call> tag
// whose body starts with "{" or "[", as parseTextCalls reads it (a tag
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
