package web_test

// Browser tests of the cockpit's traces view as an observer of a proxy
// that goes away and comes back, of a stream that goes silent, of a tab
// left open for days, and of a shared trace link on a proxy with keys.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	openai "github.com/sashabaranov/go-openai"
)

// TestCockpitTraceLinkAsksForKey: a trace's address, shared with someone
// whose browser has no key yet, on a proxy with server.api_keys. The page
// asks for the key there (docs/security.md: "When the server needs a key
// the cockpit asks for it and keeps it in the page's localStorage"), then
// shows the trace, the header's nodes and the list of chains.
func TestCockpitTraceLinkAsksForKey(t *testing.T) {
	chromium := findChromium(t)
	bin := proxyBinary(t)
	cfgPath := filepath.Join(t.TempDir(), "keys.yaml")
	if err := os.WriteFile(cfgPath, []byte("server:\n  api_keys: [key-a]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	demo := startProxy(t, bin, "-config", cfgPath)
	res, err := newClient(demo.url, "key-a").CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model: "chain/reflexive", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: reflexiveQuestion}},
	})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Header().Get("X-Chain-Trace-Id")

	p := openPage(t, newBrowser(t, chromium), demo.url) // no key stored
	p.do(t, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = "#/traces/%s"`, id)))
	p.poll(t, `document.querySelector("#trace-body .error-message")?.textContent.includes("401")`, 10*time.Second)
	form := `#trace-detail form.key-form`
	if visible := eval[bool](t, p, fmt.Sprintf(`(f => !!f && f.offsetParent !== null)(document.querySelector(%q))`, form)); !visible {
		t.Fatalf("the trace's page says %q and offers no way to give the key", p.text(t, "#trace-body"))
	}
	p.do(t, chromedp.SendKeys(chromedp.CSS(form+" input[type=password]"), "key-a"), chromedp.Click(chromedp.CSS(form+" button[type=submit]")))
	p.poll(t, fmt.Sprintf(`document.querySelector(".td-trace-id")?.textContent === %q && document.querySelectorAll("#trace-detail .badge").length === 3`, id), 10*time.Second)
	if got := eval[string](t, p, fmt.Sprintf(`localStorage.getItem(%q)`, keyStorage)); got != "key-a" {
		t.Errorf("stored key = %q, want key-a kept in localStorage", got)
	}
	// The header's nodes (GET /readyz needs the key too) show with it,
	// not at the next check 15 s later.
	p.poll(t, `document.querySelectorAll("#nodes [data-node]").length === 3`, 5*time.Second)
	// The list, with the same key, now that the page has it.
	p.do(t, chromedp.Evaluate[chromedp.Void](`location.hash = "#/traces"`))
	waitRow(t, p, id, "ok")
	if problem := eval[bool](t, p, `document.querySelector("#traces-problem").hidden`); !problem {
		t.Errorf("the list still shows a problem: %q", p.text(t, "#traces-problem"))
	}
}

// shiftedClock replaces the page's Date with one ahead by the ms the tab's
// sessionStorage says (clock-shift), so that a test moves the page days on,
// reloads included.
const shiftedClock = `(() => {
	const Real = Date;
	const shift = () => +(sessionStorage.getItem("clock-shift") ?? 0);
	window.Date = class extends Real {
		constructor(...a) { if (a.length) super(...a); else super(Real.now() + shift()); }
		static now() { return Real.now() + shift(); }
	};
})()`

