package chain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"chainproxy/antiloop"
	"chainproxy/chain/node"
	"chainproxy/classify"
	"chainproxy/config"
	"chainproxy/internal/redact"
	"chainproxy/memory"
	"chainproxy/tools"
)

// Model names that select the chain rather than a node.
const (
	ModelAuto      = "chain/auto"
	ModelSimple    = "chain/simple"
	ModelReflexive = "chain/reflexive"
)

// ErrUnknownModel is returned for a model that is neither a chain model nor a
// node nor a node's model.
var ErrUnknownModel = errors.New("unknown model")

// ToolRunner executes server-side tools (tools.Registry).
type ToolRunner interface {
	Specs() []tools.Spec
	Check(name string, args []byte) error
	// Key is how the anti-loop identifies a checked call: its identity
	// bytes (spelling-independent), kind, and what it reads or writes.
	Key(name string, args []byte) (tools.Key, error)
	Call(ctx context.Context, name string, args []byte) (string, error)
}

// Deps are the collaborators of an Engine.
type Deps struct {
	// Nodes holds every configured node's backend (node.Build).
	Nodes *node.Set
	// Tools runs server tools; nil offers none.
	Tools ToolRunner
	// Guard is the anti-loop state shared by replicas.
	Guard *antiloop.Guard
	// Classifier decides simple or reflexive.
	Classifier *classify.Classifier
	Logger     *slog.Logger
	// Admission, when set, bounds concurrent calls per node.
	Admission node.Admitter
	// Resume keeps chains waiting for a client's tool results; nil: a
	// follow-up restarts the chain with the results as evidence.
	Resume ResumeStore
	// Memory keeps context fitting's summaries and calibration, shared by
	// replicas when it is Redis; nil keeps no summaries.
	Memory memory.KV
	// Redactor masks the configured secrets in tool results, stage and
	// call errors; when it knows none, one is built from the config.
	Redactor redact.Redactor
}

// Node is a configured model endpoint.
type Node struct {
	config.Node
	Backend node.Backend
	// keepAlive is Node.KeepAlive read once; nil leaves the server's default.
	keepAlive *time.Duration
	// kept is set when the node's model is kept loaded for good
	// (config.RunnersKeptLoaded): its keepAlive is -1, whoever calls.
	kept bool
	// caps are what every call to the node is held to: tools.max_args_bytes,
	// max_output_bytes and the engine's redactor (node.Caps.Chat).
	caps node.Caps
	// numCtx is the window the node's server is asked to run the model
	// with (Request.NumCtx): its context_window, or the largest of the
	// nodes sharing its Ollama runner (config.RunnerWindows), so that they
	// do not reload the model for each other.
	numCtx int
}

// Engine runs requests. It is safe for concurrent use.
type Engine struct {
	cfg     *config.Config
	nodes   map[string]*Node
	order   []*Node
	byModel map[string]*Node
	runner  ToolRunner
	// toolSet is what the stages offer, derived from runner.Specs and
	// rebuilt only when the runner's tool set changes (see tools_view.go).
	toolSet    atomic.Pointer[toolView]
	guard      *antiloop.Guard
	classifier *classify.Classifier
	admission  node.Admitter
	// set is the nodes and what their servers said of them; offline is
	// its offline set.
	set     *node.Set
	offline *node.Offline
	resume  ResumeStore
	log     *slog.Logger
	// kv caches summaries and calibration ratios (Deps.Memory); nil: none
	// cached, ratios kept in process.
	kv          memory.KV
	calibration *memory.Calibration
	// summaries are the summarizer calls in progress, which concurrent
	// requests of one conversation share.
	summaries memory.Flights
	// redact masks configured secrets in what the chain writes.
	redact redact.Redactor
	// aliases are model_aliases, most specific first.
	aliases []alias
	// watcher sees every run's events (SetWatcher); a pointer, so that
	// setting it never races with the runs reading it.
	watcher atomic.Pointer[Watcher]
	// warm loads models early, when the admission schedules loads
	// (warm.go).
	warm warmer
}

