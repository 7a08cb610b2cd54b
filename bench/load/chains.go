package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ollama/ollama/api"

	"chainproxy/config"
	"chainproxy/internal/fakeollama"
)

// chainModel is one node of the -chains scenario: the design's model sizes
// (issue 44) and a generation time per call, in simulated time.
type chainModel struct {
	node, model string
	size        int64
	gen         time.Duration
}

// chainModels are the design's three models on one GPU: qwen3:1.7b as OL1,
// a 30B as M1, a 16B as M2. OL1 and M1 fit together in 24 GB, M2 fits with
// neither M1 nor (once OL1 and M1 are loaded) both. The generation times
// make the design's "3 sequential calls, ~7–10 s total".
var chainModels = []chainModel{
	{node: "OL1", model: "qwen3:1.7b", size: 1.4e9, gen: 1500 * time.Millisecond},
	{node: "M1", model: "qwen3:30b", size: 18e9, gen: 4 * time.Second},
	{node: "M2", model: "deepseek-coder-v2:16b", size: 9e9, gen: 3 * time.Second},
}

const (
	chainGPU       = 24e9 // bytes
	chainBandwidth = 2e9  // bytes a second
	chainPieces    = 8    // content lines of an answer; the done line follows
	chainArrivals  = 8    // chains of the concurrent part
	chainSpacing   = time.Second
)

// chainSim is the simulated Ollama and the proxy in front of it.
type chainSim struct {
	sim   *fakeollama.Server
	proxy *proc
	scale float64
}

// startChainSim starts a simulated one-GPU Ollama (fakeollama's scheduler,
// every duration multiplied by scale) and the proxy built from cmd/proxy
// with a reflexive chain over its three models, its load scheduling on or
// off (chainsConfig).
func startChainSim(ctx context.Context, bin, dir, logLevel string, scale float64, sched bool) (*chainSim, error) {
	gen := map[string]time.Duration{}
	sizes := map[string]int64{}
	for _, m := range chainModels {
		gen[m.model] = m.gen
		sizes[m.model] = m.size
	}
	sim := fakeollama.Start(func(_ int, req *api.ChatRequest) fakeollama.Reply {
		pieces := make([]string, chainPieces)
		for i := range pieces {
			pieces[i] = fmt.Sprintf("%s finding %d. ", req.Model, i+1)
		}
		// A stream waits the delay before each piece and before the done
		// line; a whole answer ("stream": false) once.
		delay := scaled(gen[req.Model], scale)
		if req.Stream == nil || *req.Stream {
			delay /= chainPieces + 1
		}
		return fakeollama.Reply{Content: pieces, EvalCount: chainPieces, Delay: delay}
	})
	sim.SetMemory(fakeollama.Memory{
		Budget:    chainGPU,
		Bandwidth: chainBandwidth / scale,
		Sizes:     sizes,
		KeepAlive: scaled(5*time.Minute, scale),
	})
	root := filepath.Join(dir, "workspace")
	if err := os.MkdirAll(root, 0o755); err != nil {
		sim.Stop()
		return nil, err
	}
	px, err := startProxy(ctx, "chains-proxy", bin, "", dir, chainsConfig(sim.URL, root, sched, scale), logLevel, nil)
	if err != nil {
		sim.Stop()
		return nil, err
	}
	return &chainSim{sim: sim, proxy: px, scale: scale}, nil
}

func (c *chainSim) stop() {
	c.proxy.stop()
	c.sim.Stop()
}

func scaled(d time.Duration, scale float64) time.Duration {
	return time.Duration(float64(d) * scale)
}

