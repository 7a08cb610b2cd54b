// Package openai is the node.Backend of a node served by any
// OpenAI-compatible chat completions API (OpenAI, vLLM, llama.cpp server,
// LM Studio, Ollama's /v1).
//
// The wire format is OpenAI's, written and read here: go-openai (which
// probes the node's /models) marshals each message through a second
// encoding/json pass and drops what some requests need (request.go), and
// its stream reader matches two regular expressions per line and has no
// "reasoning" field (sse.go); with them, reading and writing the wire was
// most of what a relay cost. The fakes the tests run against decode
// requests with go-openai's types, and the end-to-end tests use its client.
//
// The upstream is streamed unless the caller asked for the whole answer at
// once (node.Request.Whole), which a client that did not ask for a stream
// gets sooner that way. Reasoning arrives as reasoning_content, reasoning
// or <think> tags at the head of the content (only </think>, when the
// model's chat template opened the block: see Backend.thinkOpened); it
// comes out of Chat one way, in node.Chunk.Reasoning. Tool call fragments
// are assembled by index.
//
// It imports chain and config, never web or gin.
package openai

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	gojson "github.com/goccy/go-json"
	goopenai "github.com/sashabaranov/go-openai"

	"chainproxy/chain/node"
	"chainproxy/config"
)

var (
	_ node.Backend = (*Backend)(nil)
	_ node.Prober  = (*Backend)(nil)
)

// Backend calls one OpenAI-compatible node.
type Backend struct {
	node   config.Node
	http   *http.Client
	url    string           // {base}/chat/completions
	client *goopenai.Client // for Probe
	// noStreamOptions is set once the upstream refused stream_options:
	// later calls do without it (and without usage) rather than fail
	// once each.
	noStreamOptions atomic.Bool
	// thinkOpened is set once an answer showed that the model's chat
	// template ends the prompt with <think> (its content is
	// "reasoning</think>answer"), as DeepSeek-R1's does when its server
	// parses no reasoning: later answers are split from their first byte.
	// It is cleared by an answer that opened its own block, or that
	// stopped without closing the one it was thought to be in.
	thinkOpened atomic.Bool
	// thinks is set once an answer carried reasoning (Thinks).
	thinks atomic.Bool
	// noTemplateKwargs is set once the upstream refused
	// chat_template_kwargs, as OpenAI refuses any field it does not know:
	// later calls asked not to think go without it rather than fail once
	// each.
	noTemplateKwargs atomic.Bool
}

// The nodes of provider openai are this package's: node.Build finds them
// once it is imported.
func init() {
	node.Register(config.ProviderOpenAI, func(n config.Node) node.Backend { return New(n, nil) })
}

// New returns the backend of node, with its base URL and API key. With a nil
// httpClient it builds one whose connection attempts give up after
// node.ConnectTimeout (an unreachable node fails fast as offline) and that
// sets no response header timeout: a model may think for a long time before
// its first byte, which node.FirstByteTimeout bounds instead
// (node.CallClock).
func New(n config.Node, httpClient *http.Client) *Backend {
	if httpClient == nil {
		httpClient = node.NewHTTPClient(n)
	}
	cfg := goopenai.DefaultConfig(n.APIKey)
	cfg.BaseURL = n.BaseURL
	cfg.HTTPClient = httpClient
	return &Backend{
		node:   n,
		http:   httpClient,
		url:    strings.TrimSuffix(n.BaseURL, "/") + "/chat/completions",
		client: goopenai.NewClientWithConfig(cfg),
	}
}

// Chat streams the model's answer to fn. Content and reasoning are delivered
// as they arrive; tool calls, the finish reason and the usage come in the
// last chunk. An error returned by fn stops the stream and is returned as is.
//
// The request asks for stream_options.include_usage so that the usage comes
// back. Some OpenAI-compatible servers refuse that field with a 400 that
// names it: the call is then made again once without it, and the backend
// remembers not to send it to that node any more.
func (b *Backend) Chat(ctx context.Context, req *node.Request, fn func(node.Chunk) error) error {
	ctx, clock := node.StartClock(ctx, b.node, !req.Whole)
	defer clock.Stop()
	return clock.Err(b.chat(ctx, clock, req, fn))
}

