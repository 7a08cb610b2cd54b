package web

import "net/http"

// Per-request caps beyond server.max_body_bytes and server.max_messages:
// OpenAI's own limits where it has them (stop: 4, tools: 128), and a size
// for identifiers that end up in state keys and logs.
const (
	maxTools   = 128
	maxStops   = 4
	maxIDBytes = 256
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
