// Package web is the HTTP layer: an OpenAI-compatible API
// (/v1/chat/completions, /v1/responses, /v1/models), Anthropic's Messages
// API (/v1/messages, /v1/messages/count_tokens), Ollama's API (/api/chat,
// /api/generate, /api/tags, /api/show, …), the design's /chat endpoint with its
// live event stream, health and readiness, metrics, and the embedded cockpit
// page. It is the only package that imports gin; it turns requests into
// chain.RunRequests and chain results and errors into HTTP.
package web

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/trace"

	"chainproxy/chain"
	"chainproxy/chain/node"
	chaintrace "chainproxy/chain/trace"
	"chainproxy/config"
	"chainproxy/internal/redact"
)

//go:embed static
var staticFiles embed.FS

// TraceStore keeps recent traces for GET /v1/chain/traces/{id}, and reports
// the state store's health for /readyz.
type TraceStore interface {
	// PutTrace keeps data under id. The store may keep data itself: the
	// server builds each document for the store and does not change it
	// after.
	PutTrace(ctx context.Context, id string, data []byte) error
	GetTrace(ctx context.Context, id string) ([]byte, bool, error)
	Status() string
}

// NodeSet is what the operational endpoints (/readyz, /api/ps, /metrics)
// and Ollama's model descriptions read of the configured nodes, from the
// node layer (node.Set, built by node.Build) rather than the engine that
// runs requests over them: whether each answers, what its server said of
// its model, its hosts, and whether the admission is shared. Five
// methods, because three endpoints read them and one Set has them all.
type NodeSet interface {
	// Probe checks that node answers and has its model, and remembers
	// what its server says.
	Probe(ctx context.Context, node string) error
	Capabilities(node string) (caps []string, known bool)
	// Window is the context window node's prompts are fitted to, 0
	// when unknown.
	Window(node string) int
	Hosts(node string) []node.HostState
	AdmissionStatus() string
}

var _ NodeSet = (*node.Set)(nil)

// Options are the server's collaborators and tunables.
type Options struct {
	Config *config.Config
	Engine *chain.Engine
	// Nodes are the configured nodes (node.Build's Set, the one the
	// engine runs on); nil takes the engine's.
	Nodes NodeSet
	// Traces keeps the traces; when it is also a TraceFeed (Redis), the
	// trace list shows the chains of every replica sharing it.
	Traces TraceStore
	Logger *slog.Logger
	// Metrics, when set, records Prometheus metrics and serves /metrics.
	Metrics *Metrics
	// Keepalive is the SSE comment interval while no content flows
	// (default 4s, so that a comment goes out at least every 5 s).
	Keepalive time.Duration
	// LogPrompts logs prompt text at debug level.
	LogPrompts bool
	// Redactor masks the configured secrets in error answers and
	// /readyz; when it knows none, one is built from Config.
	Redactor redact.Redactor
	// Tracing, when set (telemetry on), starts a span per request and
	// makes its trace id the chain's; nil costs nothing.
	Tracing trace.TracerProvider
}

// Server serves the proxy's HTTP API.
type Server struct {
	cfg        *config.Config
	engine     *chain.Engine
	nodes      NodeSet
	traces     TraceStore
	log        *slog.Logger
	metrics    *Metrics
	keepalive  time.Duration
	logPrompts bool
	keys       [][]byte
	// admins are the keys that see every caller's traces (server.admin_keys).
	admins [][]byte
	// hub lists recent chains for GET /v1/chain/traces: the engine's
	// Watcher, and with a TraceFeed for traces, every replica's chains.
	hub      *traceHub
	loopback bool            // bound to loopback only: Host is checked
	redact   redact.Redactor // masks configured secrets in error text
	prompts  promptMemo      // the stored traces' prompts, masked
	// drained ends when streams must end (Drain); drain ends it.
	drained   context.Context
	drain     context.CancelFunc
	drainOnce sync.Once
	handler   http.Handler
	models    []byte // the /v1/models body, static for the process
	// model is each listed model's GET /v1/models/{id} body.
	model map[string][]byte
	// started is when the server was built: the modified time Ollama's
	// model listings show.
	started time.Time
	// tracer starts the request spans; nil when telemetry is off.
	tracer trace.Tracer
}

