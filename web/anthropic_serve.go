package web

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"chainproxy/chain"
	"chainproxy/internal/jsonx"
)

// messages serves POST /v1/messages: Anthropic's Messages API in front of
// the same engine as the other fronts, for Claude Code and the Anthropic
// SDKs. Query strings (Claude Code's ?beta=true) are accepted and ignored.
func (s *Server) messages(c *gin.Context) {
	wire, req, f, ok := openFront(s, c, "/v1/messages", decodeMessagesRequest, checkMessagesLimits, (*messagesRequest).toRunRequest)
	if !ok {
		return
	}
	id := "msg_" + s.objectID(c, f.traceID)
	if wire.Stream {
		s.answer(c, &f, req, func(w *sseWriter) encoder { return newAnthropicEncoder(w, id, wire.Model, wire.thinking) }, nil, nil)
		return
	}
	s.answer(c, &f, req, nil, nil, func(res *chain.Result, trace []byte) ([]byte, error) {
		stop := stopReason(res.FinishReason)
		b, err := marshal(&anthropicResponse{ID: id, Type: "message", Role: "assistant", Model: wire.Model,
			Content: anthropicContent(res, wire.thinking), StopReason: &stop, Usage: anthropicUsageOf(res)})
		return withChain(b, trace), err
	})
}

// countTokens serves POST /v1/messages/count_tokens: the prompt's tokens
// as the proxy estimates them for context fitting, at the ratio calibrated
// for the node that would receive it.
func (s *Server) countTokens(c *gin.Context) {
	start := time.Now()
	wire, ok := readWire(s, c, decodeMessagesRequest, checkMessagesLimits)
	if !ok {
		return
	}
	n, err := s.engine.CountTokens(c.Request.Context(), wire.Model, wire.msgs, wire.tools)
	if err != nil {
		s.reject(c, "model", err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"input_tokens": n})
	if s.metrics != nil {
		// Counted apart from the runs: Claude Code asks before many turns.
		s.metrics.observeRequest("/v1/messages/count_tokens", "", http.StatusOK, time.Since(start), 0, nil, 0, time.Time{})
	}
}

// anthropicEncoder writes a run as the Messages API's typed events:
// message_start, then each content block (thinking, text, then one
// tool_use per client tool call) opened with content_block_start, filled
// with deltas and closed with content_block_stop, then message_delta
// (stop_reason, usage, and the trace as "chain") and message_stop. Pings
// keep the stream alive while earlier stages run.
type anthropicEncoder struct {
	w         *sseWriter
	id, model string
	thinking  bool // the client takes the node's reasoning
	started   bool
	wroteText bool // a text block was opened
	// cur is the open block's type ("thinking" or "text"; "" when none),
	// at index next-1.
	cur  string
	next int
	// start is the message_start event, encoded here, at the handler's
	// depth: the events written from deep in a run (the message's start,
	// its blocks' starts, deltas and stops) are framed by hand, since
	// goccy/go-json's encoder takes a 9 KiB stack frame, and called there
	// it doubled every streaming goroutine's stack to 32 KiB
	// (FuzzAnthropicFrames checks the frames against the encoder).
	start []byte
}

var _ encoder = (*anthropicEncoder)(nil)

func newAnthropicEncoder(w *sseWriter, id, model string, thinking bool) *anthropicEncoder {
	e := &anthropicEncoder{w: w, id: id, model: model, thinking: thinking}
	e.start, _ = marshal(&anthropicEvent{Type: "message_start", Message: &anthropicResponse{ID: id, Type: "message", Role: "assistant",
		Model: model, Content: []any{}}}) // plain strings: it always encodes
	return e
}

