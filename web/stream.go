package web

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"chainproxy/chain"
)

// sseWriter writes a streamed answer on the handler's goroutine, flushing
// each write so it reaches the client as it happens: Server-Sent Events
// (data, event, comment) for the OpenAI fronts, newline-delimited JSON
// (line) for Ollama's.
type sseWriter struct {
	w       gin.ResponseWriter
	rc      *http.ResponseController
	started bool
	// contentType is the stream's media type: text/event-stream unless set.
	contentType string
	// header, when set, adds the front's headers as the 200 goes out: the
	// driver names the run's mode there.
	header func(http.Header)
	// last is when a line last went out: keepalives are due a full
	// interval after it, whatever was written.
	last time.Time
	// hold keeps what is written in buf, to go out with the next write
	// that is not held: see drive.
	hold   bool
	buf    []byte
	pooled *[]byte // where buf goes back to sseBufs (release)
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
	p := sseBufs.Get().(*[]byte)
	return &sseWriter{w: w, rc: http.NewResponseController(w), buf: (*p)[:0], pooled: p}
}

// sseBufs holds the writers' buffers between streams: a streamed answer
// grows one to a few KiB, which would otherwise be allocated again, chunk
// by chunk, on every stream (most of a relayed stream's garbage). A new one
// holds one event: an open stream keeps its buffer, and 1,000 slow streams
// held 4 MB at 4 KiB each.
var sseBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// maxPooledSSE is the largest buffer given back: one that a long reasoning
// burst grew further is left to the collector.
const maxPooledSSE = 64 << 10

// release gives the buffer back; the writer must not be used after it.
func (s *sseWriter) release() {
	if s.pooled != nil && cap(s.buf) <= maxPooledSSE {
		*s.pooled = s.buf[:0]
		sseBufs.Put(s.pooled)
	}
	s.buf, s.pooled = nil, nil
}

// start commits the 200 and the stream's headers.
func (s *sseWriter) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	if s.contentType == "" {
		s.contentType = "text/event-stream"
	}
	h.Set("Content-Type", s.contentType)
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	if s.header != nil {
		s.header(h)
	}
	s.w.WriteHeader(http.StatusOK)
}

func (s *sseWriter) flush() error {
	if s.hold {
		return nil
	}
	// Pushing the deadline back costs a timer update: once a second is
	// enough for a 30 s window.
	now := time.Now()
	if !s.noDeadline && now.Sub(s.deadline) > time.Second {
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
	s.last = now
	return err
}

// data writes one "data: …" event.
func (s *sseWriter) data(payload []byte) error { return s.event("", payload) }

// event writes an event named name ("": unnamed).
func (s *sseWriter) event(name string, payload []byte) error {
	s.openEvent(name)
	s.buf = append(s.buf, payload...)
	return s.endEvent()
}

// openEvent starts an event, named when name is set, whose data the caller
// appends to buf itself, framing it in place rather than encoding it apart
// and copying it; endEvent ends it and writes it out.
func (s *sseWriter) openEvent(name string) {
	if name != "" {
		s.buf = append(s.buf, "event: "...)
		s.buf = append(s.buf, name...)
		s.buf = append(s.buf, '\n')
	}
	s.buf = append(s.buf, "data: "...)
}

func (s *sseWriter) endEvent() error {
	s.buf = append(s.buf, '\n', '\n')
	return s.flush()
}

// line writes one NDJSON object: payload and a newline.
func (s *sseWriter) line(payload []byte) error {
	s.buf = append(s.buf, payload...)
	s.buf = append(s.buf, '\n')
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

// drive runs the engine for a streaming response on the handler's
// goroutine: each event goes to onEvent as it happens, and onTick is called
// when no line went out for a keepalive interval, from a timer. Both run under one mutex, with the
// sse writer's state, so the timer's keepalive comment and the handler's
// writes never interleave.
//
// Content deltas are held (sse.hold) and written out together when the
// engine is about to wait: chain.RunRequest.Idle is called before every
// read of the upstream that would block, and when a model call ends. Chunks
// that arrived together leave in one write, as a reverse proxy copying its
// upstream's reads sends them, and none waits for a later one. Other events
// are written at once.
//
// A write error (the client is gone) cancels the run. The timer's callback,
// a goroutine of its own, returns at once when drive has returned, which it
// learns under the mutex: it never writes after drive.
func (s *Server) drive(ctx context.Context, req *chain.RunRequest, sse *sseWriter, onEvent func(chain.Event) error, onTick func() error) (res *chain.Result, err error) {
	ctx, cancel, drained := s.untilDrained(ctx)
	defer func() { err = drained(err) }()
	var (
		mu     sync.Mutex
		werr   error // the first write error
		closed bool
		tick   *time.Timer
	)
	fail := func(err error) {
		if werr == nil {
			werr = err
			cancel() // the client is gone: stop the run
		}
	}
	mu.Lock()
	tick = time.AfterFunc(s.keepalive, func() {
		mu.Lock()
		defer mu.Unlock()
		if closed || werr != nil {
			return
		}
		// A line written less than an interval ago keeps the stream alive
		// until a full interval after it: the tick is put off until then.
		// The keepalive is a line too, so while nothing else is written
		// one goes out every interval, never two intervals apart.
		if idle := time.Since(sse.last); !sse.last.IsZero() && idle < s.keepalive {
			tick.Reset(s.keepalive - idle)
			return
		}
		if err := onTick(); err != nil {
			fail(err)
			return
		}
		tick.Reset(s.keepalive)
	})
	mu.Unlock()
	req.Idle = func() {
		mu.Lock()
		defer mu.Unlock()
		if werr == nil && len(sse.buf) > 0 {
			if err := sse.flush(); err != nil {
				fail(err)
			}
		}
	}
	res, err = s.engine.Run(ctx, req, func(ev chain.Event) error {
		mu.Lock()
		defer mu.Unlock()
		if werr != nil {
			return werr
		}
		sse.hold = ev.Kind == chain.EventDelta
		err := onEvent(ev)
		sse.hold = false
		if err == nil && ev.Kind != chain.EventDelta && len(sse.buf) > 0 {
			err = sse.flush()
		}
		if err != nil {
			fail(err)
		}
		return err
	})
	mu.Lock()
	closed = true
	tick.Stop()
	if werr != nil && err == nil {
		err = werr
	}
	if err != nil && werr != nil && ctx.Err() != nil {
		err = context.Canceled
	}
	mu.Unlock()
	return res, err
}
