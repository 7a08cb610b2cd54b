package chain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"chainproxy/antiloop"
	"chainproxy/chain/judge"
	"chainproxy/chain/node"
	"chainproxy/chain/toolfit"
)

// run is the state of one request.
type run struct {
	e     *Engine
	req   *RunRequest
	emit  func(Event) error
	trace Trace
	// left is what remains of the global turn budget.
	left int
	// streamed is set once answer content went out as EventDelta.
	streamed bool
	// turnBreak is owed by a turn whose text went out as EventDelta: the
	// next turn's streamed text starts with it, a paragraph break, so that
	// the two are not glued into one sentence.
	turnBreak string
	// upstream is the time spent waiting on nodes (queue and calls).
	upstream time.Duration
	// whole: nobody watches the run, so answers may come unstreamed.
	whole bool
	log   *slog.Logger // made by logger, on the run's first log line
	// tv is the tool set taken at the run's start: MCP tools that come or
	// go mid-run change the next request, not this one.
	tv *toolView
	// client is the set of the request's client tool names (clientNames).
	client map[string]bool
	// hidden is the set of server tools the client's tools keep from the
	// stages (hiddenTools).
	hidden map[string]bool
	// tix indexes the tools the stages with tools choose from
	// (toolIndex), made at the first choice.
	tix *toolfit.Index
	// clientOnly: the simple stage is offered the client's tools alone,
	// fitted to its node's window as a chain stage's are (clientTurns).
	clientOnly bool
	// t0 is when the request started: trace times are offsets from it.
	t0 time.Time
	// question is the user's words the classifier judged, or the name of
	// a client's own request: what names the chain (Event.Question).
	question string
	// relay: a node named directly; its prompt is the client's business
	// and is sent as it came, unfitted.
	relay bool
	// summarized is set once the run made its one summarizer call.
	summarized bool
	// parts: the conversation has images or files, which each stage gets
	// when its node takes them (partsFor).
	parts bool
	// ctxErr is the first stage skipped for a prompt too long for its
	// node: the client's error when no stage could answer.
	ctxErr error
	// spanned are the stages whose spans were started, to end those a
	// failed run leaves open (telemetry.go).
	spanned []*stage
}

// logger is the engine's logger with the run's trace id. It is made on the
// first line the run logs: most runs log none, and With formats its
// attributes at once.
func (r *run) logger() *slog.Logger {
	if r.log == nil {
		r.log = r.e.log.With("req_id", r.req.TraceID)
	}
	return r.log
}

// stage is one stage being run.
type stage struct {
	idx     int
	node    *Node
	cfg     stageConfig
	allowed int  // turns this stage may use
	answers bool // the answering stage: its content streams to the client
	// tools are what its next call is offered (chooseTools); toolRoom
	// is what they may weigh, in characters (-1: no limit), and query
	// and usedTools what they are chosen by (toolfit.go).
	tools     []Tool
	finds     bool // tools ends with the run's own find_tools
	toolRoom  int
	query     []uint64
	usedTools []string
	msgs      []Message
	// base is how many of msgs the stage was given (instructions and the
	// client's conversation); its own turns and notes come after.
	base     int
	st       StageTrace
	started  time.Time
	content  []string // content of each turn, in order
	evidence []evidence
	seen     map[uint64]*seenCall // made at the first call: most stages make none
	fmtErrs  int
	idle     int    // turns in a row without progress
	stop     string // stop status, "" while running
	reason   string // last reasoning text
	// host is the host of a several-host node that served the stage's
	// turns so far (Request.Host): its next turns go there when they can.
	host string
	// earlier are the answers of the stages before, which the answering
	// stage's stream is held back from while it may be copying one.
	earlier []string
	// loop is set when the stage's answer was cut out of a repetition loop.
	loop *antiloop.Loop
	// thinkLoop is set when the stage's reasoning went into a repetition
	// loop: the call was stopped, and the stage has no answer.
	thinkLoop *antiloop.Loop
	// instead is the stage whose answer replaces this one's, degenerate.
	instead *stage
	// badCall is the last call's unreadable text tool call, if any.
	badCall judge.TextCalls
	// awaiting are the client calls the stage waits for, and clientRes
	// what the stage knows of each client call identity (client_chain.go).
	awaiting  []pendingCall
	clientRes map[uint64]clientSeen
	// span is the stage's exported span, nil unless the request is
	// traced (telemetry.go); model is the model the last call's upstream
	// said answered, for its span.
	span  trace.Span
	model string
	// failure is the error that stopped the stage (stageError), whose
	// span describes it without what the node said (SpanError).
	failure error
}

