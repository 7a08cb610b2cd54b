package eval

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"chainproxy/chain"
	"chainproxy/chain/node"
	"chainproxy/chain/trace"
)

// Runner answers one request: the proxy's *chain.Engine, the very engine
// the server runs.
type Runner interface {
	Run(ctx context.Context, req *chain.RunRequest, emit func(chain.Event) error) (*chain.Result, error)
}

var _ Runner = (*chain.Engine)(nil)

// Options configure a run of the evaluation.
type Options struct {
	Items []Item
	// Modes are the model names each item is asked under: node names
	// (simple mode, pinned to the node), chain/reflexive, chain/auto.
	Modes []string
	// Concurrency is how many requests run at once (default 1).
	Concurrency int
	// Judge is the node that grades items whose match is judge; "" when
	// none has to be.
	Judge string
	// Temperature and Seed, when set, are sent with every request, so that
	// every mode answers under the same sampling.
	Temperature *float64
	Seed        *int64
	// Done are results of an earlier run of the same set (-resume): their
	// item and mode are not asked again.
	Done []Result
	// Progress, when set, receives the progress: a bar redrawn in place
	// when Terminal, else a plain line every tenth of the run.
	Progress io.Writer
	Terminal bool
	// Traces, when set, receives each run's whole trace, one JSON line
	// ({"trace_id","id","mode","chain"}), as it finishes.
	Traces io.Writer
	// Share, when set, keeps each run's trace where a proxy on the same
	// store opens it, as it finishes.
	Share *Sharing
	// Conversation prefixes the conversation keys of the run's requests,
	// so that no anti-loop state is shared with another run or a user.
	Conversation string
}

// Result is one item answered under one mode.
type Result struct {
	ID   string `json:"id"`
	Mode string `json:"mode"`
	// Correct is the score; a failed run is not correct.
	Correct bool `json:"correct"`
	// Failed marks a run (or its judging) that ended in an error: it
	// counts as a wrong answer, and Error says why.
	Failed bool   `json:"failed,omitempty"`
	Error  string `json:"error,omitempty"`
	// TraceID is the request's trace id (the traces file holds each trace).
	TraceID string `json:"trace_id"`
	// Routed is the mode the engine ran: simple or reflexive (how
	// chain/auto routed the item).
	Routed string `json:"routed,omitempty"`
	// LatencyMS is the whole request; TTFTMS the time to the answer's
	// first streamed token (0 when none streamed).
	LatencyMS int64 `json:"latency_ms"`
	TTFTMS    int64 `json:"ttft_ms"`
	TokensIn  int   `json:"tokens_in"`
	TokensOut int   `json:"tokens_out"`
	// Calls counts the model calls, summaries included; Loads those that
	// loaded their model (chain.ModelCall.LoadedModel); GuardStops the
	// stages the guards stopped (a stopped_* status).
	Calls      int     `json:"model_calls"`
	Loads      int     `json:"model_loads"`
	GuardStops int     `json:"guard_stops"`
	Stages     []Stage `json:"stages,omitempty"`
	// Answer is the reply, cut at answerCap bytes.
	Answer string `json:"answer"`
	// Judge is the judge's verdict on an item graded by it.
	Judge *Verdict `json:"judge,omitempty"`
}

// Stage is a stage of a run, as the report shows it.
type Stage struct {
	Node   string `json:"node"`
	Status string `json:"status"`
}

// answerCap bounds an answer kept in the report; the traces file has it
// whole.
const answerCap = 2000

// job is one item to ask under one mode.
type job struct {
	item *Item
	mode string
}

// Plan is the order requests are sent in: item by item, every mode for
// an item before the next item, the modes' order turned by one at each
// item. Load on the server (a model loading, another user) then falls on
// every mode alike, and no mode always goes first.
func Plan(items []Item, modes []string, done []Result) []job {
	have := make(map[[2]string]bool, len(done))
	for _, r := range done {
		have[[2]string{r.ID, r.Mode}] = true
	}
	var out []job
	for i := range items {
		for j := range modes {
			m := modes[(i+j)%len(modes)]
			if !have[[2]string{items[i].ID, m}] {
				out = append(out, job{&items[i], m})
			}
		}
	}
	return out
}

