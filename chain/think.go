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
// it. Tags may be split across pieces at any byte. Content that cannot start
// a think block passes through at once: bytes are held back only while they
// could still be the start of a tag. Whitespace right after either tag is
// dropped, as Ollama's own parser does, so a reply does not start with the
// blank lines that follow </think>. An unclosed think block at the end of the
// stream was reasoning.
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
			if i := strings.Index(text, thinkClose); i >= 0 {
				reasoning = text[:i]
				s.held, s.state, rest = "", thinkEatTrail, text[i+len(thinkClose):]
				continue
			}
			n := partialSuffix(text, thinkClose)
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