// New builds an Engine over the configured nodes.
func New(cfg *config.Config, deps Deps) (*Engine, error) {
	if deps.Nodes == nil {
		return nil, errors.New("chain: a node set is required (node.Build)")
	}
	e := &Engine{
		cfg:        cfg,
		nodes:      map[string]*Node{},
		byModel:    map[string]*Node{},
		runner:     deps.Tools,
		guard:      deps.Guard,
		classifier: deps.Classifier,
		admission:  deps.Admission,
		set:        deps.Nodes,
		offline:    deps.Nodes.Offline(),
		resume:     deps.Resume,
		log:        deps.Logger,
		kv:         deps.Memory,
		redact:     deps.Redactor,
	}
	if e.redact.Empty() {
		e.redact = redact.FromConfig(cfg)
	}
	e.calibration = memory.NewCalibration(deps.Memory)
	e.aliases = aliases(cfg.ModelAliases)
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.classifier == nil {
		e.classifier = classify.New(cfg.Classify, nil)
	}
	if e.guard == nil {
		return nil, errors.New("chain: an anti-loop guard is required")
	}
	if deps.Admission != nil {
		deps.Nodes.Admit(deps.Admission)
	}
	kept := cfg.RunnersKeptLoaded()
	for _, n := range cfg.Nodes {
		b, ok := deps.Nodes.Backend(n.Name)
		if !ok {
			return nil, fmt.Errorf("chain: no backend for node %q", n.Name)
		}
		node := &Node{Node: n, Backend: b, caps: node.Caps{MaxArgs: cfg.Tools.MaxArgsBytes, MaxOutput: n.MaxOutputBytes, Redact: e.redact}, numCtx: deps.Nodes.RunnerWindow(n.Name)}
		if n.KeepAlive != "" {
			d, err := config.ParseKeepAlive(n.KeepAlive)
			if err != nil {
				return nil, fmt.Errorf("chain: node %q: %w", n.Name, err)
			}
			node.keepAlive = &d
		}
		if kept[n.Name] {
			// Ollama's keep_alive -1: loaded for good, also from the
			// nodes that share a keep_loaded node's runner.
			d := time.Duration(-1)
			node.keepAlive, node.kept = &d, true
		}
		e.nodes[n.Name] = node
		e.order = append(e.order, node)
		if _, dup := e.byModel[n.Model]; !dup {
			e.byModel[n.Model] = node
		}
	}
	e.warm = e.preloads(deps.Admission)
	tv := e.newToolView()
	e.toolSet.Store(tv)
	e.warnToolFit(tv)
	return e, nil
}

// NodeSet is the node set the engine runs on (Deps.Nodes): what a server
// built without its own reads the nodes' states from.
func (e *Engine) NodeSet() *node.Set { return e.set }

// Nodes returns the configured nodes in configuration order.
func (e *Engine) Nodes() []*Node { return e.order }

// Route is where a model name sends a request.
type Route struct {
	// Mode is "" for chain/auto (classify), else the forced mode.
	Mode string
	// Node is set when the model names a node directly.
	Node string
}

// Relay reports whether the route is a plain relay to one node, which runs
// no server tools (only the client's own) and so never consults the
// anti-loop's per-conversation memory.
func (r Route) Relay() bool { return r.Node != "" }

// Resolve maps a request's model field to a Route: a chain model, a node
// by name or by model, else the most specific model_aliases pattern that
// matches. Any other name is an *UnknownModelError naming what exists.
func (e *Engine) Resolve(model string) (Route, error) {
	if r, ok := e.served(model); ok {
		return r, nil
	}
	if target, ok := e.Alias(model); ok {
		if r, ok := e.served(target); ok {
			return r, nil
		}
	}
	return Route{}, &UnknownModelError{Model: model, Known: e.Models(), Aliases: e.Aliases()}
}