// chainsConfig is the proxy's configuration: the three nodes on the
// simulator with the defaults a user has (max_concurrency 1, Ollama's
// keep_alive), the default stages (OL1 with tools, M1, M2). With sched,
// the load scheduling is on with its default bound (admission.
// max_reorder_wait, scaled) and OL1's small model is kept loaded
// (keep_loaded), as issue 44 proposes; without, the scheduling is off
// (max_reorder_wait 0) and nothing is kept: the proxy as it was.
func chainsConfig(sim, toolsRoot string, sched bool, scale float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "server:\n  addr: 127.0.0.1:0\nnodes:\n")
	for _, m := range chainModels {
		keep := ""
		if sched && m.node == "OL1" {
			keep = ", keep_loaded: true"
		}
		fmt.Fprintf(&b, "  - {name: %s, provider: ollama, base_url: %q, model: %q%s}\n", m.node, sim, m.model, keep)
	}
	wait := time.Duration(0)
	if sched {
		wait = scaled(config.DefaultMaxReorderWait, scale)
	}
	fmt.Fprintf(&b, "admission:\n  max_reorder_wait: %s\n", wait)
	fmt.Fprintf(&b, "tools:\n  root: %q\n", toolsRoot)
	return b.String()
}

// chainRun is one chain as the client and the simulator saw it.
type chainRun struct {
	start, end time.Duration // since the part began, wall time
	// pause is how long the server was left idle before it (one chain
	// at a time only), simulated: a user reading the last answer.
	pause time.Duration
	sent  time.Time // when its request was sent
	calls []string  // the models called during it (one chain at a time only)
	// waited are its calls' load_duration, as the simulator answered
	// (one chain at a time only): a call that waited for a load had
	// that load on the chain's critical path.
	waited []time.Duration
	loads  []fakeollama.LoadEvent
	err    error
}

// chainsResult is one mode's runs: one chain at a time, then eight
// arriving one second apart, with the simulator's loads and calls.
type chainsResult struct {
	sched bool
	cs    *chainSim // for its scale; stopped
	seq   []chainRun
	conc  []chainRun
	loads []fakeollama.LoadEvent
	calls int
}

// runChain sends one reflexive request and waits for its whole answer.
func runChain(ctx context.Context, url string) error {
	r := do(ctx, newClient(1), url, requestBody("chain/reflexive", false), false, false, nil)
	return r.err
}

// runChains runs the -chains scenario, the load scheduling off and then on,
// and prints its report.
func runChains(ctx context.Context, o options, stdout, stderr io.Writer) error {
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, "load: "+format+"\n", args...) }
	dir, err := os.MkdirTemp("", "chainproxy-chains-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := o.proxyBin
	if bin == "" {
		logf("building ./cmd/proxy")
		if bin, err = buildProxy(ctx, o.repo, dir, false); err != nil {
			return err
		}
	}
	gen := map[string]time.Duration{}
	for _, m := range chainModels {
		gen[m.model] = m.gen
	}
	var results []chainsResult
	for _, sched := range []bool{false, true} {
		res, err := runChainsMode(ctx, o, bin, dir, sched, logf)
		if err != nil {
			return fmt.Errorf("scheduling %s: %w", onOff(sched), err)
		}
		results = append(results, res)
	}
	reportChains(stdout, o, gen, results)
	return nil
}

func onOff(sched bool) string {
	if sched {
		return "on"
	}
	return "off"
}