type stageConfig struct {
	tools  bool
	prompt string
}

// evidence is a tool call and what it returned, kept for later stages.
type evidence struct {
	name, args, status, result string
}

func (s *stage) answer() string { return strings.Join(s.content, "") }

// final is the text of the stage's answering turn, its last with text: the
// client's answer. An earlier turn's "Let me look at the workspace." is
// not part of it (a stream has shown it already, a paragraph apart).
func (s *stage) final() string {
	if len(s.content) == 0 {
		return ""
	}
	return s.content[len(s.content)-1]
}

// output is the stage's text for the trace: its turns' texts with a
// paragraph break between them, so that "Let me look." and the next turn's
// "Raw findings: …" do not read as one glued sentence in the trace, the
// cockpit or the <details> blocks.
func (s *stage) output() string { return strings.Join(s.content, "\n\n") }

// reachableAfter counts the stages after i whose node is not known offline.
func (r *run) reachableAfter(i int) int {
	n := 0
	for _, s := range r.e.cfg.Chain.Stages[i+1:] {
		if !r.e.offline.IsOffline(s.Node) {
			n++
		}
	}
	return n
}

// reflexive runs the configured stages in order.
func (r *run) reflexive(ctx context.Context) (*Result, error) {
	return r.reflexiveFrom(ctx, 0, nil, nil)
}

// reflexiveFrom runs the stages from index from; resumed, when set, is that
// stage resumed after the client ran its tools, and done the stages before.
func (r *run) reflexiveFrom(ctx context.Context, from int, resumed *stage, done []*stage) (*Result, error) {
	stages := r.e.cfg.Chain.Stages
	r.recheckOffline(ctx, stages[from:])
	var last *stage // last stage that produced something usable
	if len(done) > 0 {
		last = done[len(done)-1]
	}
	for i := from; i < len(stages); i++ {
		var stageErr error
		s := resumed
		if i != from || s == nil {
			var err error
			if s, err = r.openStage(ctx, i, done, last); err != nil {
				return nil, err
			}
		}
		if s.answers {
			s.earlier = earlierAnswers(done)
		}
		if s.stop == "" {
			if stageErr = r.turns(ctx, s); stageErr != nil {
				if fatal(ctx, stageErr) {
					return nil, stageErr
				}
				r.stageError(s, stageErr)
			}
		}
		if len(s.awaiting) > 0 && stageErr == nil {
			return r.awaitingResult(ctx, s, done, i)
		}
		if s.answers && s.stop != "" && s.stop != StageFailed && s.stop != StageSkippedOffline && s.stop != StageSkippedContext {
			if stageErr = r.finalCall(ctx, s); stageErr != nil {
				if fatal(ctx, stageErr) {
					return nil, stageErr
				}
				r.stageError(s, stageErr)
			}
		}
		if stageErr == nil {
			r.judgeAnswer(s, done)
		}
		if err := r.endStage(s); err != nil {
			return nil, err
		}
		if stageErr != nil && r.streamed {
			// Part of this stage's answer already reached the client: no
			// other stage's answer can be stitched onto it.
			return nil, &Failure{Trace: r.trace, Err: stageErr}
		}
		if s.st.Status != StageFailed && s.st.Status != StageSkippedOffline && s.st.Status != StageSkippedContext {
			done = append(done, s)
			last = s
		}
	}
	// Every stage's call has ended: the server may load now what the next
	// request calls first.
	r.e.warmRest()
	if last == nil {
		// The causes are deep in the trace; the first one, which the
		// others usually share (nothing listens), goes with the error, so
		// that the client's message and the log line name it.
		err := ErrAllStagesFailed
		if r.ctxErr != nil && r.allSkipped(StageSkippedContext) {
			// No node could take the prompt: the client's to shorten.
			return nil, &Failure{Trace: r.trace, Err: r.ctxErr}
		}
		for _, st := range r.trace.Stages {
			if st.Error != "" {
				err = fmt.Errorf("%w; first cause: %s", ErrAllStagesFailed, st.Error)
				break
			}
		}
		return nil, &Failure{Trace: r.trace, Err: err}
	}
	if last.answer() == "" && len(last.evidence) > 0 && !last.answers {
		// The stages after it failed: the last one that worked answers from
		// what it gathered, without tools.
		if err := r.finalCall(ctx, last); err != nil && fatal(ctx, err) {
			return nil, err
		}
		last.st.Output, last.st.Reasoning = last.output(), last.reason
		r.trace.Stages[last.idx] = last.st
	}
	if !last.answers {
		// The answering stage failed or was skipped. The last stage left
		// has no answer to give when it was degenerate (only reasoning,
		// say): an earlier stage's answer is the best there is, as for a
		// degenerate answering stage. The answering stage's error says
		// whose answer the reply carries.
		if strings.TrimSpace(last.answer()) == "" {
			if good := lastGood(done); good != nil {
				last = good
			}
		}
		tail := &r.trace.Stages[len(r.trace.Stages)-1]
		if strings.TrimSpace(last.answer()) != "" {
			tail.Error += "; answered with " + last.node.Name + "'s answer"
		} else {
			tail.Error += "; no earlier stage had an answer to give instead"
		}
	}
	return r.result(last)
}