// New builds the server's handler tree.
func New(o Options) *Server {
	s := &Server{started: time.Now().UTC(), cfg: o.Config, engine: o.Engine, traces: o.Traces, log: o.Logger, metrics: o.Metrics, keepalive: o.Keepalive, logPrompts: o.LogPrompts}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.keepalive <= 0 {
		s.keepalive = 4 * time.Second
	}
	for _, k := range o.Config.Server.APIKeys {
		s.keys = append(s.keys, []byte(k))
	}
	for _, k := range o.Config.Server.AdminKeys {
		s.admins = append(s.admins, []byte(k))
	}
	s.hub = newTraceHub(o.Config.Chain.ResumeTTL)
	if o.Tracing != nil {
		s.tracer = o.Tracing.Tracer(tracerScope)
	}
	if o.Engine != nil {
		o.Engine.SetWatcher(s.hub)
	}
	s.nodes = o.Nodes
	if s.nodes == nil && o.Engine != nil {
		s.nodes = o.Engine.NodeSet()
	}
	s.redact = o.Redactor
	if s.redact.Empty() {
		s.redact = redact.FromConfig(o.Config)
	}
	s.prompts = promptMemo{redact: s.redact.String, m: map[string]string{}}
	s.models, s.model = s.modelList()
	s.loopback = LoopbackAddr(o.Config.Server.Addr)
	s.drained, s.drain = context.WithCancel(context.Background())
	if feed, ok := o.Traces.(TraceFeed); ok {
		// Replicas on one Redis list each other's chains too.
		s.hub.shareWith(s.drained, feed, s.log)
	}

	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.Use(s.recoverer, s.browserGuard)
	r.NoRoute(func(c *gin.Context) { s.reject(c, "route", notServed(c.Request.URL.Path)) })
	r.NoMethod(func(c *gin.Context) { s.reject(c, "method", errMethod) })

	api := r.Group("/", s.auth)
	api.POST("/v1/chat/completions", s.chatCompletions)
	api.POST("/v1/responses", s.responses)
	api.GET("/v1/responses/:id", s.getResponse)
	// Anthropic's Messages API, for Claude Code and the Anthropic SDKs.
	api.POST("/v1/messages", s.messages)
	api.POST("/v1/messages/count_tokens", s.countTokens)
	api.GET("/v1/models", s.listModels)
	// Model ids hold slashes (chain/auto): the id is the rest of the path.
	api.GET("/v1/models/*id", s.getModel)
	api.GET("/v1/chain/traces", s.listTraces)
	api.GET("/v1/chain/traces/:id", s.getTrace)
	// Ollama's own API, for the clients that speak only it (ollama run,
	// Open WebUI's Ollama mode, ollama-js, editor plugins).
	api.POST("/api/chat", s.ollamaChat)
	api.POST("/api/generate", s.ollamaGenerate)
	api.POST("/api/show", s.ollamaShow)
	api.POST("/api/pull", s.ollamaPull)
	api.GET("/api/tags", s.ollamaTags)
	api.GET("/api/ps", s.ollamaPs)
	api.GET("/api/version", s.ollamaVersionHandler)
	api.POST("/chat", s.chat)
	// Ollama's clients check that the server is up with HEAD / first.
	r.HEAD("/", func(c *gin.Context) { c.Status(http.StatusOK) })
	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	// /readyz and /metrics show the topology and traffic: behind the key
	// unless server.public_metrics.
	ops := r.Group("/")
	if !s.cfg.Server.PublicMetrics {
		ops.Use(s.auth)
	}
	ops.GET("/readyz", s.readyz)
	if s.metrics != nil {
		s.metrics.watchNodes(s.engine, s.cfg.Nodes, s.nodes)
		ops.GET("/metrics", gin.WrapH(s.metrics.Handler()))
	}
	sub, _ := fs.Sub(staticFiles, "static")
	files := http.FileServerFS(sub)
	r.GET("/", gin.WrapH(files))
	r.GET("/static/*path", func(c *gin.Context) {
		c.Request.URL.Path = c.Param("path")
		files.ServeHTTP(c.Writer, c.Request)
	})
	s.handler = r
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// recoverer turns a panic into a 500 in OpenAI's shape, so one bad request
// never takes the server down. http.ErrAbortHandler is re-raised: it is how
// a handler aborts a response already under way.
func (s *Server) recoverer(c *gin.Context) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("panic", "req_id", reqID(c), "panic", v)
			if !c.Writer.Written() {
				s.fail(c, errors.New("internal error"))
			}
			c.Abort()
		}
	}()
	c.Next()
}