// served routes a model name the proxy serves itself.
func (e *Engine) served(model string) (Route, bool) {
	switch model {
	case ModelAuto:
		return Route{}, true
	case ModelSimple:
		return Route{Mode: ModeSimple}, true
	case ModelReflexive:
		return Route{Mode: ModeReflexive}, true
	}
	if n, ok := e.nodes[model]; ok {
		return Route{Mode: ModeSimple, Node: n.Name}, true
	}
	if n, ok := e.byModel[model]; ok {
		return Route{Mode: ModeSimple, Node: n.Name}, true
	}
	return Route{}, false
}

// ToolChoice is the client's tool_choice: Mode "auto" (or ""), "none",
// "required" or "function" with Name.
type ToolChoice struct {
	Mode string
	Name string
}

// RunRequest is one request to answer.
type RunRequest struct {
	// TraceID names the chain in its trace, its logs and the trace list.
	// A run that resumes a chain paused for the client's tools sets it to
	// the chain's (the first request's id), and the trace list may give a
	// new chain an id of its own when the client's is another's (see
	// Watcher): the caller reads it back once the run classified.
	TraceID string
	// Model is the client's model field, resolved with Resolve.
	Model string
	// Route is Model resolved, when the caller resolved it already (an API
	// front does, to refuse an unknown model before anything else and to
	// know whether the run needs a conversation key): Run then takes it
	// rather than resolving again. Nil: Run resolves Model.
	Route *Route `json:"-"`
	// ForcedMode comes from the X-Chain-Mode header ("" = not forced).
	ForcedMode string
	// Category is the route category (X-Chain-Category).
	Category string
	// Conversation keys the anti-loop's per-conversation state; a Relay
	// route needs none.
	Conversation string
	// Caller is a fixed-length, non-secret identity of who sent the request
	// (a hash of its API key; "" without keys). State a run leaves behind
	// (anti-loop results, resume state, traces) is scoped to it.
	Caller string
	// Client is the caller's User-Agent, for the cockpit's list of traces.
	Client string
	// Started is set by Run: when the chain started, its trace's times
	// being offsets from it (a resumed chain's first request's start), so
	// that every replica lists the chain as started at one time.
	Started  time.Time
	Messages []Message
	// ClientTools are tools the client executes itself.
	ClientTools []Tool
	// ClientCallID, when set, is the ID of the client call the chain passes
	// back, for a client that answers one call a turn and sends its result
	// without an ID (the deprecated functions of Chat Completions): its
	// caller gives the result this ID, which finds the chain to resume.
	// Such a client gets one call a turn; the turn's other client calls are
	// refused with a note for the model. The ID must not repeat in another
	// conversation under the same Conversation key, as the chain's state is
	// found by the two. Empty: the chain issues random IDs.
	ClientCallID string
	ToolChoice   ToolChoice
	Params       Params
	// Batch marks a batch-priority request (queued behind interactive ones).
	Batch bool
	// KeepAlive is the client's keep_alive, honoured in simple mode and
	// relay (the chain's nodes keep their configured one); nil: unset.
	KeepAlive *time.Duration
	// Notes are what the API front left out of the request (a hosted tool
	// the proxy cannot run, say), said once in the trace's reasons.
	Notes []string
	// Idle is passed to every model call (Request.Idle), and called when a
	// call ends: a streaming writer holding back chunks sends them then.
	Idle func() `json:"-"`
}

// Result is the answer of a run.
type Result struct {
	// Message is the final assistant message.
	Message      Message
	FinishReason string
	Trace        Trace
	// Upstream is the time the run spent waiting on nodes, queues
	// included: the rest of its duration is the proxy's own.
	Upstream time.Duration
	// prior is the usage the requests before this one were answered
	// with, for a chain resumed with the client's tool results: its
	// trace holds their calls too.
	prior Usage
}

