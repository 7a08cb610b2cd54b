package chain

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"chainproxy/antiloop"
	"chainproxy/chain/node"
	"chainproxy/chain/toolfit"
	"chainproxy/config"
	"chainproxy/memory"
)

// defaultOllamaWindow is the window Ollama runs a model with unless told
// otherwise (node.DefaultOllamaWindow).
const defaultOllamaWindow = node.DefaultOllamaWindow

// ErrContextLength is wrapped by the error of a prompt that cannot fit the
// window of the node that must answer it: the client's to shorten (400
// context_length_exceeded), never a silent cut.
var ErrContextLength = errors.New("context length exceeded")

// ContextLengthError is a prompt too long for a node's window, found by
// the proxy's own estimate or reported by the upstream.
type ContextLengthError struct {
	Node string
	// Window and Estimate are in tokens; 0 when not known (an upstream
	// that refused a node of unknown window). Tools is the part of
	// Estimate the tool definitions offered take: the fewest a stage with
	// tools runs with (find_tools alone when tools were withheld).
	Window, Estimate, Tools int
	// Upstream is the upstream's own message, when it refused the prompt.
	Upstream string
}

func (e *ContextLengthError) Error() string {
	switch {
	case e.Upstream != "":
		return fmt.Sprintf("node %s refused the prompt as longer than its context window: %s", e.Node, e.Upstream)
	case e.Tools > 0:
		return fmt.Sprintf("the prompt does not fit node %s's context window of %d tokens: the instructions and the last message alone need about %d tokens with the answer's reserve, and the fewest tools the stage runs with about %d more", e.Node, e.Window, e.Estimate-e.Tools, e.Tools)
	default:
		return fmt.Sprintf("the prompt does not fit node %s's context window of %d tokens: the instructions and the last message alone need about %d tokens with the answer's reserve", e.Node, e.Window, e.Estimate)
	}
}

func (e *ContextLengthError) Unwrap() error { return ErrContextLength }

// WindowError is a configured context_window above what the node's model
// supports (node.WindowError).
type WindowError = node.WindowError

// contextOverflow reports whether err is an upstream refusing a prompt as
// longer than its window: Ollama with truncate false ("the input length
// exceeds the context length"), OpenAI and vLLM ("context_length_exceeded",
// "maximum context length is …"), llama-server ("the request exceeds the
// available context size", "request (N tokens) exceeds the available
// context size (M tokens)", "input is larger than the max context size":
// its exceed_context_size_error, whose type its body carries apart from
// the message).
func contextOverflow(err error) (string, bool) {
	if err == nil {
		// The common case, without the allocation errors.As costs.
		return "", false
	}
	var ue *node.UpstreamError
	if !errors.As(err, &ue) {
		return "", false
	}
	msg := strings.ToLower(ue.Message)
	if msg == "" && ue.Err != nil {
		msg = strings.ToLower(ue.Err.Error())
	}
	if strings.Contains(msg, "exceeds the context length") || strings.Contains(msg, "context_length_exceeded") ||
		strings.Contains(msg, "maximum context length") || strings.Contains(msg, "context window") && strings.Contains(msg, "exceed") ||
		strings.Contains(msg, "available context size") || strings.Contains(msg, "max context size") {
		return ue.Message, true
	}
	return "", false
}

// Window is node n's context window in tokens as the node layer knows it
// (node.Set.Window); 0 when unknown (no fitting). A configured one is read
// here, as the Set would, without its lookups: every call fits to it.
func (e *Engine) Window(n *Node) int {
	if w := cmp.Or(n.ContextWindow, n.numCtx); w > 0 {
		return w
	}
	return e.set.Window(n.Name)
}

// learnWindow asks n's server the window its loaded model runs with, when
// the configuration does not say and the backend can tell.
func (e *Engine) learnWindow(ctx context.Context, n *Node) { e.set.LearnWindow(ctx, n.Name) }

// reserve is the tokens of window kept for the answer: the request's
// max_tokens, else memory.answer_reserve, at most half the window.
func (r *run) reserve(window int) int {
	n := r.e.cfg.Memory.AnswerReserve
	if mt := r.req.Params.MaxTokens; mt != nil && *mt > 0 {
		n = *mt
	}
	return min(n, window/2)
}