// openStage builds and starts stage i of the chain after the stages done
// (last is the last of them that worked): its tools fitted and chosen, its
// turns out of the budgets, its messages, and its skip when its node is
// remembered offline or came back after an earlier stage answered.
func (r *run) openStage(ctx context.Context, i int, done []*stage, last *stage) (*stage, error) {
	stages := r.e.cfg.Chain.Stages
	sc := stages[i]
	node := r.e.nodes[sc.Node]
	after := r.reachableAfter(i)
	s := r.newStage(len(r.trace.Stages), node, stageConfig{tools: sc.Tools, prompt: sc.Prompt})
	// Only the stages with tools are offered any, the client's
	// included (stageTools): a stage without them needs no model
	// that takes tools, whatever the client brought.
	if s.cfg.tools {
		if err := r.fitTools(ctx, s); err != nil {
			return nil, err
		}
	}
	s.answers = after == 0
	s.allowed = min(sc.MaxTurns, r.left-after)
	if s.answers && s.cfg.tools {
		if r.left <= 1 {
			// One turn left: it must answer, so it gets no tools.
			s.cfg.tools = false
		} else if s.allowed >= r.left {
			// Keep one turn for the final call without tools.
			s.allowed = r.left - 1
		}
	}
	s.allowed = max(s.allowed, 1)
	if s.cfg.tools {
		r.chooseTools(ctx, s, done)
	}
	s.msgs = r.partsFor(ctx, s, r.stageMessages(ctx, s, done, i, len(stages)))
	s.base = len(s.msgs)
	if err := r.startStage(ctx, s); err != nil {
		return nil, err
	}
	if cause, ok := r.e.offline.Lookup(node.Name); ok {
		s.stop = StageSkippedOffline
		s.st.Error = fmt.Sprintf("node %s is remembered offline for %s after: %s", node.Name, r.e.offline.TTL(node.Name), cause)
	} else if last != nil && last.answers {
		// The node was offline when an earlier stage became the
		// answering one, and is back: that stage answered, and its
		// answer may have reached the client already. A second
		// answer would be glued to it.
		s.stop = StageSkippedOffline
		s.st.Error = fmt.Sprintf("node %s was offline when %s became the answering stage, which answered", node.Name, last.node.Name)
	}
	return s, nil
}

// allSkipped reports whether every stage of the trace has status.
func (r *run) allSkipped(status string) bool {
	for _, st := range r.trace.Stages {
		if st.Status != status {
			return false
		}
	}
	return len(r.trace.Stages) > 0
}