// chat is Chat under its clock, which reads the answer's body.
func (b *Backend) chat(ctx context.Context, clock *node.CallClock, req *node.Request, fn func(node.Chunk) error) error {
	resp, stream, err := b.open(ctx, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body := clock.Body(resp.Body)
	if ct := resp.Header.Get("Content-Type"); stream && !isMediaType(ct, "text/event-stream") || !stream && !isMediaType(ct, "application/json") {
		// Not the shape asked for and labelled so: the body says what
		// it is. Servers answer a stream request whole (some ignore
		// "stream"), stream to one that asked for the whole answer,
		// and label either wrong or not at all
		// (TestChatAnswerOfAnotherShape). What neither shape starts
		// with is read as what was asked. An answer labelled as asked,
		// the usual one, is read without a look.
		var first byte
		first, body, err = sniff(body)
		if err != nil {
			return node.TransportError(ctx, b.node.Name, err)
		}
		switch first {
		case '{':
			stream = false
		case 'd', ':', 'e', 'i', 'r': // data, a comment, event, id, retry
			stream = true
		}
	}
	if !stream {
		return b.readWhole(ctx, body, resp.ContentLength, req, fn)
	}
	return b.readStream(ctx, node.IdleReader(body, req.Idle), req, fn)
}

// isMediaType reports whether a Content-Type is of media type mt.
func isMediaType(contentType, mt string) bool {
	t, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(t), mt)
}

// maxSniff bounds the space sniff reads past before giving up: what it
// holds is held whole.
const maxSniff = 64 << 10

// sniff reads body up to its first byte that is not JSON's space and
// returns that byte, 0 when the body ends or maxSniff bytes of space came
// first, and a reader of the whole body, what sniff read included.
func sniff(body io.Reader) (byte, io.Reader, error) {
	head := make([]byte, 0, 512)
	for len(head) < maxSniff {
		if len(head) == cap(head) {
			head = slices.Grow(head, len(head))
		}
		n, err := body.Read(head[len(head):cap(head)])
		for _, c := range head[len(head) : len(head)+n] {
			switch c {
			case ' ', '\t', '\n', '\r':
				continue
			}
			return c, io.MultiReader(bytes.NewReader(head[:len(head)+n]), body), nil
		}
		head = head[:len(head)+n]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, nil, err
		}
	}
	return 0, io.MultiReader(bytes.NewReader(head), body), nil
}

