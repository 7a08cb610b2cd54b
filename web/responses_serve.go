package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"chainproxy/chain"
	"chainproxy/internal/jsonx"
)

// responses serves POST /v1/responses: OpenAI's Responses API in front of
// the same engine as /v1/chat/completions.
func (s *Server) responses(c *gin.Context) {
	wire, req, f, ok := openFront(s, c, "/v1/responses", decodeResponsesRequest, checkResponsesLimits, func(w *responsesRequest) *chain.RunRequest {
		if w.PreviousResponseID != "" {
			var err error
			if w.history, err = s.loadConversation(c.Request.Context(), caller(c), w.PreviousResponseID); err != nil {
				s.reject(c, "previous_response_id", err)
				return nil
			}
		}
		return w.toRunRequest(w.history)
	})
	if !ok {
		return
	}
	objID := s.objectID(c, f.traceID)
	obj := newResponseObject(responseID(objID), f.start.Unix(), wire)
	if obj.Store && s.traces == nil {
		obj.Store = false // nowhere to keep it
	}
	// keep stores the response before its last bytes go out: a client
	// may send previous_response_id the moment it has them, to another
	// replica.
	keep := func(res *chain.Result, final []byte) {
		if !obj.Store {
			return
		}
		conv := append(append([]chain.Message(nil), wire.history...), wire.items...)
		s.storeResponse(c.Request.Context(), caller(c), obj.ID, final, append(conv, res.Message))
	}
	if wire.Stream {
		s.answer(c, &f, req, func(w *sseWriter) encoder {
			return &responsesEncoder{w: w, obj: obj, objID: objID, keep: keep}
		}, nil, nil)
		return
	}
	s.answer(c, &f, req, nil, nil, func(res *chain.Result, trace []byte) ([]byte, error) {
		obj.complete(res, time.Now().Unix(), outputItems(objID, res))
		b, err := marshal(obj)
		if err != nil {
			return nil, err
		}
		final := withChain(b, trace)
		keep(res, final)
		return final, nil
	})
}

// storedResponse is what store: true keeps: the response as answered, and
// the conversation up to it (without instructions, which OpenAI does not
// carry over) for previous_response_id.
type storedResponse struct {
	Response json.RawMessage `json:"response"`
	Messages []chain.Message `json:"messages"`
}

// responseKey is where a stored response lives in the trace store: scoped
// to its caller like traces, and under a prefix no trace id can take (a
// trace id comes from one path segment, which holds no slash).
func responseKey(who, id string) string { return "response/" + traceKey(who, id) }

// storeResponse keeps a response for previous_response_id and GET
// /v1/responses/{id}, in the trace store: memory, or Redis shared by the
// replicas, with the traces' bound and TTL. The trace store bounds how
// many it keeps, not their size, and each holds the whole conversation,
// which previous_response_id grows turn after turn: one larger than
// server.max_body_bytes, more than a client may send as its whole
// history, is not kept, so that a continuation never carries more than a
// request could.
func (s *Server) storeResponse(ctx context.Context, who, id string, resp []byte, msgs []chain.Message) {
	doc, err := marshal(storedResponse{Response: resp, Messages: msgs})
	if err == nil && int64(len(doc)) > s.cfg.Server.MaxBodyBytes {
		err = fmt.Errorf("the conversation is %d bytes, more than server.max_body_bytes (%d)", len(doc), s.cfg.Server.MaxBodyBytes)
	}
	if err == nil {
		err = s.traces.PutTrace(context.WithoutCancel(ctx), responseKey(who, id), doc)
	}
	if err != nil {
		s.log.Warn("storing response", "req_id", strings.TrimPrefix(id, "resp_"), "err", err)
	}
}

// errResponseNotFound answers an id that is unknown, expired or another
// caller's: the same 404 for each, so that ids cannot be probed.
func errResponseNotFound(id string) error {
	return &httpError{http.StatusNotFound, "invalid_request_error", "previous_response_not_found",
		fmt.Sprintf("response %q not found (only responses created with store: true, whose conversation is within server.max_body_bytes, are kept, for a while)", id)}
}

