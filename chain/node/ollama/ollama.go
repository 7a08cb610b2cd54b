// Package ollama is the node.Backend of a node served by Ollama, spoken in
// Ollama's native API (POST /api/chat streamed as NDJSON, GET /api/version,
// POST /api/show)
// with the wire types of github.com/ollama/ollama/api, rather than through
// Ollama's OpenAI layer, whose gaps (made-up tool call IDs, reasoning dropped
// or mixed into the content) the proxy closes itself.
//
// It translates between chain's neutral types and Ollama's wire types and
// maps every failure to a *node.UpstreamError. It imports chain and config,
// never web or gin.
package ollama

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/ollama/ollama/api"

	"chainproxy/chain/node"
	"chainproxy/config"
)

var (
	_ node.Backend = (*Backend)(nil)
	_ node.Prober  = (*Backend)(nil)
)

// Backend calls one Ollama node.
type Backend struct {
	node    config.Node
	http    *http.Client
	chatURL string
	client  *api.Client
	// err is a base URL that does not parse, reported by every call rather
	// than at construction so that one bad node does not stop the others.
	err error
}

// The nodes of provider ollama are this package's: node.Build finds them
// once it is imported.
func init() {
	node.Register(config.ProviderOllama, func(n config.Node) node.Backend { return New(n, nil) })
}

// New returns the backend of node. With a nil httpClient it builds one whose
// connection attempts give up after node.ConnectTimeout (an unreachable node
// fails fast as offline) and that sets no response header timeout: a model
// may think for a long time before its first byte, which
// node.FirstByteTimeout bounds instead (node.CallClock).
func New(n config.Node, httpClient *http.Client) *Backend {
	if httpClient == nil {
		httpClient = node.NewHTTPClient(n)
	}
	b := &Backend{node: n, http: httpClient}
	base, err := url.Parse(n.BaseURL)
	if err != nil {
		b.err = fmt.Errorf("ollama: node %s: base url: %w", n.Name, err)
		return b
	}
	// The calls of api.Client (the version, the model's details, the
	// loaded models) are bounded as a chat call answered whole is: the
	// chain asks the details and the window in the path of a user's
	// request, with that request's context, and a server that sent its
	// headers and stalled would hold the request for good.
	meta := httpClient
	if d := n.CallTimeout(false); d > 0 && (meta.Timeout == 0 || meta.Timeout > d) {
		c := *httpClient
		c.Timeout = d
		meta = &c
	}
	b.client = api.NewClient(base, meta)
	b.chatURL = base.JoinPath("/api/chat").String()
	return b
}

// Chat streams the model's answer to fn. Content and reasoning are delivered
// as they arrive; tool calls, the finish reason and the usage come in the
// last chunk. An error returned by fn stops the stream and is returned as is.
func (b *Backend) Chat(ctx context.Context, req *node.Request, fn func(node.Chunk) error) error {
	if b.err != nil {
		return b.err
	}
	creq, err := ToChatRequest(req)
	if err != nil {
		return fmt.Errorf("ollama: node %s: %w", b.node.Name, err)
	}
	if req.Whole {
		// Ollama answers "stream": false with one line: the same reader
		// takes it.
		whole := false
		creq.Stream = &whole
	}
	if req.KeepAlive != nil {
		creq.KeepAlive = &api.Duration{Duration: *req.KeepAlive}
	}
	if req.NumCtx > 0 {
		if creq.Options == nil {
			creq.Options = map[string]any{}
		}
		creq.Options["num_ctx"] = req.NumCtx
	}
	// Without it, Ollama drops the oldest messages of a prompt longer than
	// the window, silently, the user's question first; refused, the
	// overflow is an error the proxy sees and fits again (chain's
	// ContextOverflow).
	creq.Truncate = &noTruncate
	if req.NoThink {
		creq.Think = &api.ThinkValue{Value: false}
	}
	// Nor may the answer push the prompt out: by default Ollama, once
	// prompt and answer fill the window, drops the older half of the
	// prompt and goes on (v0.17.4 runner/ollamarunner, ShiftCacheSlot),
	// the question among what the model no longer sees. Without the
	// shift the answer ends there, done_reason "length", which the
	// client is told.
	creq.Shift = &noShift
	ctx, clock := node.StartClock(ctx, b.node, !req.Whole)
	defer clock.Stop()
	st := Stream{MaxArgs: req.MaxArgsBytes, MaxCallsBytes: req.MaxCallsBytes}
	err = b.chat(ctx, creq, clock, req.Idle, func(resp *api.ChatResponse) error {
		c := st.Add(resp)
		if c.Empty() {
			return nil
		}
		if err := fn(c); err != nil {
			return consumerError{err}
		}
		return nil
	})
	var ce consumerError
	switch {
	case errors.As(err, &ce):
		return ce.err
	case err != nil:
		return clock.Err(b.namedError(b.wrongPath(upstreamError(ctx, b.node.Name, err), "/api/chat")))
	case !st.Done():
		// The body ended cleanly (a cut connection is an error above):
		// Ollama up to v0.17.4 ends so, without a word, when the model
		// writes one token more than 30 times in a row (llm/server.go,
		// ollama/ollama#8786; later versions say "prediction aborted,
		// token repeat limit reached"). A JSON format meets it often:
		// its grammar lets whitespace run on.
		return &node.UpstreamError{Node: b.node.Name, Kind: node.KindProtocol, Message: errEndedEarly}
	}
	return nil
}

