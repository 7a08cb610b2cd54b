package web

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"chainproxy/chain"
	"chainproxy/chain/trace"
)

// encodeTrace encodes tr for a response, with each stage's output and
// reasoning capped, and for the trace store, whole. stored is nil when the
// two would differ, so that storeTrace encodes the whole trace itself; a
// trace with nothing to cut is encoded once.
func encodeTrace(tr *chain.Trace) (resp, stored []byte, err error) {
	capped, cut := tr.Capped(trace.OutputCap)
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
	c, _ := st.Capped(trace.OutputCap)
	return &c
}

// traceListCap is how many recent chains the trace list keeps: as many as
// the trace store (store.DefaultTraces), so that a listed trace can be
// opened.
const traceListCap = 500

// questionCap caps a listed question, in bytes.
const questionCap = 200

// traceSummary is one chain in the trace list; its encoding, the head of
// a stored trace document, is chain's, which proxy eval writes too.
type traceSummary = trace.TraceSummary

// stageBadge is a stage as the list shows it.
type stageBadge = trace.StageBadge

// traceRunning is the status of a chain still under way.
const traceRunning = "running"

// traceCancelled is the status of a chain whose client went away before
// its answer (see trace.TraceCancelled).
const traceCancelled = trace.TraceCancelled

// traceAbandoned is the status of a chain that paused for its client's
// tools (awaiting_client) and was not resumed within chain.resume_ttl,
// and of its waiting stage: the client will not come back to it.
const traceAbandoned = "abandoned"

// traceInterrupted is the status of another replica's chain that was
// running when that replica went silent (see traceStaleAfter), and of its
// stages still running then.
const traceInterrupted = "interrupted"

// TraceFeed shares the trace list between the replicas on one store, so
// that each lists every replica's chains: a replica puts the summary of
// its own chains as they change, reads the others' for each new list, and
// hears of their changes as they happen. The store in Redis implements it;
// a store in process does not, the server's own list being then the whole
// list.
type TraceFeed interface {
	// PutSummary keeps data, the latest summary of chain id, among the
	// recent ones, and hands it to every watcher.
	PutSummary(ctx context.Context, id string, data []byte) error
	// Summaries returns the recent summaries, in no particular order.
	Summaries(ctx context.Context) ([][]byte, error)
	// WatchSummaries calls fn with each summary put, by any replica,
	// until ctx ends or the store closes.
	WatchSummaries(ctx context.Context, fn func(data []byte))
}

// Sharing the list. A replica sends the summary of each running chain of
// its own every traceHeartbeat, so that the others can tell a chain quiet
// in a long stage from one whose replica died: a chain not heard of for
// traceStaleAfter is listed as interrupted. traceShareTimeout bounds each
// put and read; a request never waits for them.
const (
	traceHeartbeat    = 30 * time.Second
	traceStaleAfter   = 2 * time.Minute
	traceShareTimeout = time.Second
)

// sharedSummary is a summary as a replica shares it (trace.SharedSummary,
// which proxy eval shares too).
type sharedSummary = trace.SharedSummary

// listedTrace is a chain in the list: its summary, whose it is, and while
// it runs, its stages so far (the stored trace replaces them at the end).
// The list keys it by owner and id (key): trace ids are not secrets (a
// client's traceparent travels to every service of its trace), so two
// callers may send the same one, and neither may reach the other's chain.
type listedTrace struct {
	owner   string
	sum     traceSummary
	start   time.Time
	partial *chain.Trace
	// stale: sum's badges are older than partial's stages. They are made
	// when read (summary), not on every event of every request.
	stale bool
	// queued: this replica's chain waits in the hub's outbox to be shared.
	queued bool
	// told: the readers were told that the chain, awaiting its client,
	// is abandoned (sweep).
	told bool
	// run is the request running the chain, until it ends: another
	// request under its id (the same client trace, at once) ending
	// before it was listed is not this chain's end.
	run *chain.RunRequest
	// replica is the replica that sent a chain listed from another one
	// ("" for this replica's own), seq its number for that news, and heard
	// when it was sent (for this replica's own chain, when its request
	// ended: a later request of it elsewhere, a resumption, is newer).
	replica string
	seq     uint64
	heard   time.Time
}

// key is where the list keeps it.
func (it *listedTrace) key() string { return traceKey(it.owner, it.sum.TraceID) }