// statusFor is the package's statusFor with the configured secrets masked
// in the message: every error answer, whole or at the end of a stream,
// goes through it.
func (s *Server) statusFor(err error) (int, errorObject) {
	status, obj := statusFor(err)
	obj.Message = s.redact.String(obj.Message)
	return status, obj
}

// fail writes err as OpenAI error JSON with its status, or in Ollama's
// shape on Ollama's paths.
func (s *Server) fail(c *gin.Context, err error) {
	status, obj := s.statusFor(err)
	if status == StatusClientClosed {
		s.log.Info("client closed request", "req_id", reqID(c))
		c.Status(status)
		return
	}
	var qe *node.QueueFullError
	var ue *node.UpstreamError
	switch {
	case errors.As(err, &qe):
		c.Header("Retry-After", itoa(int(qe.RetryAfter/time.Second)))
	case status == http.StatusTooManyRequests && errors.As(err, &ue) && ue.RetryAfter > 0:
		// The node's rate limit, passed on: a client that retried at
		// once would only be refused again.
		c.Header("Retry-After", itoa(int((ue.RetryAfter+time.Second-1)/time.Second)))
	}
	if fl := asFailure(err); fl != nil && fl.Trace.Mode != "" {
		c.Header("X-Chain-Mode", fl.Trace.Mode)
	}
	if status >= 500 {
		s.log.Warn("request failed", "req_id", reqID(c), "status", status, "err", err)
	}
	if ollamaPath(c.Request.URL.Path) {
		// Ollama's clients read {"error": "…"}; an OpenAI error object
		// there would reach their users as raw JSON.
		c.JSON(status, ollamaErrorBody{Error: obj.Message})
		return
	}
	if anthropicPath(c.Request.URL.Path) {
		c.JSON(anthropicStatus(err, status, obj))
		return
	}
	c.JSON(status, errorBody{Error: obj})
}

// readBody reads the request body whole, capped at server.max_body_bytes.
// Reading it fully before any upstream call keeps the request and response
// from racing on one connection.
func (s *Server) readBody(c *gin.Context) ([]byte, error) {
	// The buffer grows with what arrives, never from Content-Length: a
	// client may declare 10 MB and send one byte. The read deadline closes a
	// body sent too slowly, so an idle connection holds no memory for long.
	var buf bytes.Buffer
	if d := s.cfg.Server.ReadTimeout; d > 0 {
		_ = http.NewResponseController(c.Writer).SetReadDeadline(time.Now().Add(d))
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(c.Writer, c.Request.Body, s.cfg.Server.MaxBodyBytes))
	body := buf.Bytes()
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &httpError{http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large",
				"request body larger than " + itoa(int(mbe.Limit)) + " bytes"}
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, errSlowBody
		}
		return nil, invalid("", "reading request body: %v", err)
	}
	// The write side keeps no deadline: answers may stream for minutes.
	_ = http.NewResponseController(c.Writer).SetReadDeadline(time.Time{})
	if !fewValues(body, maxValues) {
		return nil, errManyValues
	}
	return body, nil
}

// reqID is the id of a request's log lines: the trace id begin gave it,
// or, for a request refused before begin (a wrong key, an unknown path,
// count_tokens, a cross-origin call), one made now and kept, so that
// every line of a request, a rejected one too, carries one.
func reqID(c *gin.Context) string {
	if id := c.GetString("req_id"); id != "" {
		return id
	}
	id := newTraceID()
	c.Set("req_id", id)
	return id
}

