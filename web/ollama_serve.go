package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/ollama/ollama/api"
	"github.com/ollama/ollama/types/model"

	"chainproxy/chain"
	"chainproxy/chain/node"
	"chainproxy/config"
	"chainproxy/internal/jsonx"
)

// ollamaVersion is the Ollama API version the proxy speaks: clients that
// check the server's version (the ollama CLI warns on a mismatch) see the
// one whose routes and types it follows.
const ollamaVersion = "0.17.4"

// ndjson is the media type of Ollama's streams.
const ndjson = "application/x-ndjson"

// ollamaChat serves POST /api/chat.
func (s *Server) ollamaChat(c *gin.Context) { s.ollamaRun(c, false) }

// ollamaGenerate serves POST /api/generate: a prompt without history.
func (s *Server) ollamaGenerate(c *gin.Context) { s.ollamaRun(c, true) }

// resolveOllama resolves an Ollama model name: as given, else without the
// ":latest" tag Ollama's clients may add to a name without one.
func (s *Server) resolveOllama(name string) (string, chain.Route, error) {
	route, err := s.engine.Resolve(name)
	if err != nil {
		if base, ok := strings.CutSuffix(name, ":latest"); ok {
			if r, err2 := s.engine.Resolve(base); err2 == nil {
				return base, r, nil
			}
		}
	}
	return name, route, err
}

func (s *Server) ollamaRun(c *gin.Context, generate bool) {
	f := front{path: c.FullPath(), start: time.Now()}
	f.traceID = s.begin(c, f.path)
	decode := func(body []byte) (*ollamaChatRequest, error) { return decodeOllamaRequest(body, generate) }
	wire, ok := readWire(s, c, decode, checkOllamaLimits)
	if !ok {
		return
	}
	name := wire.Model
	var err error
	if wire.Model, f.route, err = s.resolveOllama(wire.Model); err != nil {
		s.reject(c, "model", err)
		return
	}
	stream := wire.Stream == nil || *wire.Stream
	if len(wire.Messages) == 0 {
		// Ollama loads the model and answers done_reason "load": clients
		// (ollama run) send this to warm a model up. With keep_alive 0 it
		// unloads it and says "unload" (ollama stop; scripts freeing
		// memory check it). Nothing to load or unload here.
		reason := "load"
		if wire.keepAlive != nil && *wire.keepAlive == 0 {
			reason = "unload"
		}
		c.JSON(http.StatusOK, ollamaChatChunk{Model: name, CreatedAt: time.Now().UTC(), Response: ptrIf(generate, ""),
			Message: ptrIf(!generate, ollamaMessage{Role: "assistant"}), Done: true, DoneReason: reason})
		s.endSpan(c, http.StatusOK, nil, nil, nil)
		return
	}
	req := wire.toRunRequest()
	if !s.prepare(c, &f, req, "", nil) {
		return
	}
	enc := &ollamaEncoder{model: name, generate: generate, thinking: wire.think == nil || *wire.think, start: f.start, run: req}
	if stream {
		s.answer(c, &f, req, func(w *sseWriter) encoder {
			enc.w = w
			enc.w.contentType = ndjson
			return enc
		}, nil, nil)
		return
	}
	s.answer(c, &f, req, nil, nil, func(res *chain.Result, trace []byte) ([]byte, error) {
		ch := enc.chunk(res.Message.Content, res.Message.Reasoning)
		ch.Done, ch.DoneReason, ch.ollamaMetrics = true, doneReason(res.FinishReason), metricsOf(res, time.Since(f.start), sinceStarted(f.start, req))
		enc.setCalls(&ch, res.Message.ToolCalls)
		b, err := marshal(&ch)
		return withChain(b, trace), err
	})
}

func ptrIf[T any](ok bool, v T) *T {
	if !ok {
		return nil
	}
	return &v
}

// ollamaEncoder writes a run as Ollama's NDJSON stream: one object per
// delta, the tool calls whole in an object of their own, then the done
// object with Ollama's counters and the trace.
type ollamaEncoder struct {
	w        *sseWriter
	model    string
	generate bool // /api/generate: "response" rather than "message"
	thinking bool // the client did not turn thinking off
	start    time.Time
	run      *chain.RunRequest // its Started tells which calls are this request's
}

var _ encoder = (*ollamaEncoder)(nil)

func (e *ollamaEncoder) chunk(content, thinking string) ollamaChatChunk {
	if !e.thinking {
		thinking = ""
	}
	ch := ollamaChatChunk{Model: e.model, CreatedAt: time.Now().UTC()}
	if e.generate {
		ch.Response, ch.Thinking = &content, thinking
	} else {
		ch.Message = &ollamaMessage{Role: "assistant", Content: content, Thinking: thinking}
	}
	return ch
}