// traceSub is one reader of the list's event stream. dirty and wake are
// how the hub hands it changes without ever blocking on it: the hub notes
// the changed ids and wakes it; the reader takes them when it can.
type traceSub struct {
	who   string
	all   bool
	wake  chan struct{} // capacity 1
	dirty []string      // keys, guarded by traceHub.mu
}

// traceHub lists recent chains from every front and client, live: it is
// the engine's Watcher, and storeTrace tells it when a request ends. It
// keeps summaries only; whole traces are in the trace store. With a feed
// (shareWith) it also lists the other replicas' chains.
type traceHub struct {
	mu    sync.Mutex
	items map[string]*listedTrace // by key (owner and id)
	order []string                // keys, oldest first by start
	// ids counts the chains listed under each trace id, whoever's: a
	// chain whose id is free (most) needs no look at the others.
	ids  map[string]int
	subs map[*traceSub]struct{}
	now  func() time.Time
	// resumeTTL is chain.resume_ttl: a chain awaiting its client longer
	// is abandoned.
	resumeTTL time.Duration

	// feed shares the list with the other replicas; nil when alone.
	feed TraceFeed
	log  *slog.Logger
	// replica names this process in what it shares, so that its own
	// chains coming back from the store are known as its own.
	replica string
	seq     uint64   // the last news shared
	outbox  []string // keys of own chains to share
	// flushing: a goroutine is sending the outbox.
	flushing bool
}

var _ chain.Watcher = (*traceHub)(nil)

func newTraceHub(resumeTTL time.Duration) *traceHub {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &traceHub{items: map[string]*listedTrace{}, ids: map[string]int{}, subs: map[*traceSub]struct{}{}, now: time.Now,
		resumeTTL: resumeTTL, replica: hex.EncodeToString(b[:])}
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
	var it *listedTrace
	if ev.Kind == chain.EventClassified {
		it = h.classified(req, &ev)
	} else {
		it = h.items[traceKey(req.Caller, req.TraceID)]
	}
	if it == nil || it.partial == nil || it.sum.Status != traceRunning {
		return // not listed, or already ended
	}
	tr := it.partial
	switch ev.Kind {
	case chain.EventClassified:
		tr.Mode = ev.Mode
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
			st, _ := ev.StageTrace.Capped(trace.OutputCap)
			st.ToolsUsed, st.Calls = slices.Clone(st.ToolsUsed), nil
			tr.Stages[ev.Stage] = st
		}
	}
	it.sum.Mode = tr.Mode
	it.stale = true
	h.publish(it)
	if ev.Kind != chain.EventTurn && ev.Kind != chain.EventTool {
		// The other replicas hear of the chain's steps, not of each
		// turn and tool call: the heartbeat brings those.
		h.enqueue(it)
	}
}

// classified lists the chain a run's classification starts, or goes on
// with; h.mu is held. A resumed run (ev.Paused) goes on with the chain it
// resumes, under that chain's id, as one entry: its client round trips are
// part of its timeline. A new run takes its request's id, unless that id
// is taken (see taken): then it gets one of its own, in req.TraceID, which
// the request answers under; the client's trace id stays the parent of
// the request's exported span.
func (h *traceHub) classified(req *chain.RunRequest, ev *chain.Event) *listedTrace {
	if p := ev.Paused; p != nil {
		it := h.items[traceKey(req.Caller, req.TraceID)]
		if it == nil || it.replica != "" || it.sum.Status != chain.StageAwaitingClient {
			// Paused on another replica, dropped from the list, or
			// replaced in it by a later request under its id: listed
			// anew, from when it started.
			it = h.add(req.TraceID, req.Caller, question(ev.Question, req.Messages), req.Client, req.Started)
		}
		it.sum.Status, it.sum.Resumed, it.told, it.run = traceRunning, true, false, req
		if q := question(ev.Question, nil); q != "" {
			it.sum.Question = q
		}
		it.partial = partialOf(&p.Trace)
		return it
	}
	if h.taken(req.Caller, req.TraceID) {
		req.TraceID = newTraceID()
	}
	// A new request under the id of a chain of the same caller that
	// ended (the client sent the traceparent of one trace with several
	// requests, maybe to another replica first) is listed in its place:
	// the list shows the latest.
	start := req.Started
	if start.IsZero() {
		start = h.now()
	}
	it := h.add(req.TraceID, req.Caller, question(ev.Question, req.Messages), req.Client, start)
	it.run = req
	return it
}