var noTruncate, noShift = false, false

// errEndedEarly is the message of a stream that ended cleanly before its
// done line.
const errEndedEarly = "the answer ended before Ollama's done line, as Ollama up to v0.17.4 ends it when the model repeats one token more than 30 times (its token repeat limit)"

// maxLine caps one NDJSON line, as Ollama's own client does.
const maxLine = 8 << 20

// errLineTooLong is a stream line over maxLine: bufio's own error ("token
// too long") would not tell the user what was too long.
var errLineTooLong = errors.New("stream line longer than 8 MiB")

// maxToolCalls bounds the tool calls of one answer, as the openai backend
// does: a server repeating calls line after line cannot grow the proxy.
const maxToolCalls = 1024

// streamError is an {"error": …} line in the middle of a stream.
type streamError struct{ msg string }

func (e *streamError) Error() string { return e.msg }

// chat is POST /api/chat, streamed: fn gets each decoded line, the body
// is read through clock, and idle (node.Request.Idle) is called before
// each wait for more.
//
// It does the work of api.Client.Chat, with the same wire types, for two
// reasons. That client allocates an 8 MiB line buffer per call (a few
// milliseconds of zeroing and a GC cycle's worth of garbage per request),
// where a buffer that grows to the longest line is enough. And it ends
// quietly, as a success, when the connection drops mid-stream.
func (b *Backend) chat(ctx context.Context, creq *api.ChatRequest, clock *node.CallClock, idle func(), fn func(*api.ChatResponse) error) error {
	body, err := json.Marshal(creq)
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, b.chatURL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/x-ndjson")
	resp, err := b.http.Do(hreq)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= http.StatusBadRequest {
		data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if err != nil {
			return err
		}
		se := api.StatusError{StatusCode: resp.StatusCode, Status: resp.Status}
		if json.Unmarshal(data, &se) != nil || se.ErrorMessage == "" {
			se.ErrorMessage = strings.TrimSpace(string(data))
		}
		return se
	}
	sc := bufio.NewScanner(node.IdleReader(clock.Body(resp.Body), idle))
	sc.Buffer(nil, maxLine)
	for sc.Scan() {
		data := sc.Bytes()
		if len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		var l struct {
			api.ChatResponse
			Error string `json:"error"`
		}
		if err := json.Unmarshal(data, &l); err != nil {
			return fmt.Errorf("decode stream line: %w", err)
		}
		if l.Error != "" {
			return &streamError{l.Error}
		}
		if err := fn(&l.ChatResponse); err != nil {
			return err
		}
		if l.Done {
			drain(resp.Body)
			return nil
		}
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return errLineTooLong
	}
	return sc.Err()
}

// drain reads the little that follows the last line of a stream (the end
// of the chunked body) so that the connection goes back to the pool: one
// closed before its end is thrown away, and a new one costs a handshake
// per request. Servers end the body right after their last line.
func drain(body io.Reader) {
	io.Copy(io.Discard, io.LimitReader(body, 4<<10))
}

// Probe checks that the node answers GET /api/version, without running a model.
func (b *Backend) Probe(ctx context.Context) error {
	if b.err != nil {
		return b.err
	}
	if _, err := b.client.Version(ctx); err != nil {
		return b.wrongPath(upstreamError(ctx, b.node.Name, err), "/api/version")
	}
	return nil
}

// wrongPath names the URL that answered 404 on Ollama's own path and says
// how base_url is likely wrong: Ollama's is the server's root.
func (b *Backend) wrongPath(err error, path string) error {
	return node.NameWrongPath(err, b.node.BaseURL, path, func(base string) string {
		switch root, ok := strings.CutSuffix(base, "/api"); {
		case ok:
			return "base_url is the Ollama server's root, without /api: try " + root
		case strings.HasSuffix(base, "/v1"):
			return "base_url of an ollama node is the server's root, without /v1: try " + strings.TrimSuffix(base, "/v1") + " (or provider: openai to use its OpenAI API)"
		}
		return "is base_url an Ollama server's root, such as http://127.0.0.1:11434?"
	})
}

