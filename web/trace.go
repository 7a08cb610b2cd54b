package web

import (
	"slices"
	"strings"
	"sync"
	"time"

	"chainproxy/chain"
)

// encodeTrace encodes tr for a response, with each stage's output and
// reasoning capped, and for the trace store, whole. stored is nil when the
// two would differ, so that storeTrace encodes the whole trace itself; a
// trace with nothing to cut is encoded once.
func encodeTrace(tr *chain.Trace) (resp, stored []byte, err error) {
	capped, cut := tr.Capped(chain.OutputCap)
	if resp, err = marshal(&capped); err != nil || cut {
		return resp, nil, err
	}
	return resp, resp, nil
}

// cappedStage is st as responses show it: output and reasoning capped.
func cappedStage(st *chain.StageTrace) *chain.StageTrace {
	if st == nil {
		return nil
	}
	c, _ := st.Capped(chain.OutputCap)
	return &c
}

// traceListCap is how many recent chains the trace list keeps: as many as
// the trace store (store.DefaultTraces), so that a listed trace can be
// opened.
const traceListCap = 500

// questionCap caps a listed question, in bytes.
const questionCap = 200

// traceSummary is one chain in the trace list (GET /v1/chain/traces and its
// event stream), and the head of a stored trace document.
type traceSummary struct {
	TraceID string `json:"trace_id"`
	// Started is when the chain started, in Unix milliseconds.
	Started int64 `json:"started"`
	// Question names the request: the first line of the user's words
	// the classifier judged, or of a client's own request's name, else of
	// the user's last message.
	Question string       `json:"question"`
	Mode     string       `json:"mode"`
	Stages   []stageBadge `json:"stages"`
	// Status is "running" until the request ends, then the chain's:
	// "failed", "awaiting_client", a stage's stop ("stopped_repeat", …),
	// "degenerate" or "ok" (see chainStatus).
	Status     string `json:"status"`
	DurationMS int64  `json:"duration_ms"`
	Tokens     int    `json:"tokens"`
	// Client is the caller's User-Agent.
	Client string `json:"client"`
	// Resumed is set on a chain that went on with a client's tool results.
	Resumed bool `json:"resumed,omitempty"`
}

// stageBadge is a stage as the list shows it.
type stageBadge struct {
	Node   string `json:"node"`
	Status string `json:"status"`
	Turns  int    `json:"turns"`
}

// traceRunning is the status of a chain still under way.
const traceRunning = "running"

// listedTrace is a chain in the list: its summary, whose it is, and while
// it runs, its stages so far (the stored trace replaces them at the end).
type listedTrace struct {
	owner   string
	sum     traceSummary
	start   time.Time
	partial *chain.Trace
	// stale: sum's badges are older than partial's stages. They are made
	// when read (summary), not on every event of every request.
	stale bool
}

// traceSub is one reader of the list's event stream. dirty and wake are
// how the hub hands it changes without ever blocking on it: the hub notes
// the changed ids and wakes it; the reader takes them when it can.
type traceSub struct {
	who   string
	all   bool
	wake  chan struct{} // capacity 1
	dirty []string      // guarded by traceHub.mu
}

// traceHub lists recent chains from every front and client, live: it is
// the engine's Watcher, and storeTrace tells it when a request ends. It
// keeps summaries only; whole traces are in the trace store.
type traceHub struct {
	mu    sync.Mutex
	items map[string]*listedTrace
	order []string // ids, oldest first
	subs  map[*traceSub]struct{}
	now   func() time.Time
}

var _ chain.Watcher = (*traceHub)(nil)

func newTraceHub() *traceHub {
	return &traceHub{items: map[string]*listedTrace{}, subs: map[*traceSub]struct{}{}, now: time.Now}
}

