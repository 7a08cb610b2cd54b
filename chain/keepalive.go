package chain

import "time"

// keepAlive is the keep_alive of stage s's calls: the client's in simple
// mode and relay, where the client chose the one model it talks to; else
// the node's configured one. In the chain the operator decides which of its
// models stay loaded, not each client; and a keep_loaded node's model stays
// loaded whoever calls it, since the load scheduling counts it as held for
// good (a client's keep_alive 0 would unload it under the chains' feet).
func (r *run) keepAlive(s *stage) *time.Duration {
	if r.req.KeepAlive != nil && r.trace.Mode == ModeSimple && !s.node.kept {
		return r.req.KeepAlive
	}
	return s.node.keepAlive
}
