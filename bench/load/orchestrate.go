package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuTime reads the user+system CPU time a process has used so far, from
// /proc/PID/stat (in clock ticks of 10 ms: CLK_TCK is 100 on Linux).
func cpuTime(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name, field 2, may hold spaces: count from its ")".
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// measured is a cell's sample with the CPU its target and the upstream used.
type measured struct {
	*sample
	cpu, upCPU time.Duration // over the whole cell, warm-up included
	all        int           // requests over the whole cell
}

func orchestrate(ctx context.Context, o options, stdout, stderr io.Writer) error {
	pinNote := "not pinned (-pin=false): the load generator and the servers share both cores"
	cpu := ""
	if o.pin {
		note, err := pinSelf("1")
		if err != nil {
			return err
		}
		pinNote = note
		if hasTaskset() {
			cpu = "0"
			pinNote += "; mock upstream, bare proxy and proxy each pinned to CPU 0 (taskset -c 0)"
		}
	}
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, "load: "+format+"\n", args...) }
	logf("%s", pinNote)
	dir, err := os.MkdirTemp("", "chainproxy-bench-")
	if err != nil {
		return err
	}
	keep := false
	defer func() {
		if keep {
			logf("logs kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	}()
	fail := func(err error) error { keep = true; return err }
	env := machine(pinNote)
	env.files = fileLimit(o.slowStreams)
	logf("%s", env.files)

	bin := o.proxyBin
	if bin == "" {
		logf("building ./cmd/proxy")
		if bin, err = buildProxy(ctx, o.repo, dir, false); err != nil {
			return fail(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	toolsRoot := filepath.Join(dir, "workspace")
	if err := os.Mkdir(toolsRoot, 0o755); err != nil {
		return err
	}
	up, err := startProc(ctx, "upstream", cpu, dir, nil, roleListening, self, "-role", "upstream")
	if err != nil {
		return fail(err)
	}
	defer up.stop()
	bare, err := startProc(ctx, "bare", cpu, dir, nil, roleListening, self, "-role", "bare", "-target", "http://"+up.addr)
	if err != nil {
		return fail(err)
	}
	defer bare.stop()
	var delays []time.Duration
	for _, d := range []time.Duration{o.spreadDelay, o.slowDelay} {
		if d > 0 {
			delays = append(delays, d)
		}
	}
	cfg := proxyConfig(up.addr, toolsRoot, delays, "")
	px, err := startProxy(ctx, "proxy", bin, cpu, dir, cfg, o.proxyLog, nil)
	if err != nil {
		return fail(err)
	}
	defer px.stop()
	var cand *proc
	if o.candidate != "" {
		if cand, err = startProxy(ctx, "candidate", o.candidate, cpu, dir, cfg, o.proxyLog, nil); err != nil {
			return fail(err)
		}
		defer cand.stop()
	}
	// The shared and redis targets: a second proxy, its store a Redis of
	// its own, started only when asked for.
	var shared *proc
	if slices.Contains(o.targets, "shared") || slices.Contains(o.targets, "redis") {
		rd, err := startRedis(ctx, cpu, dir)
		switch {
		case errors.Is(err, errNoRedis):
			logf("skipping targets shared and redis: %v", err)
			o.targets = slices.DeleteFunc(o.targets, func(t string) bool { return t == "shared" || t == "redis" })
		case err != nil:
			return fail(err)
		default:
			defer rd.stop()
			shared, err = startProxy(ctx, "shared", bin, cpu, dir, proxyConfig(up.addr, toolsRoot, delays, "redis://"+rd.addr+"/0"), o.proxyLog, nil)
			if err != nil {
				return fail(err)
			}
			defer shared.stop()
		}
	}
	all := map[string]target{
		"direct": {"direct", "http://" + up.addr, up.pid(), ""},
		"bare":   {"bare", "http://" + bare.addr, bare.pid(), ""},
		"proxy":  {"proxy", "http://" + px.addr, px.pid(), ""},
		"simple": {"simple", "http://" + px.addr, px.pid(), "chain/simple"},
	}
	if shared != nil {
		all["shared"] = target{"shared", "http://" + shared.addr, shared.pid(), "L"}
		all["redis"] = target{"redis", "http://" + shared.addr, shared.pid(), ""}
	}
	if cand != nil {
		all["candidate"] = target{"candidate", "http://" + cand.addr, cand.pid(), ""}
	}
	if o.soak > 0 {
		logf("soak: %d clients for %s through the proxy", o.soakConns, o.soak)
		r, err := soak(ctx, all["proxy"], "http://"+px.addr+"/metrics", o.soakConns, o.soak)
		if err != nil {
			return fail(err)
		}
		reportSoak(stdout, r, o.soakConns)
		if r.errors > 0 {
			return fail(fmt.Errorf("soak: %d of %d requests failed, first: %s", r.errors, r.requests, r.firstErr))
		}
		return nil
	}
	var targets []target
	for _, name := range o.targets {
		targets = append(targets, all[name])
	}

	// The cells: every round runs each (mode, connections) cell for every
	// target back to back, in an order that rotates, so that background
	// load and warm-up effects fall on each target alike.
	total := map[cell]*measured{}
	rounds := make([]map[cell]*measured, o.rounds)
	start := time.Now()
	for round := range o.rounds {
		rounds[round] = map[cell]*measured{}
		for mi, stream := range o.modes {
			for ci, conns := range o.conns {
				off := round + mi + ci
				for k := range targets {
					t := targets[(off+k)%len(targets)]
					c := cell{target: t.name, stream: stream, conns: conns}
					cpu0, up0 := cpuTime(t.pid), cpuTime(up.pid())
					s := runCell(ctx, t, c, o.warmup, o.duration)
					if ctx.Err() != nil {
						return ctx.Err()
					}
					m := &measured{sample: s, cpu: cpuTime(t.pid) - cpu0, upCPU: cpuTime(up.pid()) - up0}
					m.all = s.n + s.warm
					rounds[round][c] = m
					if tm := total[c]; tm == nil {
						cp := *s
						cp.lat, cp.ttfc = append([]time.Duration(nil), s.lat...), append([]time.Duration(nil), s.ttfc...)
						total[c] = &measured{sample: &cp, cpu: m.cpu, upCPU: m.upCPU, all: m.all}
					} else {
						tm.merge(s)
						tm.cpu += m.cpu
						tm.upCPU += m.upCPU
						tm.all += m.all
					}
					logf("round %d/%d %-9s c=%-3d %-6s %8.0f req/s  p50 %s  errors %d", round+1, o.rounds, modeName(stream), conns, t.name, s.rps(), fmtDur(percentile(s.lat, 50)), s.errs)
				}
			}
		}
	}
	cellsTook := time.Since(start)

	var spreads map[string]*spread
	if o.spreadDelay > 0 && o.spreadReqs > 0 {
		spreads = map[string]*spread{}
		for _, t := range targets {
			if t.model != "" {
				continue // the check names the slow node itself: the same path as "proxy"
			}
			logf("relay check: %d streams through %s, upstream waits %s per chunk", o.spreadReqs, t.name, o.spreadDelay)
			spreads[t.name] = checkSpread(ctx, t, o.spreadReqs, o.spreadDelay)
		}
	}

	var profiles []profileResult
	if o.profileDir != "" {
		profiles, err = profileProxies(ctx, o, cpu, dir, self, up.addr, cfg, logf)
		if err != nil {
			return fail(err)
		}
	}

	// Slow streams run against fresh processes: the memory they show is
	// what holding the streams costs, not what the load cells left behind.
	px.stop()
	bare.stop()
	cand.stop()
	shared.stop()
	var slows []*slowResult
	if o.slowStreams > 0 {
		names := []string{"proxy", "bare"}
		if o.candidate != "" {
			names = append(names, "candidate")
		}
		for _, name := range names {
			var p *proc
			var stats string
			if name != "bare" {
				b := bin
				if name == "candidate" {
					b = o.candidate
				}
				p, err = startProxy(ctx, name+"-slow", b, cpu, dir, cfg, o.proxyLog, nil)
				if p != nil {
					stats = "http://" + p.addr + "/metrics"
				}
			} else {
				p, err = startProc(ctx, "bare-slow", cpu, dir, nil, roleListening, self, "-role", "bare", "-target", "http://"+up.addr)
				if p != nil {
					stats = "http://" + p.addr + "/_bench/stats"
				}
			}
			if err != nil {
				return fail(err)
			}
			logf("holding %d slow streams (20 chunks, %s apart) through %s", o.slowStreams, o.slowDelay, name)
			r, err := holdSlowStreams(ctx, target{name, "http://" + p.addr, p.pid(), ""}, stats, o.slowStreams, o.slowDelay)
			p.stop()
			if err != nil {
				return fail(err)
			}
			slows = append(slows, r)
		}
	}
	env.loadEnd = loadavg()
	env.cellsTook = cellsTook
	report(stdout, o, env, total, rounds, spreads, slows, profiles)
	return nil
}

// fileLimit checks that the open-files limit lets the proxy hold n streams
// (one client and one upstream connection each), raising the hard limit,
// which the children inherit, when it is too low. Every Go process raises
// its own soft limit to the hard one at startup (Go 1.19 and later).
func fileLimit(n int) string {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return "open files: unknown (" + err.Error() + ")"
	}
	need := uint64(2*n + 256)
	note := fmt.Sprintf("open files: soft %d, hard %d; Go raises each process's soft limit to the hard one; %d streams need about %d in the proxy", rl.Cur, rl.Max, n, need)
	if rl.Max >= need {
		return note
	}
	raised := syscall.Rlimit{Cur: need, Max: need}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
		return note + "; raising the hard limit failed (" + err.Error() + "): run ulimit -Hn " + fmt.Sprint(need) + " first"
	}
	return note + fmt.Sprintf("; hard limit raised to %d for this run", need)
}

func modeName(stream bool) string {
	if stream {
		return "stream"
	}
	return "non-stream"
}