// Watch implements chain.Watcher: a chain appears at its classification
// and its stages as they start, turn, call tools and end.
func (h *traceHub) Watch(req *chain.RunRequest, ev chain.Event) {
	if req.TraceID == "" || ev.Kind == chain.EventDelta {
		// The answer's text is not listed: a delta, most of a stream's
		// events, changes nothing here, and must not take the lock.
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	it := h.items[req.TraceID]
	if it != nil && it.sum.Status != traceRunning && ev.Kind == chain.EventClassified {
		// A new request under an ended chain's id: the client sent the
		// traceparent of one trace with several requests (an agent's
		// run, a tool round trip). The list shows the latest.
		it = nil
	}
	if it == nil {
		if ev.Kind != chain.EventClassified {
			return
		}
		it = h.add(req.TraceID, req.Caller, question(ev.Question, req.Messages), req.Client)
	}
	tr := it.partial
	if tr == nil || it.sum.Status != traceRunning {
		return // already ended
	}
	switch ev.Kind {
	case chain.EventClassified:
		tr.Mode = ev.Mode
		for _, r := range ev.Reasons {
			if strings.HasPrefix(r, "resumed in stage ") {
				it.sum.Resumed = true
			}
		}
		tr.Reasons = slices.Clone(ev.Reasons)
	case chain.EventStageStart:
		for len(tr.Stages) <= ev.Stage {
			tr.Stages = append(tr.Stages, chain.StageTrace{})
		}
		st := &tr.Stages[ev.Stage]
		if st.Node == ev.Node && st.Status == chain.StageAwaitingClient {
			st.Status = traceRunning // resumed: the earlier turns stay
		} else {
			*st = chain.StageTrace{Node: ev.Node, Model: ev.Model, Status: traceRunning, StartMS: h.now().Sub(it.start).Milliseconds(), ToolsUsed: []chain.ToolUse{}}
		}
	case chain.EventTurn:
		if ev.Stage < len(tr.Stages) {
			tr.Stages[ev.Stage].Turns = ev.Turn
		}
	case chain.EventTool:
		if ev.Stage < len(tr.Stages) && ev.ToolUse != nil {
			st := &tr.Stages[ev.Stage]
			st.ToolsUsed = append(st.ToolsUsed, *ev.ToolUse)
		}
	case chain.EventStageEnd:
		if ev.StageTrace != nil {
			for len(tr.Stages) <= ev.Stage {
				tr.Stages = append(tr.Stages, chain.StageTrace{})
			}
			st, _ := ev.StageTrace.Capped(chain.OutputCap)
			st.ToolsUsed, st.Calls = slices.Clone(st.ToolsUsed), nil
			tr.Stages[ev.Stage] = st
		}
	}
	it.sum.Mode = tr.Mode
	it.stale = true
	h.publish(it)
}

// add lists a new chain, in place of one listed under the same id; h.mu
// is held.
func (h *traceHub) add(id, owner, question, client string) *listedTrace {
	if h.items[id] != nil {
		h.order = slices.DeleteFunc(h.order, func(o string) bool { return o == id })
	}
	now := h.now()
	it := &listedTrace{owner: owner, start: now, partial: &chain.Trace{Stages: []chain.StageTrace{}}}
	it.sum = traceSummary{TraceID: id, Started: now.UnixMilli(), Question: question, Status: traceRunning, Client: client, Stages: []stageBadge{}}
	h.items[id] = it
	h.order = append(h.order, id)
	if len(h.order) > traceListCap {
		old := h.order[0]
		h.order = h.order[1:]
		delete(h.items, old)
	}
	return it
}

// end records how the request of chain id, listed for who, ended; tr is
// its trace, nil when the request failed before the chain ran (it was then
// never listed). It returns the summary that heads the stored trace, and
// false when the chain was not listed. Readers hear of the end from
// stored, once the trace can be read: until then the chain opens with its
// stages so far.
func (h *traceHub) end(who, id string, tr *chain.Trace, err error) (traceSummary, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	it := h.items[id]
	if it == nil || it.owner != who {
		return traceSummary{}, false
	}
	if tr != nil {
		it.sum.Mode = tr.Mode
		it.sum.Stages, it.sum.Tokens = badges(tr)
		it.stale = false
	}
	it.sum.DurationMS = h.now().Sub(it.start).Milliseconds()
	if tr != nil {
		// The stages' times are offsets from the engine's own start, a
		// moment after the request's: the list's duration covers them.
		for _, st := range tr.Stages {
			it.sum.DurationMS = max(it.sum.DurationMS, st.StartMS+st.DurationMS)
		}
	}
	it.sum.Status = chainStatus(tr, err)
	return it.summary(h.now()), true
}

// stored tells the readers that chain id ended, its trace stored.
func (h *traceHub) stored(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if it := h.items[id]; it != nil && it.partial != nil {
		it.partial = nil
		h.publish(it)
	}
}

// publish tells the readers allowed to see it that it changed; h.mu is held.
func (h *traceHub) publish(it *listedTrace) {
	for sub := range h.subs {
		if !sub.all && sub.who != it.owner {
			continue
		}
		if !slices.Contains(sub.dirty, it.sum.TraceID) {
			sub.dirty = append(sub.dirty, it.sum.TraceID)
		}
		select {
		case sub.wake <- struct{}{}:
		default: // already woken
		}
	}
}

// subscribe adds a reader of the list's changes; who sees its own chains,
// all sees every chain.
func (h *traceHub) subscribe(who string, all bool) *traceSub {
	sub := &traceSub{who: who, all: all, wake: make(chan struct{}, 1)}
	h.mu.Lock()
	h.subs[sub] = struct{}{}
	h.mu.Unlock()
	return sub
}

func (h *traceHub) unsubscribe(sub *traceSub) {
	h.mu.Lock()
	delete(h.subs, sub)
	h.mu.Unlock()
}

// take returns the summaries of the chains that changed since sub last
// took them.
func (h *traceHub) take(sub *traceSub) []traceSummary {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]traceSummary, 0, len(sub.dirty))
	for _, id := range sub.dirty {
		if it := h.items[id]; it != nil {
			out = append(out, it.summary(h.now()))
		}
	}
	sub.dirty = sub.dirty[:0]
	return out
}