// runChainsMode runs both parts of the scenario with the scheduling on or
// off, each on a fresh simulator and proxy (a cold GPU).
func runChainsMode(ctx context.Context, o options, bin, dir string, sched bool, logf func(string, ...any)) (chainsResult, error) {
	res := chainsResult{sched: sched}
	// (a) One chain at a time, from a cold GPU: the first chain loads
	// everything; the later ones show the steady state, back to back and
	// then with the server idle between them while the user reads.
	n := o.chainsSeq
	if o.chainsPause > 0 {
		n *= 2
	}
	logf("chains, scheduling %s: %d chains one at a time (a pause of %s before the last %d), scale %g", onOff(sched), n, o.chainsPause, n-o.chainsSeq, o.chainsScale)
	cs, err := startChainSim(ctx, bin, dir, o.proxyLog, o.chainsScale, sched)
	if err != nil {
		return res, err
	}
	begin := time.Now()
	var marks []int // the simulator's load count when each chain was sent
	for i := range n {
		var pause time.Duration
		if i >= o.chainsSeq {
			pause = o.chainsPause
			select {
			case <-time.After(scaled(pause, o.chainsScale)):
			case <-ctx.Done():
				cs.stop()
				return res, ctx.Err()
			}
		}
		calls0, loads0 := len(cs.sim.Requests()), len(cs.sim.Loads())
		r := chainRun{start: time.Since(begin), sent: time.Now(), pause: pause}
		r.err = runChain(ctx, "http://"+cs.proxy.addr)
		r.end = time.Since(begin)
		for _, req := range cs.sim.Requests()[calls0:] {
			r.calls = append(r.calls, req.Model)
		}
		r.waited = cs.sim.LoadDurations()[calls0:]
		marks = append(marks, loads0)
		res.seq = append(res.seq, r)
		if r.err != nil {
			cs.stop()
			return res, fmt.Errorf("chain one at a time: %w", r.err)
		}
	}
	// A chain's loads are those begun from its request to the next one's:
	// what its end loads for the next chain counts with it. The user reads
	// the last answer too.
	if o.chainsPause > 0 {
		select {
		case <-time.After(scaled(o.chainsPause, o.chainsScale)):
		case <-ctx.Done():
			cs.stop()
			return res, ctx.Err()
		}
	}
	all := cs.sim.Loads()
	marks = append(marks, len(all))
	for i := range res.seq {
		res.seq[i].loads = all[marks[i]:marks[i+1]]
	}
	cs.stop()

	// (b) Eight chains arriving one second apart, from a cold GPU.
	logf("chains, scheduling %s: %d chains arriving %s apart (simulated)", onOff(sched), chainArrivals, chainSpacing)
	cs, err = startChainSim(ctx, bin, dir, o.proxyLog, o.chainsScale, sched)
	if err != nil {
		return res, err
	}
	defer cs.stop()
	res.cs = cs
	conc := make([]chainRun, chainArrivals)
	var wg sync.WaitGroup
	begin = time.Now()
	for i := range conc {
		wg.Go(func() { // exits when its chain is answered or ctx ends
			at := scaled(time.Duration(i)*chainSpacing, cs.scale)
			select {
			case <-time.After(at - time.Since(begin)):
			case <-ctx.Done():
				conc[i].err = ctx.Err()
				return
			}
			conc[i].start = time.Since(begin)
			conc[i].err = runChain(ctx, "http://"+cs.proxy.addr)
			conc[i].end = time.Since(begin)
		})
	}
	wg.Wait()
	for i, r := range conc {
		if r.err != nil {
			return res, fmt.Errorf("concurrent chain %d: %w", i, r.err)
		}
	}
	res.conc, res.loads, res.calls = conc, cs.sim.Loads(), len(cs.sim.Requests())
	return res, nil
}

// criticalWait is the load_duration above which a call is counted as
// having waited for a load, in simulated time: the smallest load (OL1's)
// takes 0.7 s, a call to a loaded model waits none.
const criticalWait = 200 * time.Millisecond

