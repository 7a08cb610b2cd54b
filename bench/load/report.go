package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// environment describes the machine and the run.
type environment struct {
	cpus      int
	model     string
	goVersion string
	kernel    string
	pin       string
	files     string
	loadStart string
	loadEnd   string
	cellsTook time.Duration
}

func machine(pin string) environment {
	e := environment{cpus: runtime.NumCPU(), goVersion: runtime.Version(), pin: pin, loadStart: loadavg()}
	// runtime.NumCPU counts the CPUs this process may run on: once pinned,
	// one. /proc/cpuinfo has them all.
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		n := 0
		for line := range strings.SplitSeq(string(data), "\n") {
			k, v, _ := strings.Cut(line, ":")
			switch strings.TrimSpace(k) {
			case "processor":
				n++
			case "model name":
				e.model = strings.TrimSpace(v)
			}
		}
		e.cpus = n
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		e.kernel = strings.TrimSpace(string(data))
	}
	return e
}

// loadavg is the first three fields of /proc/loadavg: other work on the
// machine shows up here.
func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func fmtDur(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/float64(time.Millisecond)) }

func fmtMB(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/(1<<20)) }

func yes(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**MISSED**"
}

func report(w io.Writer, o options, env environment, total map[cell]*measured, rounds []map[cell]*measured,
	spreads map[string]*spread, slows []*slowResult, profiles []profileResult) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("## Machine and run\n")
	p("- %d CPUs, %s; Linux %s; %s", env.cpus, env.model, env.kernel, env.goVersion)
	p("- %s", env.pin)
	p("- %s", env.files)
	p("- load average at start %s, at end %s (other work on the machine competes with the run)", env.loadStart, env.loadEnd)
	p("- %d rounds × (%d modes × %d concurrencies × %d targets), each cell %s warm-up + %s measured; cells took %s",
		o.rounds, len(o.modes), len(o.conns), len(o.targets), o.warmup, o.duration, env.cellsTook.Round(time.Second))
	p("- targets: direct = the mock upstream itself; bare = httputil.ReverseProxy (body read whole first, 64 idle upstream connections); proxy = ./cmd/proxy with model \"A\", a plain relay to node A (no server tools); simple = the same proxy with model \"chain/simple\" (simple mode: server tools and their system prompt sent upstream)")
	if slices.Contains(o.targets, "shared") || slices.Contains(o.targets, "redis") {
		p("- shared = a second proxy with store.redis_url on a redis-server of its own (pinned with the servers), model \"L\": a relay to a node with max_concurrency %d, shared through Redis leases (a take and a give-back per call, nothing queues); redis = that proxy with model \"A\": the same Redis store (traces written to it) without a limit. redis-server's own CPU is not in the CPU/req column", sharedLimit)
	}
	p("- upstream answer: %d content chunks (one word each), then a finish chunk, the usage chunk when asked, and [DONE]; non-stream: one JSON chat.completion", chunkCount)
	p("")
	p("## Results\n")
	p("Latencies in ms, from sending the request to the last byte; \"added\" is the p50 over the upstream's own (direct) at the same mode and concurrency.")
	p("CPU/req is the CPU time of the target's process alone (the proxy, not the upstream) per request, warm-up included; upstream CPU/req is the mock upstream's, per request of that target (the proxy asks it for a non-stream answer when its client did).\n")
	p("| mode | conns | target | req/s | p50 | p99 | added p50 | first content p50 | first content p99 | CPU/req µs | upstream CPU/req µs | content chunks | errors |")
	p("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, stream := range o.modes {
		for _, conns := range o.conns {
			direct := total[cell{"direct", stream, conns}]
			for _, name := range []string{"direct", "bare", "proxy", "simple", "shared", "redis", "candidate"} {
				m := total[cell{name, stream, conns}]
				if m == nil {
					continue
				}
				added, ttfc50, ttfc99, chunks := "", "", "", ""
				if name != "direct" && direct != nil {
					added = fmtDur(percentile(m.lat, 50) - percentile(direct.lat, 50))
				}
				if stream {
					ttfc50, ttfc99 = fmtDur(percentile(m.ttfc, 50)), fmtDur(percentile(m.ttfc, 99))
					chunks = fmt.Sprint(m.minChunks)
					if m.maxChunks != m.minChunks {
						chunks += "–" + fmt.Sprint(m.maxChunks)
					}
				}
				cpu, upCPU := "", ""
				if m.all > 0 {
					cpu = fmt.Sprintf("%.0f", float64(m.cpu.Microseconds())/float64(m.all))
					if name != "direct" {
						upCPU = fmt.Sprintf("%.0f", float64(m.upCPU.Microseconds())/float64(m.all))
					}
				}
				errs := fmt.Sprint(m.errs)
				if m.firstErr != "" {
					errs += " (" + m.firstErr + ")"
				}
				p("| %s | %d | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s |", modeName(stream), conns, name, m.rps(),
					fmtDur(percentile(m.lat, 50)), fmtDur(percentile(m.lat, 99)), added, ttfc50, ttfc99, cpu, upCPU, chunks, errs)
			}
		}
	}
	p("")
	p("## Targets (ratios within this run)\n")
	p("| target | measured (all rounds) | per round | goal | |")
	p("|---|---:|---|---|---|")
	maxConns, minConns := slices.Max(o.conns), slices.Min(o.conns)
	for _, subject := range []string{"proxy", "simple", "candidate"} {
		ratio := func(stream bool, conns int, m map[cell]*measured) float64 {
			b, x := m[cell{"bare", stream, conns}], m[cell{subject, stream, conns}]
			if b == nil || x == nil || b.rps() == 0 {
				return 0
			}
			return x.rps() / b.rps()
		}
		perRound := func(f func(map[cell]*measured) string) string {
			var s []string
			for _, r := range rounds {
				s = append(s, f(r))
			}
			return strings.Join(s, ", ")
		}
		has := func(stream bool, conns int, names ...string) bool {
			for _, n := range names {
				if total[cell{n, stream, conns}] == nil {
					return false
				}
			}
			return true
		}
		// Issue 24's goals: the relay within 5 % of the bare proxy without
		// streaming and 10 % streaming, simple mode within 10 %, at every
		// concurrency from 32 up (the ratio fell with connections in
		// flight, so the highest is the one to watch).
		goals := map[bool]float64{false: 0.95, true: 0.90}
		if subject == "simple" {
			goals[false] = 0.90
		}
		for _, stream := range []bool{false, true} {
			for _, conns := range o.conns {
				if conns < 32 || !has(stream, conns, "bare", subject) {
					continue
				}
				goal, r := goals[stream], ratio(stream, conns, total)
				p("| %s at %d conns: %s req/s ÷ bare req/s | %.0f %% | %s | ≥ %.0f %% | %s |", modeName(stream), conns, subject, 100*r,
					perRound(func(m map[cell]*measured) string { return fmt.Sprintf("%.0f %%", 100*ratio(stream, conns, m)) }), 100*goal, yes(r >= goal))
			}
		}
		added := func(name string, stream bool, m map[cell]*measured) time.Duration {
			d, x := m[cell{"direct", stream, minConns}], m[cell{name, stream, minConns}]
			if d == nil || x == nil {
				return 0
			}
			return percentile(x.lat, 50) - percentile(d.lat, 50)
		}
		if has(false, minConns, "direct", "bare", subject) {
			b, x := added("bare", false, total), added(subject, false, total)
			r := float64(x) / float64(max(b, 1))
			p("| non-stream at %d conn: %s's added p50 ÷ bare's | %.2f× (%s ms vs %s ms) | %s | ≤ 1.5× | %s |", minConns, subject, r, fmtDur(x), fmtDur(b),
				perRound(func(m map[cell]*measured) string {
					return fmt.Sprintf("%.2f×", float64(added(subject, false, m))/float64(max(added("bare", false, m), 1)))
				}), yes(r <= 1.5))
		}
		ttfc := func(name string, conns int, m map[cell]*measured) time.Duration {
			if x := m[cell{name, true, conns}]; x != nil {
				return percentile(x.ttfc, 50)
			}
			return 0
		}
		for _, conns := range slices.Compact([]int{minConns, maxConns}) {
			if !has(true, conns, "bare", subject) {
				continue
			}
			d := ttfc(subject, conns, total) - ttfc("bare", conns, total)
			goal, verdict := "≤ 0.2 ms", yes(d <= 200*time.Microsecond)
			if conns != minConns {
				// Saturated: queueing for the CPU, not the relay, dominates.
				goal, verdict = "(context: saturated)", ""
			}
			p("| stream at %d conns: first content chunk p50, %s − bare | %s ms | %s | %s | %s |", conns, subject, fmtDur(d),
				perRound(func(m map[cell]*measured) string {
					return fmtDur(ttfc(subject, conns, m)-ttfc("bare", conns, m)) + " ms"
				}), goal, verdict)
		}
	}
	// Shared admission: context, not a goal. shared ÷ redis is the leases
	// alone (both write traces to Redis); shared ÷ proxy adds the store.
	for _, stream := range []bool{false, true} {
		for _, conns := range o.conns {
			x := total[cell{"shared", stream, conns}]
			if x == nil {
				continue
			}
			for _, base := range []string{"bare", "proxy", "redis"} {
				b := total[cell{base, stream, conns}]
				if b == nil || b.rps() == 0 {
					continue
				}
				var per []string
				for _, r := range rounds {
					if rx, rb := r[cell{"shared", stream, conns}], r[cell{base, stream, conns}]; rx != nil && rb != nil && rb.rps() > 0 {
						per = append(per, fmt.Sprintf("%.0f %%", 100*rx.rps()/rb.rps()))
					}
				}
				p("| %s at %d conns: shared req/s ÷ %s req/s | %.0f %% | %s | (context: shared admission) | |", modeName(stream), conns, base, 100*x.rps()/b.rps(), strings.Join(per, ", "))
			}
		}
	}
	if sp := spreads["proxy"]; sp != nil {
		ok := sp.errs == 0 && sp.bursts == 0 && len(sp.gaps) > 0
		p("| chunks relayed as they arrive (upstream waits %s per chunk) | %d gaps < %s of %d | | 0 | %s |", o.spreadDelay, sp.bursts, o.spreadDelay/2, len(sp.gaps), yes(ok))
	}
	for _, s := range slows {
		if s.target == "bare" {
			continue
		}
		p("| %d concurrent slow streams: %s peak RSS | %s (VmHWM %s) | | < 100 MB | %s |", s.streams, s.target, fmtMB(s.rssPeak), fmtMB(s.hwm), yes(max(s.rssPeak, s.hwm) < 100<<20 && s.errs == 0))
		p("| %s goroutines before → all open → after | %d → %d → %d | | back to ≤ %d | %s |", s.target, s.gBase, s.gPeak, s.gAfter, s.gBase, yes(s.gBack))
	}
	p("")
	if len(spreads) > 0 {
		p("## Chunks relayed as they arrive\n")
		p("One stream at a time; the upstream waits %s before each of its %d chunks. A gap is the time between two content chunks reaching the client; a burst is a gap under %s (chunks held and released together).\n", o.spreadDelay, chunkCount, o.spreadDelay/2)
		p("| target | streams | errors | content chunks | gap p50 | gap min | gap max | bursts | first→last p50 |")
		p("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, name := range []string{"direct", "bare", "proxy", "simple", "shared", "redis", "candidate"} {
			sp := spreads[name]
			if sp == nil {
				continue
			}
			gmin, gmax := time.Duration(0), time.Duration(0)
			if len(sp.gaps) > 0 {
				gmin, gmax = slices.Min(sp.gaps), slices.Max(sp.gaps)
			}
			p("| %s | %d | %d | %d | %s | %s | %s | %d | %s |", name, sp.streams, sp.errs, sp.minChunk,
				fmtDur(percentile(sp.gaps, 50)), fmtDur(gmin), fmtDur(gmax), sp.bursts, fmtDur(percentile(sp.spans, 50)))
		}
		p("")
	}
	if len(slows) > 0 {
		p("## Slow streams\n")
		p("Fresh processes. The target is first warmed with 100 concurrent fast streams; once the client has closed its connections and the upstream its idle ones (its keep-alive timeout is %s, uvicorn's default), the goroutine count, stable for 2 s, is the baseline. Then %d streams are opened at once, each answered by the upstream with %d chunks %s apart; RSS is sampled every 100 ms, goroutines, goroutine stacks, heap objects (live and not yet collected) and the heap size at which the next GC starts once every stream has its first chunk. After, the client closes its connections and the goroutines are polled for up to %s.\n", upstreamIdleTimeout, o.slowStreams, chunkCount, o.slowDelay, upstreamIdleTimeout+10*time.Second)
		p("| target | streams | errors | all open after | held for | RSS base | RSS peak (sampled) | of which file-backed, base → peak | VmHWM | RSS after | goroutines base | open | after | back in | all open: stacks | heap | next GC at |")
		p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, s := range slows {
			errs := fmt.Sprint(s.errs)
			if s.firstErr != "" {
				errs += " (" + s.firstErr + ")"
			}
			back := "not back in " + (upstreamIdleTimeout + 10*time.Second).String()
			if s.gBack {
				back = s.gAfterIn.Round(time.Millisecond).String()
			}
			p("| %s | %d | %s | %s | %s | %s | %s | %s → %s | %s | %s | %d | %d | %d | %s | %s | %s | %s |", s.target, s.streams, errs,
				s.openIn.Round(time.Millisecond), s.held.Round(time.Millisecond), fmtMB(s.rssBase), fmtMB(s.rssPeak), fmtMB(s.fileBase), fmtMB(s.filePeak), fmtMB(s.hwm), fmtMB(s.rssAfter),
				s.gBase, s.gPeak, s.gAfter, back, fmtMB(s.open.stacks), fmtMB(s.open.heap), fmtMB(s.open.nextGC))
		}
		p("")
	}
	for _, pr := range profiles {
		p("## CPU profile: %s, %s at %d conns (%s)\n", pr.target, modeName(pr.stream), pr.conns, pr.file)
		p("%.0f req/s while profiled.\n", pr.rps)
		p("```")
		p("%s", strings.TrimRight(pr.top, "\n"))
		p("```\n")
	}
}