// TestCockpitTracesOverDays: the proxy keeps the last 500 chains, however
// old, and a traces tab stays open for days. A chain from an earlier day
// says its date, also in a tab that was open when it ran: a time of day
// alone reads as today's.
func TestCockpitTracesOverDays(t *testing.T) {
	chromium := findChromium(t)
	bin := proxyBinary(t)
	demo := startProxy(t, bin)
	p := openPage(t, newBrowser(t, chromium), demo.url)
	p.do(t, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: shiftedClock})
		return err
	}), chromedp.Reload())
	p.waitReady(t)
	p.do(t, chromedp.Evaluate[chromedp.Void](`location.hash = "#/traces"`))
	p.poll(t, `document.querySelector("#traces-live")?.dataset.state === "live"`, 20*time.Second)
	res, err := newClient(demo.url, "").CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model: "chain/simple", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "Hello"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Header().Get("X-Chain-Trace-Id")
	var started int64
	for _, s := range listedSummaries(t, demo.url) {
		if s.ID == id {
			started = s.Started
		}
	}
	waitRow(t, p, id, "ok")
	meta := fmt.Sprintf(`document.querySelector('.trace-row[data-id=%q] .tr-meta').textContent`, id)
	// The chain's day as the user's locale writes it: "Nov 26", "26 nov.".
	day := fmt.Sprintf(`new Date(%d).toLocaleDateString(undefined, {month: "short", day: "numeric"})`, started)
	if today := eval[bool](t, p, fmt.Sprintf(`%s.includes(%s)`, meta, day)); today {
		t.Errorf("row of today's chain = %q, want its time of day only", eval[string](t, p, meta))
	}
	p.do(t, chromedp.Evaluate[chromedp.Void](`sessionStorage.setItem("clock-shift", 2 * 86400e3)`))
	t.Run("the tab open two days later", func(t *testing.T) {
		p.poll(t, fmt.Sprintf(`%s.includes(%s)`, meta, day), 5*time.Second)
	})
	t.Run("reloaded two days later", func(t *testing.T) {
		p.do(t, chromedp.Reload())
		p.waitReady(t)
		waitRow(t, p, id, "ok")
		if got := eval[string](t, p, meta); !eval[bool](t, p, fmt.Sprintf(`%q.includes(%s)`, got, day)) {
			t.Errorf("row = %q, want the chain's day %q in it", got, eval[string](t, p, day))
		}
	})
}

// slowOL1 makes the demo's OL1 take 30 s to answer: its chain is still
// running when the proxy is killed.
const slowOL1 = `nodes:
  - name: OL1
    provider: mock
    model: demo-qwen3-1.7b
    mock:
      delay: 30s
      turns:
        - content: "slow"
`

// TestCockpitTracesAfterRestart: the proxy is killed while a chain runs
// (a crash, a deploy) and comes back on the same address. The live list
// says it lost the stream, reconnects, and then shows what the restarted
// proxy lists (what a reload would show), not the dead chain running
// forever; the dead chain's open page no longer says it runs.
func TestCockpitTracesAfterRestart(t *testing.T) {
	chromium := findChromium(t)
	bin := proxyBinary(t)
	cfg := filepath.Join(t.TempDir(), "slow.yaml")
	if err := os.WriteFile(cfg, []byte(slowOL1), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	first := startProxyOn(t, bin, addr, "-config", cfg)
	browser := newBrowser(t, chromium)
	list := openTraces(t, browser, first.url, "")
	go func() { // ends when the proxy is killed
		_, _ = newClient(first.url, "").CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
			Model: "chain/reflexive", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: reflexiveQuestion}},
		})
	}()
	list.poll(t, `document.querySelector(".trace-row")?.dataset.status === "running"`, 10*time.Second)
	dead := eval[string](t, list, `document.querySelector(".trace-row").dataset.id`)
	detail := openPage(t, browser, first.url)
	openTrace(t, detail, dead)

	first.stop(t)
	list.poll(t, `document.querySelector("#traces-live").dataset.state !== "live"`, 10*time.Second)

	second := startProxyOn(t, bin, addr, "-config", cfg)
	list.poll(t, `document.querySelector("#traces-live").dataset.state === "live"`, 10*time.Second)
	res, err := newClient(second.url, "").CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model: "chain/simple", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "Hello again"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	fresh := res.Header().Get("X-Chain-Trace-Id")
	waitRow(t, list, fresh, "ok")
	if got, want := eval[[]string](t, list, `[...document.querySelectorAll(".trace-row")].map(r => r.dataset.id + " " + r.dataset.status)`), listed(t, second.url); !slices.Equal(got, want) {
		t.Errorf("rows after the restart = %q, want what the proxy lists, newest first: %q", got, want)
	}
	detail.poll(t, `document.querySelector("#trace-detail .message")?.dataset.state !== "streaming"`, 10*time.Second)
}

// summary is a chain as GET /v1/chain/traces lists it.
type summary struct {
	ID      string `json:"trace_id"`
	Status  string `json:"status"`
	Started int64  `json:"started"`
}

