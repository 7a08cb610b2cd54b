package chain

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"chainproxy/tools"
)

// ResumeStore keeps the chains that wait for a client's tool results, for
// chain.resume_ttl, where every replica finds them (package store: memory,
// or Redis shared by replicas).
type ResumeStore interface {
	// PutResume keeps state under key for ttl.
	PutResume(ctx context.Context, key string, state []byte, ttl time.Duration) error
	// GetResume returns the state under key, if it is still kept.
	GetResume(ctx context.Context, key string) ([]byte, bool, error)
}

// resumeVersion changes when resumeState does: a state saved by another
// version restarts the chain instead of resuming it wrongly.
const resumeVersion = 3

// resumeState is what resuming a chain needs: the trace and budgets so far,
// the waiting stage's whole state (its messages with the server tools'
// results, its repeat memory, its turns) and what the earlier stages found.
type resumeState struct {
	Version int `json:"v"`
	// Nodes are the configured stages' nodes: a chain configured otherwise
	// since the pause restarts.
	Nodes []string `json:"nodes"`
	// Stage is the waiting stage's index in chain.stages.
	Stage int   `json:"stage"`
	Left  int   `json:"left"`
	Trace Trace `json:"trace"`
	// Messages is the conversation as the chain first received it.
	Messages []Message `json:"messages"`
	// T0 is when the chain's first request started, in Unix milliseconds:
	// a resumed chain's trace times go on from it, so the client's wait
	// shows as a gap on its timeline.
	T0 int64 `json:"t0,omitempty"`
	// TraceID is the chain's trace id, the first request's, and Question
	// the user's words the classifier judged: the resumed run goes on
	// under the one and is named by the other, the chain being one trace
	// however many client round trips it takes. (A state saved without
	// them resumes under the request's own id.)
	TraceID  string       `json:"trace_id,omitempty"`
	Question string       `json:"question,omitempty"`
	Cur      savedStage   `json:"cur"`
	Done     []savedStage `json:"done"`
}

type savedStage struct {
	Idx      int             `json:"idx"`
	Node     string          `json:"node"`
	Allowed  int             `json:"allowed"`
	Answers  bool            `json:"answers"`
	Tools    bool            `json:"tools"`
	Prompt   string          `json:"prompt,omitempty"`
	Msgs     []Message       `json:"msgs,omitempty"`
	Base     int             `json:"base,omitempty"`
	Content  []string        `json:"content,omitempty"`
	Evidence []savedEvidence `json:"evidence,omitempty"`
	Seen     []savedSeen     `json:"seen,omitempty"`
	FmtErrs  int             `json:"fmt_errs,omitempty"`
	Idle     int             `json:"idle,omitempty"`
	Reason   string          `json:"reason,omitempty"`
	St       StageTrace      `json:"st"`
	Pending  []pendingCall   `json:"pending,omitempty"`
	// ClientRes is stage.clientRes.
	ClientRes map[uint64]clientSeen `json:"client_res,omitempty"`
}

// savedSeen is one entry of stage.seen: the repeat memory of a server call
// identity, so that a resumed stage still knows what it ran, how often and
// what a volatile call last returned.
type savedSeen struct {
	Sig   uint64     `json:"sig"`
	Kind  tools.Kind `json:"kind"`
	Reads string     `json:"reads,omitempty"`
	Runs  int        `json:"runs"`
	Last  string     `json:"last,omitempty"`
	// Stamp, Failed and Fails: what a read read, and the failures in a
	// row (issue 25), so that a resumed stage judges a repeat as before.
	Stamp  string `json:"stamp,omitempty"`
	Failed string `json:"failed,omitempty"`
	Fails  int    `json:"fails,omitempty"`
}

type savedEvidence struct {
	Name   string `json:"name"`
	Args   string `json:"args"`
	Status string `json:"status"`
	Result string `json:"result"`
}