// consumerError marks an error returned by the caller's fn, so that it is
// told apart from the client's own errors and returned unchanged.
type consumerError struct{ err error }

func (e consumerError) Error() string { return e.err.Error() }

// upstreamError maps an error of api.Client to a *node.UpstreamError.
func upstreamError(ctx context.Context, name string, err error) error {
	var se api.StatusError
	if errors.As(err, &se) {
		msg := se.ErrorMessage
		if msg == "" {
			msg = se.Status
		}
		return &node.UpstreamError{Node: name, Kind: node.KindStatus, Status: se.StatusCode, Message: msg, Err: err}
	}
	var ae api.AuthorizationError
	if errors.As(err, &ae) {
		return &node.UpstreamError{Node: name, Kind: node.KindStatus, Status: ae.StatusCode, Message: "unauthorized", Err: err}
	}
	var me *streamError
	if errors.As(err, &me) {
		return &node.UpstreamError{Node: name, Kind: node.KindProtocol, Message: me.msg, Err: err}
	}
	// Transport failures, a cut stream (io.ErrUnexpectedEOF), a line that
	// is not JSON: TransportError tells a timeout or a caller that went
	// away from a broken upstream.
	return node.TransportError(ctx, name, err)
}

// ToChatRequest translates a chain request to Ollama's, always streamed.
//
// The "developer" role becomes "system", which Ollama's templates know. An
// assistant message's reasoning goes back as "thinking", which Ollama's
// templates use or drop as the model needs (gpt-oss wants it back between
// tool calls). A
// tool message gets tool_name from the assistant call it answers when it
// does not carry one. Tool-call arguments that are not a JSON object are
// sent as an empty object: Ollama wants an object, and the model's mistake
// already is in the trace. Think is left unset so that each model runs with
// its own default: true fails on models that cannot think, false would
// silence the reasoning of models that rely on it, and either way the
// reasoning comes back apart from the content (native "thinking" or <think>
// tags, both handled by Stream).
func ToChatRequest(req *node.Request) (*api.ChatRequest, error) {
	stream := true
	out := &api.ChatRequest{
		Model:    req.Model,
		Stream:   &stream,
		Messages: make([]api.Message, 0, len(req.Messages)),
		Options:  options(req.Params),
		Format:   req.Params.Format,
	}
	var toolNames map[string]string // call ID → tool name
	for _, m := range req.Messages {
		am := api.Message{Role: m.Role, Content: m.Content, Thinking: m.Reasoning}
		for _, p := range m.Parts {
			// The chain sends a node only the parts it takes
			// (chain.Engine.takesPart): an image's bytes.
			if p.Kind != node.PartImage || p.Data == "" {
				return nil, fmt.Errorf("%s: Ollama takes images as bytes only", cmp.Or(p.Param, "a "+p.Kind+" part"))
			}
			img, err := base64.StdEncoding.DecodeString(p.Data)
			if err != nil {
				return nil, fmt.Errorf("%s: image: %w", cmp.Or(p.Param, "an image part"), err)
			}
			am.Images = append(am.Images, img)
		}
		switch m.Role {
		case "developer":
			am.Role = "system"
		case "assistant":
			for i, tc := range m.ToolCalls {
				am.ToolCalls = append(am.ToolCalls, api.ToolCall{
					ID: tc.ID,
					Function: api.ToolCallFunction{
						Index:     i,
						Name:      tc.Name,
						Arguments: ToArguments(tc.Arguments),
					},
				})
				if tc.ID != "" {
					if toolNames == nil {
						toolNames = map[string]string{}
					}
					toolNames[tc.ID] = tc.Name
				}
			}
		case "tool":
			am.ToolCallID = m.ToolCallID
			am.ToolName = m.Name
			if am.ToolName == "" {
				am.ToolName = toolNames[m.ToolCallID]
			}
		}
		out.Messages = append(out.Messages, am)
	}
	for _, t := range req.Tools {
		params := api.ToolFunctionParameters{Type: "object"}
		if len(t.Parameters) > 0 && string(t.Parameters) != "null" {
			if err := json.Unmarshal(inlineRefs(t.Parameters), &params); err != nil {
				return nil, fmt.Errorf("tool %q: parameters: %w", t.Name, err)
			}
		}
		if params.Properties == nil {
			params.Properties = api.NewToolPropertiesMap()
		}
		out.Tools = append(out.Tools, api.Tool{
			Type:     "function",
			Function: api.ToolFunction{Name: t.Name, Description: t.Description, Parameters: params},
		})
	}
	return out, nil
}