// findingsBudget is what the earlier stages' findings may weigh at the
// head of stage s's current question, in characters: chain.context_budget,
// at most what s's node's window leaves beside the stage's instructions
// (sys), the user's question and what follows it, the tools s is offered,
// the answer's reserve and the earlier questions' share. The instructions
// and the current question are always kept whole: findings rendered for a
// larger window would make the question alone outgrow a small one, and the
// stage be skipped rather than read them shorter.
func (r *run) findingsBudget(ctx context.Context, s *stage, sys string) int {
	budget := r.e.cfg.Chain.ContextBudget
	window := r.e.Window(s.node)
	if window == 0 {
		return budget
	}
	ratio := r.e.calibration.Ratio(ctx, s.node.Model)
	in := memory.Input{Window: window, Reserve: r.reserve(window), ToolChars: toolfit.Chars(s.tools), Ratio: ratio}
	msgs := r.req.Messages
	q := len(msgs) - 1
	for q > 0 && msgs[q].Role != "user" {
		q--
	}
	in.Msgs, in.ThinkingSent = msgs[max(q, 0):], sendsThinking(s.node)
	_, current := memory.Fits(&in)
	room := in.Budget() - len(sys) - memory.MessageOverhead - current - len(questionHead) -
		int(float64(window)*ratio*r.e.cfg.Memory.QuestionsShare)
	return min(budget, max(room, 0))
}

// sendsThinking reports whether n's backend sends the messages' reasoning
// upstream: the Ollama backend does (api.Message.Thinking), and Ollama's
// templates render that of the current exchange; the OpenAI-compatible
// one leaves it out.
func sendsThinking(n *Node) bool { return n.Provider == config.ProviderOllama }

// question is the index in s.msgs of the user's current question: the last
// user message the stage was given (its own notes come after s.base).
func (s *stage) question() int {
	base := min(s.base, len(s.msgs))
	for i := base - 1; i >= 0; i-- {
		if s.msgs[i].Role == "user" {
			return i
		}
	}
	return base
}

// fitted is a prompt ready to send and what fitting it took.
type fitted struct {
	msgs  []Message
	marks []string
	chars int // what msgs and the tools weigh
}

// fit returns the messages to send for s's next call: s.msgs as they are
// when they fit the node's window (the common case: a count, no copy), else
// a fitted copy, with what was done recorded in the stage's trace. tighten
// lowers the budget after the node refused a prompt estimated to fit.
func (r *run) fit(ctx context.Context, s *stage, offered []Tool, tighten float64) (fitted, error) {
	window := r.e.Window(s.node)
	tc := toolfit.Chars(offered)
	if window == 0 || r.relay {
		return fitted{msgs: s.msgs, chars: memory.Chars(s.msgs) + tc}, nil
	}
	ratio := r.e.calibration.Ratio(ctx, s.node.Model)
	in := memory.Input{
		Msgs: s.msgs, Current: s.question(), Window: window, Reserve: r.reserve(window),
		ToolChars: tc, Ratio: ratio, Tighten: tighten, ThinkingSent: sendsThinking(s.node),
		Shares: memory.Shares{Questions: r.e.cfg.Memory.QuestionsShare, Recent: r.e.cfg.Memory.RecentShare, Summaries: r.e.cfg.Memory.SummariesShare},
	}
	ct := s.st.Context
	if ct == nil {
		ct = &ContextTrace{}
		s.st.Context = ct
	}
	ct.Window = window
	ok, chars := memory.Fits(&in)
	if ok {
		ct.EstimatedTokens = max(ct.EstimatedTokens, memory.Tokens(chars+tc, ratio))
		return fitted{msgs: s.msgs, chars: chars + tc}, nil
	}
	res, err := memory.Fit(ctx, &in, &folder{r: r, s: s})
	if err != nil {
		var tl *memory.TooLongError
		if errors.As(err, &tl) {
			ct.EstimatedTokens = max(ct.EstimatedTokens, tl.Estimate)
			return fitted{}, &ContextLengthError{Node: s.node.Name, Window: window, Estimate: tl.Estimate + tl.Reserve, Tools: tl.Tools}
		}
		return fitted{}, err
	}
	ct.EstimatedTokens = max(ct.EstimatedTokens, memory.Tokens(res.Chars+tc, ratio))
	for _, a := range res.Actions {
		ct.Actions = append(ct.Actions, ContextAction(a))
	}
	if res.SummaryErr != nil {
		r.logger().Warn("summarizer failed: older turns dropped", "stage", s.idx, "node", s.node.Name, "err", res.SummaryErr)
	}
	return fitted{msgs: res.Msgs, marks: res.Marks, chars: res.Chars + tc}, nil
}