func (e *ollamaEncoder) setCalls(ch *ollamaChatChunk, calls []chain.ToolCall) {
	if len(calls) == 0 {
		return
	}
	if e.generate {
		ch.ToolCalls = ollamaCalls(calls)
	} else {
		ch.Message.ToolCalls = ollamaCalls(calls)
	}
}

func (e *ollamaEncoder) send(ch *ollamaChatChunk) error {
	b, err := marshal(ch)
	if err != nil {
		return err
	}
	e.w.start()
	return e.w.line(b)
}

func (e *ollamaEncoder) event(ev chain.Event) error {
	if ev.Kind != chain.EventDelta || ev.Content == "" && (ev.Reasoning == "" || !e.thinking) {
		return nil
	}
	return e.delta(ev.Content, ev.Reasoning)
}

// keepalive writes an object with empty content: NDJSON has no comment
// line, and Ollama's clients decode every line, printing nothing for it.
func (e *ollamaEncoder) keepalive(string) error { return e.delta("", "") }

// delta writes the line e.chunk(content, thinking) encodes to, framed by
// hand: goccy/go-json's encoder takes a 9 KiB stack frame, and called this
// deep in a run it doubled every streaming goroutine's stack to 32 KiB
// (FuzzOllamaDelta checks the bytes against encoding/json).
func (e *ollamaEncoder) delta(content, thinking string) error {
	e.w.start()
	e.w.buf = appendOllamaDelta(e.w.buf, e.model, e.generate, time.Now().UTC(), content, thinking, e.thinking)
	e.w.buf = append(e.w.buf, '\n')
	return e.w.flush()
}

// appendOllamaDelta appends the object ollamaEncoder.chunk makes for a
// delta, as encoding/json writes it.
func appendOllamaDelta(dst []byte, model string, generate bool, at time.Time, content, thinking string, showThinking bool) []byte {
	if !showThinking {
		thinking = ""
	}
	dst = append(dst, `{"model":`...)
	dst = jsonx.AppendString(dst, model)
	dst = append(dst, `,"created_at":"`...)
	dst = at.AppendFormat(dst, time.RFC3339Nano)
	if generate {
		dst = append(dst, `","response":`...)
		dst = jsonx.AppendString(dst, content)
		if thinking != "" {
			dst = append(dst, `,"thinking":`...)
			dst = jsonx.AppendString(dst, thinking)
		}
	} else {
		dst = append(dst, `","message":{"role":"assistant","content":`...)
		dst = jsonx.AppendString(dst, content)
		if thinking != "" {
			dst = append(dst, `,"thinking":`...)
			dst = jsonx.AppendString(dst, thinking)
		}
		dst = append(dst, '}')
	}
	return append(dst, `,"done":false}`...)
}

func (e *ollamaEncoder) end(res *chain.Result, trace []byte) error {
	if len(res.Message.ToolCalls) > 0 {
		ch := e.chunk("", "")
		e.setCalls(&ch, res.Message.ToolCalls)
		if err := e.send(&ch); err != nil {
			return err
		}
	}
	ch := e.chunk("", "")
	ch.Done, ch.DoneReason, ch.ollamaMetrics = true, doneReason(res.FinishReason), metricsOf(res, time.Since(e.start), sinceStarted(e.start, e.run))
	b, err := marshal(&ch)
	if err != nil {
		return err
	}
	// The trace framed in the writer's buffer, not appended to a copy.
	w := e.w
	w.start()
	w.buf = withChain(append(w.buf, b...), trace)
	return w.line(nil)
}

// abort ends the stream with Ollama's mid-stream error line, which its
// clients return as the call's error.
func (e *ollamaEncoder) abort(_ int, obj errorObject) {
	if b, merr := json.Marshal(ollamaErrorBody{Error: obj.Message}); merr == nil {
		_ = e.w.line(b)
	}
}

// ollamaModels are the models Ollama's listing shows: the chain's, then
// each node by name and by model name, as /v1/models lists them, each with
// a tag as Ollama lists every model (":latest" for a name without one).
// Clients rely on it: Open WebUI adds ":latest" to a name without a tag
// before it looks the name up in the listing, and refuses the chat when
// the listing does not have it.
func (s *Server) ollamaModels() []string {
	names := []string{chain.ModelAuto, chain.ModelSimple, chain.ModelReflexive}
	for _, n := range s.cfg.Nodes {
		if !slices.Contains(names, n.Name) {
			names = append(names, n.Name)
		}
	}
	for _, n := range s.cfg.Nodes {
		if !slices.Contains(names, n.Model) {
			names = append(names, n.Model)
		}
	}
	for i, n := range names {
		if !strings.Contains(n, ":") {
			names[i] = n + ":latest"
		}
	}
	return slices.Compact(names)
}