// open sends req and returns the answer and whether it was asked as a
// stream. The request is built and encoded here, not in Chat, so that it
// is not on the stack of the goroutine that then waits out the whole
// answer: that stack is what an open stream holds, and past an average
// of about 3 KiB a goroutine, new goroutines start with 8 KiB rather than 4.
func (b *Backend) open(ctx context.Context, req *node.Request) (*http.Response, bool, error) {
	creq := newChatRequest(req)
	creq.Stream = !req.Whole
	if creq.Stream && !b.noStreamOptions.Load() {
		creq.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	if req.NoThink && !b.noTemplateKwargs.Load() {
		// A thinking model spends a summary's answer cap on reasoning
		// unless its chat template is told not to think: no field of
		// OpenAI's API says it (templateKwargs).
		creq.ChatTemplateKwargs = &templateKwargs{}
	}
	resp, err := b.post(ctx, creq)
	// Each refused field is dropped once: at most one retry per field.
	for err != nil {
		switch {
		case creq.StreamOptions != nil && refusesField(err, "stream_options"):
			b.noStreamOptions.Store(true)
			creq.StreamOptions = nil
		case creq.ChatTemplateKwargs != nil && refusesField(err, "chat_template_kwargs"):
			b.noTemplateKwargs.Store(true)
			creq.ChatTemplateKwargs = nil
		default:
			return nil, creq.Stream, err
		}
		resp, err = b.post(ctx, creq)
	}
	return resp, creq.Stream, nil
}

// Thinks reports whether the node's model was seen to think: an answer
// carried reasoning (reasoning_content, reasoning, or a think block in its
// content). An OpenAI-compatible server's /models rarely lists a
// "thinking" capability, so this is how a caller learns that the model's
// summaries must be asked with node.Request.NoThink.
func (b *Backend) Thinks() bool { return b.thinks.Load() }

// post sends a chat completion request. A status of 400 or more comes back
// as a *node.UpstreamError with the upstream's message, the body closed.
func (b *Backend) post(ctx context.Context, creq *chatRequest) (*http.Response, error) {
	body, err := creq.encode()
	if err != nil {
		return nil, fmt.Errorf("openai: node %s: encode request: %w", b.node.Name, err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("openai: node %s: %w", b.node.Name, err)
	}
	hreq.Header = http.Header{"Content-Type": {"application/json"}}
	if creq.Stream {
		hreq.Header.Set("Accept", "text/event-stream")
	}
	if b.node.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+b.node.APIKey)
	}
	resp, err := b.http.Do(hreq)
	if err != nil {
		return nil, node.TransportError(ctx, b.node.Name, err)
	}
	if resp.StatusCode < http.StatusBadRequest {
		return resp, nil
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	msg := errorMessage(data)
	if msg == "" {
		msg = resp.Status
	}
	return nil, b.wrongPath(&node.UpstreamError{Node: b.node.Name, Kind: node.KindStatus, Status: resp.StatusCode, Message: msg,
		RetryAfter: node.RetryAfter(resp.Header, time.Now())}, "/chat/completions")
}

// errorMessage finds the message of an error body: OpenAI's
// {"error":{"message"}}, {"error":"…"}, a top-level "message" (vLLM) or
// "detail" (FastAPI); else the body's text, capped.
func errorMessage(data []byte) string {
	var e struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if wellFormed(data) == nil && gojson.Unmarshal(data, &e) == nil {
		if msg := eventErrorMessage(e.Error); msg != "" {
			return msg
		}
		if e.Message != "" {
			return e.Message
		}
		var detail string
		if gojson.Unmarshal(e.Detail, &detail) == nil && detail != "" {
			return detail
		}
	}
	msg := strings.TrimSpace(string(data))
	if len(msg) > maxErrorBody {
		msg = msg[:maxErrorBody] + "…"
	}
	return msg
}

// errMalformedJSON is an upstream's JSON that is not well formed.
var errMalformedJSON = errors.New("malformed JSON")

// wellFormed checks an upstream's JSON with encoding/json's scanner before
// goccy/go-json decodes it: goccy/go-json v0.10.5 reads past the end of
// some malformed input (an object key ending in a dangling escape, {"\),
// into whatever memory follows, and panics or not depending on what is
// there (goccy/go-json#604, open; FuzzStreamAdd's corpus holds such an
// event). Only what the chunk decoder did not read comes here.
func wellFormed(data []byte) error {
	if !json.Valid(data) {
		return errMalformedJSON
	}
	return nil
}

// eventErrorMessage is the message of an "error" member, an object with a
// message or a string; "" when there is none.
func eventErrorMessage(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var obj struct {
		Message string `json:"message"`
	}
	if gojson.Unmarshal(raw, &obj) == nil && obj.Message != "" {
		return obj.Message
	}
	var str string
	if gojson.Unmarshal(raw, &str) == nil && str != "" {
		return str
	}
	return string(raw)
}

// newStream is the Stream of one call, with the request's caps on tool
// call arguments, started inside a think block when the node's template
// opens one.
func (b *Backend) newStream(req *node.Request) Stream {
	st := Stream{MaxArgs: req.MaxArgsBytes, MaxCallsBytes: req.MaxCallsBytes, inside: b.thinkOpened.Load()}
	st.think.Inside = st.inside
	return st
}

// learnThink keeps what a finished answer showed of who opens the node's
// think block.
func (b *Backend) learnThink(st *Stream) {
	if !st.thinkKnown {
		return
	}
	// Read first: an atomic write on every answer of a busy node would
	// bounce the line between cores for nothing.
	if b.thinkOpened.Load() != st.thinkOpened {
		b.thinkOpened.Store(st.thinkOpened)
	}
}

// readStream reads the server-sent events of a streamed answer to req.
// Once a tool call goes over req's caps, the rest of the answer is not read.
func (b *Backend) readStream(ctx context.Context, body io.Reader, req *node.Request, fn func(node.Chunk) error) error {
	st := b.newStream(req)
	r := newSSEReader(body)
	defer r.release()
	for {
		data, err := r.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			if errors.Is(err, errEventTooLarge) {
				return &node.UpstreamError{Node: b.node.Name, Kind: node.KindProtocol, Message: err.Error(), Err: err}
			}
			return node.TransportError(ctx, b.node.Name, err)
		}
		if r.erred {
			return &node.UpstreamError{Node: b.node.Name, Kind: node.KindProtocol, Message: errorMessage(data)}
		}
		if string(data) == "[DONE]" {
			// Read the little that follows (a blank line and the end of
			// the chunked body) so that the connection goes back to the
			// pool: one closed before the end of its body is thrown
			// away, which costs a handshake per request.
			io.Copy(io.Discard, io.LimitReader(body, 4<<10))
			break
		}
		c, err := st.Add(data)
		if err != nil {
			var ee *eventError
			if errors.As(err, &ee) {
				return &node.UpstreamError{Node: b.node.Name, Kind: node.KindProtocol, Message: ee.msg}
			}
			return &node.UpstreamError{Node: b.node.Name, Kind: node.KindProtocol, Message: err.Error(), Err: err}
		}
		if !c.Empty() {
			if err := fn(c); err != nil {
				return err
			}
		}
		if st.over {
			// The call will be refused: what follows is not worth reading.
			st.finish = "tool_calls"
			break
		}
	}
	// The end of the body and "data: [DONE]" are alike here. A stream that
	// ends without a finish reason was cut short.
	last, ok := st.Finish()
	if !ok {
		return &node.UpstreamError{Node: b.node.Name, Kind: node.KindProtocol, Message: "stream ended before a finish_reason"}
	}
	b.learnThink(&st)
	b.learnThinks(&st)
	return fn(last)
}