// newTraceID makes a chain trace id of W3C's form (32 lowercase hex, 16
// random bytes), so that it is also the id of the request's exported
// trace when telemetry is on (see begin).
func newTraceID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// conversationKey scopes the anti-loop's memory: the client's session header
// or user field when given, else the first user message, which stays the
// same for every request of one conversation. It is a fixed-length hash of
// the caller's identity and that value, so a caller cannot reach another
// key's state by sending its session id, and a long value costs no store
// memory.
func conversationKey(c *gin.Context, user string, msgs []chain.Message) string {
	h := sha256.New()
	io.WriteString(h, caller(c))
	h.Write([]byte{0})
	switch v := header(c, hSession); {
	case v != "":
		io.WriteString(h, "s:"+v)
	case user != "":
		io.WriteString(h, "u:"+user)
	default:
		io.WriteString(h, "h:")
		for _, m := range msgs {
			if m.Role == "user" {
				io.WriteString(h, m.Content)
				break
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Request headers the proxy reads on every request, in canonical form
// (TestHeaderNames): header looks them up as they are.
const (
	hAuthorization = "Authorization"
	hAPIKey        = "X-Api-Key"
	hOrigin        = "Origin"
	hUserAgent     = "User-Agent"
	hSession       = "X-Chain-Session"
	hMode          = "X-Chain-Mode"
	hCategory      = "X-Chain-Category"
	hPriority      = "X-Chain-Priority"
	hRender        = "X-Chain-Render"
)

// header is the first value of the request header name, which must be
// canonical. Gin's GetHeader canonicalizes the name on every call, about
// 600 instructions, and a request reads up to nine of them.
func header(c *gin.Context, name string) string {
	if v := c.Request.Header[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// applyHeaders copies the chain's request headers into req.
func applyHeaders(c *gin.Context, req *chain.RunRequest) error {
	if err := checkSession(header(c, hSession)); err != nil {
		return err
	}
	req.Caller = caller(c)
	req.Client = clientName(header(c, hUserAgent))
	switch m := strings.ToLower(header(c, hMode)); m {
	case "", "auto":
	case chain.ModeSimple, chain.ModeReflexive:
		req.ForcedMode = m
	default:
		return invalid("X-Chain-Mode", "header X-Chain-Mode %q is not one of auto, simple, reflexive", m)
	}
	req.Category = header(c, hCategory)
	req.Batch = strings.EqualFold(header(c, hPriority), "batch")
	return nil
}

// storeTrace keeps the trace of run (the request) for GET
// /v1/chain/traces/{id}, under the caller's scope, and tells the trace list how the request ended (runErr is
// the run's error). traceJSON is tr encoded, when it already is. The list
// hears of the end after the trace is stored, so that a reader told of it
// finds the trace. A chain whose client went away is stored too, with its
// stages so far, cancelled (see traceHub.end).
func (s *Server) storeTrace(ctx context.Context, run *chain.RunRequest, who, id string, tr *chain.Trace, traceJSON []byte, runErr error) {
	sum, kept, listed := s.hub.end(run, who, id, tr, runErr)
	defer s.hub.stored(who, id)
	if kept != tr {
		tr, traceJSON = kept, nil
	}
	if s.traces == nil || tr == nil {
		return
	}
	var err error
	if tr.HasPrompts() {
		// The stored trace also says what each model call was sent.
		full := tr.WithPrompts(s.prompts.String)
		traceJSON, err = marshal(&full)
	} else if traceJSON == nil {
		traceJSON, err = marshal(tr)
	}
	var head []byte
	if err == nil {
		if !listed {
			sum = traceSummary{TraceID: id, Status: chaintrace.TraceStatus(tr, runErr), Mode: tr.Mode}
			sum.Stages, sum.Tokens = chaintrace.Badges(tr)
		}
		head, err = marshal(&sum)
	}
	if err == nil {
		// The list's summary of the chain, then "chain": trace.
		err = s.traces.PutTrace(context.WithoutCancel(ctx), traceKey(who, id), chaintrace.TraceDocument(head, traceJSON))
	}
	if err != nil {
		s.log.Warn("storing trace", "req_id", id, "err", err)
	}
}

// promptMemo masks the prompts a stored trace shows, remembering the texts
// it masked last: every simple or chain request sends the same system
// prompt, and a conversation resends its history, so most texts were
// masked by an earlier request (masking looks for every secret and pattern
// in up to chaintrace.PromptCap bytes a message). At most promptMemoCap texts
// are kept, copies, so that a key does not hold a request's body.
type promptMemo struct {
	redact func(string) string
	mu     sync.Mutex
	m      map[string]string
}

const (
	promptMemoCap = 256
	promptMemoMin = 128 // shorter texts are masked again: cheaper than a copy
)

func (p *promptMemo) String(s string) string {
	if len(s) < promptMemoMin {
		return p.redact(s)
	}
	p.mu.Lock()
	c, ok := p.m[s]
	p.mu.Unlock()
	if ok {
		return c
	}
	c = p.redact(s)
	k := strings.Clone(s)
	if c == s {
		c = k // nothing masked: c is s, which may be part of a request body
	}
	p.mu.Lock()
	if len(p.m) >= promptMemoCap {
		clear(p.m)
	}
	p.m[k] = c
	p.mu.Unlock()
	return c
}

// getTrace serves GET /v1/chain/traces/{id}: the stored trace, or for a
// chain still running, its stages so far (status "running"; of another
// replica's chain, the stages its summary has). A key finds its own
// traces; an admin key finds any the list still holds, from any replica.
func (s *Server) getTrace(c *gin.Context) {
	id := c.Param("id")
	who, all := caller(c), c.GetBool("admin")
	if sum, tr, ok := s.hub.running(who, all, id); ok {
		c.JSON(http.StatusOK, struct {
			traceSummary
			Chain *chain.Trace `json:"chain"`
		}{sum, tr})
		return
	}
	notFound := &httpError{http.StatusNotFound, "invalid_request_error", "trace_not_found", "trace " + id + " not found (only recent traces are kept)"}
	if s.traces == nil {
		s.fail(c, notFound)
		return
	}
	if owner, ok := s.hub.owner(who, all, id); ok && all {
		who = owner
	}
	data, ok, err := s.traces.GetTrace(c.Request.Context(), traceKey(who, id))
	if err != nil {
		s.fail(c, err)
		return
	}
	if !ok {
		s.fail(c, notFound)
		return
	}
	c.Data(http.StatusOK, "application/json", s.hub.abandonStored(data))
}

// listTraces serves GET /v1/chain/traces: the recent chains the caller may
// see (its own; every caller's for an admin key), run on any replica
// sharing the store, oldest first, as JSON;
// or, asked with Accept: text/event-stream, as a live stream of "trace"
// events (one per chain, then one each time a chain starts a stage or
// ends), with a "ready" event after the chains already listed.
func (s *Server) listTraces(c *gin.Context) {
	who, all := caller(c), c.GetBool("admin")
	// The other replicas' chains, as the store has them now; their
	// changes are heard as they come.
	s.hub.resync(c.Request.Context())
	if !strings.Contains(c.GetHeader("Accept"), "text/event-stream") {
		c.JSON(http.StatusOK, gin.H{"object": "list", "data": s.hub.list(who, all)})
		return
	}
	// Subscribed before the list is read: a chain that changes in between
	// is sent twice, never missed.
	sub := s.hub.subscribe(who, all)
	defer s.hub.unsubscribe(sub)
	sse := newSSE(c.Writer)
	sse.start()
	send := func(sums []traceSummary) error {
		for i := range sums {
			b, err := marshal(&sums[i])
			if err != nil {
				return err
			}
			sse.hold = true
			if err := sse.event("trace", b); err != nil {
				return err
			}
		}
		sse.hold = false
		return sse.flush()
	}
	if send(s.hub.list(who, all)) != nil || sse.event("ready", []byte("{}")) != nil {
		return
	}
	tick := time.NewTicker(s.keepalive)
	defer tick.Stop()
	// The loop ends when the client goes, or the server drains.
	for {
		var err error
		select {
		case <-c.Request.Context().Done():
			return
		case <-s.drained.Done():
			return
		case <-sub.wake:
			err = send(s.hub.take(sub))
		case <-tick.C:
			s.hub.sweep()
			if time.Since(sse.last) >= s.keepalive {
				err = sse.comment("keepalive")
			}
		}
		if err != nil {
			return
		}
	}
}

// clientName is a User-Agent as the trace list shows it: capped, printable.
func clientName(ua string) string {
	ua = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return -1
		}
		return r
	}, ua)
	if len(ua) > 120 {
		ua = strings.ToValidUTF8(ua[:120], "") + "…"
	}
	return ua
}

// traceKey scopes a trace id to its caller (chaintrace.TraceKey, which proxy
// eval writes under too): another key looks up another name and gets 404,
// as if the trace did not exist.
func traceKey(who, id string) string { return chaintrace.TraceKey(who, id) }

// listedModel is one entry of /v1/models, in OpenAI's shape (id, object,
// created, owned_by) and Anthropic's (type, display_name, created_at) at
// once: Claude Code and the Anthropic SDKs read the same route.
type listedModel struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	Type        string `json:"type"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
	Lifecycle   string `json:"lifecycle"`
	// What Anthropic's list says of its own models (capabilities, line,
	// limits, deprecation), null: a chain's limits are its nodes'.
	Capabilities   *struct{} `json:"capabilities"`
	Line           *string   `json:"line"`
	MaxInputTokens *int      `json:"max_input_tokens"`
	MaxTokens      *int      `json:"max_tokens"`
	DeprecatedAt   *string   `json:"deprecated_at"`
	RetiresAt      *string   `json:"retires_at"`
	// AliasFor is the model a model_aliases pattern stands for.
	AliasFor string `json:"alias_for,omitempty"`
}

func (s *Server) listedModel(id, owner, aliasFor string) listedModel {
	return listedModel{ID: id, Object: "model", Created: s.started.Unix(), OwnedBy: owner,
		Type: "model", DisplayName: id, CreatedAt: s.started.Format(time.RFC3339), Lifecycle: "active", AliasFor: aliasFor}
}

// modelList renders /v1/models once, the chain models, every node, and
// the model_aliases names that are not patterns, and the GET
// /v1/models/{id} body of each.
func (s *Server) modelList() ([]byte, map[string][]byte) {
	list := struct {
		Object string        `json:"object"`
		Data   []listedModel `json:"data"`
		// Anthropic's paging, of a list that is always whole.
		HasMore bool   `json:"has_more"`
		FirstID string `json:"first_id"`
		LastID  string `json:"last_id"`
	}{Object: "list"}
	for _, id := range []string{chain.ModelAuto, chain.ModelSimple, chain.ModelReflexive} {
		list.Data = append(list.Data, s.listedModel(id, "chainproxy", ""))
	}
	listed := map[string]bool{}
	for _, n := range s.cfg.Nodes {
		list.Data = append(list.Data, s.listedModel(n.Name, n.Provider, ""))
		listed[n.Name] = true
	}
	// A node's model name is accepted as model too (it routes to the first
	// node serving it), so clients that pick from this list can use it.
	for _, n := range s.cfg.Nodes {
		if !listed[n.Model] {
			list.Data = append(list.Data, s.listedModel(n.Model, n.Provider, ""))
			listed[n.Model] = true
		}
	}
	// Each model_aliases name without wildcards, with the model it stands
	// for: a client that lists models sees what names it may use. A
	// pattern (claude-*) is no model: a client that picked it from the
	// list would send "claude-*"; GET /v1/models/{id} answers for each
	// name one takes.
	if s.engine != nil {
		for _, a := range s.engine.Aliases() {
			if !strings.ContainsAny(a[0], `*?[\`) {
				list.Data = append(list.Data, s.listedModel(a[0], "chainproxy", a[1]))
			}
		}
	}
	list.FirstID, list.LastID = list.Data[0].ID, list.Data[len(list.Data)-1].ID
	b, _ := json.Marshal(list)
	one := make(map[string][]byte, len(list.Data))
	for _, m := range list.Data {
		one[m.ID], _ = json.Marshal(m)
	}
	return b, one
}

func (s *Server) listModels(c *gin.Context) { c.Data(http.StatusOK, "application/json", s.models) }

// getModel serves GET /v1/models/{id}, which OpenAI clients (LangChain, some
// UIs) call to check a model before using it.
func (s *Server) getModel(c *gin.Context) {
	id := strings.TrimPrefix(c.Param("id"), "/")
	if id == "" {
		s.listModels(c)
		return
	}
	b, ok := s.model[id]
	if !ok {
		target, aliased := s.engine.Alias(id)
		if !aliased {
			_, err := s.engine.Resolve(id) // the error names the models that exist
			s.reject(c, "model", err)
			return
		}
		// A name a pattern takes: the client may use it.
		c.JSON(http.StatusOK, s.listedModel(id, "chainproxy", target))
		return
	}
	c.Data(http.StatusOK, "application/json", b)
}

// hostState is one host of a node of several in /readyz.
type hostState struct {
	URL string `json:"url"`
	// Status is "ready", or "offline" while calls skip it (Error says why).
	Status       string   `json:"status"`
	InFlight     int      `json:"in_flight"`
	Error        string   `json:"error,omitempty"`
	Capabilities []string `json:"capabilities,omitempty"`
}

// hostStates reports node's hosts after a probe; nil for one host.
func (s *Server) hostStates(node string) []hostState {
	hs := s.nodes.Hosts(node)
	if hs == nil {
		return nil
	}
	out := make([]hostState, len(hs))
	for i, h := range hs {
		// What a host's server said of its model is passed on masked.
		out[i] = hostState{URL: h.URL, Status: "ready", InFlight: h.InFlight, Capabilities: s.redact.EachValue(h.Capabilities)}
		if h.Offline {
			out[i].Status = "offline"
		}
		if h.Error != "" {
			out[i].Error = s.redact.String(h.Error)
		}
	}
	return out
}

// readyz probes every node at once and reports each.
func (s *Server) readyz(c *gin.Context) {
	type nodeState struct {
		Name      string `json:"name"`
		Provider  string `json:"provider"`
		Model     string `json:"model"`
		Reachable bool   `json:"reachable"`
		LatencyMS int64  `json:"latency_ms"`
		Error     string `json:"error,omitempty"`
		// Status is "ready", or "unavailable" when the node does not
		// answer or lacks its model (Error says which).
		Status string `json:"status"`
		// Capabilities are its model's, when known (Ollama's /api/show).
		Capabilities []string `json:"capabilities,omitempty"`
		// Hosts are a node's hosts when it has several (base_urls): the
		// node is ready while one of them is.
		Hosts []hostState `json:"hosts,omitempty"`
	}
	nodes := s.cfg.Nodes
	states := make([]nodeState, len(nodes))
	ctx, cancel := context.WithTimeout(c.Request.Context(), 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i, n := range nodes {
		states[i] = nodeState{Name: n.Name, Provider: n.Provider, Model: n.Model}
		wg.Go(func() { // exits when Probe returns, bounded by ctx
			start := time.Now()
			err := s.nodes.Probe(ctx, n.Name)
			states[i].LatencyMS = time.Since(start).Milliseconds()
			states[i].Capabilities, _ = s.nodes.Capabilities(n.Name)
			states[i].Hosts = s.hostStates(n.Name)
			states[i].Status = "unavailable"
			if err != nil {
				states[i].Error = s.redact.String(err.Error())
				return
			}
			states[i].Reachable = true
			states[i].Status = "ready"
		})
	}
	wg.Wait()
	status, word := http.StatusServiceUnavailable, "unavailable"
	for _, st := range states {
		if st.Reachable {
			status, word = http.StatusOK, "ready"
		}
	}
	store := "memory"
	if s.traces != nil {
		store = s.traces.Status()
	}
	h := gin.H{"status": word, "store": store, "nodes": states}
	if adm := s.nodes.AdmissionStatus(); adm != "" {
		// "local": Redis is down and each replica keeps the limits alone.
		h["admission"] = adm
	}
	if mcp := s.engine.MCPServers(); mcp != nil {
		for i := range mcp {
			mcp[i].Status = s.redact.String(mcp[i].Status)
		}
		h["mcp"] = mcp // a server that is down leaves the proxy ready: its tools are just not offered
	}
	if fit := s.engine.ToolFit(ctx); fit != nil {
		// How many tools each stage with tools is offered, of how many:
		// beyond its share of the window, the least relevant to each
		// question are withheld behind find_tools.
		h["tools"] = fit
	}
	c.JSON(status, h)
}

func itoa(n int) string { return strconv.Itoa(n) }