// Usage is the tokens this request's model calls used: the trace's, less
// those of the calls an earlier request of a resumed chain made and was
// answered with, so that a client adding up the usage of each answer (an
// agent showing its spend) counts every call once.
func (r *Result) Usage() Usage { return r.Trace.Usage().Sub(r.prior) }

// Failure is a run that produced no answer; it carries the trace so that the
// client sees what was tried.
type Failure struct {
	Trace Trace
	Err   error
}

func (f *Failure) Error() string { return "chain: " + f.Err.Error() }
func (f *Failure) Unwrap() error { return f.Err }

// ErrAllStagesFailed is the cause of a Failure where no stage produced
// anything usable.
var ErrAllStagesFailed = errors.New("every stage of the chain failed")

// Run answers req. emit, when not nil, receives the run's events as they
// happen on the caller's goroutine; an error from emit ends the run with it.
func (e *Engine) Run(ctx context.Context, req *RunRequest, emit func(Event) error) (*Result, error) {
	route, err := e.route(req)
	if err != nil {
		return nil, err
	}
	r := &run{e: e, req: req, emit: emit, whole: emit == nil, left: e.cfg.Chain.MaxTotalTurns, tv: e.tools(), t0: time.Now()}
	req.Started = r.t0
	if emit == nil {
		r.emit = func(Event) error { return nil }
	}
	r.emit = e.watched(req, r.emit)
	defer r.endSpans(ctx)
	var note string
	if !route.Relay() {
		var st *resumeState
		if st, note = r.lookup(ctx); st != nil {
			return r.resume(ctx, st)
		}
	}
	var background bool
	r.trace.Mode, r.trace.Reasons, r.question, background = e.decide(req, route)
	r.trace.Reasons = append(r.trace.Reasons, e.unavailableReasons()...)
	r.trace.Reasons = append(r.trace.Reasons, req.Notes...)
	if r.trace.Mode == ModeReflexive {
		// Simple mode never pauses, so has nothing to resume: no note.
		if note != "" {
			r.trace.Reasons = append(r.trace.Reasons, note)
		}
		r.trace.Reasons = append(r.trace.Reasons, r.clientToolReasons()...)
	}
	if hasParts(req.Messages) {
		// Refused before anything runs when no node that may answer can
		// take an image or a file; the stages that can get them.
		r.parts = true
		nodes := e.answeringNodes(r.trace.Mode)
		if route.Relay() {
			nodes = []*Node{e.nodes[route.Node]}
		}
		if err := e.checkParts(ctx, req.Messages, nodes); err != nil {
			return nil, err
		}
	}
	r.trace.Stages = []StageTrace{}
	if err := r.emit(Event{Kind: EventClassified, Mode: r.trace.Mode, Reasons: r.trace.Reasons, Question: r.question, Own: background}); err != nil {
		return nil, err
	}
	if route.Relay() {
		r.relay = true
		return r.simple(ctx, e.nodes[route.Node], false)
	}
	if r.trace.Mode == ModeSimple {
		// A client's own request (a title, a compaction) needs none of
		// the server's tools: offering them costs a small window their
		// definitions and invites calls nobody asked for.
		return r.simple(ctx, e.nodes[e.cfg.Chain.SimpleNode], e.runner != nil && !background)
	}
	if r.trace.Mode == ModeReflexive && ctx.Err() == nil {
		// Only once the chain will run: a request refused (parts no
		// node takes) or whose client went away at its classification
		// would load models its stages never use, evicting others'.
		e.warmFrom(0)
	}
	return r.reflexive(ctx)
}

// route is req's route: the one its caller resolved, else Model's.
func (e *Engine) route(req *RunRequest) (Route, error) {
	if req.Route != nil {
		return *req.Route, nil
	}
	return e.Resolve(req.Model)
}

