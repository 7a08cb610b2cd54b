// Command load is the proxy's load harness (issue 6, "Measured performance").
//
// One run builds the proxy, starts a mock OpenAI upstream, a bare
// net/http/httputil.ReverseProxy to it and the proxy in simple mode to it,
// each in its own process pinned with taskset to CPU 0, while this process,
// the load generator, runs pinned to CPU 1. It drives the upstream directly,
// the bare proxy and the proxy with the same requests at several
// concurrencies, non-stream and stream, rotating the order of the targets
// and repeating, and prints a Markdown table and the targets as
// ratios within the run. It then checks that chunks are relayed as they
// arrive, and holds 1,000 slow streams to measure the proxy's memory and
// goroutines. Asked with -targets, it also drives a second proxy whose
// store is a redis-server it starts, with and without a node limit shared
// through Redis (targets shared and redis): the cost of shared admission.
//
// Asked with -chains, it runs instead the scenario of issue 44: the proxy
// in front of a simulated one-GPU Ollama (internal/fakeollama's scheduler)
// whose three models do not fit together, reflexive chains one at a time
// (back to back, then with a user's reading pause before each) and eight
// arriving a second apart, with the proxy's load scheduling off and then
// on, and reports the chains' times and the model loads.
//
//	go run ./bench/load                    # everything, about 3 minutes
//	go run ./bench/load -profile /tmp/prof # also CPU profiles of the proxy (relay, simple) and the bare proxy
//	go run ./bench/load -chains -chains-scale 0.2 # the chain scenario alone, about 4 minutes
//
// The same binary plays every part: -role upstream and -role bare start the
// mock upstream and the bare proxy; the default role orchestrates. All
// traffic stays on 127.0.0.1.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// options are the orchestrator's flags.
type options struct {
	repo        string
	proxyBin    string
	duration    time.Duration
	warmup      time.Duration
	rounds      int
	conns       []int
	pin         bool
	spreadDelay time.Duration
	spreadReqs  int
	slowStreams int
	slowDelay   time.Duration
	profileDir  string
	profileTime time.Duration
	proxyLog    string
	targets     []string
	modes       []bool
	candidate   string
	soak        time.Duration
	soakConns   int
	chains      bool
	chainsScale float64
	chainsSeq   int
	chainsPause time.Duration
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	role := fs.String("role", "", "internal: upstream or bare (the default orchestrates)")
	addr := fs.String("addr", "127.0.0.1:0", "internal: listen address of a role")
	target := fs.String("target", "", "internal: upstream URL of the bare proxy")
	pprofAddr := fs.String("pprof", "", "internal: serve net/http/pprof on this address")

	var o options
	conns := fs.String("conns", "1,8,32,256", "comma-separated client `connections` per cell")
	targets := fs.String("targets", "direct,bare,proxy", "comma-separated targets to drive: direct (the upstream itself), bare, proxy (model \"A\": a plain relay to node A), simple (the same proxy with model \"chain/simple\": simple mode with the server tools), shared (a second proxy with store.redis_url on a redis-server the harness starts, model \"L\": a relay to a node whose max_concurrency, too large to queue, is shared through Redis leases; skipped when redis-server is missing), redis (that second proxy with model \"A\": the Redis store without a limit, so that shared ÷ redis is the admission alone)")
	modes := fs.String("modes", "non-stream,stream", "comma-separated modes to drive")
	fs.StringVar(&o.repo, "repo", ".", "repository root (where ./cmd/proxy is)")
	fs.StringVar(&o.proxyBin, "proxy-bin", "", "use this proxy binary instead of building ./cmd/proxy")
	fs.StringVar(&o.candidate, "candidate", "", "a second proxy `binary`, driven as target \"candidate\" in the same cells (to measure a change)")
	fs.DurationVar(&o.duration, "duration", 1500*time.Millisecond, "measured time of one cell (target × mode × connections)")
	fs.DurationVar(&o.warmup, "warmup", 300*time.Millisecond, "unmeasured time before each cell")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds; each runs every cell once, the targets' order rotating")
	fs.BoolVar(&o.pin, "pin", true, "pin the servers to CPU 0 and the load generator to CPU 1 with taskset")
	fs.DurationVar(&o.spreadDelay, "spread-delay", 20*time.Millisecond, "upstream delay per chunk for the relay-as-they-come check (0 skips it)")
	fs.IntVar(&o.spreadReqs, "spread-requests", 5, "streams per target for the relay-as-they-come check")
	fs.IntVar(&o.slowStreams, "slow-streams", 1000, "concurrent slow streams held through each proxy (0 skips the test)")
	fs.DurationVar(&o.slowDelay, "slow-delay", 500*time.Millisecond, "upstream delay per chunk of a slow stream (20 chunks)")
	fs.StringVar(&o.profileDir, "profile", "", "when set, write CPU profiles of the proxy (relay and simple mode) and of the bare proxy, under the run's largest connection count, to this `dir`")
	fs.DurationVar(&o.profileTime, "profile-time", 5*time.Second, "length of each CPU profile")
	fs.StringVar(&o.proxyLog, "proxy-log-level", "info", "the proxy's -log-level (its logs go to a file)")
	fs.DurationVar(&o.soak, "soak", 0, "instead of the cells, soak the proxy for this long and report its errors (e.g. 60s)")
	fs.IntVar(&o.soakConns, "soak-conns", 200, "concurrent clients of the soak")
	fs.BoolVar(&o.chains, "chains", false, "instead of the cells, run the chain scenario: a reflexive chain over three models on a simulated one-GPU Ollama (fakeollama's scheduler), one chain at a time and eight arriving one second apart")
	fs.Float64Var(&o.chainsScale, "chains-scale", 0.05, "wall time of one simulated second in the chain scenario")
	fs.IntVar(&o.chainsSeq, "chains-seq", 3, "chains run one at a time in the chain scenario (the first from a cold GPU), back to back, then as many again after a pause each")
	fs.DurationVar(&o.chainsPause, "chains-pause", 15*time.Second, "simulated time a user reads each answer before the next chain, in the second half of the one-at-a-time part (0: no second half)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var err error
	switch *role {
	case "upstream":
		err = serveUpstream(ctx, *addr, *pprofAddr, stdout)
	case "bare":
		err = serveBare(ctx, *addr, *target, *pprofAddr, stdout)
	case "":
		if o.chains {
			if o.chainsScale <= 0 || o.chainsSeq <= 0 || o.chainsPause < 0 {
				fmt.Fprintln(stderr, "-chains-scale and -chains-seq must be positive, -chains-pause not negative")
				return 2
			}
			err = runChains(ctx, o, stdout, stderr)
			break
		}
		if o.conns, err = parseConns(*conns); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		if o.targets, o.modes, err = parseTargets(*targets, *modes); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		if o.candidate != "" {
			o.targets = append(o.targets, "candidate")
		}
		err = orchestrate(ctx, o, stdout, stderr)
	default:
		err = fmt.Errorf("unknown -role %q", *role)
	}
	if err != nil {
		fmt.Fprintln(stderr, "load:", err)
		return 1
	}
	return 0
}

func parseConns(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-conns: %q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func parseTargets(targets, modes string) ([]string, []bool, error) {
	var ts []string
	for f := range strings.SplitSeq(targets, ",") {
		switch f = strings.TrimSpace(f); f {
		case "direct", "bare", "proxy", "simple", "shared", "redis":
			ts = append(ts, f)
		default:
			return nil, nil, fmt.Errorf("-targets: unknown target %q (want direct, bare, proxy, simple, shared, redis)", f)
		}
	}
	var ms []bool
	for f := range strings.SplitSeq(modes, ",") {
		switch strings.TrimSpace(f) {
		case "non-stream":
			ms = append(ms, false)
		case "stream":
			ms = append(ms, true)
		default:
			return nil, nil, fmt.Errorf("-modes: unknown mode %q (want non-stream, stream)", f)
		}
	}
	return ts, ms, nil
}
