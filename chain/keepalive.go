package chain

import (
	"time"

	"chainproxy/config"
)

// keepAlive is the keep_alive of stage s's calls: the client's in simple
// mode and relay, where the client chose the one model it talks to; else
// the node's configured one. In the chain the operator decides which of its
// models stay loaded, not each client.
func (r *run) keepAlive(s *stage) *time.Duration {
	if r.req.KeepAlive != nil && r.trace.Mode == ModeSimple {
		return r.req.KeepAlive
	}
	if s.node.KeepAlive == "" {
		return nil
	}
	// Validated by config.Load; a value that fails here was set by code
	// and is left to the upstream's default.
	d, err := config.ParseKeepAlive(s.node.KeepAlive)
	if err != nil {
		return nil
	}
	return &d
}