// Run asks every item under every mode and returns the results that
// finished, the resumed ones first. When ctx ends it stops sending,
// cancels the requests under way and returns what finished, with
// ctx's error: an unfinished request is not a result (a -resume asks it
// again), whereas a request that failed is one, marked failed.
func Run(ctx context.Context, r Runner, o Options) ([]Result, error) {
	jobs := Plan(o.Items, o.Modes, o.Done)
	results := append([]Result(nil), o.Done...)
	workers := max(o.Concurrency, 1)
	prog := newProgress(o.Progress, o.Terminal, len(jobs))
	var traceMu sync.Mutex
	var loads node.LoadLedger // a load concurrent items waited for counts once

	todo := make(chan job)
	out := make(chan Result)
	var wg sync.WaitGroup
	// The feeder exits when every job is handed out or ctx ends; it
	// closes todo, so each worker exits after its current job.
	go func() {
		defer close(todo)
		for _, j := range jobs {
			select {
			case todo <- j:
			case <-ctx.Done():
				return
			}
		}
	}()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range todo {
				res, traces := ask(ctx, r, &o, j, &loads)
				if ctx.Err() != nil {
					continue // cut short, not finished: -resume asks it again
				}
				for _, k := range traces {
					if o.Traces != nil {
						traceMu.Lock()
						writeTrace(o.Traces, &k)
						traceMu.Unlock()
					}
					if o.Share != nil {
						if err := o.Share.put(ctx, &k.sum, k.tr); err != nil && o.Share.Failed != nil {
							o.Share.Failed(k.traceID, err)
						}
					}
				}
				select {
				case out <- res:
				case <-ctx.Done():
				}
			}
		}()
	}
	go func() { wg.Wait(); close(out) }() // exits once every worker has
	for res := range out {
		results = append(results, res)
		prog.step()
	}
	prog.finish()
	return results, ctx.Err()
}

// kept is a trace the run keeps (the traces file, the shared store): an
// answer's, or the judging of one (judge), with its summary as the
// cockpit's list shows it.
type kept struct {
	traceID, id, mode string
	judge             bool
	tr                *chain.Trace
	sum               trace.TraceSummary
}

// ask runs one job, and the judge when the item needs it, and returns the
// traces to keep: the answer's, unless the request never started (an
// unknown model), then the judging's. loads tells the run's model loads
// from the reports of one load.
func ask(ctx context.Context, r Runner, o *Options, j job, loads *node.LoadLedger) (res Result, traces []kept) {
	res = Result{ID: j.item.ID, Mode: j.mode, TraceID: newID()}
	req := &chain.RunRequest{
		TraceID:      res.TraceID,
		Model:        j.mode,
		Conversation: o.Conversation + j.item.ID + "/" + j.mode,
		Client:       "chainproxy-eval",
		Messages:     messages(j.item.Prompt()),
		Params:       chain.Params{Temperature: o.Temperature, Seed: o.Seed},
	}
	t0 := time.Now()
	var first time.Duration
	out, err := r.Run(ctx, req, func(ev chain.Event) error {
		if ev.Kind == chain.EventDelta && first == 0 && (ev.Content != "" || ev.Reasoning != "") {
			first = time.Since(t0)
		}
		return nil
	})
	res.LatencyMS = time.Since(t0).Milliseconds()
	res.TTFTMS = first.Milliseconds()
	var tr *chain.Trace
	if out != nil {
		tr = &out.Trace
		res.Answer = out.Message.Content
	}
	var f *chain.Failure
	if errors.As(err, &f) {
		tr = &f.Trace
	}
	if tr != nil {
		describe(&res, tr, t0, loads)
		traces = append(traces, kept{traceID: res.TraceID, id: res.ID, mode: res.Mode, tr: tr,
			sum: summary(res.TraceID, res.LatencyMS, req, t0.UnixMilli(), tr, err)})
	}
	if err != nil {
		res.Failed, res.Error = true, err.Error()
		return res, traces
	}
	if j.item.NeedsJudge() {
		v, k, err := judge(ctx, r, o, j, res.Answer)
		res.Judge = v
		if k != nil {
			traces = append(traces, *k)
		}
		if err != nil {
			res.Failed, res.Error = true, "judge: "+err.Error()
		} else {
			res.Correct = v.Correct
		}
	} else {
		res.Correct = Score(j.item, res.Answer)
	}
	res.Answer = cut(res.Answer, answerCap)
	return res, traces
}