// learnThinks keeps that the node's model thinks once an answer showed
// reasoning, or a </think> closing a block its template opened (even one
// whose reasoning went out as content before the tag told); never
// cleared: asking a model that no longer thinks not to costs nothing.
func (b *Backend) learnThinks(st *Stream) {
	if (st.reasoned || st.thinkKnown && st.thinkOpened) && !b.thinks.Load() {
		b.thinks.Store(true)
	}
}

// Probe checks that the node answers GET {base}/models, without running a model.
func (b *Backend) Probe(ctx context.Context) error {
	if _, err := b.client.ListModels(ctx); err != nil {
		return b.wrongPath(b.upstreamError(ctx, err), "/models")
	}
	return nil
}

// wrongPath names the URL that answered 404 on the API's own path and says
// how base_url is likely wrong: OpenAI-compatible servers serve under /v1.
func (b *Backend) wrongPath(err error, path string) error {
	return node.NameWrongPath(err, b.node.BaseURL, path, func(base string) string {
		if strings.HasSuffix(base, "/v1") {
			return "is base_url the server's OpenAI API root (ending in /v1)?"
		}
		return "OpenAI-compatible servers serve their API under /v1: try base_url " + base + "/v1"
	})
}

// refusesField reports whether err is an upstream refusing the request
// field named field: a 400 that names it (OpenAI's "Unrecognized request
// argument supplied: …"), or a 422 from pydantic-based servers, whose
// message lists the field.
func refusesField(err error, field string) bool {
	var ue *node.UpstreamError
	return errors.As(err, &ue) && ue.Kind == node.KindStatus &&
		(ue.Status == http.StatusBadRequest || ue.Status == http.StatusUnprocessableEntity) &&
		strings.Contains(ue.Message, field)
}