func saveStage(s *stage, full bool) savedStage {
	out := savedStage{Idx: s.idx, Node: s.node.Name, Content: s.content, St: s.st, Reason: s.reason}
	for _, ev := range s.evidence {
		out.Evidence = append(out.Evidence, savedEvidence{ev.name, ev.args, ev.status, ev.result})
	}
	if full {
		out.Allowed, out.Answers, out.Tools, out.Prompt = s.allowed, s.answers, s.cfg.tools, s.cfg.prompt
		out.Msgs, out.Base, out.FmtErrs, out.Idle, out.Pending, out.ClientRes = s.msgs, s.base, s.fmtErrs, s.idle, s.awaiting, s.clientRes
		for sig, e := range s.seen {
			out.Seen = append(out.Seen, savedSeen{Sig: sig, Kind: e.kind, Reads: e.reads, Runs: e.runs, Last: e.last,
				Stamp: e.stamp, Failed: e.failed, Fails: e.fails})
		}
	}
	return out
}

// loadStage rebuilds a saved stage; lookup checked that its node exists.
func (r *run) loadStage(v savedStage) *stage {
	s := r.newStage(v.Idx, r.e.nodes[v.Node], stageConfig{tools: v.Tools, prompt: v.Prompt})
	s.started = time.Now().Add(-time.Duration(v.St.DurationMS) * time.Millisecond)
	s.st, s.content, s.reason = v.St, v.Content, v.Reason
	s.allowed, s.answers, s.msgs, s.base, s.fmtErrs, s.idle, s.clientRes = v.Allowed, v.Answers, v.Msgs, v.Base, v.FmtErrs, v.Idle, v.ClientRes
	for _, ev := range v.Evidence {
		s.evidence = append(s.evidence, evidence{ev.Name, ev.Args, ev.Status, ev.Result})
	}
	if len(v.Seen) > 0 {
		s.seen = make(map[uint64]*seenCall, len(v.Seen))
	}
	for _, e := range v.Seen {
		s.seen[e.Sig] = &seenCall{kind: e.Kind, reads: e.Reads, runs: e.Runs, last: e.Last, stamp: e.Stamp, failed: e.Failed, fails: e.Fails}
	}
	return s
}

// resumeKey is where a chain waiting on the client call callID is kept: a
// fixed-length hash of the conversation key and the call ID, so that only
// the same caller's conversation finds it.
func resumeKey(conv, callID string) string {
	h := sha256.New()
	h.Write([]byte(conv))
	h.Write([]byte{0})
	h.Write([]byte(callID))
	return hex.EncodeToString(h.Sum(nil))
}

// save keeps what resuming at stage s needs. A failure is logged, not
// returned: the client still gets its tool calls, and its follow-up then
// restarts the chain with the results as evidence.
func (r *run) save(ctx context.Context, s *stage, done []*stage, cfgIdx int) {
	if r.e.resume == nil || len(s.awaiting) == 0 {
		return
	}
	st := resumeState{Version: resumeVersion, Stage: cfgIdx, Left: r.left, Trace: r.trace, Messages: r.req.Messages, T0: r.t0.UnixMilli(),
		TraceID: r.req.TraceID, Question: r.question, Cur: saveStage(s, true)}
	for _, sc := range r.e.cfg.Chain.Stages {
		st.Nodes = append(st.Nodes, sc.Node)
	}
	for _, d := range done {
		st.Done = append(st.Done, saveStage(d, false))
	}
	b, err := json.Marshal(&st)
	if err == nil {
		// Kept under each call the stage waits for: a follow-up that
		// answers only some of them (clientResults) is found by any.
		for _, p := range s.awaiting {
			if err = r.e.resume.PutResume(ctx, resumeKey(r.req.Conversation, p.ID), b, r.e.cfg.Chain.ResumeTTL); err != nil {
				break
			}
		}
	}
	if err != nil {
		r.logger().Warn("saving the chain for resumption failed", "stage", s.idx, "node", s.node.Name, "err", err)
	}
}

// tailToolIDs are the tool_call_ids of the tool messages that end msgs: the
// results a client sends back after running its tools.
func tailToolIDs(msgs []Message) []string {
	var ids []string
	for i := len(msgs) - 1; i >= 0 && msgs[i].Role == "tool"; i-- {
		if msgs[i].ToolCallID != "" {
			ids = append(ids, msgs[i].ToolCallID)
		}
	}
	return ids
}

