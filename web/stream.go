package web

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"chainproxy/chain"
)

// sseWriter writes Server-Sent Events on the handler's goroutine, flushing
// each one so it reaches the client as it happens.
type sseWriter struct {
	w       gin.ResponseWriter
	rc      *http.ResponseController
	started bool
	wrote   bool // something was written since the last keepalive tick
	// hold is set while more events are already waiting: what is written
	// stays in buf and goes out in one write with the last of them. Chunks
	// that arrived together leave together, as a reverse proxy copying its
	// upstream's reads would send them, and none waits for a later one.
	hold bool
	buf  []byte
	// deadline is when the write deadline was last pushed back; nil error
	// from the controller means deadlines are supported.
	deadline   time.Time
	noDeadline bool
}

// writeTimeout bounds one write to the client: a stalled reader must not hold
// the stream (and its upstream call) forever. There is no server-wide write
// timeout, which would cut long streams.
const writeTimeout = 30 * time.Second

func newSSE(w gin.ResponseWriter) *sseWriter {
	return &sseWriter{w: w, rc: http.NewResponseController(w)}
}

// start commits the 200 and the event-stream headers.
func (s *sseWriter) start(extra func(http.Header)) {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	if extra != nil {
		extra(h)
	}
	s.w.WriteHeader(http.StatusOK)
}

func (s *sseWriter) flush() error {
	if s.hold {
		return nil
	}
	// Pushing the deadline back costs a timer update: once a second is
	// enough for a 30 s window.
	if now := time.Now(); !s.noDeadline && now.Sub(s.deadline) > time.Second {
		s.deadline = now
		if err := s.rc.SetWriteDeadline(now.Add(writeTimeout)); err != nil {
			s.noDeadline = true
		}
	}
	_, err := s.w.Write(s.buf)
	s.buf = s.buf[:0]
	if err == nil {
		err = s.rc.Flush()
	}
	s.wrote = true
	return err
}

// data writes one "data: …" event.
func (s *sseWriter) data(payload []byte) error {
	s.buf = append(s.buf, "data: "...)
	s.buf = append(s.buf, payload...)
	s.buf = append(s.buf, '\n', '\n')
	return s.flush()
}

// event writes a named event.
func (s *sseWriter) event(name string, payload []byte) error {
	s.buf = append(s.buf, "event: "...)
	s.buf = append(s.buf, name...)
	s.buf = append(s.buf, "\ndata: "...)
	s.buf = append(s.buf, payload...)
	s.buf = append(s.buf, '\n', '\n')
	return s.flush()
}

// comment writes an SSE comment line, which clients ignore: it keeps idle
// connections (and reverse proxies in between) from timing out.
func (s *sseWriter) comment(text string) error {
	s.buf = append(s.buf, ": "...)
	s.buf = append(s.buf, text...)
	s.buf = append(s.buf, '\n', '\n')
	return s.flush()
}

type runOutcome struct {
	res *chain.Result
	err error
}

// drive runs the engine for a streaming response. The engine runs on its own
// goroutine and hands events over a channel; this goroutine, the handler's,
// does all the writing: each event goes to onEvent, and onTick is called
// every keepalive interval. While further events are already queued, sse
// holds its writes, so that a burst costs one write and one flush rather
// than one per chunk; nothing waits for an event that has not arrived. The
// engine goroutine exits when Run returns, which it does promptly once ctx
// is cancelled (every send selects on ctx.Done()); drive always waits for it
// before returning.
func (s *Server) drive(ctx context.Context, req *chain.RunRequest, sse *sseWriter, onEvent func(chain.Event) error, onTick func() error) (*chain.Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan chain.Event, 16)
	done := make(chan runOutcome, 1)
	go func() {
		res, err := s.engine.Run(ctx, req, func(ev chain.Event) error {
			select {
			case events <- ev:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		close(events)
		done <- runOutcome{res, err}
	}()
	tick := time.NewTicker(s.keepalive)
	defer tick.Stop()
	var werr error
	for events != nil {
		select {
		case ev, ok := <-events:
			if !ok {
				events = nil
				break
			}
			if werr == nil {
				sse.hold = len(events) > 0
				werr = onEvent(ev)
				sse.hold = false
				if werr == nil && len(sse.buf) > 0 && len(events) == 0 {
					werr = sse.flush()
				}
				if werr != nil {
					cancel() // the client is gone: stop the run
				}
			}
		case <-tick.C:
			if werr == nil {
				if werr = onTick(); werr != nil {
					cancel()
				}
			}
		}
	}
	out := <-done
	if werr != nil && out.err == nil {
		out.err = werr
	}
	if out.err != nil && ctx.Err() != nil && werr != nil {
		out.err = context.Canceled
	}
	return out.res, out.err
}