// appendBlockEvent appends a content block event of index i, framed by
// hand: content_block_start of a text or thinking block (kind), a
// content_block_delta of text (kind "text", "thinking" or "signature": a
// text_delta, thinking_delta or signature_delta), or content_block_stop.
func appendBlockEvent(dst []byte, event string, i int, kind, text string) []byte {
	dst = append(dst, `{"type":"`...)
	dst = append(dst, event...)
	dst = append(dst, `","index":`...)
	dst = strconv.AppendInt(dst, int64(i), 10)
	switch event {
	case "content_block_start":
		if kind == "thinking" {
			dst = append(dst, `,"content_block":{"type":"thinking","thinking":"","signature":""}`...)
		} else {
			dst = append(dst, `,"content_block":{"type":"text","text":"","citations":null}`...)
		}
	case "content_block_delta":
		field := "text"
		switch kind {
		case "thinking":
			field = "thinking"
		case "signature":
			field = "signature"
		}
		dst = append(dst, `,"delta":{"type":"`...)
		dst = append(dst, field...)
		dst = append(dst, `_delta","`...)
		dst = append(dst, field...)
		dst = append(dst, `":`...)
		dst = jsonx.AppendString(dst, text)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// blockEvent writes one event appendBlockEvent frames.
func (e *anthropicEncoder) blockEvent(event string, i int, kind, text string) error {
	e.w.openEvent(event)
	e.w.buf = appendBlockEvent(e.w.buf, event, i, kind, text)
	return e.w.endEvent()
}

// anthropicEvent is any stream event: each type uses some fields.
type anthropicEvent struct {
	Type         string             `json:"type"`
	Message      *anthropicResponse `json:"message,omitempty"`
	Index        *int               `json:"index,omitempty"`
	ContentBlock any                `json:"content_block,omitempty"`
	Delta        any                `json:"delta,omitempty"`
	Usage        *anthropicUsage    `json:"usage,omitempty"`
}

// blockDelta is a content_block_delta's delta: text_delta, thinking_delta,
// signature_delta or input_json_delta.
type blockDelta struct {
	Type        string  `json:"type"`
	Text        *string `json:"text,omitempty"`
	Thinking    *string `json:"thinking,omitempty"`
	Signature   *string `json:"signature,omitempty"`
	PartialJSON *string `json:"partial_json,omitempty"`
}

// messageDelta is a message_delta's delta.
type messageDelta struct {
	StopReason   string    `json:"stop_reason"`
	StopSequence *string   `json:"stop_sequence"`
	StopDetails  *struct{} `json:"stop_details"`
	Container    *struct{} `json:"container"`
}

func (e *anthropicEncoder) send(ev *anthropicEvent) error {
	b, err := marshal(ev)
	if err != nil {
		return err
	}
	return e.w.event(ev.Type, b)
}

// open starts the response: headers and message_start.
func (e *anthropicEncoder) open() error {
	if e.started {
		return nil
	}
	e.started = true
	e.w.start()
	return e.w.event("message_start", e.start)
}

// begin opens a text or thinking block (kind), closing the one open
// before.
func (e *anthropicEncoder) begin(kind string) error {
	if err := e.closeBlock(); err != nil {
		return err
	}
	e.cur = kind
	idx := e.next
	e.next++
	return e.blockEvent("content_block_start", idx, kind, "")
}

// closeBlock ends the open block, if any; a thinking block gets its
// signature first, as Anthropic sends it.
func (e *anthropicEncoder) closeBlock() error {
	if e.cur == "" {
		return nil
	}
	idx := e.next - 1
	if e.cur == "thinking" {
		if err := e.blockEvent("content_block_delta", idx, "signature", thinkingSignature); err != nil {
			return err
		}
	}
	e.cur = ""
	return e.blockEvent("content_block_stop", idx, "", "")
}

// delta adds text to a block of kind, opening one when another is open.
func (e *anthropicEncoder) delta(kind, text string) error {
	if err := e.open(); err != nil {
		return err
	}
	if e.cur != kind {
		if kind == "text" {
			e.wroteText = true
		}
		if err := e.begin(kind); err != nil {
			return err
		}
	}
	return e.blockEvent("content_block_delta", e.next-1, kind, text)
}

func (e *anthropicEncoder) event(ev chain.Event) error {
	if ev.Kind != chain.EventDelta {
		return nil
	}
	if ev.Reasoning != "" && e.thinking {
		if err := e.delta("thinking", ev.Reasoning); err != nil {
			return err
		}
	}
	if ev.Content != "" {
		return e.delta("text", ev.Content)
	}
	return nil
}

// keepalive sends a ping event, which the SDKs read and skip.
func (e *anthropicEncoder) keepalive(string) error {
	if err := e.open(); err != nil {
		return err
	}
	return e.w.event("ping", []byte(`{"type":"ping"}`))
}

func (e *anthropicEncoder) end(res *chain.Result, trace []byte) error {
	if err := e.open(); err != nil {
		return err
	}
	if !e.wroteText && len(res.Message.ToolCalls) == 0 {
		// An answer without text still has its text block, as the whole
		// message has.
		if err := e.begin("text"); err != nil {
			return err
		}
	}
	if err := e.closeBlock(); err != nil {
		return err
	}
	for _, call := range res.Message.ToolCalls {
		// Written at the driver's depth, through the encoder.
		idx := e.next
		e.next++
		block := toolUseBlock{Type: "tool_use", ID: call.ID, Name: call.Name, Input: json.RawMessage("{}"), Caller: direct}
		if err := e.send(&anthropicEvent{Type: "content_block_start", Index: &idx, ContentBlock: block}); err != nil {
			return err
		}
		args := string(callInput(call.Arguments))
		if err := e.send(&anthropicEvent{Type: "content_block_delta", Index: &idx, Delta: blockDelta{Type: "input_json_delta", PartialJSON: &args}}); err != nil {
			return err
		}
		if err := e.blockEvent("content_block_stop", idx, "", ""); err != nil {
			return err
		}
	}
	u := anthropicUsageOf(res)
	b, err := marshal(&anthropicEvent{Type: "message_delta", Delta: messageDelta{StopReason: stopReason(res.FinishReason)}, Usage: &u})
	if err != nil {
		return err
	}
	// One write for the end of the message, the trace framed in the
	// writer's buffer rather than appended to a copy first.
	w := e.w
	w.hold = true
	w.openEvent("message_delta")
	w.buf = withChain(append(w.buf, b...), trace)
	_ = w.endEvent()
	w.hold = false
	return w.event("message_stop", []byte(`{"type":"message_stop"}`))
}

// abort ends the stream with an error event, in Anthropic's shape, with
// the trace of a failed chain.
func (e *anthropicEncoder) abort(status int, obj errorObject) {
	if e.open() != nil {
		return
	}
	_, body := anthropicStatus(nil, status, obj)
	if b, err := json.Marshal(body); err == nil {
		_ = e.w.event("error", b)
	}
}