// lookup finds the chain a follow-up continues. It reports in note why a
// follow-up with tool results is not resumed, for the trace; the chain then
// starts again with those results in the conversation.
func (r *run) lookup(ctx context.Context) (st *resumeState, note string) {
	ids := tailToolIDs(r.req.Messages)
	if len(ids) == 0 {
		return nil, ""
	}
	const restart = ": the chain starts again with the client's tool results as evidence"
	if r.e.resume == nil {
		return nil, "no resume store" + restart
	}
	for _, id := range ids {
		b, ok, err := r.e.resume.GetResume(ctx, resumeKey(r.req.Conversation, id))
		if err != nil {
			r.logger().Warn("looking up a chain to resume failed", "err", err)
			return nil, "resume state unavailable" + restart
		}
		if !ok {
			continue
		}
		st = new(resumeState)
		if err := json.Unmarshal(b, st); err != nil || st.Version != resumeVersion || !r.sameStages(st) {
			return nil, "resume state from another configuration" + restart
		}
		return st, ""
	}
	return nil, "nothing to resume (expired or unknown tool call ids)" + restart
}

// sameStages reports whether st was saved by a chain configured as this
// one, so that its stages and nodes are this chain's.
func (r *run) sameStages(st *resumeState) bool {
	stages := r.e.cfg.Chain.Stages
	if len(st.Nodes) != len(stages) || st.Stage < 0 || st.Stage >= len(stages) || stages[st.Stage].Node != st.Cur.Node {
		return false
	}
	for i, sc := range stages {
		if sc.Node != st.Nodes[i] {
			return false
		}
	}
	for _, v := range append([]savedStage{st.Cur}, st.Done...) {
		if _, ok := r.e.nodes[v.Node]; !ok || v.Idx < 0 || v.Idx >= len(st.Trace.Stages) {
			return false
		}
	}
	for _, p := range st.Cur.Pending {
		if p.Use < 0 || p.Use >= len(st.Cur.St.ToolsUsed) {
			return false
		}
	}
	return len(st.Cur.Pending) > 0
}

// resume continues a chain that waited for the client: the waiting stage
// gets the client's results and goes on with the turns it has left, then
// the later stages run.
func (r *run) resume(ctx context.Context, st *resumeState) (res *Result, err error) {
	results := r.req.Messages
	if st.T0 > 0 {
		r.t0 = time.UnixMilli(st.T0)
		r.req.Started = r.t0
	}
	if st.TraceID != "" {
		r.req.TraceID = st.TraceID
	}
	r.question = st.Question
	r.trace = st.Trace
	// The paused answer told the client what the calls so far used.
	prior := r.trace.Usage()
	defer func() {
		if res != nil {
			res.prior = prior
		}
	}()
	r.left = st.Left
	r.req.Messages = st.Messages
	// The later stages get the conversation's images as the first
	// request's did; the waiting stage has its own messages already.
	r.parts = hasParts(st.Messages)
	var done []*stage
	for _, v := range st.Done {
		done = append(done, r.loadStage(v))
	}
	s := r.loadStage(st.Cur)
	if s.cfg.tools {
		r.chooseTools(ctx, s, done)
	}
	r.stageSpan(ctx, s, true)
	r.trace.Reasons = append(r.trace.Reasons, "resumed in stage "+s.node.Name+" with the client's tool results")
	if err := r.emit(Event{Kind: EventClassified, Mode: r.trace.Mode, Reasons: r.trace.Reasons, Question: r.question,
		Paused: &Paused{Trace: r.trace}}); err != nil {
		return nil, err
	}
	s.st.Status = ""
	r.trace.Stages[s.idx] = s.st
	if err := r.emit(Event{Kind: EventStageStart, Stage: s.idx, Node: s.node.Name, Model: s.node.Model, MaxTurns: s.allowed, Tools: len(s.tools) > 0}); err != nil {
		return nil, err
	}
	if err := r.clientResults(s, st.Cur.Pending, results); err != nil {
		return nil, err
	}
	if ctx.Err() == nil {
		r.e.warmFrom(st.Stage)
	}
	return r.reflexiveFrom(ctx, st.Stage, s, done)
}