// ollamaDetails describes a model: the chain's models are of family
// "chain"; a node's is its provider's. A model that takes images has the
// family "clip" too, as Ollama lists its vision models (LLaVA's families
// are llama and clip): /api/tags has no capabilities, and clients that
// read only the list look there.
func (s *Server) ollamaDetails(name string) api.ModelDetails {
	d := api.ModelDetails{Format: "chain", Family: "chain", Families: []string{"chain"}}
	_, route, err := s.resolveOllama(name)
	if err == nil && route.Node != "" {
		for _, n := range s.cfg.Nodes {
			if n.Name == route.Node {
				d.Format, d.Family, d.Families = n.Provider, n.Provider, []string{n.Provider}
			}
		}
		if s.takesVision(route.Node) {
			d.Families = append(d.Families, "clip")
		}
	} else if err == nil && s.chainVision(route.Mode) {
		d.Families = append(d.Families, "clip")
	}
	return d
}

// takesVision reports whether node's model is known to take images.
func (s *Server) takesVision(node string) bool {
	caps, _ := s.nodes.Capabilities(node)
	return slices.Contains(caps, chain.CapVision)
}

// chainVision reports whether a chain model of mode ("" for chain/auto)
// takes images: its simple node does, or a stage of the chain, or for
// chain/auto both, since either may answer (a request with images that
// no answering node takes is refused; the stages that take none are told
// what they were not shown).
func (s *Server) chainVision(mode string) bool {
	simple := s.takesVision(s.cfg.Chain.SimpleNode)
	stages := slices.ContainsFunc(s.cfg.Chain.Stages, func(st config.Stage) bool { return s.takesVision(st.Node) })
	switch mode {
	case chain.ModeSimple:
		return simple
	case chain.ModeReflexive:
		return stages
	}
	return simple && stages
}

func digest(name string) string {
	h := sha256.Sum256([]byte(name))
	return hex.EncodeToString(h[:])
}

// ollamaTags serves GET /api/tags.
func (s *Server) ollamaTags(c *gin.Context) {
	list := api.ListResponse{Models: []api.ListModelResponse{}}
	for _, name := range s.ollamaModels() {
		list.Models = append(list.Models, api.ListModelResponse{Name: name, Model: name, ModifiedAt: s.started, Digest: digest(name), Details: s.ollamaDetails(name)})
	}
	c.JSON(http.StatusOK, list)
}

// ollamaPs serves GET /api/ps. The proxy loads no model itself: it lists
// what it serves, as loaded, so that clients polling it see the chain.
// Nothing it serves unloads, which Ollama says of a model kept with
// keep_alive -1: an expiry a maximal duration away (the ollama CLI prints
// "Forever"; a zero time made it print "Stopping..."). A node's model
// shows the window the proxy fits its prompts to; a chain's models have
// none of their own (each node's prompt is fitted to that node), so 0.
// Beside them, runners says what each Ollama server behind the nodes holds
// (ollamaRunners).
func (s *Server) ollamaPs(c *gin.Context) {
	list := ollamaPsResponse{ProcessResponse: api.ProcessResponse{Models: []api.ProcessModelResponse{}}}
	never := time.Now().Add(time.Duration(math.MaxInt64))
	for _, name := range s.ollamaModels() {
		m := api.ProcessModelResponse{Name: name, Model: name, Digest: digest(name), Details: s.ollamaDetails(name), ExpiresAt: never}
		if _, route, err := s.resolveOllama(name); err == nil && route.Node != "" {
			m.ContextLength = s.nodeWindow(route.Node)
		}
		list.Models = append(list.Models, m)
	}
	list.Runners = s.ollamaRunners(c.Request.Context())
	c.JSON(http.StatusOK, list)
}

// ollamaPsResponse is GET /api/ps: Ollama's ProcessResponse, whose models
// are what the proxy serves, with runners added. Ollama's clients read
// models and skip a field they do not know (the ollama CLI, ollama-js).
type ollamaPsResponse struct {
	api.ProcessResponse
	Runners []ollamaRunner `json:"runners,omitempty"`
}

// ollamaRunner is one Ollama server behind the nodes (node.Runner): the
// nodes it serves, and the models it holds as its own /api/ps lists them,
// or why it did not answer.
type ollamaRunner struct {
	URL    string          `json:"url"`
	Nodes  []string        `json:"nodes"`
	Models []ollamaRunning `json:"models"`
	Error  string          `json:"error,omitempty"`
}

// ollamaRunning is a model a runner holds, in the fields of Ollama's
// ProcessModelResponse that its /api/ps gave.
type ollamaRunning struct {
	Name          string    `json:"name"`
	Model         string    `json:"model"`
	Size          int64     `json:"size"`
	SizeVRAM      int64     `json:"size_vram"`
	ExpiresAt     time.Time `json:"expires_at"`
	ContextLength int       `json:"context_length"`
}