// observe records what the node reported of a prompt: the calibration
// learns from it, and a prompt at or above the window is flagged (the
// upstream may have cut it anyway).
func (r *run) observe(ctx context.Context, s *stage, f fitted, usage *Usage) {
	if usage == nil || usage.PromptTokens <= 0 || r.relay {
		return
	}
	r.e.calibration.Observe(ctx, s.node.Model, f.chars, usage.PromptTokens)
	if ct := s.st.Context; ct != nil {
		ct.ReportedTokens = max(ct.ReportedTokens, usage.PromptTokens)
		if usage.PromptTokens >= ct.Window {
			ct.Overflow = true
		}
	}
}

// refitFactor is how much a model's ratio drops (memory.Calibration.Refused),
// and the retry's budget tightens, after it refused a prompt estimated to
// fit. Ollama's refusal gives no numbers, so one retry must land well
// inside the window: half the characters per token and half the budget,
// four times fewer characters, covers a byte-level tokenizer taken for an
// English one. The budget is tightened no further than a byte a token
// (memory.Input), the densest tokenizer there is: the ratio may already
// be at the refused prompt's characters per window token, near the truth
// for a prompt just over the window. The retry's reported prompt tokens
// then set the ratio the next requests to the model start from.
const refitFactor = 0.5

// errSummarySpent is the summarizer's answer to a second request for a
// summary in one run: at most one summarizer call per request.
var errSummarySpent = errors.New("the request's one summarizer call is spent")

// folder is memory.Folder over the engine's store and summarizer node, for
// one stage of one run.
type folder struct {
	r *run
	s *stage
}

func (f *folder) summarizer() *Node {
	name := f.r.e.cfg.Memory.Summarizer
	if name == "" {
		name = f.r.e.cfg.Chain.SimpleNode
	}
	return f.r.e.nodes[name]
}

func (f *folder) Window(ctx context.Context) (int, float64) {
	n := f.summarizer()
	w := f.r.e.Window(n)
	if w == 0 {
		// An OpenAI-compatible summarizer of unknown window: the
		// smallest window of the small models the chain is for.
		w = defaultOllamaWindow
	}
	return w, f.r.e.calibration.Ratio(ctx, n.Model)
}

func (f *folder) Cached(ctx context.Context, key string) (memory.Summary, bool) {
	if f.r.e.kv == nil {
		return memory.Summary{}, false
	}
	data, ok, err := f.r.e.kv.Get(ctx, key)
	if err != nil || !ok {
		return memory.Summary{}, false
	}
	var s memory.Summary
	if json.Unmarshal(data, &s) != nil {
		return memory.Summary{}, false
	}
	return s, true
}

// Summarize makes the run's one summarizer call, bounded by
// memory.summary_timeout, or waits for the same call another request of
// the conversation is making (shared). The call is a step of the trace of
// the stage that made it (kind "summary") with its own time and tokens.
func (f *folder) Summarize(ctx context.Context, prompt []Message) (string, bool, error) {
	r := f.r
	if r.summarized {
		return "", false, errSummarySpent
	}
	r.summarized = true
	n := f.summarizer()
	if cause, off := r.e.stillOffline(ctx, n); off {
		return "", false, fmt.Errorf("summarizer node %s is offline: %s", n.Name, cause)
	}
	asked := time.Now()
	defer func() { r.upstream += time.Since(asked) }()
	return r.e.summaries.Do(ctx, n.Name, prompt, r.e.cfg.Memory.SummaryTimeout, func(ctx context.Context) (string, error) {
		return f.call(ctx, n, prompt, asked)
	})
}

