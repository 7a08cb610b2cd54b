package web

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// errShuttingDown ends a stream the server is about to cut: the client gets
// an OpenAI error event and [DONE] instead of a connection closed mid-way.
var errShuttingDown = &httpError{http.StatusServiceUnavailable, "server_error", "server_shutting_down",
	"the server is shutting down; retry the request"}

// Drain tells the server it is shutting down: streams still running at
// deadline end with an error event and data: [DONE], so that they finish
// before the shutdown grace period cuts connections. Call it once, when
// shutdown starts; later calls do nothing.
func (s *Server) Drain(deadline time.Time) {
	s.drainOnce.Do(func() {
		time.AfterFunc(time.Until(deadline), s.drain)
	})
}

// untilDrained derives from ctx a context that also ends when the server
// drains. It starts no goroutine: the drain runs a callback registered with
// context.AfterFunc, which done unregisters (a goroutine per stream was 25 %
// more goroutines for 1,000 open streams). cancel ends the context too,
// for the caller's own reasons (one context where two would each register
// with their parent). done also reports errShuttingDown in place of the
// cancellation it caused.
func (s *Server) untilDrained(ctx context.Context) (_ context.Context, cancel func(), done func(error) error) {
	ctx, cancelCause := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.drained, func() { cancelCause(errShuttingDown) })
	return ctx, func() { cancelCause(nil) }, func(err error) error {
		stop()
		if err != nil && errors.Is(context.Cause(ctx), errShuttingDown) {
			err = errShuttingDown
		}
		cancelCause(nil)
		return err
	}
}
