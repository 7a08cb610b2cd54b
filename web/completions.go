package web

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"chainproxy/chain"
	"chainproxy/config"
	"chainproxy/internal/jsonx"
)

// chatCompletions serves POST /v1/chat/completions.
func (s *Server) chatCompletions(c *gin.Context) {
	wire, req, f, ok := openFront(s, c, "/v1/chat/completions", decodeChatRequest, checkLimits, (*chatRequest).toRunRequest)
	if !ok {
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
			return appendAnswer(b, completionID(objID), wire.Model, f.start.Unix(), content, res.Message.Reasoning, res.FinishReason, res.Usage(), trace), nil
		}
		resp := toResponse(completionID(objID), wire.Model, f.start.Unix(), res, content)
		if wire.legacy {
			resp.toLegacy(res)
		}
		b, err := marshal(resp)
		return withChain(b, trace), err
	})
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
		w.buf = appendUsageChunk(w.buf, e.head, res.Usage())
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
