package web

import (
	"bytes"
	"net/http"

	"chainproxy/chain"
)

// Per-request caps beyond server.max_body_bytes and server.max_messages:
// OpenAI's own limits where it has them (stop: 4, tools: 128, 500 images a
// request), and a size for identifiers that end up in state keys and logs.
const (
	maxTools   = 128
	maxStops   = 4
	maxIDBytes = 256
	// maxMessageParts bounds the content of one message: its parts or
	// blocks of every kind (texts included), an Ollama message's images,
	// a tool result's blocks.
	maxMessageParts = 1000
	// maxParts bounds the images and files of one request, counted as the
	// front decodes them: a tool result's images count with the message
	// they join. It is OpenAI's own limit of images a request.
	maxParts = 500
	// maxValues bounds the JSON values of a request body, checked before
	// it is decoded: a body of max_body_bytes made of empty objects
	// decoded into millions of Go structs, over 2 GB for 10 MiB. A long
	// agent conversation at server.max_messages holds about a fifth of
	// it.
	maxValues = 200_000
)

var errSlowBody = &httpError{http.StatusRequestTimeout, "invalid_request_error", "request_timeout",
	"request body not received within server.read_timeout"}

// checkLimits refuses a decoded request beyond the per-request caps, naming
// the field, so that no array or identifier is unbounded but by body size.
func checkLimits(req *chatRequest, maxMessages int) error {
	switch {
	case len(req.Messages) > maxMessages:
		return invalid("messages", "too many messages: %d, at most %d (server.max_messages)", len(req.Messages), maxMessages)
	case len(req.Tools) > maxTools:
		return invalid("tools", "too many tools: %d, at most %d", len(req.Tools), maxTools)
	case len(req.stops) > maxStops:
		return invalid("stop", "too many stop sequences: %d, at most %d", len(req.stops), maxStops)
	case len(req.User) > maxIDBytes:
		return invalid("user", "user is %d bytes, at most %d", len(req.User), maxIDBytes)
	}
	return nil
}

// checkSession bounds the X-Chain-Session header like the user field.
func checkSession(v string) error {
	if len(v) > maxIDBytes {
		return invalid("X-Chain-Session", "header X-Chain-Session is %d bytes, at most %d", len(v), maxIDBytes)
	}
	return nil
}

// checkHistory bounds /chat's history like messages.
func checkHistory(n, maxMessages int) error {
	if n+1 > maxMessages {
		return invalid("history", "too many messages: %d, at most %d (server.max_messages)", n+1, maxMessages)
	}
	return nil
}

// checkMessageParts bounds the parts of one message's content at param,
// before they are read.
func checkMessageParts(n int, param string) error {
	if n > maxMessageParts {
		return invalid(param, "%s has %d parts, at most %d in one message", param, n, maxMessageParts)
	}
	return nil
}

// partCount counts a request's images and files as its front decodes
// them, against maxParts.
type partCount int

// add counts parts, and refuses the request at the first part over the
// limit, naming where it is.
func (n *partCount) add(parts []chain.Part) error {
	*n += partCount(len(parts))
	if over := int(*n) - maxParts; over > 0 {
		p := parts[len(parts)-over]
		return invalid(p.Param, "%s: too many images and files: more than %d in one request", p.Param, maxParts)
	}
	return nil
}

// errManyValues refuses a body of more than maxValues JSON values.
var errManyValues = invalid("", "request body holds more than %d JSON values (objects, arrays and their items): send fewer messages, parts or tools", maxValues)

// fewValues reports whether body holds at most limit JSON values, counted
// by structure: an object or array, and each comma between items or
// members, count one (so a container of k items counts k). It does not
// validate: the decoder does, after. One pass, without allocating: the
// strings, most of a body, are skipped to their closing quote. A body of
// at most limit bytes is not read: each value takes a byte at least, so
// an agent's usual request (tens of kB) costs nothing.
func fewValues(body []byte, limit int) bool {
	if len(body) <= limit {
		return true
	}
	n := 0
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '"':
			i = stringEnd(body, i+1)
		case '{', '[', ',':
			if n++; n > limit {
				return false
			}
		}
	}
	return true
}

// stringEnd is the index of the quote that closes a string whose text
// starts at i (len(body) when none does): the first quote after an even
// number of backslashes.
func stringEnd(body []byte, i int) int {
	for {
		j := bytes.IndexByte(body[i:], '"')
		if j < 0 {
			return len(body)
		}
		j += i
		k := j
		for k > i && body[k-1] == '\\' {
			k--
		}
		if (j-k)%2 == 0 {
			return j
		}
		i = j + 1
	}
}
