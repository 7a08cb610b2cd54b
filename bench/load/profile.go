package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// profileResult is one CPU profile taken under load.
type profileResult struct {
	target string
	stream bool
	conns  int
	file   string
	rps    float64
	top    string // go tool pprof -top, trimmed
}

// profileProxies takes CPU profiles of the proxy (a build with
// net/http/pprof overlaid, otherwise the same binary) relaying and in
// simple mode, and of the bare proxy, each under the heaviest load of the
// run, non-stream and stream.
func profileProxies(ctx context.Context, o options, cpu, dir, self, upAddr, cfg string, logf func(string, ...any)) ([]profileResult, error) {
	if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
		return nil, err
	}
	logf("building ./cmd/proxy with net/http/pprof overlaid")
	bin, err := buildProxy(ctx, o.repo, dir, true)
	if err != nil {
		return nil, err
	}
	conns := 0
	for _, c := range o.conns {
		conns = max(conns, c)
	}
	var out []profileResult
	for _, name := range []string{"proxy", "simple", "bare"} {
		pprofAddr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		var p *proc
		var profBin string
		model := ""
		if name == "simple" {
			model = "chain/simple"
		}
		if name != "bare" {
			p, err = startProxy(ctx, name+"-pprof", bin, cpu, dir, cfg, o.proxyLog, []string{"CHAINPROXY_BENCH_PPROF=" + pprofAddr})
			profBin = bin
		} else {
			p, err = startProc(ctx, "bare-pprof", cpu, dir, nil, roleListening, self, "-role", "bare", "-target", "http://"+upAddr, "-pprof", pprofAddr)
			profBin = self
		}
		if err != nil {
			return nil, err
		}
		for _, stream := range []bool{false, true} {
			t := target{name, "http://" + p.addr, p.pid(), model}
			file := filepath.Join(o.profileDir, fmt.Sprintf("%s-%s-c%d.pprof", name, modeName(stream), conns))
			logf("profiling %s, %s at %d conns, for %s", name, modeName(stream), conns, o.profileTime)
			errc := make(chan error, 1)
			go func() { // exits when the profile is written: profileTime plus a little
				errc <- fetchProfile(ctx, pprofAddr, o.profileTime, file)
			}()
			s := runCell(ctx, t, cell{name, stream, conns}, 500*time.Millisecond, o.profileTime+time.Second)
			if err := <-errc; err != nil {
				p.stop()
				return nil, err
			}
			top, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=30", profBin, file).Output()
			if err != nil {
				top = []byte("go tool pprof: " + err.Error())
			}
			out = append(out, profileResult{target: name, stream: stream, conns: conns, file: file, rps: s.rps(), top: trimTop(string(top))})
		}
		p.stop()
	}
	return out, nil
}

// fetchProfile starts a CPU profile after a short delay (the load warms up
// meanwhile) and writes it to file.
func fetchProfile(ctx context.Context, addr string, d time.Duration, file string) error {
	select {
	case <-time.After(500 * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(d.Seconds()))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cpu profile: status %d", resp.StatusCode)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// trimTop drops pprof's header lines up to the table.
func trimTop(s string) string {
	if i := strings.Index(s, "Showing nodes"); i >= 0 {
		return s[i:]
	}
	return s
}