// call runs the summarizer n over prompt, under ctx (the flight's, already
// bounded), and records it in the stage's trace.
func (f *folder) call(ctx context.Context, n *Node, prompt []Message, asked time.Time) (string, error) {
	r, s := f.r, f.s
	mc := ModelCall{Turn: s.st.Turns + 1, Kind: "summary", Node: n.Name, StartMS: asked.Sub(r.t0).Milliseconds()}
	mc.KeepPrompt(prompt, nil)
	if r.e.admission != nil {
		release, err := r.e.admission.Acquire(ctx, n.Name, r.req.Batch)
		if err != nil {
			return "", err
		}
		defer release()
	}
	began := time.Now()
	mc.QueueMS = began.Sub(asked).Milliseconds()
	var text strings.Builder
	var usage *Usage
	var load time.Duration
	// The summary has its share of the stage's window to fill; a model
	// that rambles stops there.
	maxTokens := min(memory.SummaryTokens, int(float64(max(r.e.Window(s.node), defaultOllamaWindow))*r.e.cfg.Memory.SummariesShare)+64)
	// Asked of the summarizer's server once if nothing tells yet.
	caps, _ := r.e.learnCaps(ctx, n)
	req := n.caps.Apply(&node.Request{Model: n.Model, Messages: prompt, Whole: true, Params: Params{MaxTokens: &maxTokens}, KeepAlive: n.keepAlive, NumCtx: n.numCtx,
		NoThink: thinks(n, caps)})
	cctx, span := r.startCall(ctx, s, n, mc.Kind, prompt, 0)
	err := n.caps.Chat(cctx, n.Backend, req, func(c node.Chunk) error {
		text.WriteString(c.Content)
		if c.Usage != nil {
			usage = c.Usage
		}
		if c.FinishReason != "" {
			mc.FinishReason, load = c.FinishReason, c.Load
		}
		return nil
	})
	mc.DurationMS = time.Since(began).Milliseconds()
	mc.SplitLoad(load)
	if usage != nil {
		mc.Usage = *usage
		s.st.Usage = s.st.Usage.Add(*usage)
	}
	if err != nil {
		var ue *node.UpstreamError
		if errors.As(err, &ue) && ue.Offline() {
			r.e.offline.Mark(n.Name, ue.Error())
		}
		if _, over := contextOverflow(err); over {
			// Its tokenizer is denser than estimated: the stage's own call
			// to the same model learns from it.
			r.e.learnWindow(ctx, n)
			w, _ := f.Window(ctx)
			r.e.calibration.Refused(ctx, n.Model, memory.Chars(prompt), w, refitFactor)
		}
		mc.Error = err.Error()
	} else if usage != nil {
		r.e.calibration.Observe(ctx, n.Model, memory.Chars(prompt), usage.PromptTokens)
	}
	// A thinking model may open its answer with a <think> block.
	var ts node.ThinkSplitter
	head, _ := ts.Feed(text.String())
	tail, _ := ts.Flush()
	summary := head + tail
	// A small model may loop, one line again and again to its cap: the
	// summary is cut after the first copy, as a stage's answer is, rather
	// than cached and sent with every later request.
	var rep antiloop.Repeats
	if l, loop := rep.End(summary); loop {
		summary = summary[:l.Keep]
	}
	summary = strings.TrimSpace(summary)
	if err == nil && summary == "" {
		// A thinking summarizer that spent its cap on reasoning wrote
		// nothing: a failure, so that the trace and the log say why the
		// older turns were dropped.
		err = fmt.Errorf("summarizer node %s wrote no summary (finish_reason %q)", n.Name, mc.FinishReason)
		mc.Error = err.Error()
	}
	s.st.Calls = append(s.st.Calls, mc)
	if span != nil {
		r.endCall(span, &mc, "", &Message{Role: "assistant", Content: text.String()}, err)
	}
	if err != nil {
		return "", err
	}
	return summary, nil
}

// Store caches s for memory.summary_ttl; best effort: a summary not cached
// is made again next time.
func (f *folder) Store(ctx context.Context, key string, s memory.Summary) {
	if f.r.e.kv == nil {
		return
	}
	if data, err := json.Marshal(s); err == nil {
		_ = f.r.e.kv.Set(context.WithoutCancel(ctx), key, data, f.r.e.cfg.Memory.SummaryTTL)
	}
}