// listedSummaries is GET /v1/chain/traces, oldest first.
func listedSummaries(t *testing.T, url string) []summary {
	t.Helper()
	resp, err := http.Get(url + "v1/chain/traces")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []summary `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	return list.Data
}

// listed is GET /v1/chain/traces as "id status", newest first.
func listed(t *testing.T, url string) []string {
	t.Helper()
	out := []string{}
	for _, s := range slices.Backward(listedSummaries(t, url)) {
		out = append(out, s.ID+" "+s.Status)
	}
	return out
}

// TestCockpitTracesSilentStream: the connection of the list's stream dies
// without a word (a laptop that slept, a NAT or VPN that dropped it): no
// FIN, no RST, nothing more arrives. The proxy sends a keepalive at least
// every 5 s (web.Options.Keepalive), so silence says the stream is dead:
// the page reconnects and sees the chains that ran meanwhile.
func TestCockpitTracesSilentStream(t *testing.T) {
	chromium := findChromium(t)
	bin := proxyBinary(t)
	demo := startProxy(t, bin)
	relay := newRelay(t, demo.url)
	p := openTraces(t, newBrowser(t, chromium), relay.url, "")
	relay.freezeStreams()
	res, err := newClient(demo.url, "").CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model: "chain/simple", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "Hello"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Header().Get("X-Chain-Trace-Id")
	p.poll(t, fmt.Sprintf(`document.querySelector('.trace-row[data-id=%q]')?.dataset.status === "ok" && document.querySelector("#traces-live").dataset.state === "live"`, id), 40*time.Second)
}

// relay forwards TCP connections to a proxy, and can make the ones that
// carry the trace list's event stream go silent: from then on it drops
// what either side sends, and closes nothing, as a dead path does.
type relay struct {
	url   string
	mu    sync.Mutex
	conns []*relayConn
}

// relayConn is one relayed connection; its flags are guarded by relay.mu.
type relayConn struct {
	client, server net.Conn
	stream         bool // carried GET /v1/chain/traces
	frozen         bool
}

func newRelay(t *testing.T, target string) *relay {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := target[len("http://") : len(target)-1]
	r := &relay{url: "http://" + l.Addr().String() + "/"}
	t.Cleanup(func() {
		l.Close()
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, c := range r.conns {
			c.client.Close()
			c.server.Close()
		}
	})
	go func() { // ends when the listener closes
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", host)
			if err != nil {
				c.Close()
				continue
			}
			rc := &relayConn{client: c, server: s}
			r.mu.Lock()
			r.conns = append(r.conns, rc)
			r.mu.Unlock()
			go r.pipe(rc, c, s, true)
			go r.pipe(rc, s, c, false)
		}
	}()
	return r
}

// pipe copies src to dst until either closes; up is the client's side.
func (r *relay) pipe(rc *relayConn, src, dst net.Conn, up bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			r.mu.Lock()
			if up && bytes.Contains(buf[:n], []byte("GET /v1/chain/traces HTTP/")) {
				rc.stream = true
			}
			frozen := rc.frozen
			r.mu.Unlock()
			if !frozen {
				if _, err := dst.Write(buf[:n]); err != nil {
					return
				}
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			dst.Close()
			return
		}
	}
}

// freezeStreams silences the connections that carry the list's stream.
func (r *relay) freezeStreams() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		if c.stream {
			c.frozen = true
		}
	}
}

// startProxyOn runs bin -demo on addr, as startProxy does on a free one:
// a restarted proxy comes back where the page knew it.
func startProxyOn(t *testing.T, bin, addr string, args ...string) *proxyProc {
	t.Helper()
	out := &syncBuffer{}
	cmd := exec.Command(bin, append([]string{"-demo", "-addr", addr}, args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	p := &proxyProc{url: "http://" + addr + "/", cmd: cmd, exited: make(chan struct{}), out: out}
	go func() { // reaps the process; exits when it does
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("proxy %s output:\n%s", addr, out.String())
		}
	})
	client := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		select {
		case <-p.exited:
			t.Fatalf("proxy %v exited before /healthz answered:\n%s", cmd.Args, out.String())
		default:
		}
		if resp, err := client.Get(p.url + "healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("proxy %v: /healthz not ready after 20 s:\n%s", cmd.Args, out.String())
		}
	}
}
