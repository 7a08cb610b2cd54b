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
		time.AfterFunc(time.Until(deadline), func() { close(s.draining) })
	})
}

// untilDrained derives from ctx a context that also ends when the server
// drains. The goroutine exits when done is called or the drain fires; done
// also reports errShuttingDown in place of the cancellation it caused.
func (s *Server) untilDrained(ctx context.Context) (context.Context, func(error) error) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := make(chan struct{})
	exited := make(chan struct{})
	go func() { // exits on stop, on the drain, or when ctx ends
		defer close(exited)
		select {
		case <-s.draining:
			cancel(errShuttingDown)
		case <-stop:
		case <-ctx.Done():
		}
	}()
	return ctx, func(err error) error {
		close(stop)
		<-exited
		if err != nil && errors.Is(context.Cause(ctx), errShuttingDown) {
			err = errShuttingDown
		}
		cancel(nil)
		return err
	}
}