// maxErrorBody caps what of a non-JSON error body goes into a message.
const maxErrorBody = 512

// upstreamError maps an error of go-openai's client (Probe) to a
// *node.UpstreamError.
func (b *Backend) upstreamError(ctx context.Context, err error) error {
	// RequestError first: it may wrap an APIError that has no status.
	var reqErr *goopenai.RequestError
	if errors.As(err, &reqErr) {
		msg := strings.TrimSpace(string(reqErr.Body))
		if len(msg) > maxErrorBody {
			msg = msg[:maxErrorBody] + "…"
		}
		if msg == "" {
			msg = reqErr.HTTPStatus
		}
		return &node.UpstreamError{Node: b.node.Name, Kind: node.KindStatus, Status: reqErr.HTTPStatusCode, Message: msg, Err: err}
	}
	var apiErr *goopenai.APIError
	if errors.As(err, &apiErr) {
		if apiErr.HTTPStatusCode == 0 {
			// A data: {"error": …} event inside a stream that had begun.
			return &node.UpstreamError{Node: b.node.Name, Kind: node.KindProtocol, Message: apiErr.Message, Err: err}
		}
		return &node.UpstreamError{Node: b.node.Name, Kind: node.KindStatus, Status: apiErr.HTTPStatusCode, Message: apiErr.Message, Err: err}
	}
	return node.TransportError(ctx, b.node.Name, err)
}

// Stream assembles the chunks of one chat completion stream. The zero value
// is ready; a Stream serves one call.
type Stream struct {
	// MaxArgs, when positive, caps each call's arguments at MaxArgs+1
	// bytes: a call over MaxArgs is known by its length (see
	// node.Request.MaxArgsBytes) and nothing more of it is held.
	MaxArgs int
	// MaxCallsBytes, when positive, caps the arguments, IDs and names of
	// all the calls together: the call that would go past it is dropped.
	MaxCallsBytes int
	// over is set once a call went past a cap; total counts the bytes
	// of the calls kept.
	over   bool
	total  int
	think  node.ThinkSplitter
	calls  []*pendingCall
	finish string
	usage  *usage
	// model is the model the upstream says answered, read once.
	model string
	// choices is the last event's choices, whose array the next reuses.
	choices []streamChoice
	// tmpl reads content events like the last one read whole.
	tmpl chunkTemplate
	// inside: the node's chat template was thought to open the think
	// block when the call began (Backend.thinkOpened).
	inside bool
	// thinkOpened, when thinkKnown, is what the answer showed of the
	// node's chat template: whether it opens the think block. Set by
	// Finish.
	thinkOpened, thinkKnown bool
	// reasoned: the answer carried reasoning (Backend.Thinks).
	reasoned bool
}

type pendingCall struct {
	// dropped: the call went past Stream.MaxCallsBytes.
	dropped bool
	index   int
	id      string
	name    string
	args    strings.Builder
}

