package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"chainproxy/config"
	"chainproxy/internal/jsonx"
	"chainproxy/internal/origin"
	"chainproxy/internal/redact"
)

// Tool is a function offered to a model.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is a JSON schema, valid JSON or empty: tools are checked
	// where they come in (the client's request, the registry, the
	// configuration), not again by backends on every call.
	Parameters json.RawMessage `json:"parameters,omitempty"`
	// Declaration is the tool as backends send it (ToolDeclaration),
	// encoded once: the engine sets it on the server tools, whose
	// declarations do not change from call to call, so that a schema is
	// not encoded again on every call (most of encoding a simple-mode
	// request). Empty for a client's tools, which backends encode.
	Declaration json.RawMessage `json:"-"`
}

// emptyParameters is sent for a tool declared without parameters: OpenAI
// accepts a function without them, but several compatible servers do not.
var emptyParameters = json.RawMessage(`{"type":"object","properties":{}}`)

// ToolDeclaration encodes t as OpenAI's function tool,
// {"type":"function","function":{"name","description","parameters"}}, the
// shape Ollama's API takes too. The parameters are written as they are:
// valid JSON by Tool's contract.
func ToolDeclaration(t Tool) json.RawMessage {
	params := emptyParameters
	if len(t.Parameters) > 0 && string(t.Parameters) != "null" {
		params = t.Parameters
	}
	b := make([]byte, 0, 64+len(t.Name)+len(t.Description)+len(params))
	b = append(b, `{"type":"function","function":{"name":`...)
	b = jsonx.AppendString(b, t.Name)
	if t.Description != "" {
		b = append(b, `,"description":`...)
		b = jsonx.AppendString(b, t.Description)
	}
	b = append(b, `,"parameters":`...)
	b = append(b, params...)
	return append(b, "}}"...)
}

// Params are the sampling options forwarded to a model. Nil means unset.
type Params struct {
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	// TopK is sent to Ollama nodes only: OpenAI's API has no top_k, and
	// some OpenAI-compatible servers refuse fields they do not know.
	TopK      *int     `json:"top_k,omitempty"`
	MaxTokens *int     `json:"max_tokens,omitempty"`
	Stop      []string `json:"stop,omitempty"`
	Seed      *int64   `json:"seed,omitempty"`
	// Format is Ollama's format: "json" or a JSON schema the answer must
	// follow (an OpenAI node gets it as response_format). Only the
	// answering stage's calls carry it: earlier stages write notes.
	Format json.RawMessage `json:"format,omitempty"`
}

// Request is one model call.
type Request struct {
	// Model is the upstream model name.
	Model    string
	Messages []Message
	Tools    []Tool
	Params   Params
	// Whole asks for the answer in one piece: nobody is watching it stream,
	// and an unstreamed answer costs the upstream and the proxy much less.
	// Backends may still stream; they deliver the same chunks either way.
	Whole bool
	// Idle, when set, is called on Chat's goroutine each time the backend
	// is about to wait for the upstream (a read with nothing buffered, a
	// scripted delay). A caller that holds back what it writes to its
	// client, to send chunks that arrived together in one write, sends it
	// then: nothing is held while the upstream is silent.
	Idle func()
	// KeepAlive is how long the upstream keeps the model loaded after the
	// call (Ollama's keep_alive: negative for ever, 0 unload); nil leaves
	// the upstream's default. Backends without the notion ignore it.
	KeepAlive *time.Duration
	// NumCtx, when positive, is the window the upstream should run the
	// model with (Ollama's options.num_ctx): the node's configured
	// context_window, the same on every call so that Ollama never reloads
	// the model for it. Backends without the notion ignore it.
	NumCtx int
	// NoThink asks the model not to think (Ollama's think: false): set
	// for a summary, whose answer cap a thinking model would spend on its
	// reasoning, and only for a model that reports thinking, since others
	// may refuse the field. Backends without the notion ignore it.
	NoThink bool
	// MaxArgsBytes, when positive, caps what a backend keeps of one tool
	// call's arguments: at most MaxArgsBytes+1 bytes, so that a call over
	// the cap (tools.max_args_bytes) is known by its length and refused.
	MaxArgsBytes int
	// MaxCallsBytes, when positive, caps the arguments, IDs and names of all the
	// answer's tool calls together (nodes[].max_output_bytes): a call
	// that would go past it is dropped, and the backend reads no more.
	MaxCallsBytes int
	// Host, when set, carries the host (base URL) of a node with several
	// (Hosts) from one call of a stage to the next: the backend uses it
	// again when it can, so that the model stays warm and the server's
	// prompt cache is reused, and writes there the host it used. Backends
	// of one host ignore it.
	Host *string
}

// IdleReader returns r, calling idle before each Read when idle is set: a
// buffered reader reads from r only once what it holds is used up, so that
// is when the backend is about to wait. See Request.Idle.
func IdleReader(r io.Reader, idle func()) io.Reader {
	if idle == nil {
		return r
	}
	return &idleReader{r, idle}
}

