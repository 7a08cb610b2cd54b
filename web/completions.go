package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"chainproxy/chain"
	"chainproxy/config"
)

// chatCompletions serves POST /v1/chat/completions.
func (s *Server) chatCompletions(c *gin.Context) {
	start := time.Now()
	traceID := newTraceID()
	c.Set("req_id", traceID)
	body, err := s.readBody(c)
	if err != nil {
		s.reject(c, "body", err)
		return
	}
	wire, err := decodeChatRequest(body)
	if err == nil {
		err = checkLimits(wire, s.cfg.Server.MaxMessages)
	}
	if err != nil {
		s.reject(c, "invalid request", err)
		return
	}
	route, err := s.engine.Resolve(wire.Model)
	if err != nil {
		s.reject(c, "model", err)
		return
	}
	req := wire.toRunRequest()
	req.TraceID = traceID
	if !route.Relay() {
		req.Conversation = conversationKey(c, wire.User, req.Messages)
	}
	if err := applyHeaders(c, req); err != nil {
		s.reject(c, "headers", err)
		return
	}
	render := s.cfg.Chain.Render
	if strings.EqualFold(c.GetHeader("X-Chain-Render"), config.RenderDetails) {
		render = config.RenderDetails
	}
	c.Header("X-Chain-Trace-Id", traceID)
	var (
		res       *chain.Result
		traceJSON []byte
	)
	if wire.Stream {
		res, traceJSON, err = s.streamCompletion(c, wire, req, render)
	} else {
		var emit func(chain.Event) error
		var head strings.Builder
		if render == config.RenderDetails {
			// The same blocks as the stream's, from the same events.
			d := newDetailsRenderer()
			emit = func(ev chain.Event) error { head.WriteString(d.event(ev)); return nil }
		}
		res, err = s.engine.Run(c.Request.Context(), req, emit)
		if err == nil {
			content := res.Message.Content
			if render == config.RenderDetails {
				content = head.String() + content
			}
			var body, respTrace []byte
			if respTrace, traceJSON, err = encodeTrace(&res.Trace); err == nil {
				body, err = marshal(toResponse(completionID(traceID), wire.Model, start.Unix(), res, content))
			}
			if err != nil {
				s.fail(c, fmt.Errorf("encoding the response: %w", err))
			} else {
				c.Header("X-Chain-Mode", res.Trace.Mode)
				writeFinal(c, withChain(body, respTrace))
			}
		} else if !c.Writer.Written() {
			s.fail(c, err)
		}
	}
	s.finish(c, "/v1/chat/completions", traceID, start, res, traceJSON, err)
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
// trace as encoded for the answer, when it was.
func (s *Server) finish(c *gin.Context, route, traceID string, start time.Time, res *chain.Result, traceJSON []byte, err error) {
	var tr *chain.Trace
	if res != nil {
		tr = &res.Trace
	} else if fl := asFailure(err); fl != nil {
		tr = &fl.Trace
	}
	s.storeTrace(c.Request.Context(), caller(c), traceID, tr, traceJSON, err)
	status := c.Writer.Status()
	if err != nil && c.Writer.Written() && status == http.StatusOK {
		status, _ = statusFor(err) // failed mid-stream: the 200 was already out
	}
	// Typed attributes: no boxing, and the line is written on every request.
	attrs := make([]slog.Attr, 0, 8)
	attrs = append(attrs, slog.String("req_id", traceID), slog.String("route", route), slog.Int("status", status), slog.Int64("dur_ms", time.Since(start).Milliseconds()))
	mode := ""
	if tr != nil {
		mode = tr.Mode
		var stages strings.Builder
		for i, st := range tr.Stages {
			if i > 0 {
				stages.WriteByte(',')
			}
			stages.WriteString(st.Node)
			stages.WriteByte(':')
			stages.WriteString(st.Status)
		}
		attrs = append(attrs, slog.String("mode", tr.Mode), slog.Int("turns", tr.Turns), slog.String("stages", stages.String()))
	}
	if err != nil {
		attrs = append(attrs, slog.Any("err", err))
	}
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "request", attrs...)
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
}

