package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"chainproxy/chain"
)

// This file is a request's end, the same on every front: its trace stored,
// its one log line, its metrics and its span.

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
		var t0 time.Time
		if run != nil {
			t0 = run.Started
		}
		s.metrics.observeRequest(route, mode, status, time.Since(start), upstream, tr, sinceStarted(start, run), t0)
	}
	s.endSpan(c, status, res, tr, err)
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

func asFailure(err error) *chain.Failure {
	var f *chain.Failure
	if errors.As(err, &f) {
		return f
	}
	return nil
}

// sinceStarted is when a request that began at start began in its chain's
// trace, in the trace's milliseconds: 0 for a new chain, later for a
// resumed one, whose trace holds the calls of its earlier requests.
func sinceStarted(start time.Time, run *chain.RunRequest) int64 {
	if run == nil || run.Started.IsZero() {
		return 0
	}
	return start.Sub(run.Started).Milliseconds()
}