// runnerLister is the optional capability of a NodeSet that asks the
// servers behind its nodes what they hold (node.Set.Runners).
type runnerLister interface {
	Runners(ctx context.Context) []node.Runner
}

// runnersWait bounds the servers' answers to /api/ps: a server that does
// not answer in time is reported, not waited for.
const runnersWait = 3 * time.Second

// ollamaRunners asks each Ollama server behind the nodes what it holds,
// all at once; nil when the node set cannot tell or no node is Ollama's.
func (s *Server) ollamaRunners(ctx context.Context) []ollamaRunner {
	rl, ok := s.nodes.(runnerLister)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, runnersWait)
	defer cancel()
	var out []ollamaRunner
	for _, r := range rl.Runners(ctx) {
		or := ollamaRunner{URL: r.URL, Nodes: r.Nodes, Models: []ollamaRunning{}, Error: r.Err}
		for _, m := range r.Models {
			or.Models = append(or.Models, ollamaRunning{Name: m.Name, Model: m.Name, Size: m.Size, SizeVRAM: m.VRAM, ExpiresAt: m.ExpiresAt, ContextLength: m.ContextLength})
		}
		out = append(out, or)
	}
	return out
}

// nodeWindow is the context window node's prompts are fitted to, 0 when
// unknown.
func (s *Server) nodeWindow(node string) int { return s.nodes.Window(node) }

// ollamaShowRequest is api.ShowRequest's name fields: model, or the
// deprecated name the ollama CLI still sends.
type ollamaShowRequest struct {
	Model string `json:"model"`
	Name  string `json:"name"`
}

// ollamaShow serves POST /api/show: a model's details and capabilities.
// A node's capabilities are those its server reported; the chain's models
// take tools, pass on thinking when a node thinks, and take images when
// the nodes that answer them do (chainVision).
func (s *Server) ollamaShow(c *gin.Context) {
	body, err := s.readBody(c)
	if err != nil {
		s.reject(c, "body", err)
		return
	}
	var in ollamaShowRequest
	if err := unmarshal(body, &in); err != nil {
		s.reject(c, "invalid request", invalid("", "invalid JSON in request body: %v", err))
		return
	}
	name := in.Model
	if name == "" {
		name = in.Name
	}
	resolved, route, err := s.resolveOllama(name)
	if err != nil {
		s.reject(c, "model", err)
		return
	}
	caps := []model.Capability{model.CapabilityCompletion, model.CapabilityTools}
	if route.Node != "" {
		if known, ok := s.nodes.Capabilities(route.Node); ok {
			caps = caps[:0]
			for _, k := range known {
				caps = append(caps, model.Capability(k))
			}
		}
	} else {
		for _, n := range s.cfg.Nodes {
			if known, _ := s.nodes.Capabilities(n.Name); slices.Contains(known, string(model.CapabilityThinking)) {
				caps = append(caps, model.CapabilityThinking)
				break
			}
		}
		if s.chainVision(route.Mode) {
			caps = append(caps, model.CapabilityVision)
		}
	}
	info := map[string]any{"general.architecture": "chain", "general.name": resolved}
	// Where Ollama puts a model's window (<architecture>.context_length,
	// which `ollama show` prints): a node's is the one its prompts are
	// fitted to.
	if route.Node != "" {
		if w := s.nodeWindow(route.Node); w > 0 {
			info["chain.context_length"] = w
		}
	}
	c.JSON(http.StatusOK, api.ShowResponse{
		Details:      s.ollamaDetails(resolved),
		ModelInfo:    info,
		Capabilities: caps,
		ModifiedAt:   s.started,
	})
}

// ollamaPull serves POST /api/pull: a model the proxy serves is there
// already; any other is refused, since the proxy does not manage models.
func (s *Server) ollamaPull(c *gin.Context) {
	body, err := s.readBody(c)
	if err != nil {
		s.reject(c, "body", err)
		return
	}
	var in struct {
		ollamaShowRequest
		Stream *bool `json:"stream"`
	}
	if err := unmarshal(body, &in); err != nil {
		s.reject(c, "invalid request", invalid("", "invalid JSON in request body: %v", err))
		return
	}
	name := in.Model
	if name == "" {
		name = in.Name
	}
	if _, _, err := s.resolveOllama(name); err != nil {
		s.reject(c, "model", invalid("model", "model %q is not served by this proxy, which does not manage models: pull it on a node's Ollama and add the node to the configuration", name))
		return
	}
	b, _ := json.Marshal(api.ProgressResponse{Status: "success"})
	if in.Stream == nil || *in.Stream {
		c.Data(http.StatusOK, ndjson, append(b, '\n'))
		return
	}
	c.Data(http.StatusOK, "application/json; charset=utf-8", b)
}

// ollamaVersionHandler serves GET /api/version.
func (s *Server) ollamaVersionHandler(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"version": ollamaVersion})
}
