package web

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"chainproxy/chain"
)

// This file is the driver every API front shares: Chat Completions,
// Messages, Responses, Ollama's API and the cockpit's /chat each decode
// their request into a chain.RunRequest (preamble.go), then hand the run
// to answer, streamRun or wholeRun with an encoder of their own wire
// format. The driver owns what is the same on
// every front: the X-Chain-Mode header, keep-alives while earlier stages
// run, the end of a stream whose 200 is already out, the trace at the end,
// and the client's cancel (through drive). A front never calls the engine
// itself.
//
// The driver lives in package web rather than in a web/drive package, as
// the layout sketch has it, because the errors table (statusFor), the
// stream writer and the request bookkeeping (finish) it uses are web's own,
// and a sub-package would have to import them back.

// encoder is one front's wire format for a streamed run. The driver calls
// it on the handler's goroutine or the keep-alive timer's, never both at
// once (drive's mutex), so an encoder keeps its state without locks. An
// encoder starts the response itself (w.start) on its first write.
type encoder interface {
	// event encodes one chain event as it happens; most fronts write only
	// EventDelta, the answer's text and thinking. Deltas are held by the
	// writer and leave together when the engine is about to wait.
	event(ev chain.Event) error
	// keepalive writes something the client ignores, naming where the run
	// is ("stage M1 turn 2"), and starts the response if it was not.
	keepalive(where string) error
	// end writes the end of an answered run; trace is the run's trace as
	// encoded for the answer.
	end(res *chain.Result, trace []byte) error
	// abort ends a stream whose 200 is out with the run's error, as
	// statusFor maps it (secrets masked, the trace of a failed chain in
	// obj.Chain), in the front's shape; best effort, since the client may
	// be gone.
	abort(status int, obj errorObject)
}

// streamRun runs req for a streaming front: enc writes the events to w.
// Headers go out with the encoder's first write, with the first keep-alive,
// or with the first stage of a reflexive run (which names the stage in a
// keep-alive), so that a failure before any of them still gets its own
// status, written by failPre in the front's error shape. It returns the
// result and the trace as encoded for the store.
func (s *Server) streamRun(c *gin.Context, req *chain.RunRequest, w *sseWriter, enc encoder, failPre func(error)) (*chain.Result, []byte, error) {
	defer w.release() // nothing writes to w once the run is over (drive)
	mode := ""
	where := "starting"
	// id is the chain's id as the run classified it (chainID): read here,
	// on the run's goroutine, for the headers the keep-alive may write.
	id := req.TraceID
	w.header = func(h http.Header) { h.Set("X-Chain-Mode", mode); h.Set("X-Chain-Trace-Id", id) }
	onEvent := func(ev chain.Event) error {
		switch ev.Kind {
		case chain.EventClassified:
			mode, id = ev.Mode, req.TraceID
		case chain.EventStageStart:
			where = "stage " + ev.Node + " starting"
		case chain.EventTurn:
			where = "stage " + ev.Node + " turn " + itoa(ev.Turn)
		}
		if err := enc.event(ev); err != nil {
			return err
		}
		switch ev.Kind {
		case chain.EventStageStart:
			// A reflexive run's earlier stages may take minutes before
			// the answer's first word: say so at once.
			if mode == chain.ModeReflexive {
				return enc.keepalive(where)
			}
		case chain.EventTurn:
			if w.started {
				return enc.keepalive(where)
			}
		}
		return nil
	}
	onTick := func() error { return enc.keepalive(where) }
	res, err := s.drive(c.Request.Context(), req, w, onEvent, onTick)
	chainID(c, req)
	if err != nil {
		if !w.started {
			failPre(err)
			return nil, nil, err
		}
		enc.abort(s.statusFor(err))
		return nil, nil, err
	}
	respTrace, traceJSON, err := encodeTrace(&res.Trace)
	if err != nil {
		return res, nil, fmt.Errorf("encoding the trace: %w", err)
	}
	return res, traceJSON, enc.end(res, respTrace)
}

// wholeRun runs req for a front answering in one piece. emit, when set,
// sees the run's events; body builds the answer from the result and the
// trace as encoded for the answer. A failure is written by failPre, in the
// front's error shape. It returns the result and the trace as encoded for
// the store.
func (s *Server) wholeRun(c *gin.Context, req *chain.RunRequest, emit func(chain.Event) error, body func(res *chain.Result, trace []byte) ([]byte, error), failPre func(error)) (*chain.Result, []byte, error) {
	res, err := s.engine.Run(c.Request.Context(), req, emit)
	chainID(c, req)
	if err != nil {
		if !c.Writer.Written() {
			failPre(err)
		}
		return res, nil, err
	}
	respTrace, traceJSON, err := encodeTrace(&res.Trace)
	var b []byte
	if err == nil {
		b, err = body(res, respTrace)
	}
	if err != nil {
		err = fmt.Errorf("encoding the response: %w", err)
		failPre(err)
		return res, nil, err
	}
	c.Header("X-Chain-Mode", res.Trace.Mode)
	writeFinal(c, b)
	return res, traceJSON, nil
}

// ctxRun is where chainID keeps the request that ran, for its chain's end
// in the trace list (storeTrace).
const ctxRun = "chain_run"

// chainID records the id req's run went on under, once it ran: the
// request's own, or the chain's it resumed, or one of its own where the
// client's trace id is another caller's chain (see traceHub.classified).
// The response's X-Chain-Trace-Id, the log line and the stored trace name
// it (finish).
func chainID(c *gin.Context, req *chain.RunRequest) {
	c.Set("req_id", req.TraceID)
	c.Set(ctxRun, req)
	if !c.Writer.Written() {
		c.Header("X-Chain-Trace-Id", req.TraceID)
	}
}

// answer runs a front's req and ends the request (finish): streamed with
// the encoder stream makes for the response's writer, else whole, emit
// seeing the events and body building the answer (see wholeRun).
func (s *Server) answer(c *gin.Context, f *front, req *chain.RunRequest,
	stream func(*sseWriter) encoder, emit func(chain.Event) error, body func(res *chain.Result, trace []byte) ([]byte, error)) {
	fail := func(err error) { s.fail(c, err) }
	var (
		res       *chain.Result
		traceJSON []byte
		err       error
	)
	if stream != nil {
		w := newSSE(c.Writer)
		res, traceJSON, err = s.streamRun(c, req, w, stream(w), fail)
	} else {
		res, traceJSON, err = s.wholeRun(c, req, emit, body, fail)
	}
	s.finish(c, f.path, f.traceID, f.start, res, traceJSON, err)
}

// writeFinal writes a whole JSON answer with its length and flushes it, so
// that the client has it before the request's bookkeeping (trace, log line,
// metrics) runs.
func writeFinal(c *gin.Context, body []byte) {
	h := c.Writer.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	c.Writer.WriteHeader(http.StatusOK)
	c.Writer.Write(body)
	c.Writer.Flush()
}

// withChain adds the member "chain" with the encoded trace to the encoded
// object obj: the trace is encoded once per request, for the answer and for
// the trace store.
func withChain(obj, traceJSON []byte) []byte {
	obj = append(obj[:len(obj)-1], `,"chain":`...)
	obj = append(obj, traceJSON...)
	return append(obj, '}')
}
