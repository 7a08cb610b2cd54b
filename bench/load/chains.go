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
// with a reflexive chain over its three models.
func startChainSim(ctx context.Context, bin, dir, logLevel string, scale float64) (*chainSim, error) {
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
	px, err := startProxy(ctx, "chains-proxy", bin, "", dir, chainsConfig(sim.URL, root), logLevel, nil)
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

// simulated turns a measured wall time back into simulated seconds.
func (c *chainSim) simulated(d time.Duration) float64 { return d.Seconds() / c.scale }

// chainsConfig is the proxy's configuration: the three nodes on the
// simulator with the defaults a user has (max_concurrency 1, Ollama's
// keep_alive), the default stages (OL1 with tools, M1, M2).
func chainsConfig(sim, toolsRoot string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "server:\n  addr: 127.0.0.1:0\nnodes:\n")
	for _, m := range chainModels {
		fmt.Fprintf(&b, "  - {name: %s, provider: ollama, base_url: %q, model: %q}\n", m.node, sim, m.model)
	}
	fmt.Fprintf(&b, "tools:\n  root: %q\n", toolsRoot)
	return b.String()
}

// chainRun is one chain as the client and the simulator saw it.
type chainRun struct {
	start, end time.Duration // since the part began, wall time
	calls      []string      // the models called during it (one chain at a time only)
	loads      []fakeollama.LoadEvent
	err        error
}

// runChain sends one reflexive request and waits for its whole answer.
func runChain(ctx context.Context, url string) error {
	r := do(ctx, newClient(1), url, requestBody("chain/reflexive", false), false, false, nil)
	return r.err
}

// runChains runs the -chains scenario and prints its report.
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

	// (a) One chain at a time, from a cold GPU: the first chain loads
	// everything; the later ones show the steady state.
	logf("chains: %d chains one at a time, scale %g", o.chainsSeq, o.chainsScale)
	cs, err := startChainSim(ctx, bin, dir, o.proxyLog, o.chainsScale)
	if err != nil {
		return err
	}
	var seq []chainRun
	begin := time.Now()
	for range o.chainsSeq {
		calls0, loads0 := len(cs.sim.Requests()), len(cs.sim.Loads())
		r := chainRun{start: time.Since(begin)}
		r.err = runChain(ctx, "http://"+cs.proxy.addr)
		r.end = time.Since(begin)
		for _, req := range cs.sim.Requests()[calls0:] {
			r.calls = append(r.calls, req.Model)
		}
		r.loads = cs.sim.Loads()[loads0:]
		seq = append(seq, r)
		if r.err != nil {
			cs.stop()
			return fmt.Errorf("chain one at a time: %w", r.err)
		}
	}
	cs.stop()

	// (b) Eight chains arriving one second apart, from a cold GPU.
	logf("chains: %d chains arriving %s apart (simulated)", chainArrivals, chainSpacing)
	cs, err = startChainSim(ctx, bin, dir, o.proxyLog, o.chainsScale)
	if err != nil {
		return err
	}
	defer cs.stop()
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
			return fmt.Errorf("concurrent chain %d: %w", i, r.err)
		}
	}
	reportChains(stdout, o, cs, gen, seq, conc, cs.sim.Loads(), len(cs.sim.Requests()))
	return nil
}

func reportChains(w io.Writer, o options, cs *chainSim, gen map[string]time.Duration, seq, conc []chainRun, loads []fakeollama.LoadEvent, calls int) {
	fmt.Fprintf(w, "## Chains on one GPU (simulated)\n\n")
	fmt.Fprintf(w, "fakeollama's scheduler: %.0f GB at %.0f GB/s, Ollama's defaults (keep_alive 5m, one request at a time per model); ", chainGPU/1e9, chainBandwidth/1e9)
	var ms []string
	for _, m := range chainModels {
		ms = append(ms, fmt.Sprintf("%s %s %.1f GB, %.1f s a call", m.node, m.model, float64(m.size)/1e9, m.gen.Seconds()))
	}
	fmt.Fprintf(w, "%s. Times in simulated seconds (wall time ÷ %g).\n\n", strings.Join(ms, "; "), o.chainsScale)

	fmt.Fprintf(w, "### One chain at a time\n\n")
	fmt.Fprintf(w, "| chain | calls | time (s) | generation (s) | loads (s) | loads | other (s) |\n|---|---|---:|---:|---:|---|---:|\n")
	for i, r := range seq {
		var g time.Duration
		for _, m := range r.calls {
			g += gen[m]
		}
		var lt time.Duration
		var ln []string
		for _, e := range r.loads {
			lt += e.Took
			ln = append(ln, e.Model)
		}
		t := cs.simulated(r.end - r.start)
		fmt.Fprintf(w, "| %d | %s | %.1f | %.1f | %.1f | %d (%s) | %.1f |\n", i+1, strings.Join(r.calls, ", "), t, g.Seconds(), cs.simulated(lt), len(r.loads), strings.Join(ln, ", "), t-g.Seconds()-cs.simulated(lt))
	}
	fmt.Fprintf(w, "\nOne chain at a time, every load is on its critical path: \"other\" is the proxy's own time and the scale's rounding.\n\n")

	fmt.Fprintf(w, "### %d chains arriving %s apart\n\n", len(conc), chainSpacing)
	var done []float64
	for _, r := range conc {
		done = append(done, cs.simulated(r.end-r.start))
	}
	last := slices.MaxFunc(conc, func(a, b chainRun) int { return int(a.end - b.end) })
	per := map[string]int{}
	var lt time.Duration
	for _, e := range loads {
		per[e.Model]++
		lt += e.Took
	}
	var pl []string
	for _, m := range chainModels {
		pl = append(pl, fmt.Sprintf("%s %d", m.node, per[m.model]))
	}
	slices.Sort(done)
	fmt.Fprintf(w, "| model loads | load time (s) | calls | last chain done at (s) | chain time min / median / max (s) |\n|---:|---:|---:|---:|---|\n")
	fmt.Fprintf(w, "| %d (%s) | %.1f | %d | %.1f | %.1f / %.1f / %.1f |\n\n", len(loads), strings.Join(pl, ", "), cs.simulated(lt), calls,
		cs.simulated(last.end), done[0], done[len(done)/2], done[len(done)-1])
}