// answerMessage is what the proxy reads of a chunk's delta or of a whole
// answer's message: the same fields, which go-openai's types lack
// ("reasoning"). Only a delta's tool calls carry an index.
type answerMessage struct {
	Content          string `json:"content"`
	ReasoningContent string `json:"reasoning_content"`
	Reasoning        string `json:"reasoning"`
	ToolCalls        []struct {
		Index    *int   `json:"index"`
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// text feeds m's content to the think splitter and returns the chunk of
// content and reasoning it gives.
func (s *Stream) text(m *answerMessage) node.Chunk {
	var c node.Chunk
	c.Content, c.Reasoning = s.think.Feed(m.Content)
	// Servers in transition have sent the same text in both fields: take
	// one.
	if r := cmp.Or(m.ReasoningContent, m.Reasoning); r != "" {
		c.Reasoning = r + c.Reasoning
	}
	s.reasoned = s.reasoned || c.Reasoning != ""
	return c
}

// streamChunk is the part of a chat.completion.chunk the proxy reads.
type streamChunk struct {
	Choices []streamChoice `json:"choices"`
	Usage   *usage         `json:"usage"`
	// Error is set by an event that reports a failure mid-stream, as
	// OpenAI and vLLM send it: data: {"error": {"message": …}}.
	Error json.RawMessage `json:"error"`
}

// streamChoice is one choice of a chat.completion.chunk.
type streamChoice struct {
	Index        int           `json:"index"`
	Delta        answerMessage `json:"delta"`
	FinishReason string        `json:"finish_reason"`
}

// eventError is an error event of the stream: the upstream's own message.
type eventError struct{ msg string }

func (e *eventError) Error() string { return e.msg }

// maxToolCalls bounds the tool calls of one answer, so that an upstream
// sending absurd indexes cannot make the proxy grow without end.
const maxToolCalls = 1024

// Add decodes one event's data and returns what it adds for the caller:
// content and reasoning at once; tool call fragments, the finish reason and
// the usage are kept for Finish.
func (s *Stream) Add(data []byte) (node.Chunk, error) {
	// The choices' array is reused from event to event: the chunk decoder
	// overwrites each element it appends.
	sc := streamChunk{Choices: s.choices[:0]}
	var model *string
	if s.model == "" {
		model = &s.model // the first event that names it
	}
	// Most events are read by the chunk decoder (decodeChunkSpan, through
	// the template); the others by goccy/go-json, which decodes these
	// structs about four times faster than encoding/json.
	if !s.decode(data, &sc, model) {
		// The general decoder would merge into a reused element.
		sc = streamChunk{}
		if err := wellFormed(data); err != nil {
			return node.Chunk{}, fmt.Errorf("decode stream chunk: %w", err)
		}
		if err := gojson.UnmarshalNoEscape(data, &sc); err != nil {
			return node.Chunk{}, fmt.Errorf("decode stream chunk: %w", err)
		}
	}
	if msg := eventErrorMessage(sc.Error); msg != "" {
		return node.Chunk{}, &eventError{msg}
	}
	s.choices = sc.Choices
	if sc.Usage != nil {
		s.usage = sc.Usage
	}
	var c node.Chunk
	for i := range sc.Choices {
		ch := &sc.Choices[i]
		if ch.Index != 0 {
			continue // only one choice is ever asked for
		}
		d := &ch.Delta
		c = s.text(d)
		for _, td := range d.ToolCalls {
			pc := s.call(td.Index, td.ID)
			if pc == nil {
				return node.Chunk{}, fmt.Errorf("tool call index %d out of range, or more than %d calls", *td.Index, maxToolCalls)
			}
			// The name comes whole in the first fragment; some servers
			// repeat it in later ones.
			s.name(pc, td.ID, td.Function.Name)
			s.addArgs(pc, td.Function.Arguments)
		}
		if ch.FinishReason != "" {
			s.finish = ch.FinishReason
		}
	}
	return c, nil
}

// decode reads the usual event, through the template when it fits: once
// the answering model is known (model nil), content events differ only in
// their text. The first event, which names the model, is a template too.
func (s *Stream) decode(data []byte, sc *streamChunk, model *string) bool {
	if model == nil && s.tmpl.match(data, sc) {
		return true
	}
	span, ok := decodeChunkSpan(data, sc, model)
	if ok {
		s.tmpl.learn(data, sc, span)
	}
	return ok
}

// name sets pc's ID and name where it has none yet.
func (s *Stream) name(pc *pendingCall, id, name string) {
	if pc.id == "" && id != "" && s.fits(pc, len(id)) {
		pc.id = id
	}
	if pc.name == "" && name != "" && s.fits(pc, len(name)) {
		pc.name = name
	}
}

// addArgs appends a fragment of arguments to pc, up to MaxArgs+1 bytes,
// and drops pc when the calls together would go past MaxCallsBytes.
func (s *Stream) addArgs(pc *pendingCall, frag string) {
	if s.MaxArgs > 0 && !pc.dropped {
		if room := s.MaxArgs + 1 - pc.args.Len(); len(frag) >= room {
			frag = frag[:room]
			s.over = true
		}
	}
	if s.fits(pc, len(frag)) {
		pc.args.WriteString(frag)
	}
}

// fits counts n more bytes of pc against MaxCallsBytes, and reports
// whether pc may hold them: past the cap, pc is dropped and what it held
// is let go. IDs and names count with the arguments, since a hostile
// upstream can make them as long.
func (s *Stream) fits(pc *pendingCall, n int) bool {
	if pc.dropped {
		return false
	}
	if s.MaxCallsBytes > 0 && s.total+n > s.MaxCallsBytes {
		s.total -= pc.args.Len() + len(pc.id) + len(pc.name)
		pc.dropped, pc.args, pc.id, pc.name = true, strings.Builder{}, "", ""
		s.over = true
		return false
	}
	s.total += n
	return true
}

// call finds or makes the call a fragment belongs to. Fragments without an
// index (servers that leave it out) go to the call of their ID, a new call
// when the ID is new, else to the last call.
func (s *Stream) call(index *int, id string) *pendingCall {
	if index != nil {
		if *index < 0 || *index >= maxToolCalls {
			return nil
		}
		// The last call at the index, unless the fragment names another
		// ID: Ollama's /v1 gives every call of a batch index 0, each
		// whole with its own ID (ollama/ollama#15457), and merged, two
		// calls would be one with both arguments end to end.
		for i := len(s.calls) - 1; i >= 0; i-- {
			if pc := s.calls[i]; pc.index == *index {
				if id == "" || pc.id == "" || pc.id == id {
					return pc
				}
				break
			}
		}
		if len(s.calls) >= maxToolCalls {
			return nil
		}
		pc := &pendingCall{index: *index}
		s.calls = append(s.calls, pc)
		return pc
	}
	for _, pc := range s.calls {
		if id != "" && pc.id == id {
			return pc
		}
	}
	if id != "" || len(s.calls) == 0 {
		if len(s.calls) >= maxToolCalls {
			return nil
		}
		pc := &pendingCall{index: len(s.calls)}
		s.calls = append(s.calls, pc)
		return pc
	}
	return s.calls[len(s.calls)-1]
}

// Finish returns the last chunk: what the think splitter held back, the
// assembled tool calls in index order, the finish reason and the usage. It
// reports false when no finish reason was seen, which means the stream was
// cut short.
func (s *Stream) Finish() (node.Chunk, bool) {
	if s.finish == "" {
		return node.Chunk{}, false
	}
	s.thinkOpened, s.thinkKnown = s.think.PromptOpened()
	if !s.thinkKnown && s.inside && s.finish == "stop" {
		// Stopped in the block the template was thought to open: this
		// answer had none (the server now parses reasoning, or the
		// model or its template changed).
		s.thinkKnown = true
	}
	var c node.Chunk
	c.Content, c.Reasoning = s.think.Flush()
	s.reasoned = s.reasoned || c.Reasoning != ""
	// Stable: calls that share an index (call) keep the order they came in.
	slices.SortStableFunc(s.calls, func(a, b *pendingCall) int { return a.index - b.index })
	for _, pc := range s.calls {
		if pc.dropped {
			continue
		}
		id := pc.id
		if id == "" {
			id = "call_" + rand.Text()
		}
		c.ToolCalls = append(c.ToolCalls, node.ToolCall{ID: id, Name: pc.name, Arguments: pc.args.String()})
	}
	switch {
	case len(c.ToolCalls) > 0:
		c.FinishReason = "tool_calls"
	case s.finish == "length", s.finish == "content_filter":
		c.FinishReason = s.finish
	default:
		c.FinishReason = "stop"
	}
	c.Usage = s.usage.chain()
	c.Model = s.model
	return c, true
}

// wholeResponse is the part of a chat.completion the proxy reads.
type wholeResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		Message      answerMessage `json:"message"`
		FinishReason string        `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
	// Error is set by an answer without choices that reports a failure
	// with status 200: OpenRouter's, once the model has started
	// (https://openrouter.ai/docs/errors), or LM Studio's on a path it
	// does not serve (a base_url without /v1).
	Error json.RawMessage `json:"error"`
}

// readWhole reads an unstreamed answer to req and delivers it as the chunks
// a stream would have given: content and reasoning, then the last chunk.
func (b *Backend) readWhole(ctx context.Context, body io.Reader, size int64, req *node.Request, fn func(node.Chunk) error) error {
	st := b.newStream(req)
	var buf bytes.Buffer
	if size > 0 && size < maxWholeBody {
		buf.Grow(int(size) + bytes.MinRead) // rather than grown in copies
	}
	// One byte past the cap tells an answer over it from one at it: cut
	// silently, it would fail as JSON the upstream never sent.
	_, err := buf.ReadFrom(io.LimitReader(body, maxWholeBody+1))
	data := buf.Bytes()
	if err != nil {
		return node.TransportError(ctx, b.node.Name, err)
	}
	if len(data) > maxWholeBody {
		return &node.UpstreamError{Node: b.node.Name, Kind: node.KindProtocol, Message: errWholeTooLarge.Error(), Err: errWholeTooLarge}
	}
	var (
		m      *answerMessage
		finish string
		sc     streamChunk
	)
	if decodeWhole(data, &sc, &st.model) && len(sc.Choices) > 0 {
		m, finish, st.usage = &sc.Choices[0].Delta, sc.Choices[0].FinishReason, sc.Usage
	} else {
		var wr wholeResponse
		err := wellFormed(data)
		if err == nil {
			err = gojson.Unmarshal(data, &wr)
		}
		if err != nil || len(wr.Choices) == 0 {
			msg := "answer without choices"
			switch {
			case err != nil:
				msg = "decode answer: " + err.Error()
			case eventErrorMessage(wr.Error) != "":
				msg = eventErrorMessage(wr.Error)
			}
			return &node.UpstreamError{Node: b.node.Name, Kind: node.KindProtocol, Message: msg, Err: err}
		}
		m, finish = &wr.Choices[0].Message, wr.Choices[0].FinishReason
		st.usage, st.model = wr.Usage, wr.Model
	}
	st.finish = cmp.Or(finish, "stop")
	if st.finish == "stop" {
		// The whole answer is known: a block its template opened shows
		// as a </think>, which the splitter finds started outside too;
		// without one, the model answered without thinking.
		st.think.Inside = false
	}
	if c := st.text(m); !c.Empty() {
		if err := fn(c); err != nil {
			return err
		}
	}
	for i, tc := range m.ToolCalls {
		pc := &pendingCall{index: i}
		st.name(pc, tc.ID, tc.Function.Name)
		st.addArgs(pc, tc.Function.Arguments)
		st.calls = append(st.calls, pc)
	}
	last, _ := st.Finish()
	b.learnThink(&st)
	b.learnThinks(&st)
	return fn(last)
}

// maxWholeBody caps an unstreamed answer.
const maxWholeBody = 32 << 20

// errWholeTooLarge is an unstreamed answer over maxWholeBody.
var errWholeTooLarge = errors.New("answer larger than 32 MiB")
