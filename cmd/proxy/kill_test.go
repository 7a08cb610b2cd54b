package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"chainproxy/internal/fakeopenai"
	"chainproxy/internal/redistest"
)

// buildProxy builds this package's binary into a temporary directory. A
// build that fails (no go tool here, say) skips the test, or fails it when
// CI is set, so that CI never passes by skipping.
func buildProxy(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "proxy")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("go build of the proxy failed, and CI is set so this test may not be skipped: %v\n%s", err, out)
		}
		t.Skipf("skipping: cannot build the proxy binary (go build -o %s .): %v\n%s", bin, err, out)
	}
	return bin
}

// replica is one proxy process started from the built binary.
type replica struct {
	cmd    *exec.Cmd
	base   string
	stderr string // file with its log
	exited chan struct{}
}

// startReplica runs bin with the config file cfg on a free loopback port and
// returns once it prints its listening line. The process is killed when the
// test ends, should it still run.
func startReplica(t *testing.T, bin, cfg, name string) *replica {
	t.Helper()
	dir := filepath.Dir(cfg)
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close() // the child holds its own descriptor
	cmd := exec.Command(bin, "-config", cfg, "-addr", "127.0.0.1:0", "-log-level", "warn")
	cmd.Dir = dir
	cmd.Stderr = logf
	// The child dies with the test binary, should that be killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	r := &replica{cmd: cmd, stderr: logPath, exited: make(chan struct{})}
	found := make(chan string, 1)
	go func() { // exits at the child's EOF on stdout, when it exits
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if after, ok := strings.CutPrefix(sc.Text(), "chainproxy listening on "); ok {
				found <- after
			}
		}
		_ = cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(r.kill)
	select {
	case r.base = <-found:
	case <-r.exited:
		t.Fatalf("%s exited at start: %s", name, r.log())
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not listen within 30s: %s", name, r.log())
	}
	return r
}

// kill ends the process with SIGKILL, as a crash or an OOM kill would, and
// waits for it. Killing a dead replica does nothing.
func (r *replica) kill() {
	_ = r.cmd.Process.Kill()
	<-r.exited
}

func (r *replica) log() string {
	b, _ := os.ReadFile(r.stderr)
	return tail(string(b))
}

// TestKilledReplicaFreesItsSlot: two real proxy processes share one node's
// max_concurrency: 1 through a real redis-server. Replica A holds the slot
// with a call the upstream keeps; A is killed with SIGKILL, so it never gives
// the slot back. A call to replica B must then wait for A's lease to expire
// (it cannot get the slot while the lease is fresh), and be answered soon
// after, within the lease plus a generous margin.
func TestKilledReplicaFreesItsSlot(t *testing.T) {
	const lease = 3 * time.Second
	rs := redistest.Start(t)
	fake := fakeopenai.New(t,
		fakeopenai.Reply{Hang: true}, // A's call: held until A's connection dies
		fakeopenai.Reply{Content: []string{"answered by B"}},
	)
	bin := buildProxy(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	err := os.WriteFile(cfg, fmt.Appendf(nil, `
nodes:
  - {name: OL1, provider: openai, base_url: %q, model: m, max_concurrency: 1, timeout: 120s}
chain:
  stages: [{node: OL1, max_turns: 1}]
store:
  redis_url: %q
admission:
  lease: %s
tools:
  root: %q
`, fake.BaseURL(), rs.URL(), lease, dir), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	a := startReplica(t, bin, cfg, "a")
	b := startReplica(t, bin, cfg, "b")

	const body = `{"model":"OL1","messages":[{"role":"user","content":"hi"}]}`
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	aDone := make(chan struct{})
	go func() { // exits when A dies (its connection is cut) or ctx ends
		defer close(aDone)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.base+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	select {
	case <-fake.Hanging(): // A holds the slot: its call reached the upstream
	case <-time.After(60 * time.Second):
		t.Fatalf("A's call never reached the upstream; A's log: %s", a.log())
	}

	killed := time.Now()
	a.kill()
	<-aDone

	client := &http.Client{Timeout: lease + 60*time.Second}
	resp, err := client.Post(b.base+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("B: %v; B's log: %s", err, b.log())
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	waited := time.Since(killed)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(got), "answered by B") {
		t.Fatalf("B answered %d %s; want 200 with the upstream's answer; B's log: %s", resp.StatusCode, got, b.log())
	}
	if n := len(fake.Requests()); n != 2 {
		t.Errorf("upstream got %d calls, want 2 (A's, then B's)", n)
	}
	// A renews its lease every third of it, so at the kill the lease had
	// about two thirds left at least: B may not have the slot before a
	// third of the lease has gone by. The upper bound is loose: the
	// machine is loaded, and B polls at most every second.
	if waited < lease/3 {
		t.Errorf("B was answered %v after A's kill: it got the slot while A's lease (%v) was still fresh", waited, lease)
	}
	if limit := lease + 20*time.Second; waited > limit {
		t.Errorf("B was answered %v after A's kill, want within %v (the lease and a margin)", waited, limit)
	}
	t.Logf("B answered %v after A's kill (lease %v)", waited, lease)
}
