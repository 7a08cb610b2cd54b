package web

import (
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"chainproxy/chain"
)

// This file is the preamble every API front shares, between decoding its
// wire (readWire) and driving the run (answer): the model resolved once,
// for the front and the engine alike (RunRequest.Route), the run request
// named by the trace id, keyed to its conversation and shaped by the
// X-Chain-* headers, and the headers every front answers with.

// readWire reads a front's request: its body, decoded by decode and
// checked against server.max_messages by check. On an error it answers
// the client itself and reports false.
func readWire[W any](s *Server, c *gin.Context, decode func([]byte) (W, error), check func(W, int) error) (W, bool) {
	body, err := s.readBody(c)
	if err != nil {
		s.reject(c, "body", err)
		var zero W
		return zero, false
	}
	wire, err := decode(body)
	if err == nil {
		err = check(wire, s.cfg.Server.MaxMessages)
	}
	if err != nil {
		s.reject(c, "invalid request", err)
		return wire, false
	}
	return wire, true
}

// front is one API request past its preamble: the route it is logged and
// measured under, when it started, its trace id, and its model resolved.
type front struct {
	path    string
	start   time.Time
	traceID string
	route   chain.Route
}

// frontWire is what the preamble asks of a front's decoded request: the
// model it names, the client's own conversation or session id ("" when it
// sends none), and the client's tools the front left out.
type frontWire interface {
	model() string
	user() string
	droppedTools() []string
}

// openFront is a front's preamble: it begins a request to the front at
// path (its span and trace id), reads its wire with decode and check
// (readWire), resolves the model the wire names, makes the run request
// with build (nil when build answered the client itself) and prepares it
// (prepare). On an error it answers the client itself and reports false.
func openFront[W frontWire](s *Server, c *gin.Context, path string, decode func([]byte) (W, error), check func(W, int) error, build func(W) *chain.RunRequest) (W, *chain.RunRequest, front, bool) {
	f := front{path: path, start: time.Now()}
	f.traceID = s.begin(c, path)
	wire, ok := readWire(s, c, decode, check)
	if !ok {
		return wire, nil, f, false
	}
	route, err := s.engine.Resolve(wire.model())
	if err != nil {
		s.reject(c, "model", err)
		return wire, nil, f, false
	}
	f.route = route
	req := build(wire)
	if req == nil || !s.prepare(c, &f, req, wire.user(), wire.droppedTools()) {
		return wire, nil, f, false
	}
	return wire, req, f, true
}

// prepare readies req, decoded by a front, to run under f's trace id on its route:
// a relay needs no conversation key, anything else is keyed by user (the
// client's own conversation or session id, "" when it sends none) and the
// messages. dropped are the client's tools the front left out, named in a
// header. On a bad header it answers the client itself and reports false.
func (s *Server) prepare(c *gin.Context, f *front, req *chain.RunRequest, user string, dropped []string) bool {
	req.TraceID = f.traceID
	req.Route = &f.route
	if !f.route.Relay() {
		req.Conversation = conversationKey(c, user, req.Messages)
	}
	if err := applyHeaders(c, req); err != nil {
		s.reject(c, "headers", err)
		return false
	}
	c.Header("X-Chain-Trace-Id", f.traceID)
	if len(dropped) > 0 {
		c.Header("X-Chain-Dropped-Tools", strings.Join(dropped, ", "))
	}
	return true
}
