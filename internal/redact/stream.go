package redact

import (
	"slices"
	"strings"
)

// Stream masks r's configured secrets by value in text that arrives in
// pieces (a model's streamed answer), where a secret may be split between
// two pieces. Feed returns what is safe to pass on, holding back only a
// tail that could be the start of a secret (a few bytes, and only when
// the text ends like one); Flush returns the rest at the end. The generic
// patterns are not applied: they need more context than a piece has. The
// zero Stream, or one of a Redactor without secrets, passes text through.
type Stream struct {
	r       Redactor
	pending string
}

// Stream returns a Stream of r's secrets, for one piece of text.
func (r Redactor) Stream() Stream { return Stream{r: r} }

// Feed adds piece and returns the text now known to hold no secret.
func (s *Stream) Feed(piece string) string {
	if s.r.r == nil {
		return piece
	}
	text := piece
	if s.pending != "" {
		text = s.pending + piece
		s.pending = ""
	}
	if s.r.contains(text) {
		text = s.r.r.Replace(text)
	}
	if k := s.r.partialTail(text); k > 0 {
		s.pending = text[len(text)-k:]
		text = text[:len(text)-k]
	}
	return text
}

// Values masks the configured secrets in s by value only, without the
// generic patterns: for text whose form must not change (JSON arguments).
func (r Redactor) Values(s string) string {
	if r.r == nil || !r.contains(s) {
		return s
	}
	return r.r.Replace(s)
}

// EachValue is list with the configured secrets masked by value in each
// string (Values); list itself, not copied, when none holds one. It is for
// the lists a server sends that the proxy passes on (a model's
// capabilities).
func (r Redactor) EachValue(list []string) []string {
	for i, v := range list {
		if r.Values(v) == v {
			continue
		}
		out := slices.Clone(list)
		for j := i; j < len(out); j++ {
			out[j] = r.Values(out[j])
		}
		return out
	}
	return list
}

// Flush returns what Feed held back: the text ended without completing a
// secret.
func (s *Stream) Flush() string {
	p := s.pending
	s.pending = ""
	return p
}

// Cut masks r's secrets by value in s, the start of a longer text that
// was cut short, and drops the tail of s that may be the start of a secret
// the cut went through: masking by value, later, would not recognise what
// the cut left of it.
func (r Redactor) Cut(s string) string {
	st := r.Stream()
	return st.Feed(s)
}

// partialTail is the length of the longest tail of text that is a proper
// prefix of a secret (0 when none).
func (r Redactor) partialTail(text string) int {
	longest := len(r.secrets[0]) // secrets are sorted longest first
	for k := min(longest-1, len(text)); k > 0; k-- {
		tail := text[len(text)-k:]
		if !r.first[tail[0]] {
			continue
		}
		for _, sec := range r.secrets {
			if len(sec) > k && strings.HasPrefix(sec, tail) {
				return k
			}
		}
	}
	return 0
}

// contains reports whether text holds one of the secrets: a few fast
// substring searches spare the replacer's copy of every piece.
func (r Redactor) contains(text string) bool {
	for _, sec := range r.secrets {
		if len(sec) <= len(text) && strings.Contains(text, sec) {
			return true
		}
	}
	return false
}