// describe fills what res reports of the run's trace, which started at
// t0; a model load that calls of several items waited for together
// counts in the first of them to end (loads).
func describe(res *Result, tr *chain.Trace, t0 time.Time, loads *node.LoadLedger) {
	res.Routed = tr.Mode
	u := tr.Usage()
	res.TokensIn, res.TokensOut = u.PromptTokens, u.CompletionTokens
	for _, s := range tr.Stages {
		res.Calls += len(s.Calls)
		for i := range s.Calls {
			c := &s.Calls[i]
			if !c.LoadedModel() {
				continue
			}
			name := s.Node
			if c.Node != "" { // a summary: the summarizer's load
				name = c.Node
			}
			if loads.First(name, c.Ready(t0)) {
				res.Loads++
			}
		}
		if strings.HasPrefix(s.Status, "stopped_") {
			res.GuardStops++
		}
		res.Stages = append(res.Stages, Stage{Node: s.Node, Status: s.Status})
	}
}

func messages(ms []Message) []chain.Message {
	out := make([]chain.Message, len(ms))
	for i, m := range ms {
		out[i] = chain.Message{Role: m.Role, Content: m.Content}
	}
	return out
}

// writeTrace writes one line of the traces file: an answer's trace, or
// with judge set, the judging of the item's answer under mode. A trace
// that does not encode is left out: the report still has the result.
func writeTrace(w io.Writer, k *kept) {
	line, err := json.Marshal(struct {
		TraceID string       `json:"trace_id"`
		ID      string       `json:"id"`
		Mode    string       `json:"mode"`
		Judge   bool         `json:"judge,omitempty"`
		Chain   *chain.Trace `json:"chain"`
	}{k.traceID, k.id, k.mode, k.judge, k.tr})
	if err == nil {
		_, _ = w.Write(append(line, '\n'))
	}
}

// newID is a trace id as the server makes them: 16 random bytes in hex.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// progress shows how far a run is, its rate and the time left.
type progress struct {
	w        io.Writer
	terminal bool
	total    int
	done     int
	start    time.Time
	every    int // plain lines: one per this many results
}

func newProgress(w io.Writer, terminal bool, total int) *progress {
	return &progress{w: w, terminal: terminal, total: total, start: time.Now(), every: max(1, total/10)}
}

func (p *progress) step() {
	p.done++
	if p.w == nil {
		return
	}
	if p.terminal || p.done%p.every == 0 || p.done == p.total {
		p.print()
	}
}

func (p *progress) print() {
	el := time.Since(p.start)
	rate := float64(p.done) / max(el.Seconds(), 1e-9)
	left := "?"
	if rate > 0 {
		left = time.Duration(float64(p.total-p.done) / rate * float64(time.Second)).Round(time.Second).String()
	}
	if !p.terminal {
		fmt.Fprintf(p.w, "eval: %d/%d answered, %.2f/s, %s left\n", p.done, p.total, rate, left)
		return
	}
	const width = 30
	fill := width
	if p.total > 0 {
		fill = width * p.done / p.total
	}
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d  %.2f/s  %s left ", strings.Repeat("#", fill), strings.Repeat(".", width-fill), p.done, p.total, rate, left)
}

func (p *progress) finish() {
	if p.w != nil && p.terminal && p.total > 0 {
		fmt.Fprintln(p.w)
	}
}
