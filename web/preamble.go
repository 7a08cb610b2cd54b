package web

import (
	"strings"

	"github.com/gin-gonic/gin"

	"chainproxy/chain"
)

// This file is the preamble every API front shares, between decoding its
// wire (readWire) and driving the run (answer): the model resolved once,
// for the front and the engine alike (RunRequest.Route), the run request
// named by the trace id, keyed to its conversation and shaped by the
// X-Chain-* headers, and the headers every front answers with.

// resolveModel resolves a front's model field. On an unknown model it
// answers the client itself and reports false.
func (s *Server) resolveModel(c *gin.Context, model string) (chain.Route, bool) {
	route, err := s.engine.Resolve(model)
	if err != nil {
		s.reject(c, "model", err)
		return route, false
	}
	return route, true
}

// prepare readies req, decoded by a front, to run under traceID on route:
// a relay needs no conversation key, anything else is keyed by user (the
// client's own conversation or session id, "" when it sends none) and the
// messages. dropped are the client's tools the front left out, named in a
// header. On a bad header it answers the client itself and reports false.
func (s *Server) prepare(c *gin.Context, req *chain.RunRequest, route chain.Route, traceID, user string, dropped []string) bool {
	req.TraceID = traceID
	req.Route = &route
	if !route.Relay() {
		req.Conversation = conversationKey(c, user, req.Messages)
	}
	if err := applyHeaders(c, req); err != nil {
		s.reject(c, "headers", err)
		return false
	}
	c.Header("X-Chain-Trace-Id", traceID)
	if len(dropped) > 0 {
		c.Header("X-Chain-Dropped-Tools", strings.Join(dropped, ", "))
	}
	return true
}