// streamCompletion answers with OpenAI's chunk stream. Headers go out with
// the first content, or with the first keepalive, or the first stage event
// of a reflexive run, so that an early failure still gets a proper status.
func (s *Server) streamCompletion(c *gin.Context, wire *chatRequest, req *chain.RunRequest, render string) (*chain.Result, []byte, error) {
	sse := newSSE(c.Writer)
	id, model, created := completionID(req.TraceID), wire.Model, time.Now().Unix()
	includeUsage := wire.StreamOptions != nil && wire.StreamOptions.IncludeUsage
	mode := ""
	roleSent := false
	where := "starting"
	var details *detailsRenderer
	if render == config.RenderDetails {
		details = newDetailsRenderer()
	}
	start := func() {
		sse.start(func(h http.Header) { h.Set("X-Chain-Mode", mode) })
	}
	send := func(ch *chunk) error {
		b, err := marshal(ch)
		if err != nil {
			return err
		}
		return sse.data(b)
	}
	// Content deltas are most of a stream: they are framed from a prefix and
	// suffix encoded once, with only the text encoded per chunk.
	prefix, suffix := contentFrame(id, model, created)
	content := func(text, reasoning string) error {
		start()
		if roleSent && reasoning == "" && text != "" {
			sse.buf = append(sse.buf, "data: "...)
			sse.buf = append(sse.buf, prefix...)
			sse.buf = appendJSONString(sse.buf, text)
			sse.buf = append(sse.buf, suffix...)
			sse.buf = append(sse.buf, '\n', '\n')
			return sse.flush()
		}
		d := delta{ReasoningContent: reasoning}
		if text != "" || !roleSent {
			d.Content = &text
		}
		if !roleSent {
			d.Role = "assistant"
			roleSent = true
		}
		return send(newChunk(id, model, created, d, nil))
	}
	onEvent := func(ev chain.Event) error {
		if details != nil {
			if head := details.event(ev); head != "" {
				if err := content(head, ""); err != nil {
					return err
				}
			}
		}
		switch ev.Kind {
		case chain.EventClassified:
			mode = ev.Mode
		case chain.EventStageStart:
			where = "stage " + ev.Node + " starting"
			if mode == chain.ModeReflexive {
				start()
				return sse.comment(where)
			}
		case chain.EventTurn:
			where = "stage " + ev.Node + " turn " + itoa(ev.Turn)
			if sse.started {
				return sse.comment(where)
			}
		case chain.EventDelta:
			return content(ev.Content, ev.Reasoning)
		}
		return nil
	}
	onTick := func() error {
		start()
		return sse.comment(where)
	}
	res, err := s.drive(c.Request.Context(), req, sse, onEvent, onTick)
	if err != nil {
		if !sse.started {
			s.fail(c, err)
			return nil, nil, err
		}
		// The 200 is out: end the stream with an error chunk, then [DONE].
		_, obj := s.statusFor(err)
		if b, merr := json.Marshal(errorBody{Error: obj}); merr == nil {
			_ = sse.data(b)
		}
		_ = sse.data([]byte("[DONE]"))
		return nil, nil, err
	}
	if !roleSent {
		if err := content("", ""); err != nil {
			return res, nil, err
		}
	}
	if len(res.Message.ToolCalls) > 0 {
		if err := send(newChunk(id, model, created, delta{ToolCalls: wireCalls(res.Message.ToolCalls, true)}, nil)); err != nil {
			return res, nil, err
		}
	}
	last := newChunk(id, model, created, delta{}, strptr(res.FinishReason))
	if includeUsage {
		if err := send(last); err != nil {
			return res, nil, err
		}
		u := res.Trace.Usage()
		last = &chunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model, Choices: []chunkChoice{}, Usage: &u}
	}
	// The last chunk carries the trace.
	respTrace, traceJSON, err := encodeTrace(&res.Trace)
	if err != nil {
		return res, nil, fmt.Errorf("encoding the trace: %w", err)
	}
	b, err := marshal(last)
	if err != nil {
		return res, nil, err
	}
	sse.hold = true // one write for the last chunk and [DONE]
	_ = sse.data(withChain(b, respTrace))
	sse.hold = false
	return res, traceJSON, sse.data([]byte("[DONE]"))
}

func asFailure(err error) *chain.Failure {
	var f *chain.Failure
	if errors.As(err, &f) {
		return f
	}
	return nil
}