func (s *Server) loadResponse(ctx context.Context, who, id string) (*storedResponse, error) {
	if s.traces == nil {
		return nil, errResponseNotFound(id)
	}
	data, ok, err := s.traces.GetTrace(ctx, responseKey(who, id))
	if err != nil {
		return nil, fmt.Errorf("loading response %s: %w", id, err)
	}
	if !ok {
		return nil, errResponseNotFound(id)
	}
	var st storedResponse
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("decoding stored response %s: %w", id, err)
	}
	return &st, nil
}

// loadConversation is the conversation a stored response ended.
func (s *Server) loadConversation(ctx context.Context, who, id string) ([]chain.Message, error) {
	st, err := s.loadResponse(ctx, who, id)
	if err != nil {
		return nil, err
	}
	return st.Messages, nil
}

// getResponse serves GET /v1/responses/{id}.
func (s *Server) getResponse(c *gin.Context) {
	st, err := s.loadResponse(c.Request.Context(), caller(c), c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Data(http.StatusOK, "application/json", st.Response)
}

// responsesEncoder writes a run as the Responses API's typed events, in
// OpenAI's order: response.created and response.in_progress, then each
// output item (reasoning summary, message, function call) opened, filled
// with deltas and closed, then response.completed carrying the trace. Each
// event has the next sequence_number.
type responsesEncoder struct {
	w      *sseWriter
	obj    *responseObject
	objID  string // the base of its item ids (Server.objectID)
	seq    int
	opened bool
	// cur is the open item's kind ("reasoning" or "message"; "" when
	// none), at output index len(output)-1; text is its text so far.
	cur    string
	text   strings.Builder
	output []any
	// keep, when set, is given the completed response with its trace
	// before response.completed goes out.
	keep func(res *chain.Result, final []byte)
}

var _ encoder = (*responsesEncoder)(nil)

// responseEvent is any Responses stream event: each type uses some fields.
type responseEvent struct {
	Type           string          `json:"type"`
	SequenceNumber int             `json:"sequence_number"`
	Response       json.RawMessage `json:"response,omitempty"`
	OutputIndex    *int            `json:"output_index,omitempty"`
	Item           any             `json:"item,omitempty"`
	ItemID         string          `json:"item_id,omitempty"`
	ContentIndex   *int            `json:"content_index,omitempty"`
	SummaryIndex   *int            `json:"summary_index,omitempty"`
	Part           any             `json:"part,omitempty"`
	Delta          *string         `json:"delta,omitempty"`
	Text           *string         `json:"text,omitempty"`
	Name           string          `json:"name,omitempty"`
	Arguments      *string         `json:"arguments,omitempty"`
	Logprobs       *[]struct{}     `json:"logprobs,omitempty"`
}

// index0 is the only content and summary index the proxy writes: one part per item.
var index0 = 0

// send writes one event. It is encoded with encoding/json, not goccy/go-json
// (marshal): the events of a stream go out deep in a run, where goccy's
// 9 KiB stack frame grew every streaming goroutine's stack from 16 to 32
// KiB, and the ones that go through here are a few a response; the deltas,
// one a chunk, are framed by hand (sendDelta).
func (e *responsesEncoder) send(ev responseEvent) error {
	ev.SequenceNumber = e.seq
	e.seq++
	b, err := json.Marshal(&ev)
	if err != nil {
		return err
	}
	return e.w.event(ev.Type, b)
}

// sendDelta writes a text delta of the open item, at output index idx.
func (e *responsesEncoder) sendDelta(reasoning bool, id string, idx int, text string) error {
	e.w.openEvent(deltaType(reasoning))
	e.w.buf = appendResponsesDelta(e.w.buf, reasoning, e.seq, id, idx, text)
	e.seq++
	return e.w.endEvent()
}

// deltaType is the type of a text delta: of a reasoning summary, or of a
// message's output text.
func deltaType(reasoning bool) string {
	if reasoning {
		return "response.reasoning_summary_text.delta"
	}
	return "response.output_text.delta"
}

// appendResponsesDelta appends the delta event's JSON: what encoding/json
// writes for its responseEvent (FuzzResponsesDelta).
func appendResponsesDelta(b []byte, reasoning bool, seq int, id string, idx int, text string) []byte {
	b = append(b, `{"type":"`...)
	b = append(b, deltaType(reasoning)...)
	b = append(b, `","sequence_number":`...)
	b = strconv.AppendInt(b, int64(seq), 10)
	b = append(b, `,"output_index":`...)
	b = strconv.AppendInt(b, int64(idx), 10)
	b = append(b, `,"item_id":`...)
	b = jsonx.AppendString(b, id)
	if reasoning {
		b = append(b, `,"summary_index":0,"delta":`...)
		b = jsonx.AppendString(b, text)
		return append(b, '}')
	}
	b = append(b, `,"content_index":0,"delta":`...)
	b = jsonx.AppendString(b, text)
	return append(b, `,"logprobs":[]}`...)
}

// sendResponse sends an event carrying the response, with trace when set;
// before, res and the response go to keep when both are set. The response
// is encoded with encoding/json, as in send: the first two go out deep in a
// run.
func (e *responsesEncoder) sendResponse(typ string, trace []byte, res *chain.Result) error {
	b, err := json.Marshal(e.obj)
	if err != nil {
		return err
	}
	if trace != nil {
		b = withChain(b, trace)
	}
	if res != nil && e.keep != nil {
		e.keep(res, b)
	}
	// {"type","sequence_number","response"}, the order of responseEvent's
	// fields, framed here: b, which holds the trace, is written as it is.
	doc := make([]byte, 0, len(b)+len(typ)+64)
	doc = append(doc, `{"type":`...)
	doc = jsonx.AppendString(doc, typ)
	doc = append(doc, `,"sequence_number":`...)
	doc = strconv.AppendInt(doc, int64(e.seq), 10)
	doc = append(doc, `,"response":`...)
	doc = append(doc, b...)
	doc = append(doc, '}')
	e.seq++
	return e.w.event(typ, doc)
}

// open starts the response: headers, response.created, response.in_progress.
func (e *responsesEncoder) open() error {
	if e.opened {
		return nil
	}
	e.opened = true
	e.w.start()
	if err := e.sendResponse("response.created", nil, nil); err != nil {
		return err
	}
	return e.sendResponse("response.in_progress", nil, nil)
}

func (e *responsesEncoder) itemID(kind string) string {
	return kind + "_" + e.objID + "_" + itoa(len(e.output))
}

// begin opens an output item of kind, closing the one open before.
func (e *responsesEncoder) begin(kind string) error {
	if err := e.closeItem(); err != nil {
		return err
	}
	e.cur = kind
	e.text.Reset()
	idx := len(e.output)
	var item any
	if kind == "reasoning" {
		item = reasoningItem{Type: "reasoning", ID: e.itemID("rs"), Summary: []summaryText{}}
	} else {
		item = messageItem{Type: "message", ID: e.itemID("msg"), Status: "in_progress", Role: "assistant", Content: []outputText{}}
	}
	e.output = append(e.output, item)
	if err := e.send(responseEvent{Type: "response.output_item.added", OutputIndex: &idx, Item: item}); err != nil {
		return err
	}
	id := e.curID()
	if kind == "reasoning" {
		return e.send(responseEvent{Type: "response.reasoning_summary_part.added", ItemID: id, OutputIndex: &idx, SummaryIndex: &index0, Part: summaryText{Type: "summary_text", Text: ""}})
	}
	return e.send(responseEvent{Type: "response.content_part.added", ItemID: id, OutputIndex: &idx, ContentIndex: &index0, Part: newOutputText("")})
}

func (e *responsesEncoder) curID() string {
	switch it := e.output[len(e.output)-1].(type) {
	case reasoningItem:
		return it.ID
	case messageItem:
		return it.ID
	}
	return ""
}

// closeItem sends the done events of the open item, if any.
func (e *responsesEncoder) closeItem() error {
	if e.cur == "" {
		return nil
	}
	idx := len(e.output) - 1
	id, text := e.curID(), e.text.String()
	kind := e.cur
	e.cur = ""
	if kind == "reasoning" {
		item := reasoningItem{Type: "reasoning", ID: id, Summary: []summaryText{{Type: "summary_text", Text: text}}}
		e.output[idx] = item
		if err := e.send(responseEvent{Type: "response.reasoning_summary_text.done", ItemID: id, OutputIndex: &idx, SummaryIndex: &index0, Text: &text}); err != nil {
			return err
		}
		if err := e.send(responseEvent{Type: "response.reasoning_summary_part.done", ItemID: id, OutputIndex: &idx, SummaryIndex: &index0, Part: item.Summary[0]}); err != nil {
			return err
		}
		return e.send(responseEvent{Type: "response.output_item.done", OutputIndex: &idx, Item: item})
	}
	part := newOutputText(text)
	item := messageItem{Type: "message", ID: id, Status: "completed", Role: "assistant", Content: []outputText{part}}
	e.output[idx] = item
	if err := e.send(responseEvent{Type: "response.output_text.done", ItemID: id, OutputIndex: &idx, ContentIndex: &index0, Text: &text, Logprobs: &part.Logprobs}); err != nil {
		return err
	}
	if err := e.send(responseEvent{Type: "response.content_part.done", ItemID: id, OutputIndex: &idx, ContentIndex: &index0, Part: part}); err != nil {
		return err
	}
	return e.send(responseEvent{Type: "response.output_item.done", OutputIndex: &idx, Item: item})
}

// delta adds text to an item of kind, opening it when another is open.
func (e *responsesEncoder) delta(kind, text string) error {
	if err := e.open(); err != nil {
		return err
	}
	if e.cur != kind {
		if err := e.begin(kind); err != nil {
			return err
		}
	}
	e.text.WriteString(text)
	return e.sendDelta(kind == "reasoning", e.curID(), len(e.output)-1, text)
}

func (e *responsesEncoder) event(ev chain.Event) error {
	if ev.Kind != chain.EventDelta {
		return nil
	}
	if ev.Reasoning != "" {
		if err := e.delta("reasoning", ev.Reasoning); err != nil {
			return err
		}
	}
	if ev.Content != "" {
		return e.delta("message", ev.Content)
	}
	return nil
}

func (e *responsesEncoder) keepalive(where string) error {
	if err := e.open(); err != nil {
		return err
	}
	return e.w.comment(where)
}

func (e *responsesEncoder) end(res *chain.Result, trace []byte) error {
	if err := e.open(); err != nil {
		return err
	}
	if e.cur == "reasoning" || len(e.output) == 0 && len(res.Message.ToolCalls) == 0 {
		// Every answer has its message, if only an empty one, as the
		// whole response has.
		if err := e.begin("message"); err != nil {
			return err
		}
	}
	if err := e.closeItem(); err != nil {
		return err
	}
	for _, call := range res.Message.ToolCalls {
		idx := len(e.output)
		item := functionCallItem{Type: "function_call", ID: "fc_" + call.ID, Status: "in_progress", CallID: call.ID, Name: call.Name, Arguments: ""}
		e.output = append(e.output, item)
		if err := e.send(responseEvent{Type: "response.output_item.added", OutputIndex: &idx, Item: item}); err != nil {
			return err
		}
		args := call.Arguments
		if err := e.send(responseEvent{Type: "response.function_call_arguments.delta", ItemID: item.ID, OutputIndex: &idx, Delta: &args}); err != nil {
			return err
		}
		if err := e.send(responseEvent{Type: "response.function_call_arguments.done", ItemID: item.ID, OutputIndex: &idx, Name: call.Name, Arguments: &args}); err != nil {
			return err
		}
		item.Status, item.Arguments = "completed", args
		e.output[idx] = item
		if err := e.send(responseEvent{Type: "response.output_item.done", OutputIndex: &idx, Item: item}); err != nil {
			return err
		}
	}
	e.obj.complete(res, time.Now().Unix(), e.output)
	typ := "response.completed"
	if e.obj.Status == "incomplete" {
		typ = "response.incomplete"
	}
	return e.sendResponse(typ, trace, res)
}

// abort ends the stream with response.failed, carrying the error and, when
// the chain ran, its trace.
func (e *responsesEncoder) abort(status int, obj errorObject) {
	if e.open() != nil {
		return
	}
	e.obj.Status = "failed"
	e.obj.Error = responseErrorFor(status, obj)
	e.obj.Output = e.output
	if e.obj.Output == nil {
		e.obj.Output = []any{}
	}
	var trace []byte
	if obj.Chain != nil {
		trace, _ = marshal(obj.Chain)
	}
	_ = e.sendResponse("response.failed", trace, nil)
}