type idleReader struct {
	r    io.Reader
	idle func()
}

func (r *idleReader) Read(p []byte) (int, error) {
	r.idle()
	return r.r.Read(p)
}

// Chunk is a piece of a model's streamed answer. Backends deliver content and
// reasoning as they arrive, and tool calls only once complete (fragments
// assembled by index).
type Chunk struct {
	Content   string
	Reasoning string
	ToolCalls []ToolCall
	// FinishReason is set on the last chunk: "stop", "length", "tool_calls"
	// or "content_filter".
	FinishReason string
	// Usage is set on the last chunk when the upstream reported it.
	Usage *Usage
	// Cut, on a last chunk, says why the proxy ended the call itself
	// (its output reached nodes[].max_output_bytes).
	Cut string
	// Model, on a last chunk, is the model that answered, as the upstream
	// names it (Ollama's done line, an OpenAI-compatible answer's model):
	// the exported span's gen_ai.response.model.
	Model string
	// Load, on a last chunk, is how long the upstream took to have the
	// model ready for the call, as it reports it: Ollama's load_duration,
	// from the request's arrival to its model's runner being ready, so a
	// load and the wait for the models it evicts are in it, and a few
	// milliseconds of its own work when the model was loaded already
	// (LoadThreshold). 0 when the upstream reports none, as
	// OpenAI-compatible servers do not.
	Load time.Duration
}

// LoadThreshold is the Load at or above which a call counts as having
// loaded its model (the trace's load, chainproxy_model_loads_total, eval's
// model_loads). Ollama reports a load_duration on every answer: for a
// model already loaded it is the time to read the request and the model's
// manifest and to be handed the runner, a few milliseconds (v0.17.4,
// server/routes.go ChatHandler: checkpointLoaded − checkpointStart; 1 to
// 10 ms measured on a tiny model), whereas starting a runner and reading
// the weights takes a few hundred milliseconds even for a tiny model (280
// to 300 ms measured).
const LoadThreshold = 100 * time.Millisecond

// Empty reports whether c carries nothing: backends skip such chunks.
func (c Chunk) Empty() bool {
	return c.Content == "" && c.Reasoning == "" && c.ToolCalls == nil && c.FinishReason == "" && c.Usage == nil
}

// Usage counts tokens as OpenAI reports them.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Add sums two usages.
func (u Usage) Add(v Usage) Usage {
	return Usage{u.PromptTokens + v.PromptTokens, u.CompletionTokens + v.CompletionTokens, u.TotalTokens + v.TotalTokens}
}

// Sub is u less v.
func (u Usage) Sub(v Usage) Usage {
	return Usage{u.PromptTokens - v.PromptTokens, u.CompletionTokens - v.CompletionTokens, u.TotalTokens - v.TotalTokens}
}

// Backend is a model endpoint. Chat streams the answer to fn, which returns
// an error to stop the stream; Chat returns once the answer is complete,
// failed or ctx is done.
type Backend interface {
	Chat(ctx context.Context, req *Request, fn func(Chunk) error) error
}

// Prober is the optional capability of a backend that can check that its
// upstream answers, without running a model.
type Prober interface {
	Probe(ctx context.Context) error
}

// Kinds of UpstreamError.
const (
	// KindConnect: the connection was refused or did not open in time; the
	// node is treated as offline.
	KindConnect = "connect"
	// KindTimeout: the call outlived its deadline after connecting.
	KindTimeout = "timeout"
	// KindStatus: the upstream answered with an HTTP error status.
	KindStatus = "status"
	// KindProtocol: the upstream answered something that is not its protocol,
	// or reported an error inside the stream.
	KindProtocol = "protocol"
)

// UpstreamError is a failed call to a node.
type UpstreamError struct {
	Node    string
	Kind    string
	Status  int // HTTP status for KindStatus
	Message string
	Err     error
	// URL is the address that answered, when the answer says the node's
	// base_url is wrong (a 404 on the API's own path); Hint says what to
	// change. Both go into the message.
	URL, Hint string
	// RetryAfter is how long the upstream asked to be left alone, from
	// the Retry-After of its 429 (OpenAI, OpenRouter, Groq and vLLM's
	// rate limiters send one): the client is told the same, so that its
	// retries wait as long and no longer.
	RetryAfter time.Duration
}

