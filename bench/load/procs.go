package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pinnedEnv marks the orchestrator once it runs under taskset -c 1.
const pinnedEnv = "CHAINPROXY_BENCH_PINNED"

// pinSelf re-executes this process under "taskset -c cpu" unless it already
// runs there. It returns only when it did not re-execute: taskset missing
// (reported in note), or already pinned.
func pinSelf(cpu string) (note string, err error) {
	if os.Getenv(pinnedEnv) != "" {
		return "load generator pinned to CPU " + cpu + " (taskset)", nil
	}
	ts, err := exec.LookPath("taskset")
	if err != nil {
		return "taskset not found: nothing pinned, results share both cores", nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding own executable: %w", err)
	}
	env := append(os.Environ(), pinnedEnv+"=1")
	// Exec rather than a child: the orchestrator is the load generator.
	return "", syscall.Exec(ts, append([]string{ts, "-c", cpu, self}, os.Args[1:]...), env)
}

// proc is a child process: one of this binary's roles, or the proxy.
type proc struct {
	name string
	cmd  *exec.Cmd
	addr string // host:port it listens on
	log  string // file receiving its stderr
}

// startProc starts argv (under "taskset -c cpu" when cpu is set) and waits
// for the line of its stdout that match captures the address from.
func startProc(ctx context.Context, name, cpu, logDir string, env []string, match *regexp.Regexp, argv ...string) (*proc, error) {
	if cpu != "" {
		argv = append([]string{"taskset", "-c", cpu}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	// The children die with the orchestrator, should it be killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	logPath := filepath.Join(logDir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own descriptor
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath}
	found := make(chan string, 1)
	go func() { // exits at the child's EOF on stdout
		sc := bufio.NewScanner(out)
		sent := false
		for sc.Scan() {
			if m := match.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
		if !sent {
			close(found)
		}
		io.Copy(io.Discard, out)
	}()
	select {
	case addr, ok := <-found:
		if !ok {
			p.stop()
			return nil, fmt.Errorf("%s exited before listening; see %s", name, logPath)
		}
		p.addr = addr
		return p, nil
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
	}
	p.stop()
	return nil, fmt.Errorf("%s did not start listening; see %s", name, logPath)
}

// pid is the child's process ID (taskset execs the program in place).
func (p *proc) pid() int { return p.cmd.Process.Pid }

// stop ends the child with SIGTERM, then SIGKILL after 5 s.
func (p *proc) stop() {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }() // exits when the child does
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

var (
	roleListening  = regexp.MustCompile(`^listening (\S+)$`)
	proxyListening = regexp.MustCompile(`^chainproxy listening on http://(\S+)$`)
	// redisReady is the line redis-server logs (to stdout, with no
	// logfile) once it accepts connections.
	redisReady = regexp.MustCompile(`(Ready to accept connections)`)
)

// errNoRedis says that redis-server is not on PATH.
var errNoRedis = errors.New("redis-server not found on PATH (install it, e.g. apt-get install redis-server)")

// startRedis starts a redis-server without persistence on a free loopback
// port; its addr is host:port.
func startRedis(ctx context.Context, cpu, dir string) (*proc, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errNoRedis
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	_, port, _ := net.SplitHostPort(addr)
	p, err := startProc(ctx, "redis", cpu, dir, nil, redisReady, bin,
		"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err != nil {
		return nil, err
	}
	p.addr = addr
	return p, nil
}

// releaseTags are the build tags of a release build (README, "Operating
// it"): the harness measures the binary operators are told to build.
// cmd/proxy's TestReleaseBuildPrunesMethods says what they leave out.
const releaseTags = "grpcnotrace,nomsgpack"

// buildProxy builds ./cmd/proxy into dir, as a release build. With pprof
// set, an extra file is overlaid into package main (the tree is not
// touched) that serves net/http/pprof on $CHAINPROXY_BENCH_PPROF, for CPU
// profiles (pprof's index page brings html/template back, so that build is
// larger).
func buildProxy(ctx context.Context, repo, dir string, pprof bool) (string, error) {
	name := "proxy"
	var extra []string
	if pprof {
		name = "proxy-pprof"
		abs, err := filepath.Abs(filepath.Join(repo, "cmd", "proxy", "zz_bench_pprof.go"))
		if err != nil {
			return "", err
		}
		src := filepath.Join(dir, "zz_bench_pprof.go")
		if err := os.WriteFile(src, []byte(pprofOverlay), 0o644); err != nil {
			return "", err
		}
		ov := filepath.Join(dir, "overlay.json")
		js := fmt.Sprintf(`{"Replace":{%s:%s}}`, strconv.Quote(abs), strconv.Quote(src))
		if err := os.WriteFile(ov, []byte(js), 0o644); err != nil {
			return "", err
		}
		extra = []string{"-overlay", ov}
	}
	bin := filepath.Join(dir, name)
	args := append([]string{"build", "-tags", releaseTags, "-o", bin}, extra...)
	args = append(args, "./cmd/proxy")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/proxy: %w\n%s", err, out)
	}
	return bin, nil
}

const pprofOverlay = `package main

import (
	"net/http"
	_ "net/http/pprof"
	"os"
)

// Added by bench/load through go build -overlay, for CPU profiles only.
func init() {
	if addr := os.Getenv("CHAINPROXY_BENCH_PPROF"); addr != "" {
		go http.ListenAndServe(addr, nil)
	}
}
`

// sharedLimit is node L's max_concurrency in the shared proxy: above any
// -conns, so that no call queues and every call takes a lease and gives it
// back.
const sharedLimit = 100000

// proxyConfig is the proxy's configuration for the bench: simple mode, one
// OpenAI node per upstream delay, no admission limit, a scratch tools root.
// With redisURL, the store is that Redis and node L, the same relay as A,
// has a max_concurrency shared through it.
func proxyConfig(upstream, toolsRoot string, delays []time.Duration, redisURL string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "server:\n  addr: 127.0.0.1:0\nnodes:\n")
	fmt.Fprintf(&b, "  - {name: A, provider: openai, base_url: \"http://%s/v1\", model: bench, max_concurrency: 0}\n", upstream)
	if redisURL != "" {
		fmt.Fprintf(&b, "  - {name: L, provider: openai, base_url: \"http://%s/v1\", model: bench, max_concurrency: %d}\n", upstream, sharedLimit)
	}
	for i, d := range delays {
		fmt.Fprintf(&b, "  - {name: S%d, provider: openai, base_url: \"http://%s/v1\", model: \"bench@%s\", max_concurrency: 0}\n", i, upstream, d)
	}
	fmt.Fprintf(&b, "chain:\n  stages: [{node: A, max_turns: 4, tools: true}]\n  simple_node: A\n")
	fmt.Fprintf(&b, "tools:\n  root: %q\n", toolsRoot)
	if redisURL != "" {
		fmt.Fprintf(&b, "store:\n  redis_url: %q\n", redisURL)
	}
	return b.String()
}

// startProxy starts the proxy binary with cfg.
func startProxy(ctx context.Context, name, bin, cpu, dir, cfg, logLevel string, env []string) (*proc, error) {
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	return startProc(ctx, name, cpu, dir, env, proxyListening, bin, "-config", path, "-log-level", logLevel)
}

// freeAddr returns a loopback address nothing listens on at the moment.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// rss reads a process's resident set size and its peak (VmRSS, VmHWM) in
// bytes from /proc.
func rss(pid int) (cur, peak int64, err error) {
	cur, peak, _, err = rssFile(pid)
	return cur, peak, err
}

// rssFile is rss with the file-backed part of the resident set
// (RssFile): the executable's own pages, which a large binary has many
// of whatever it allocates.
func rssFile(pid int) (cur, peak, file int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			cur = n << 10
		case "VmHWM":
			peak = n << 10
		case "RssFile":
			file = n << 10
		}
	}
	if cur == 0 {
		return 0, 0, 0, errors.New("no VmRSS in /proc status")
	}
	return cur, peak, file, nil
}

// hasTaskset reports whether taskset can be used.
func hasTaskset() bool {
	_, err := exec.LookPath("taskset")
	return err == nil
}