// options maps the sampling parameters to Ollama's option names; nil when
// none is set, so the model's own defaults apply.
func options(p node.Params) map[string]any {
	opts := map[string]any{}
	if p.Temperature != nil {
		opts["temperature"] = *p.Temperature
	}
	if p.TopP != nil {
		opts["top_p"] = *p.TopP
	}
	if p.TopK != nil {
		opts["top_k"] = *p.TopK
	}
	if p.MaxTokens != nil {
		opts["num_predict"] = *p.MaxTokens
	}
	if len(p.Stop) > 0 {
		opts["stop"] = p.Stop
	}
	if p.Seed != nil {
		opts["seed"] = *p.Seed
	}
	if len(opts) == 0 {
		return nil
	}
	return opts
}

// ToArguments decodes a tool call's JSON text into Ollama's ordered
// arguments, keeping the model's key order; anything but a JSON object gives
// an empty object.
func ToArguments(text string) api.ToolCallFunctionArguments {
	// The client's decoder accepts null and leaves a nil map that encodes
	// as null again, so only text that opens an object is decoded.
	t := strings.TrimSpace(text)
	var args api.ToolCallFunctionArguments
	if !strings.HasPrefix(t, "{") || json.Unmarshal([]byte(t), &args) != nil {
		return api.NewToolCallFunctionArguments()
	}
	return args
}

// Stream turns the lines of one Ollama chat stream into chunks. The zero
// value is ready; a Stream serves one call.
type Stream struct {
	// MaxArgs, when positive, keeps at most MaxArgs+1 bytes of a call's
	// arguments (see node.Request.MaxArgsBytes).
	MaxArgs int
	// MaxCallsBytes, when positive, caps the arguments, IDs and names of
	// all the calls together: calls that would go past it are dropped.
	MaxCallsBytes int
	// total counts the bytes of the calls kept.
	total int
	think node.ThinkSplitter
	calls []node.ToolCall
	done  bool
}

// Add translates one line. Reasoning comes from the native "thinking" field
// and from <think> tags at the head of the content, for models that have no
// thinking support in Ollama and write their reasoning inline. Tool calls
// are kept for the last chunk, the one of the done line.
func (s *Stream) Add(resp *api.ChatResponse) node.Chunk {
	var c node.Chunk
	c.Content, c.Reasoning = s.think.Feed(resp.Message.Content)
	if th := resp.Message.Thinking; th != "" {
		c.Reasoning = th + c.Reasoning
	}
	for _, tc := range resp.Message.ToolCalls {
		if len(s.calls) >= maxToolCalls {
			break
		}
		c := FromToolCall(tc)
		if s.MaxArgs > 0 && len(c.Arguments) > s.MaxArgs+1 {
			c.Arguments = c.Arguments[:s.MaxArgs+1]
		}
		// The ID and the name count with the arguments: a hostile
		// server can make them as long.
		size := len(c.ID) + len(c.Name) + len(c.Arguments)
		if s.MaxCallsBytes > 0 && s.total+size > s.MaxCallsBytes {
			break
		}
		s.total += size
		s.calls = append(s.calls, c)
	}
	if !resp.Done {
		return c
	}
	s.done = true
	c.Model = resp.Model
	c.Load = resp.LoadDuration
	content, reasoning := s.think.Flush()
	c.Content += content
	c.Reasoning += reasoning
	c.ToolCalls = s.calls
	switch {
	case len(s.calls) > 0:
		c.FinishReason = "tool_calls"
	case resp.DoneReason == "length":
		c.FinishReason = "length"
	default:
		c.FinishReason = "stop"
	}
	if resp.PromptEvalCount > 0 || resp.EvalCount > 0 {
		c.Usage = &node.Usage{
			PromptTokens:     resp.PromptEvalCount,
			CompletionTokens: resp.EvalCount,
			TotalTokens:      resp.PromptEvalCount + resp.EvalCount,
		}
	}
	return c
}

// Done reports whether the done line was seen.
func (s *Stream) Done() bool { return s.done }

// FromToolCall translates a whole Ollama tool call. A missing ID is replaced
// by a proxy-made unique one, since results are matched to calls by ID.
func FromToolCall(tc api.ToolCall) node.ToolCall {
	id := tc.ID
	if id == "" {
		id = NewCallID()
	}
	args, err := json.Marshal(tc.Function.Arguments)
	if err != nil {
		args = []byte("{}")
	}
	return node.ToolCall{ID: id, Name: tc.Function.Name, Arguments: string(args)}
}

// NewCallID returns a unique tool call ID in OpenAI's style.
func NewCallID() string { return "call_" + rand.Text() }