// decide picks the mode and says why, with the user's words the
// classifier judged when it ran (or the name of a client's own request),
// and whether the request is a client's own (background) one.
func (e *Engine) decide(req *RunRequest, route Route) (mode string, reasons []string, judged string, background bool) {
	if route.Node != "" {
		return ModeSimple, []string{"model " + req.Model + ": direct to node " + route.Node}, "", false
	}
	forced, why := route.Mode, "forced by model "+req.Model
	if forced == "" && req.ForcedMode != "" {
		forced, why = req.ForcedMode, "forced by header X-Chain-Mode"
	}
	switch forced {
	case ModeSimple:
		// Simple either way; a client's own request is still offered no
		// server tools, and the trace names it.
		if name := ownRequest(req.Messages); name != "" {
			return ModeSimple, append([]string{why}, classify.BackgroundDecision(name).Reasons...), ownName(name), true
		}
		return ModeSimple, []string{why}, e.judged(req.Messages), false
	case ModeReflexive:
		// The chain the user chose for a chat is not forced on the
		// client's own requests beside it (Open WebUI sends its titles to
		// the chat's model): one node answers them, in the format the
		// client parses.
		if name := ownRequest(req.Messages); name != "" {
			d := classify.BackgroundDecision(name)
			return d.Mode, append(d.Reasons, why+": not for the client's own requests"), ownName(name), true
		}
		return ModeReflexive, []string{why}, e.judged(req.Messages), false
	}
	// A client's own request known by its system message: its user
	// message holds the user's words, which are not what it asks.
	if name := systemRequest(req.Messages); name != "" {
		d := classify.BackgroundDecision(name)
		return d.Mode, d.Reasons, ownName(name), true
	}
	d := e.classifier.Classify(UserTexts(req.Messages), req.Category)
	if d.Background != "" {
		return d.Mode, d.Reasons, ownName(d.Background), true
	}
	return d.Mode, d.Reasons, d.Text, false
}

// judged is the user's words the classifier finds in msgs, an agent
// client's blocks set aside: what names a chain whose mode was forced, as
// it names one classified (a Claude Code turn starts with reminders).
func (e *Engine) judged(msgs []Message) string {
	return e.classifier.Classify(UserTexts(msgs), "").Text
}

// ownName is what names a client's own request where the user's words
// would (the traces list): its name, in brackets, since it is nobody's
// words ("### Task:" is all the message's first line would say).
func ownName(name string) string { return "(" + name + " request)" }

// systemRequest names the client's own request msgs are by their system
// message, or "".
func systemRequest(msgs []Message) string {
	if len(msgs) > 0 && msgs[0].Role == "system" {
		return classify.BackgroundSystem(msgs[0].Content)
	}
	return ""
}

// ownRequest names the client's own request msgs are, by their system
// message or their newest user message's opening, or "".
func ownRequest(msgs []Message) string {
	if name := systemRequest(msgs); name != "" {
		return name
	}
	if m, ok := UserTexts(msgs)(); ok {
		return classify.Background(m.Text)
	}
	return ""
}

// UserTexts returns a function that returns the user messages of msgs,
// newest first, then false: their text and the count of their image and
// file parts, what the classifier judges and nothing else of the request.
func UserTexts(msgs []Message) func() (classify.UserMessage, bool) {
	i := len(msgs)
	return func() (classify.UserMessage, bool) {
		for i > 0 {
			i--
			if m := &msgs[i]; m.Role == "user" {
				u := classify.UserMessage{Text: m.Content, Lead: m.Lead}
				for j := range m.Parts {
					if m.Parts[j].Kind == PartFile {
						u.Files++
					} else {
						u.Images++
					}
				}
				return u, true
			}
		}
		return classify.UserMessage{}, false
	}
}

// Probe checks that node answers and has its model, and updates what the
// engine remembers of it: a node reached again is no longer skipped as
// offline, and its model's capabilities are read again.
func (e *Engine) Probe(ctx context.Context, name string) error {
	if _, ok := e.nodes[name]; !ok {
		return fmt.Errorf("%w %q", ErrUnknownModel, name)
	}
	return e.set.Probe(ctx, name)
}
