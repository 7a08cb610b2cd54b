package web

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"chainproxy/chain"
	"chainproxy/config"
	"chainproxy/internal/jsonx"
)

// chatCompletions serves POST /v1/chat/completions.
func (s *Server) chatCompletions(c *gin.Context) {
	wire, f, ok := openFront(s, c, "/v1/chat/completions", decodeChatRequest, checkLimits, func(w *chatRequest) string { return w.Model })
	if !ok {
		return
	}
	req := wire.toRunRequest()
	if !s.prepare(c, &f, req, wire.User, nil) {
		return
	}
	render := s.cfg.Chain.Render
	if strings.EqualFold(header(c, hRender), config.RenderDetails) {
		render = config.RenderDetails
	}
	if wire.format != nil {
		// An answer asked in JSON is parsed by the client: the stage
		// blocks before it would break the parse.
		render = ""
	}
	objID := s.objectID(c, f.traceID)
	if wire.Stream {
		s.answer(c, &f, req, func(w *sseWriter) encoder { return newChatEncoder(w, wire, objID, render) }, nil, nil)
		return
	}
	var emit func(chain.Event) error
	var head strings.Builder
	if render == config.RenderDetails {
		// The same blocks as the stream's, from the same events.
		d := newDetailsRenderer()
		emit = func(ev chain.Event) error { head.WriteString(d.event(ev)); return nil }
	}
	s.answer(c, &f, req, nil, emit, func(res *chain.Result, trace []byte) ([]byte, error) {
		content := res.Message.Content
		if render == config.RenderDetails {
			content = head.String() + content
		}
		if len(res.Message.ToolCalls) == 0 {
			b := make([]byte, 0, answerSize(content, res.Message.Reasoning, wire.Model, trace))
			return appendAnswer(b, completionID(objID), wire.Model, f.start.Unix(), content, res.Message.Reasoning, res.FinishReason, res.Trace.Usage(), trace), nil
		}
		resp := toResponse(completionID(objID), wire.Model, f.start.Unix(), res, content)
		if wire.legacy {
			resp.toLegacy(res)
		}
		b, err := marshal(resp)
		return withChain(b, trace), err
	})
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

// finish stores the trace and logs the request's one line. traceJSON is the
// trace as encoded for the answer, when it was. The trace id is the
// chain's, which the run may have changed (chainID).
func (s *Server) finish(c *gin.Context, route, traceID string, start time.Time, res *chain.Result, traceJSON []byte, err error) {
	if id := c.GetString("req_id"); id != "" {
		traceID = id // the chain's, when the run went on under another (chainID)
	}
	v, _ := c.Get(ctxRun)
	run, _ := v.(*chain.RunRequest)
	var tr *chain.Trace
	if res != nil {
		tr = &res.Trace
	} else if fl := asFailure(err); fl != nil {
		tr = &fl.Trace
	}
	s.storeTrace(c.Request.Context(), run, caller(c), traceID, tr, traceJSON, err)
	status, mode := s.logRequest(c, route, traceID, start, tr, err)
	if s.logPrompts && res != nil {
		// Only on request (-log-prompts): prompts and tool results may be
		// private, so they are never logged by default.
		s.log.Debug("request content", "req_id", traceID, "reply", res.Message.Content, "tools", res.Trace.ToolsUsed())
	}
	if s.metrics != nil {
		var upstream time.Duration
		if res != nil {
			upstream = res.Upstream
		}
		s.metrics.observeRequest(route, mode, status, time.Since(start), upstream, tr)
	}
	s.endSpan(c, status, tr, err)
}

// logRequest writes the request's one line and returns the status and mode
// it logged. It is its own function so that its record, 1.5 KiB of stack,
// is not on the stack while storeTrace encodes with goccy/go-json, whose
// 9 KiB frame already takes a streaming handler near the end of its 16 KiB
// stack (finish's frame is 616 bytes, 1,248 before).
func (s *Server) logRequest(c *gin.Context, route, traceID string, start time.Time, tr *chain.Trace, err error) (status int, mode string) {
	status = c.Writer.Status()
	if err != nil && c.Writer.Written() && status == http.StatusOK {
		status, _ = statusFor(err) // failed mid-stream: the 200 was already out
	}
	h := s.log.Handler()
	if tr != nil {
		mode = tr.Mode
	}
	if !h.Enabled(context.Background(), slog.LevelInfo) {
		return status, mode
	}
	// The record is made here, without the caller's PC that Logger.LogAttrs
	// takes with runtime.Callers for every line (2,500 instructions): the
	// proxy's handlers never write the source. Typed attributes: no boxing.
	rec := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
	rec.AddAttrs(slog.String("req_id", traceID), slog.String("route", route), slog.Int("status", status), slog.Int64("dur_ms", time.Since(start).Milliseconds()))
	if tr != nil {
		var stages strings.Builder
		for i, st := range tr.Stages {
			if i > 0 {
				stages.WriteByte(',')
			}
			stages.WriteString(st.Node)
			stages.WriteByte(':')
			stages.WriteString(st.Status)
		}
		rec.AddAttrs(slog.String("mode", tr.Mode), slog.Int("turns", tr.Turns), slog.String("stages", stages.String()))
	}
	if err != nil {
		rec.AddAttrs(slog.Any("err", err))
	}
	_ = h.Handle(context.Background(), rec)
	return status, mode
}

// chatEncoder writes a run as OpenAI's chat completion chunk stream: the
// role in the first chunk, content and reasoning deltas, the tool calls
// whole, the finish reason, usage when asked, and the trace in the last
// chunk before [DONE].
type chatEncoder struct {
	w            *sseWriter
	id, model    string
	created      int64
	includeUsage bool
	roleSent     bool
	legacy       bool             // the client's tools are the deprecated functions
	details      *detailsRenderer // the "details" rendering, when asked
	// Content deltas are most of a stream: they are framed from a head
	// encoded once (chunkHead), with only the text encoded per chunk.
	head []byte
}

var _ encoder = (*chatEncoder)(nil)

func newChatEncoder(w *sseWriter, wire *chatRequest, objID, render string) *chatEncoder {
	e := &chatEncoder{w: w, id: completionID(objID), model: wire.Model, created: time.Now().Unix(),
		includeUsage: wire.StreamOptions != nil && wire.StreamOptions.IncludeUsage, legacy: wire.legacy}
	if render == config.RenderDetails {
		e.details = newDetailsRenderer()
	}
	e.head = chunkHead(e.id, e.model, e.created)
	return e
}

func (e *chatEncoder) send(ch *chunk) error {
	b, err := marshal(ch)
	if err != nil {
		return err
	}
	return e.w.data(b)
}

func (e *chatEncoder) content(text, reasoning string) error {
	e.w.start()
	w := e.w
	w.openEvent("")
	w.buf = append(w.buf, e.head...)
	w.buf = appendDelta(w.buf, !e.roleSent, text, reasoning)
	e.roleSent = true
	return w.endEvent()
}

func (e *chatEncoder) event(ev chain.Event) error {
	if e.details != nil {
		if head := e.details.event(ev); head != "" {
			if err := e.content(head, ""); err != nil {
				return err
			}
		}
	}
	if ev.Kind == chain.EventDelta {
		return e.content(ev.Content, ev.Reasoning)
	}
	return nil
}

func (e *chatEncoder) keepalive(where string) error {
	e.w.start()
	return e.w.comment(where)
}

func (e *chatEncoder) end(res *chain.Result, trace []byte) error {
	if !e.roleSent {
		if err := e.content("", ""); err != nil {
			return err
		}
	}
	finish := res.FinishReason
	if len(res.Message.ToolCalls) > 0 {
		d := delta{ToolCalls: wireCalls(res.Message.ToolCalls, true)}
		if e.legacy {
			d, finish = delta{FunctionCall: legacyCall(res.Message.ToolCalls)}, legacyFinish(finish)
		}
		if err := e.send(newChunk(e.id, e.model, e.created, d, nil)); err != nil {
			return err
		}
	}
	// The finish chunk, then the usage chunk when asked: the last of them
	// carries the trace. All leave in one write with [DONE], framed in the
	// writer's buffer (the trace is the stream's largest event: copied
	// once, not into a chunk and then into the buffer).
	w := e.w
	w.hold = true
	w.openEvent("")
	w.buf = append(w.buf, e.head...)
	w.buf = append(w.buf, finishOpen...)
	w.buf = jsonx.AppendString(w.buf, finish)
	w.buf = append(w.buf, "}]}"...)
	if e.includeUsage {
		_ = w.endEvent()
		w.openEvent("")
		w.buf = appendUsageChunk(w.buf, e.head, res.Trace.Usage())
	}
	w.buf = withChain(w.buf, trace)
	_ = w.endEvent()
	w.hold = false
	return w.data([]byte("[DONE]"))
}

// abort ends the stream with an error chunk, then [DONE].
func (e *chatEncoder) abort(_ int, obj errorObject) {
	if b, merr := json.Marshal(errorBody{Error: obj}); merr == nil {
		_ = e.w.data(b)
	}
	_ = e.w.data([]byte("[DONE]"))
}

func asFailure(err error) *chain.Failure {
	var f *chain.Failure
	if errors.As(err, &f) {
		return f
	}
	return nil
}