// taken reports whether a new chain of who may not use id: another
// caller's chain is listed under it, or one of who's own is running under
// it (two requests at once under one client trace are two chains).
// h.mu is held.
func (h *traceHub) taken(who, id string) bool {
	if h.ids[id] == 0 {
		return false
	}
	now := h.now()
	for _, it := range h.items {
		if it.sum.TraceID != id {
			continue
		}
		h.expire(it, now)
		if it.owner != who || it.sum.Status == traceRunning {
			return true
		}
	}
	return false
}

// partialOf is tr as a running chain's list entry keeps it: its own copy
// of the stages, outputs capped, without the model calls.
func partialOf(tr *chain.Trace) *chain.Trace {
	out := &chain.Trace{Mode: tr.Mode, Reasons: slices.Clone(tr.Reasons), Turns: tr.Turns, Stages: make([]chain.StageTrace, len(tr.Stages))}
	for i := range tr.Stages {
		st, _ := tr.Stages[i].Capped(trace.OutputCap)
		st.ToolsUsed, st.Calls = slices.Clone(st.ToolsUsed), nil
		out.Stages[i] = st
	}
	return out
}

// add lists a new chain started at start, in place of one listed under the
// same owner and id; h.mu is held.
func (h *traceHub) add(id, owner, question, client string, start time.Time) *listedTrace {
	it := &listedTrace{owner: owner, start: start, partial: &chain.Trace{Stages: []chain.StageTrace{}}}
	it.sum = traceSummary{TraceID: id, Started: start.UnixMilli(), Question: question, Status: traceRunning, Client: client, Stages: []stageBadge{}}
	h.put(it)
	return it
}

// put lists it in place of any chain listed under its key, in order of
// start, dropping the oldest beyond traceListCap; h.mu is held.
func (h *traceHub) put(it *listedTrace) {
	key := it.key()
	if h.items[key] != nil {
		h.order = slices.DeleteFunc(h.order, func(o string) bool { return o == key })
	} else {
		h.ids[it.sum.TraceID]++
	}
	h.items[key] = it
	i := len(h.order)
	for i > 0 && h.items[h.order[i-1]].sum.Started > it.sum.Started {
		i-- // another replica's chain, or a resumed one, started earlier than the last: near the end
	}
	h.order = slices.Insert(h.order, i, key)
	if len(h.order) > traceListCap {
		old := h.items[h.order[0]]
		h.order = h.order[1:]
		delete(h.items, old.key())
		if h.ids[old.sum.TraceID]--; h.ids[old.sum.TraceID] <= 0 {
			delete(h.ids, old.sum.TraceID)
		}
	}
}

// find returns the chain id who may open (any owner's when all: its own
// first, else the latest listed under id); h.mu is held.
func (h *traceHub) find(who string, all bool, id string) *listedTrace {
	if it := h.items[traceKey(who, id)]; it != nil || !all || h.ids[id] == 0 {
		return it
	}
	for i := len(h.order) - 1; i >= 0; i-- {
		if it := h.items[h.order[i]]; it.sum.TraceID == id {
			return it
		}
	}
	return nil
}