func reportChains(w io.Writer, o options, gen map[string]time.Duration, results []chainsResult) {
	fmt.Fprintf(w, "## Chains on one GPU (simulated)\n\n")
	fmt.Fprintf(w, "fakeollama's scheduler: %.0f GB at %.0f GB/s, Ollama's defaults (keep_alive 5m, one request at a time per model); ", chainGPU/1e9, chainBandwidth/1e9)
	var ms []string
	for _, m := range chainModels {
		ms = append(ms, fmt.Sprintf("%s %s %.1f GB, %.1f s a call", m.node, m.model, float64(m.size)/1e9, m.gen.Seconds()))
	}
	fmt.Fprintf(w, "%s. Times in simulated seconds (wall time ÷ %g). Scheduling off: `admission.max_reorder_wait: 0`, nothing kept loaded (the proxy as it was); on: the default bound (%s) and `keep_loaded: true` on OL1.\n\n", strings.Join(ms, "; "), o.chainsScale, config.DefaultMaxReorderWait)

	fmt.Fprintf(w, "### One chain at a time\n\n")
	fmt.Fprintf(w, "| scheduling | chain | idle before (s) | calls | time (s) | generation (s) | time − generation (s) | loads begun, s after its request | calls that waited for a load (critical path) |\n|---|---|---:|---|---:|---:|---:|---|---|\n")
	for _, res := range results {
		for i, r := range res.seq {
			var g time.Duration
			var crit []string
			for k, m := range r.calls {
				g += gen[m]
				if k < len(r.waited) && res.simulated(r.waited[k]) >= criticalWait.Seconds() {
					crit = append(crit, fmt.Sprintf("%s %.1f s", nodeOf(m), res.simulated(r.waited[k])))
				}
			}
			var ln []string
			for _, e := range r.loads {
				ln = append(ln, fmt.Sprintf("%s at %.1f", nodeOf(e.Model), res.simulated(e.Start.Sub(r.sent))))
			}
			t := res.simulated(r.end - r.start)
			fmt.Fprintf(w, "| %s | %d | %.0f | %d | %.1f | %.1f | %.1f | %s | %d (%s) |\n", onOff(res.sched), i+1, r.pause.Seconds(), len(r.calls), t, g.Seconds(), t-g.Seconds(), strings.Join(ln, ", "), len(crit), strings.Join(crit, ", "))
		}
	}
	fmt.Fprintf(w, "\nA call that waited for a load (its answer's load_duration ≥ %.1f s) had the load on the chain's critical path; a load run while another call works or the server is idle (an early load) is off it. A chain's loads are those begun from its request to the next chain's, each with when it began: one begun at or after the chain's time is what its end loads for the next chain.\n\n", criticalWait.Seconds())

	fmt.Fprintf(w, "### %d chains arriving %s apart\n\n", chainArrivals, chainSpacing)
	fmt.Fprintf(w, "| scheduling | model loads | load time (s) | calls | last chain done at (s) | chain time min / median / max (s) |\n|---|---:|---:|---:|---:|---|\n")
	for _, res := range results {
		var done []float64
		for _, r := range res.conc {
			done = append(done, res.simulated(r.end-r.start))
		}
		last := slices.MaxFunc(res.conc, func(a, b chainRun) int { return int(a.end - b.end) })
		per := map[string]int{}
		var lt time.Duration
		for _, e := range res.loads {
			per[e.Model]++
			lt += e.Took
		}
		var pl []string
		for _, m := range chainModels {
			pl = append(pl, fmt.Sprintf("%s %d", m.node, per[m.model]))
		}
		slices.Sort(done)
		fmt.Fprintf(w, "| %s | %d (%s) | %.1f | %d | %.1f | %.1f / %.1f / %.1f |\n", onOff(res.sched), len(res.loads), strings.Join(pl, ", "), res.simulated(lt), res.calls,
			res.simulated(last.end), done[0], done[len(done)/2], done[len(done)-1])
	}
	if len(results) == 2 {
		off, on := results[0], results[1]
		lastOf := func(res chainsResult) float64 {
			return res.simulated(slices.MaxFunc(res.conc, func(a, b chainRun) int { return int(a.end - b.end) }).end)
		}
		worst, who := 0.0, 0
		for i := range on.conc {
			d := on.simulated(on.conc[i].end-on.conc[i].start) - off.simulated(off.conc[i].end-off.conc[i].start)
			if i == 0 || d > worst {
				worst, who = d, i+1
			}
		}
		fmt.Fprintf(w, "\nOn against off: model loads %d → %d (%.2f×), last chain done %.1f → %.1f s (%+.0f %%); the chain slowed most by the scheduling, chain %d, took %+.1f s against its time with it off (bound: %s).\n\n",
			len(off.loads), len(on.loads), float64(len(on.loads))/float64(len(off.loads)), lastOf(off), lastOf(on), (lastOf(on)/lastOf(off)-1)*100, who, worst, config.DefaultMaxReorderWait)
	}
}

// simulated turns a measured wall time back into simulated seconds.
func (r chainsResult) simulated(d time.Duration) float64 { return d.Seconds() / r.cs.scale }

// nodeOf names the node of a model of the scenario.
func nodeOf(model string) string {
	for _, m := range chainModels {
		if m.model == model {
			return m.node
		}
	}
	return model
}