// RetryAfter reads a Retry-After header as seconds or an HTTP date (RFC
// 9110, section 10.2.3); zero when it is absent, malformed or past.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func (e *UpstreamError) Error() string {
	msg := e.Message
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	if looksHTML(msg) {
		// A web server's error page, not the API's: its markup helps no
		// client and can run to kilobytes.
		msg = "an HTML page (not shown)"
	}
	if e.URL != "" {
		msg = e.URL + " answered " + msg
	}
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	// An upstream may echo the credential it refused, and a transport
	// error names the URL: this text reaches clients, traces and logs.
	msg = redact.Text(msg)
	if e.Status != 0 {
		return fmt.Sprintf("node %s: upstream %s error (HTTP %d): %s", e.Node, e.Kind, e.Status, msg)
	}
	return fmt.Sprintf("node %s: upstream %s error: %s", e.Node, e.Kind, msg)
}

// NameWrongPath returns err with the URL that answered (baseURL + path) and
// hint(base) as its hint when err is a WrongPath 404, so that the message
// says which base_url to fix and how; other errors are returned as they are.
func NameWrongPath(err error, baseURL, path string, hint func(base string) string) error {
	var ue *UpstreamError
	if !errors.As(err, &ue) || !ue.WrongPath() {
		return err
	}
	base := strings.TrimRight(baseURL, "/")
	ue.URL, ue.Hint = base+path, hint(base)
	return ue
}

// looksHTML reports whether an error body is an HTML page.
func looksHTML(s string) bool {
	s = strings.TrimSpace(s)
	if len(s) > 512 {
		s = s[:512]
	}
	s = strings.ToLower(s)
	return strings.HasPrefix(s, "<!doctype html") || strings.HasPrefix(s, "<html") || strings.Contains(s, "<body") || strings.Contains(s, "<head")
}

// WrongPath reports whether a status error says the request reached a
// server that has no such path (a 404 whose body is not the API's own JSON
// error): the sign of a base_url with a missing or extra path segment.
func (e *UpstreamError) WrongPath() bool {
	if e.Kind != KindStatus || e.Status != http.StatusNotFound {
		return false
	}
	m := strings.ToLower(strings.TrimSpace(e.Message))
	return m == "" || looksHTML(m) || strings.Contains(m, "404 page not found") || strings.Contains(m, "not found") && !strings.Contains(m, "model")
}

func (e *UpstreamError) Unwrap() error { return e.Err }

// Offline reports whether the error means the node could not be reached.
func (e *UpstreamError) Offline() bool { return e.Kind == KindConnect }

// TransportError wraps an error of an HTTP round trip to node as an
// UpstreamError with its kind. Context cancellation by the caller is returned
// as is, so that a client going away is never blamed on the node.
func TransportError(ctx context.Context, node string, err error) error {
	if err == nil {
		return nil
	}
	var ue *UpstreamError
	if errors.As(err, &ue) {
		return err
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) || errors.Is(ctx.Err(), context.Canceled) {
		return ctx.Err()
	}
	if re := origin.Cause(err); re != nil {
		// Said without the URL Go's client wraps it in: the status and
		// the target's host are what a user needs, and all that is read.
		return &UpstreamError{Node: node, Kind: KindStatus, Status: re.Status, Message: re.Error(), Err: re}
	}
	kind := KindProtocol
	var opErr *net.OpError
	var uErr *url.Error
	switch {
	case errors.As(err, &opErr) && opErr.Op == "dial":
		kind = KindConnect
	case errors.Is(err, syscall.ECONNREFUSED):
		kind = KindConnect
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		kind = KindTimeout
	case errors.As(err, &uErr) && uErr.Timeout():
		kind = KindTimeout
	}
	return &UpstreamError{Node: node, Kind: kind, Err: err}
}

// NewHTTPClient is the default HTTP client of a node's backend. Only the dial
// is bounded by node.ConnectTimeout: a node that does not connect in time is
// offline. The whole call is bounded by node.Timeout through the context,
// since a streamed answer may take minutes.
func NewHTTPClient(node config.Node) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: node.ConnectTimeout, KeepAlive: 30 * time.Second}
	t.DialContext = d.DialContext
	// The default of 2 idle connections per host would make concurrent
	// requests to one node reopen connections all the time.
	t.MaxIdleConnsPerHost = 64
	// A connection holds its read and write buffers for as long as it is
	// open, and a proxy holds one upstream connection per open stream:
	// net/http's 4 KiB each came to 8 MB for 1,000 slow streams. 1 KiB
	// costs nothing here: a request body past the buffer goes out in one
	// write from the body itself, and the backends read events and answers
	// into buffers of their own, which bufio fills directly once they are
	// the larger.
	t.ReadBufferSize, t.WriteBufferSize = 1<<10, 1<<10
	// net/http reads up to 10 MiB of response headers; an API sends a few
	// KiB, and a hostile server would make each call hold the rest.
	t.MaxResponseHeaderBytes = origin.MaxResponseHeaderBytes
	// A node's API never redirects a chat call: a 3xx is a misconfigured
	// base_url or a hostile server, and following it would send the
	// prompt and the node's key elsewhere.
	return &http.Client{Transport: boundedTransport{t}, CheckRedirect: origin.CheckRedirect(false)}
}