// simple answers with one node, with the server tools when serverTools is
// set, under the same guards as a chain stage.
func (r *run) simple(ctx context.Context, node *Node, serverTools bool) (*Result, error) {
	s := r.newStage(0, node, stageConfig{tools: serverTools})
	if err := r.fitTools(ctx, s); err != nil {
		return nil, err
	}
	s.answers = true
	s.allowed = r.left
	client := len(r.req.ClientTools) > 0
	switch {
	case client || s.allowed <= 1:
		// The client's tools replace the server's; and a single turn must
		// answer, so it gets no tools.
		s.cfg.tools = false
	case s.cfg.tools:
		s.allowed-- // kept for the final call without tools
	}
	if s.cfg.tools {
		r.chooseTools(ctx, s, nil)
		s.msgs = append([]Message{{Role: "system", Content: r.simplePrompt(s)}}, r.req.Messages...)
	} else {
		s.msgs = append([]Message(nil), r.req.Messages...)
	}
	s.msgs = r.partsFor(ctx, s, s.msgs)
	s.base = len(s.msgs)
	if err := r.startStage(ctx, s); err != nil {
		return nil, err
	}
	var msg *Message
	var err error
	if client {
		msg, err = r.clientTurns(ctx, s)
	} else {
		err = r.turns(ctx, s)
		if err == nil && s.stop != "" {
			err = r.finalCall(ctx, s)
		}
	}
	if err != nil {
		if fatal(ctx, err) {
			return nil, err
		}
		r.stageError(s, err)
		if eerr := r.endStage(s); eerr != nil {
			return nil, eerr
		}
		return nil, &Failure{Trace: r.trace, Err: err}
	}
	if msg == nil {
		r.judgeAnswer(s, nil)
	}
	if err := r.endStage(s); err != nil {
		return nil, err
	}
	if msg != nil {
		return &Result{Message: *msg, FinishReason: "tool_calls", Trace: r.trace, Upstream: r.upstream}, nil
	}
	return r.result(s)
}

func (r *run) newStage(idx int, node *Node, cfg stageConfig) *stage {
	now := time.Now()
	return &stage{
		idx: idx, node: node, cfg: cfg, started: now,
		st: StageTrace{Node: node.Name, Model: node.Model, ToolsUsed: []ToolUse{}, StartMS: now.Sub(r.t0).Milliseconds()},
	}
}

func (r *run) startStage(ctx context.Context, s *stage) error {
	if !s.cfg.tools {
		s.tools = nil
	}
	r.stageSpan(ctx, s, false)
	r.trace.Stages = append(r.trace.Stages, s.st)
	return r.emit(Event{Kind: EventStageStart, Stage: s.idx, Node: s.node.Name, Model: s.node.Model, MaxTurns: s.allowed, Tools: len(s.tools) > 0})
}

func (r *run) endStage(s *stage) error {
	if s.stop == "" {
		s.stop = StageOK
	}
	s.st.Status = s.stop
	s.st.Output, s.st.Reasoning = s.output(), s.reason
	s.st.DurationMS = time.Since(s.started).Milliseconds()
	r.trace.Stages[s.idx] = s.st
	r.endStageSpan(s)
	st := s.st
	if r.e.log.Enabled(context.Background(), slog.LevelDebug) {
		r.logger().Debug("stage end", "stage", s.idx, "node", s.node.Name, "status", st.Status, "turns", st.Turns, "dur_ms", st.DurationMS)
	}
	return r.emit(Event{Kind: EventStageEnd, Stage: s.idx, Node: s.node.Name, Model: s.node.Model, StageTrace: &st})
}

// stageError records why a stage could not go on.
func (r *run) stageError(s *stage, err error) {
	var ue *node.UpstreamError
	if errors.As(err, &ue) && ue.Offline() {
		r.e.offline.Mark(s.node.Name, r.e.redact.String(ue.Error()))
		if s.st.Turns == 1 && len(s.content) == 0 && len(s.st.ToolsUsed) == 0 {
			// Refused at the first call: the node did no work, so the turn
			// goes back to the budget.
			s.stop = StageSkippedOffline
			s.st.Turns = 0
			r.trace.Turns--
			r.left++
		} else {
			s.stop = StageFailed
		}
	} else if errors.Is(err, ErrContextLength) && len(s.content) == 0 && len(s.st.ToolsUsed) == 0 {
		// The node cannot take the prompt: it did no work, so the turn
		// goes back to the budget and the next stage goes on.
		s.stop = StageSkippedContext
		r.trace.Turns -= s.st.Turns
		r.left += s.st.Turns
		s.st.Turns = 0
		if r.ctxErr == nil {
			r.ctxErr = err
		}
	} else {
		s.stop = StageFailed
	}
	s.st.Error = r.e.redact.String(err.Error())
	s.failure = err
	r.logger().Warn("stage error", "stage", s.idx, "node", s.node.Name, "err", err)
}