// list returns the chains who may see (every chain when all), oldest
// first.
func (h *traceHub) list(who string, all bool) []traceSummary {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	out := []traceSummary{}
	for _, id := range h.order {
		if it := h.items[id]; all || it.owner == who {
			out = append(out, it.summary(now))
		}
	}
	return out
}

// running returns the stages so far of a chain under way that who may
// see, and its summary.
func (h *traceHub) running(who string, all bool, id string) (traceSummary, *chain.Trace, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	it := h.items[id]
	if it == nil || it.partial == nil || !all && it.owner != who {
		return traceSummary{}, nil, false
	}
	tr := *it.partial
	tr.Stages = slices.Clone(tr.Stages)
	return it.summary(h.now()), &tr, true
}

// owner returns whose listed chain id is.
func (h *traceHub) owner(id string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if it := h.items[id]; it != nil {
		return it.owner, true
	}
	return "", false
}

// summary is it's summary at now: a running chain's duration so far. The
// hub's lock is held.
func (it *listedTrace) summary(now time.Time) traceSummary {
	if it.stale && it.partial != nil {
		it.sum.Stages, it.sum.Tokens = badges(it.partial)
	}
	it.stale = false
	s := it.sum
	s.Stages = slices.Clone(s.Stages)
	if s.Status == traceRunning {
		s.DurationMS = now.Sub(it.start).Milliseconds()
	}
	return s
}

// badges are tr's stages for the list, and its tokens.
func badges(tr *chain.Trace) ([]stageBadge, int) {
	out := make([]stageBadge, 0, len(tr.Stages))
	for _, st := range tr.Stages {
		// A resumed chain's earlier stages are not seen again while it
		// runs: they come back with its trace at the end.
		if st.Node != "" {
			out = append(out, stageBadge{Node: st.Node, Status: st.Status, Turns: st.Turns})
		}
	}
	return out, tr.Usage().TotalTokens
}

// chainStatus is the list's word for how a chain ended: failed when the
// request did, awaiting_client when a stage waits for the client's tools,
// else the first stage stop or degenerate answer, else ok.
func chainStatus(tr *chain.Trace, err error) string {
	if tr == nil || err != nil || len(tr.Stages) == 0 {
		return chain.StageFailed
	}
	status := chain.StageOK
	for _, st := range tr.Stages {
		switch {
		case st.Status == chain.StageAwaitingClient:
			return st.Status
		case status == chain.StageOK && (strings.HasPrefix(st.Status, "stopped_") || st.Status == chain.StageDegenerate):
			status = st.Status
		}
	}
	return status
}

// question is the first line of judged, the user's words the classifier
// judged (an agent client's injected blocks set aside), or when it did not
// run, of the last user message; capped.
func question(judged string, msgs []chain.Message) string {
	q := strings.TrimSpace(judged)
	for i := len(msgs) - 1; i >= 0 && q == ""; i-- {
		if msgs[i].Role == "user" {
			q = strings.TrimSpace(msgs[i].Content)
			break
		}
	}
	if line, _, ok := strings.Cut(q, "\n"); ok {
		q = strings.TrimSpace(line)
	}
	if len(q) > questionCap {
		q = strings.ToValidUTF8(q[:questionCap], "") + "…"
	}
	return q
}