// end records how run, the request of chain id, listed for who, ended; tr is
// its trace, nil when the request failed before the chain ran (it was then
// never listed) or when its client went away (err is context.Canceled). It
// returns the summary that heads the stored trace, the trace to store, and
// false when the chain was not listed. The trace to store is tr, but for a
// chain whose client went away: then it is the chain so far (tr, else the
// stages listed), with every stage still running cancelled, so that the
// chain opens as it stopped. Readers hear of the end from stored, once
// the trace can be read: until then the chain opens with its stages so
// far.
func (h *traceHub) end(run *chain.RunRequest, who, id string, tr *chain.Trace, err error) (traceSummary, *chain.Trace, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	it := h.items[traceKey(who, id)]
	if it == nil || it.replica != "" || it.partial == nil || it.run != run {
		// Not listed, another replica's, or not this request's: a
		// resumption that failed before it went on leaves its paused
		// chain as it was, a request failed before its chain was
		// listed leaves another running under its id.
		return traceSummary{}, tr, false
	}
	it.run = nil // its messages are not kept with the list
	if errors.Is(err, context.Canceled) {
		tr = h.cancelled(it, tr)
	}
	if tr != nil {
		it.sum.Mode = tr.Mode
		it.sum.Stages, it.sum.Tokens = trace.Badges(tr)
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
	it.sum.Status = trace.TraceStatus(tr, err)
	it.heard = h.now()
	return h.summary(it, h.now()), tr, true
}

// cancelled is the trace of it, whose client went away: tr when the run
// gave one, else the stages listed so far, with those not ended (running,
// or not started) cancelled at now. h.mu is held.
func (h *traceHub) cancelled(it *listedTrace, tr *chain.Trace) *chain.Trace {
	if tr == nil {
		if it.partial == nil {
			return nil
		}
		tr = it.partial
	}
	out := *tr
	out.Reasons = slices.Clone(tr.Reasons)
	out.Stages = slices.Clone(tr.Stages)
	if out.Stages == nil {
		out.Stages = []chain.StageTrace{}
	}
	if out.Reasons == nil {
		out.Reasons = []string{}
	}
	at := h.now().Sub(it.start).Milliseconds()
	for i := range out.Stages {
		if st := &out.Stages[i]; st.Status == traceRunning || st.Status == "" {
			st.Status = traceCancelled
			st.DurationMS = max(at-st.StartMS, 0)
			if st.ToolsUsed == nil {
				st.ToolsUsed = []chain.ToolUse{}
			}
		}
	}
	return &out
}

// stored tells the readers that chain id of who ended, its trace stored.
func (h *traceHub) stored(who, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if it := h.items[traceKey(who, id)]; it != nil && it.partial != nil {
		it.partial = nil
		h.publish(it)
		h.enqueue(it)
	}
}

// publish tells the readers allowed to see it that it changed; h.mu is held.
func (h *traceHub) publish(it *listedTrace) {
	for sub := range h.subs {
		if !sub.all && sub.who != it.owner {
			continue
		}
		if key := it.key(); !slices.Contains(sub.dirty, key) {
			sub.dirty = append(sub.dirty, key)
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
	for _, key := range sub.dirty {
		if it := h.items[key]; it != nil {
			out = append(out, h.summary(it, h.now()))
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
	for _, key := range h.order {
		if it := h.items[key]; all || it.owner == who {
			out = append(out, h.summary(it, now))
		}
	}
	return out
}

// running returns the stages so far of a chain under way that who may
// see, and its summary. Of another replica's chain, running or
// interrupted, whose trace is not stored, the stages known are its
// summary's.
func (h *traceHub) running(who string, all bool, id string) (traceSummary, *chain.Trace, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	it := h.find(who, all, id)
	if it == nil {
		return traceSummary{}, nil, false
	}
	now := h.now()
	if it.partial != nil {
		tr := *it.partial
		tr.Stages = slices.Clone(tr.Stages)
		return h.summary(it, now), &tr, true
	}
	h.expire(it, now)
	if it.replica == "" || it.sum.Status != traceRunning && it.sum.Status != traceInterrupted {
		return traceSummary{}, nil, false
	}
	tr := &chain.Trace{Mode: it.sum.Mode, Reasons: []string{}, Stages: make([]chain.StageTrace, 0, len(it.sum.Stages))}
	for _, b := range it.sum.Stages {
		tr.Stages = append(tr.Stages, chain.StageTrace{Node: b.Node, Status: b.Status, Turns: b.Turns, ToolsUsed: []chain.ToolUse{}})
	}
	return h.summary(it, now), tr, true
}

// owner returns whose listed chain id is, for an admin's look-up (all):
// its own, else the latest listed under id.
func (h *traceHub) owner(who string, all bool, id string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if it := h.find(who, all, id); it != nil {
		return it.owner, true
	}
	return "", false
}

// summary is it's summary at now: a running chain's duration so far, a
// chain paused too long abandoned. h.mu is held.
func (h *traceHub) summary(it *listedTrace, now time.Time) traceSummary {
	if it.stale && it.partial != nil {
		it.sum.Stages, it.sum.Tokens = trace.Badges(it.partial)
	}
	it.stale = false
	s := it.sum
	s.Stages = slices.Clone(s.Stages)
	switch {
	case s.Status == traceRunning:
		s.DurationMS = now.Sub(it.start).Milliseconds()
	case s.Status == chain.StageAwaitingClient && pausedTooLong(&s, h.resumeTTL, now):
		abandon(&s)
	}
	return s
}

// pausedTooLong reports whether s, a chain awaiting its client, paused
// longer than ttl ago at now: it ended its request at its start plus its
// duration, and its resume state is gone from the store.
func pausedTooLong(s *traceSummary, ttl time.Duration, now time.Time) bool {
	return ttl > 0 && now.UnixMilli()-(s.Started+s.DurationMS) > ttl.Milliseconds()
}

// abandon marks s, a chain awaiting its client too long, abandoned, with
// its waiting stages.
func abandon(s *traceSummary) {
	s.Status = traceAbandoned
	for i := range s.Stages {
		if s.Stages[i].Status == chain.StageAwaitingClient {
			s.Stages[i].Status = traceAbandoned
		}
	}
}

// sweep tells the readers of the chains that were abandoned since the
// last sweep: they were listed awaiting their client, and are so no more.
// The list's event stream calls it on its keep-alive ticks.
func (h *traceHub) sweep() {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	for _, it := range h.items {
		if !it.told && h.abandoned(it, now) {
			it.told = true
			h.publish(it)
		}
	}
}

// abandonStored is data, a stored trace document, with its chain
// abandoned when it awaited its client for longer than chain.resume_ttl:
// the document is kept as its request ended, and its status decided when
// read, by whichever replica reads it.
func (h *traceHub) abandonStored(data []byte) []byte {
	if h.resumeTTL <= 0 || !bytes.Contains(data, []byte(`"`+chain.StageAwaitingClient+`"`)) {
		return data
	}
	var doc struct {
		traceSummary
		Chain chain.Trace `json:"chain"`
	}
	if unmarshal(data, &doc) != nil || doc.Status != chain.StageAwaitingClient || !pausedTooLong(&doc.traceSummary, h.resumeTTL, h.now()) {
		return data
	}
	abandon(&doc.traceSummary)
	for i := range doc.Chain.Stages {
		if st := &doc.Chain.Stages[i]; st.Status == chain.StageAwaitingClient {
			st.Status = traceAbandoned
		}
	}
	out, err := marshal(&doc)
	if err != nil {
		return data
	}
	return out
}

// abandoned reports whether it awaits its client too long to come back.
func (h *traceHub) abandoned(it *listedTrace, now time.Time) bool {
	return it.sum.Status == chain.StageAwaitingClient && pausedTooLong(&it.sum, h.resumeTTL, now)
}

// shareWith shares the list through feed until ctx ends or the feed
// closes: it lists the other replicas' chains, and sends this one's. It
// is called once, before the hub watches any chain.
func (h *traceHub) shareWith(ctx context.Context, feed TraceFeed, log *slog.Logger) {
	h.feed, h.log = feed, log
	go h.share(ctx) // exits when ctx ends or the feed closes
}

// share hears the other replicas' news until ctx ends or the feed closes,
// and every traceHeartbeat sends this replica's running chains and reads
// the whole list again: news lost while the store was away is caught up,
// and a chain not heard of is found out.
func (h *traceHub) share(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { // exits when ctx ends or the feed closes
		defer close(watched)
		defer cancel()
		h.feed.WatchSummaries(ctx, h.heard)
	}()
	defer func() { cancel(); <-watched }()
	h.resync(ctx)
	t := time.NewTicker(traceHeartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h.mu.Lock()
		for _, key := range h.order {
			if it := h.items[key]; it.partial != nil && it.sum.Status == traceRunning {
				h.enqueue(it)
			}
		}
		h.mu.Unlock()
		h.resync(ctx)
	}
}

// enqueue has this replica's chain it sent to the others; h.mu is held.
// The outbox holds each chain once, whatever its changes meanwhile, and
// one goroutine at a time sends it: a request never waits for the store.
func (h *traceHub) enqueue(it *listedTrace) {
	if h.feed == nil || it.replica != "" || it.queued {
		return
	}
	it.queued = true
	h.outbox = append(h.outbox, it.key())
	if !h.flushing {
		h.flushing = true
		go h.flush() // exits when the outbox is empty
	}
}

// flush sends the outbox's chains, as they are when sent, until it is
// empty.
func (h *traceHub) flush() {
	for {
		h.mu.Lock()
		keys := h.outbox
		h.outbox = nil
		if len(keys) == 0 {
			h.flushing = false
			h.mu.Unlock()
			return
		}
		now := h.now()
		msgs := make([]sharedSummary, 0, len(keys))
		for _, key := range keys {
			if it := h.items[key]; it != nil && it.queued {
				it.queued = false
				h.seq++
				msgs = append(msgs, sharedSummary{Replica: h.replica, Seq: h.seq, Owner: it.owner, At: now.UnixMilli(), Summary: h.summary(it, now)})
			}
		}
		h.mu.Unlock()
		for i := range msgs {
			data, err := marshal(&msgs[i])
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), traceShareTimeout)
				// Kept under owner and id, as listed: two callers'
				// chains under one client trace id are two.
				err = h.feed.PutSummary(ctx, traceKey(msgs[i].Owner, msgs[i].Summary.TraceID), data)
				cancel()
			}
			if err != nil {
				h.log.Debug("sharing a trace summary", "trace_id", msgs[i].Summary.TraceID, "err", err)
			}
		}
	}
}

// heard lists another replica's news; its own coming back is ignored.
func (h *traceHub) heard(data []byte) {
	var m sharedSummary
	if err := unmarshal(data, &m); err != nil || m.Replica == h.replica {
		return
	}
	h.mu.Lock()
	h.merge(&m)
	h.mu.Unlock()
}

// resync lists the chains the feed keeps, for a new list or on the
// heartbeat, and finds out those not heard of for too long. Without a
// feed it does nothing.
func (h *traceHub) resync(ctx context.Context) {
	if h.feed == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, traceShareTimeout)
	sums, err := h.feed.Summaries(ctx)
	cancel()
	if err != nil {
		h.log.Debug("reading the shared trace list", "err", err)
	}
	msgs := make([]sharedSummary, 0, len(sums))
	for _, data := range sums {
		var m sharedSummary
		if unmarshal(data, &m) == nil && m.Replica != h.replica {
			msgs = append(msgs, m)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range msgs {
		h.merge(&msgs[i])
	}
	now := h.now()
	for _, key := range h.order {
		h.expire(h.items[key], now)
	}
}

// merge lists m, another replica's news of a chain, unless the list has
// later news of it; h.mu is held. A chain of this replica's own stays,
// unless m is of a later request under its owner and id, or of the chain
// resumed elsewhere after its request here ended.
func (h *traceHub) merge(m *sharedSummary) {
	id := m.Summary.TraceID
	key := traceKey(m.Owner, id)
	it := h.items[key]
	// resumed: m is of the chain listed, gone on elsewhere with its
	// client's tool results after the news listed. It started when the
	// chain did (RunRequest.Started): only when it was sent tells it is
	// later.
	resumed := it != nil && m.Summary.Resumed && m.At > it.heard.UnixMilli()
	switch {
	case id == "":
		return
	case it == nil:
		if len(h.order) >= traceListCap && m.Summary.Started < h.items[h.order[0]].sum.Started {
			return // older than every chain kept
		}
	case it.replica == "":
		if it.partial != nil || m.Summary.Started <= it.sum.Started && !resumed {
			return
		}
	case it.replica == m.Replica:
		if m.Seq <= it.seq {
			return
		}
	default:
		if m.Summary.Started < it.sum.Started && !resumed {
			return
		}
	}
	if m.Summary.Stages == nil {
		m.Summary.Stages = []stageBadge{}
	}
	nit := &listedTrace{owner: m.Owner, sum: m.Summary, start: time.UnixMilli(m.Summary.Started), replica: m.Replica, seq: m.Seq, heard: time.UnixMilli(m.At)}
	if it != nil && it.replica != "" && (it.sum.Started == nit.sum.Started || resumed) {
		// News of a chain listed: in its place. A heartbeat that
		// changes nothing is not news to the readers.
		h.items[key] = nit
		if it.owner == nit.owner && it.sum.Status == nit.sum.Status && it.sum.Mode == nit.sum.Mode &&
			it.sum.Tokens == nit.sum.Tokens && slices.Equal(it.sum.Stages, nit.sum.Stages) {
			return
		}
	} else {
		h.put(nit)
	}
	h.publish(nit)
}

// expire lists another replica's chain not heard of for traceStaleAfter
// as interrupted, with its stages still running, and tells the readers:
// its replica died or lost the store with the chain under way. Later news
// of it lists it again. h.mu is held.
func (h *traceHub) expire(it *listedTrace, now time.Time) {
	if it.replica == "" || it.sum.Status != traceRunning || now.Sub(it.heard) <= traceStaleAfter {
		return
	}
	it.sum.Status = traceInterrupted
	it.sum.DurationMS = max(it.heard.Sub(it.start).Milliseconds(), 0)
	for i := range it.sum.Stages {
		if it.sum.Stages[i].Status == traceRunning {
			it.sum.Stages[i].Status = traceInterrupted
		}
	}
	h.publish(it)
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