// turns is a stage's turn loop: call the model, run the tool calls it asks
// for, feed the results back, until it answers without tools or a guard or
// budget stops it.
func (r *run) turns(ctx context.Context, s *stage) error {
	for s.st.Turns < s.allowed {
		msg, err := r.call(ctx, s, s.tools)
		if err != nil {
			return err
		}
		if len(s.tools) == 0 || len(msg.ToolCalls) == 0 && s.badCall.Bad == "" {
			return nil
		}
		s.msgs = append(s.msgs, msg)
		if r.hasClientCalls(msg.ToolCalls) {
			if err := r.clientBatch(ctx, s, msg.ToolCalls); err != nil || len(s.awaiting) > 0 || s.stop != "" {
				return err
			}
			continue
		}
		if len(msg.ToolCalls) > 0 {
			results, err := r.execBatch(ctx, s, msg.ToolCalls)
			if err != nil {
				return err
			}
			s.msgs = append(s.msgs, results...)
		}
		if s.badCall.Bad != "" && s.stop == "" {
			if err := r.badTextCall(s, s.badCall); err != nil {
				return err
			}
		}
		if s.stop != "" {
			return nil
		}
	}
	// The budget ran out while the model still asked for tools.
	s.stop = StageStoppedBudget
	return nil
}

// finalCall turns what a stopped stage gathered into an answer with one more
// call offering no tools (design 003). It counts toward the global budget,
// not the stage's turns.
func (r *run) finalCall(ctx context.Context, s *stage) error {
	if r.left <= 0 {
		return nil
	}
	s.msgs = append(s.msgs, Message{Role: "user", Content: finalNote(s.stop)})
	_, err := r.callNoTurn(ctx, s)
	return err
}

// call makes one model turn of stage s and accounts for it.
func (r *run) call(ctx context.Context, s *stage, offered []Tool) (Message, error) {
	s.st.Turns++
	r.trace.Turns++
	r.left--
	if err := r.emit(Event{Kind: EventTurn, Stage: s.idx, Node: s.node.Name, Turn: s.st.Turns}); err != nil {
		return Message{}, err
	}
	return r.fittedCall(ctx, s, offered)
}

// callNoTurn is the final tool-less call: a turn of the chain, not the stage.
func (r *run) callNoTurn(ctx context.Context, s *stage) (Message, error) {
	r.trace.Turns++
	r.left--
	return r.fittedCall(ctx, s, nil)
}

// result builds the client's answer from the answering stage.
func (r *run) result(s *stage) (*Result, error) {
	text := s.final()
	replaced := s.instead != nil
	switch {
	case replaced:
		text = s.instead.final()
	case text == "" && s.stop != StageOK:
		text, replaced = noAnswer(s), true
	}
	if (!r.streamed || replaced) && text != "" {
		// The answer comes from a stage that did not stream (the stages
		// after it failed), or stands for a degenerate one that was held
		// back: deliver it whole.
		if err := r.emit(Event{Kind: EventDelta, Stage: s.idx, Node: s.node.Name, Content: text}); err != nil {
			return nil, err
		}
	}
	res := &Result{
		Message:      Message{Role: "assistant", Content: text, Reasoning: s.reason},
		FinishReason: answerFinish(s.st.FinishReason),
		Trace:        r.trace,
		Upstream:     r.upstream,
	}
	return res, nil
}

// retryable reports upstream failures worth another try: the node refused
// the connection or answered 502/503. Other 4xx and 5xx would fail again.
func retryable(err error) bool {
	var ue *node.UpstreamError
	if !errors.As(err, &ue) {
		return false
	}
	return ue.Kind == node.KindConnect || ue.Kind == node.KindStatus && (ue.Status == 502 || ue.Status == 503)
}

// wait sleeps for d or until ctx ends.
func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fatal reports errors that end the whole run rather than one stage: the
// client went away, or a node's queue is full (the client should retry).
func fatal(ctx context.Context, err error) bool {
	var qe *node.QueueFullError
	return ctx.Err() != nil || errors.As(err, &qe)
}

// ensureIDs gives every call a unique ID: text calls have none, and some
// backends repeat theirs within a batch.
func ensureIDs(calls []ToolCall, turn int) {
	seen := map[string]bool{}
	for i := range calls {
		if calls[i].ID == "" || seen[calls[i].ID] {
			calls[i].ID = fmt.Sprintf("call_t%d_%d", turn, i)
		}
		seen[calls[i].ID] = true
	}
}
