package web_test

// Browser tests of the cockpit page (web/static), in a real headless
// Chromium driven by chromedp, against the real proxy binary started with
// -demo. The demo's mock nodes OL1, M1 and M2 are scripted: a reflexive
// question runs OL1 (list_dir, then read_file) → M1 → M2; a message with the
// word "loop" makes OL1 repeat list_dir {"path":"."}; with "script", M2's
// reply carries <script>window.__xss=1</script>.
//
// Environment:
//   - CI: a missing chromium fails the test instead of skipping it.
//   - COCKPIT_SCREENSHOTS: the folder for the screenshots (default: a new
//     folder under os.TempDir()); the test prints it.
//   - UPDATE_SCREENSHOT=1: also copy the desktop screenshot to
//     docs/cockpit.png, the README's picture.
//   - COCKPIT_PROXY_BIN: run this proxy binary instead of building
//     ./cmd/proxy (it must take the same flags).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"chainproxy/internal/browsertest"
)

// reflexiveQuestion classifies reflexive on its keywords ("compare",
// "explain why").
const reflexiveQuestion = "Compare the files in the workspace and explain why they differ"

func TestCockpit(t *testing.T) {
	chromium := findChromium(t)
	bin := proxyBinary(t)
	demo := startProxy(t, bin)
	browser := newBrowser(t, chromium)
	shots := screenshotDir(t)

	// One conversation in one tab, step by step: each step builds on the
	// previous one, as a person would use the page.
	t.Run("reflexive conversation", func(t *testing.T) {
		p := openPage(t, browser, demo.url)
		var answer string

		t.Run("three badges in order and a streamed reply", func(t *testing.T) {
			p.send(t, reflexiveQuestion)
			a := p.waitAnswer(t)
			if a.State != "done" {
				t.Fatalf("answer state = %q (error %q), want done", a.State, p.text(t, a.sel(".error-box")))
			}
			answer = a.ID
			if got, want := p.badgeNodes(t, a), []string{"OL1", "M1", "M2"}; !slices.Equal(got, want) {
				t.Errorf("badges = %q, want %q", got, want)
			}
			if reply := strings.TrimSpace(p.text(t, a.sel(".reply"))); reply == "" {
				t.Error("reply is empty, want M2's text")
			}
			if n := eval[int](t, p, fmt.Sprintf(`+document.querySelector(%q).dataset.deltas`, a.sel(""))); n < 1 {
				t.Errorf("delta events = %d, want at least 1 (the reply streams in)", n)
			}
			if got := eval[string](t, p, fmt.Sprintf(`document.querySelector(%q).dataset.mode`, a.sel(".mode-pill"))); got != "reflexive" {
				t.Errorf("mode pill = %q, want reflexive", got)
			}
			for _, node := range []string{"OL1", "M1", "M2"} {
				label := p.text(t, a.badge(node))
				if !strings.Contains(label, node+" ▸ ") || !strings.Contains(label, "turn") {
					t.Errorf("badge %s text = %q, want %q", node, label, node+" ▸ N turn(s)")
				}
			}
		})

		t.Run("mode pill explains the classification on focus", func(t *testing.T) {
			a := p.answer(t, answer)
			p.do(t, chromedp.Focus(chromedp.CSS(a.sel(".mode-pill"))))
			// Polled: the tooltip fades in.
			got := eval[map[string]string](t, p, fmt.Sprintf(`new Promise(resolve => {
				const pill = document.querySelector(%q);
				const tip = document.getElementById(pill.getAttribute("aria-describedby"));
				const t0 = performance.now();
				const check = () => {
					const visibility = getComputedStyle(tip).visibility;
					if (visibility === "visible" || performance.now() - t0 > 2000) {
						resolve({title: pill.title, tip: tip.textContent, visibility, focused: String(document.activeElement === pill)});
					} else requestAnimationFrame(check);
				};
				check();
			})`, a.sel(".mode-pill")), chromedp.EvalAwaitPromise)
			if got["title"] == "" || got["tip"] == "" {
				t.Errorf("pill title = %q, tooltip = %q, want the classifier's reasons", got["title"], got["tip"])
			}
			if got["visibility"] != "visible" {
				t.Errorf("tooltip visibility on focus = %q (pill focused: %s), want visible", got["visibility"], got["focused"])
			}
			p.do(t, chromedp.Blur(chromedp.CSS(a.sel(".mode-pill"))))
		})

		t.Run("badges fold and unfold with mouse and keyboard", func(t *testing.T) {
			a := p.answer(t, answer)
			for _, node := range []string{"OL1", "M1", "M2"} {
				if got := p.expanded(t, a, node); got != (fold{Expanded: "false", Hidden: true}) {
					t.Errorf("%s at rest = %+v, want folded with its detail hidden", node, got)
				}
			}
			ol1 := a.badge("OL1")

			p.do(t, chromedp.Click(chromedp.CSS(ol1)))
			if got := p.expanded(t, a, "OL1"); got != (fold{Expanded: "true", Hidden: false}) {
				t.Fatalf("OL1 after a click = %+v, want unfolded", got)
			}
			tools := eval[[]string](t, p, fmt.Sprintf(`[...document.getElementById(document.querySelector(%q).getAttribute("aria-controls")).querySelectorAll(".tool-call")].map(e => e.dataset.tool)`, ol1))
			if !slices.Contains(tools, "list_dir") {
				t.Errorf("OL1 tool calls = %q, want list_dir among them", tools)
			}
			// innerText follows text-transform: compare in lower case.
			detail := strings.ToLower(p.text(t, a.sel(`.stage-detail[data-node="OL1"]`)))
			for _, want := range []string{"model", "turns", "duration", "tokens", "status", "list_dir", "arguments", "result"} {
				if !strings.Contains(detail, want) {
					t.Errorf("OL1 detail lacks %q; it reads:\n%s", want, detail)
				}
			}

			p.do(t, chromedp.Click(chromedp.CSS(ol1)))
			if got := p.expanded(t, a, "OL1"); got != (fold{Expanded: "false", Hidden: true}) {
				t.Errorf("OL1 after a second click = %+v, want folded", got)
			}

			p.do(t, chromedp.Focus(chromedp.CSS(ol1)), chromedp.KeyEvent(kb.Enter))
			if got := p.expanded(t, a, "OL1"); got != (fold{Expanded: "true", Hidden: false}) {
				t.Errorf("OL1 after Enter = %+v, want unfolded", got)
			}
			p.do(t, chromedp.KeyEvent(" "))
			if got := p.expanded(t, a, "OL1"); got != (fold{Expanded: "false", Hidden: true}) {
				t.Errorf("OL1 after Space = %+v, want folded", got)
			}
		})

		t.Run("each stage shows what it wrote and M2 rests unselected", func(t *testing.T) {
			a := p.answer(t, answer)
			for _, node := range []string{"OL1", "M1", "M2"} {
				sel := a.sel(`.stage-detail[data-node="` + node + `"] .sd-output`)
				got := eval[string](t, p, fmt.Sprintf(`document.querySelector(%q)?.textContent ?? ""`, sel))
				if strings.TrimSpace(got) == "" {
					t.Errorf("%s detail has no output; want the text the stage wrote", node)
				}
			}
			// With no panel open, the answering stage's badge looks like
			// the others: no fill left from the stream.
			bg := eval[[]string](t, p, fmt.Sprintf(`[%q, %q].map(s => { const b = document.querySelector(s); return getComputedStyle(b).backgroundColor + " " + getComputedStyle(b).boxShadow + " " + b.dataset.tone; })`, a.badge("M1"), a.badge("M2")))
			if bg[0] != bg[1] {
				t.Errorf("M2 badge at rest = %q, want as M1's %q", bg[1], bg[0])
			}
		})

		t.Run("conversation survives a reload", func(t *testing.T) {
			before := p.conversationText(t)
			p.do(t, chromedp.Reload())
			p.waitReady(t)
			if got := p.conversationText(t); got != before {
				t.Errorf("conversation after reload:\n%s\nwant as before:\n%s", got, before)
			}
			a := p.answer(t, answer)
			if got, want := p.badgeNodes(t, a), []string{"OL1", "M1", "M2"}; !slices.Equal(got, want) {
				t.Errorf("badges after reload = %q, want %q", got, want)
			}
		})

		t.Run("requests carry history, mode and a session that Clear renews", func(t *testing.T) {
			p.recordRequests(t)
			p.send(t, "What time zone is Paris in?")
			if a := p.waitAnswer(t); a.State != "done" {
				t.Fatalf("second answer state = %q, want done", a.State)
			}
			p.do(t, chromedp.SetValue(chromedp.CSS("#mode"), "reflexive"),
				chromedp.Evaluate[chromedp.Void](`document.querySelector("#mode").dispatchEvent(new Event("change"))`))
			p.do(t, chromedp.Click(chromedp.CSS("#clear")), chromedp.Click(chromedp.CSS("#clear")))
			if n := eval[int](t, p, `document.querySelectorAll(".message").length`); n != 0 {
				t.Errorf("messages after Clear = %d, want 0", n)
			}
			p.send(t, "Hello")
			if a := p.waitAnswer(t); a.State != "done" {
				t.Fatalf("answer after Clear state = %q, want done", a.State)
			}
			p.do(t, chromedp.SetValue(chromedp.CSS("#mode"), "auto"),
				chromedp.Evaluate[chromedp.Void](`document.querySelector("#mode").dispatchEvent(new Event("change"))`))

			reqs := p.requests(t)
			if len(reqs) != 2 {
				t.Fatalf("POST /chat requests = %d, want 2", len(reqs))
			}
			first, second := reqs[0], reqs[1]
			if !first.Body.Stream || first.Accept != "text/event-stream" {
				t.Errorf("request stream = %v, Accept = %q, want an SSE request", first.Body.Stream, first.Accept)
			}
			wantHist := []chatTurn{{"user", reflexiveQuestion}, {"assistant", "(non-empty)"}}
			if len(first.Body.History) != 2 || first.Body.History[0] != wantHist[0] ||
				first.Body.History[1].Role != "assistant" || first.Body.History[1].Content == "" {
				t.Errorf("history = %+v, want %+v", first.Body.History, wantHist)
			}
			if first.Body.Mode != "" {
				t.Errorf("mode in auto = %q, want none sent", first.Body.Mode)
			}
			if second.Body.Mode != "reflexive" {
				t.Errorf("mode after choosing reflexive = %q, want reflexive", second.Body.Mode)
			}
			if len(second.Body.History) != 0 {
				t.Errorf("history after Clear = %+v, want none", second.Body.History)
			}
			if first.Session == "" || second.Session == "" || first.Session == second.Session {
				t.Errorf("X-Chain-Session before and after Clear = %q, %q, want two different ids", first.Session, second.Session)
			}
		})

		t.Run("screenshots", func(t *testing.T) {
			// The picture for the README: one reflexive exchange with OL1's
			// tool calls unfolded.
			p.do(t, chromedp.Click(chromedp.CSS("#clear")), chromedp.Click(chromedp.CSS("#clear")))
			p.send(t, reflexiveQuestion)
			a := p.waitAnswer(t)
			p.do(t, chromedp.Click(chromedp.CSS(a.badge("OL1"))), chromedp.Blur(chromedp.CSS(a.badge("OL1"))))
			for _, s := range []struct {
				name          string
				width, height int64
				dark, full    bool
			}{
				{"desktop", 1280, 800, false, false},
				{"desktop-full", 1280, 800, false, true},
				{"desktop-dark", 1280, 800, true, false},
				{"narrow", 375, 740, false, false},
				{"narrow-dark", 375, 740, true, false},
			} {
				p.screenshot(t, filepath.Join(shots, s.name+".png"), s.width, s.height, s.dark, s.full)
			}
			t.Logf("screenshots in %s", shots)
			if os.Getenv("UPDATE_SCREENSHOT") == "1" {
				dst := filepath.Join(repoRoot(t), "docs", "cockpit.png")
				b, err := os.ReadFile(filepath.Join(shots, "desktop-full.png"))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(dst, b, 0o644); err != nil {
					t.Fatal(err)
				}
				t.Logf("updated %s", dst)
			}
		})
	})

	t.Run("looping OL1 shows stopped by repeat", func(t *testing.T) {
		p := openPage(t, browser, demo.url)
		p.send(t, "Walk the workspace in a loop and compare what you find")
		a := p.waitAnswer(t)
		status := eval[string](t, p, fmt.Sprintf(`document.querySelector(%q)?.dataset.status ?? ""`, a.badge("OL1")))
		if status != "stopped_repeat" {
			t.Errorf("OL1 data-status = %q, want stopped_repeat", status)
		}
		if text := p.text(t, a.badge("OL1")); !strings.Contains(text, "stopped: repeat") {
			t.Errorf("OL1 badge text = %q, want it to say %q", text, "stopped: repeat")
		}
		if a.State != "done" {
			t.Errorf("answer state = %q, want done: the chain still answers after a stopped stage", a.State)
		}
	})

	t.Run("model output with a script tag is shown as text", func(t *testing.T) {
		p := openPage(t, browser, demo.url)
		p.send(t, "Compare how a script tag is shown and explain why")
		a := p.waitAnswer(t)
		if a.State != "done" {
			t.Fatalf("answer state = %q, want done", a.State)
		}
		reply := p.text(t, a.sel(".reply"))
		if !strings.Contains(reply, "<script>window.__xss=1</script>") {
			t.Errorf("reply text = %q, want the literal <script> tag in it", reply)
		}
		got := eval[map[string]any](t, p, `({
			xss: typeof window.__xss,
			scripts: document.querySelectorAll("#conversation script").length,
			handlers: [...document.querySelectorAll("#conversation *")].filter(e => [...e.attributes].some(a => a.name.startsWith("on"))).length,
		})`)
		want := map[string]any{"xss": "undefined", "scripts": 0.0, "handlers": 0.0}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("%s = %v, want %v", k, got[k], w)
			}
		}
	})

	// The page's modules tested one by one, in one shared tab.
	unit := openPage(t, browser, demo.url)
	modules := func(*testing.T) *page { return unit }

	t.Run("markdown renderer", func(t *testing.T) {
		p := modules(t)
		for _, tc := range markdownCases {
			t.Run(tc.name, func(t *testing.T) {
				got := eval[string](t, p, fmt.Sprintf(`import("./static/markdown.js").then(m => {
					const d = document.createElement("div");
					d.append(m.renderMarkdown(%s));
					return d.innerHTML;
				})`, jsString(tc.in)), chromedp.EvalAwaitPromise)
				if got != tc.want {
					t.Errorf("renderMarkdown(%q)\n got %s\nwant %s", tc.in, got, tc.want)
				}
			})
		}
	})

	t.Run("stage statuses show colour, icon and word", func(t *testing.T) {
		p := modules(t)
		for _, tc := range []struct{ status, icon, word, tone string }{
			{"ok", "✓", "ok", "ok"},
			{"stopped_repeat", "⟲", "stopped: repeat", "warn"},
			{"stopped_budget", "⏱\uFE0E", "stopped: budget", "warn"},
			{"stopped_format_errors", "⚠\uFE0E", "stopped: format errors", "warn"},
			{"skipped_offline", "⊘", "skipped: offline", "off"},
			{"failed", "✗", "failed", "bad"},
			{"awaiting_client", "⏸\uFE0E", "waiting for client", "live"},
		} {
			t.Run(tc.status, func(t *testing.T) {
				got := eval[map[string]string](t, p, fmt.Sprintf(`import("./static/view.js").then(m => {
					const v = new m.MessageView({id: "s", role: "assistant", state: "done", content: "", mode: "reflexive",
						reasons: [], stages: [{node: "OL1", model: "x", turns: 1, status: %q, tools_used: []}]});
					const b = v.root.querySelector(".badge");
					return {icon: b.querySelector(".badge-icon").textContent, word: b.querySelector(".badge-status").textContent,
						tone: b.dataset.tone, status: b.dataset.status, label: b.querySelector(".badge-label").textContent};
				})`, tc.status), chromedp.EvalAwaitPromise)
				want := map[string]string{"icon": tc.icon, "word": tc.word, "tone": tc.tone, "status": tc.status, "label": "OL1 ▸ 1 turn"}
				for k, w := range want {
					if got[k] != w {
						t.Errorf("badge %s = %q, want %q", k, got[k], w)
					}
				}
			})
		}
	})

	t.Run("long tool results fold behind show more", func(t *testing.T) {
		p := modules(t)
		got := eval[map[string]any](t, p, `import("./static/view.js").then(m => {
			const v = new m.MessageView({id: "r", role: "assistant", state: "done", content: "", mode: "reflexive", reasons: [],
				stages: [{node: "OL1", model: "x", turns: 1, status: "ok",
					tools_used: [{name: "read_file", args: {path: "big.txt"}, status: "ok", result: "x".repeat(1500)}]}]});
			const pre = v.root.querySelector(".tc-result"), more = v.root.querySelector(".show-more");
			const folded = pre.textContent.length;
			more.click();
			const open = pre.textContent.length, expanded = more.getAttribute("aria-expanded");
			more.click();
			return {folded, open, expanded, refolded: pre.textContent.length};
		})`, chromedp.EvalAwaitPromise)
		want := map[string]any{"folded": 601.0, "open": 1500.0, "expanded": "true", "refolded": 601.0}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("%s = %v, want %v", k, got[k], w)
			}
		}
	})

	t.Run("server errors show inline with their message", func(t *testing.T) {
		p := modules(t)
		for _, tc := range []struct {
			name  string
			err   string
			wants []string
		}{
			{"429", `{status: 429, code: "rate_limit_exceeded", message: "node OL1: queue full", retryAfter: "7"}`,
				[]string{"HTTP 429", "rate_limit_exceeded", "node OL1: queue full", "retry after 7 s"}},
			{"upstream 500 in the stream", `{code: "upstream_error", message: "node M2: upstream returned 500"}`,
				[]string{"upstream_error", "node M2: upstream returned 500"}},
			{"markup in the message", `{status: 502, message: "<img src=x onerror=window.__xss=3>"}`,
				[]string{"HTTP 502", "<img src=x onerror=window.__xss=3>"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				text := eval[string](t, p, fmt.Sprintf(`import("./static/view.js").then(m => {
					const v = new m.MessageView({id: "e", role: "assistant", state: "error", content: "", stages: [], error: %s});
					document.body.append(v.root);
					const text = v.root.querySelector(".error-box").innerText;
					v.root.remove();
					return text;
				})`, tc.err), chromedp.EvalAwaitPromise)
				for _, w := range tc.wants {
					if !strings.Contains(text, w) {
						t.Errorf("error bubble = %q, want it to contain %q", text, w)
					}
				}
			})
		}
		if xss := eval[string](t, p, `typeof window.__xss`); xss != "undefined" {
			t.Errorf("typeof window.__xss = %q, want undefined", xss)
		}
	})

	t.Run("SSE parser survives any split", func(t *testing.T) {
		p := modules(t)
		stream, err := os.ReadFile(filepath.Join("testdata", "cockpit", "reflexive.sse"))
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"classified", "stage_start", "turn", "tool", "stage_end", "delta", "delta", "done"}
		for _, tc := range []struct {
			name, newline string
			size          int
		}{
			{"whole", "\n", 0},
			{"bytes", "\n", 1},
			{"pairs CRLF", "\r\n", 2},
			{"sevens CR", "\r", 7},
			{"chunks", "\n", 64},
		} {
			t.Run(tc.name, func(t *testing.T) {
				text := strings.ReplaceAll(string(stream), "\n", tc.newline)
				got := eval[[]sseEvent](t, p, fmt.Sprintf(`import("./static/sse.js").then(m => {
					const bytes = new TextEncoder().encode(%s), size = %d || bytes.length;
					const dec = new TextDecoder(), pieces = [];
					for (let i = 0; i < bytes.length; i += size) pieces.push(dec.decode(bytes.slice(i, i + size), {stream: true}));
					pieces.push(dec.decode());
					return m.parseAll(pieces);
				})`, jsString(text), tc.size), chromedp.EvalAwaitPromise)
				var names []string
				for _, ev := range got {
					names = append(names, ev.Event)
					if !json.Valid([]byte(ev.Data)) {
						t.Errorf("event %s data = %q, want one JSON object", ev.Event, ev.Data)
					}
				}
				if !slices.Equal(names, want) {
					t.Fatalf("events = %q, want %q", names, want)
				}
				if !strings.Contains(got[3].Data, "b.txt — é ✓") {
					t.Errorf("tool event data = %s, want the UTF-8 text intact", got[3].Data)
				}
			})
		}
	})

	t.Run("unreachable M1 shows as skipped offline", func(t *testing.T) {
		cfg := filepath.Join(t.TempDir(), "offline-m1.yaml")
		yaml := fmt.Sprintf("nodes:\n  - name: M1\n    provider: ollama\n    base_url: http://%s\n    model: x\n", closedAddr(t))
		if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		offline := startProxy(t, bin, "-config", cfg)
		p := openPage(t, browser, offline.url)

		reachable := eval[string](t, p, `new Promise(resolve => {
			const check = () => {
				const n = document.querySelector('#nodes [data-node="M1"]');
				n ? resolve(n.dataset.reachable + " " + n.textContent) : setTimeout(check, 50);
			};
			check();
		})`, chromedp.EvalAwaitPromise)
		if !strings.HasPrefix(reachable, "false") || !strings.Contains(reachable, "unreachable") {
			t.Errorf("header M1 = %q, want unreachable", reachable)
		}

		p.send(t, reflexiveQuestion)
		a := p.waitAnswer(t)
		if status := eval[string](t, p, fmt.Sprintf(`document.querySelector(%q)?.dataset.status ?? ""`, a.badge("M1"))); status != "skipped_offline" {
			t.Errorf("M1 data-status = %q, want skipped_offline", status)
		}
		if text := p.text(t, a.badge("M1")); !strings.Contains(text, "skipped: offline") {
			t.Errorf("M1 badge text = %q, want it to say %q", text, "skipped: offline")
		}

		// Then the proxy goes away: the failure shows inline, the page stays
		// up and the controls come back.
		offline.stop(t)
		p.send(t, "Are you still there?")
		a = p.waitAnswer(t)
		if a.State != "error" {
			t.Fatalf("answer state with the proxy gone = %q, want error", a.State)
		}
		if msg := p.text(t, a.sel(".error-box")); !strings.Contains(msg, "could not reach the proxy") {
			t.Errorf("error bubble = %q, want a network error message", msg)
		}
		got := eval[map[string]any](t, p, `({
			messages: document.querySelectorAll(".message").length,
			stop: document.querySelector("#stop").disabled,
			input: document.querySelector("#input").disabled,
			state: document.querySelector("#app").dataset.state,
		})`)
		want := map[string]any{"messages": 4.0, "stop": true, "input": false, "state": "idle"}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("after the failure %s = %v, want %v", k, got[k], w)
			}
		}
	})
}

// markdownCases pin the renderer's output, above all that model text never
// becomes markup.
var markdownCases = []struct{ name, in, want string }{
	{"script tag", `<script>alert(1)</script>`, `<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>`},
	{"img onerror", `<img src=x onerror=alert(1)>`, `<p>&lt;img src=x onerror=alert(1)&gt;</p>`},
	{"html in code block", "```html\n<b onclick=\"x()\">hi</b>\n```", `<pre class="md-code" data-lang="html"><code class="language-html">&lt;b onclick="x()"&gt;hi&lt;/b&gt;</code></pre>`},
	{"javascript link", `[click](javascript:alert(1))`, `<p>[click](javascript:alert(1))</p>`},
	{"data link", `[x](data:text/html,<b>)`, `<p>[x](data:text/html,&lt;b&gt;)</p>`},
	{"https link", `[docs](https://example.com/a?b=1)`, `<p><a href="https://example.com/a?b=1" target="_blank" rel="noopener noreferrer">docs</a></p>`},
	{"quote in link", `[x](https://e.com/"onmouseover=alert(1))`, `<p>[x](https://e.com/"onmouseover=alert(1))</p>`},
	{"bare url", `see https://example.com.`, `<p>see <a href="https://example.com" target="_blank" rel="noopener noreferrer">https://example.com</a>.</p>`},
	{"bold em code", "**bold**, *em* and `a<b`", `<p><strong>bold</strong>, <em>em</em> and <code>a&lt;b</code></p>`},
	{"snake case", `snake_case_name stays`, `<p>snake_case_name stays</p>`},
	{"paragraphs", "one\ntwo\n\nthree", `<p>one<br>two</p><p>three</p>`},
	{"bullets", "- a\n- **b**", `<ul><li>a</li><li><strong>b</strong></li></ul>`},
	{"numbers", "1. one\n2. two", `<ol><li>one</li><li>two</li></ol>`},
	{"nested", "- a\n  - b", `<ul><li>a<ul><li>b</li></ul></li></ul>`},
	{"heading", "## Title", `<h4 class="md-h">Title</h4>`},
	{"unclosed fence", "```\nstill streaming", `<pre class="md-code"><code>still streaming</code></pre>`},
}

type sseEvent struct {
	Event string `json:"event"`
	Data  string `json:"data"`
}

type chatTurn struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatRequest struct {
	Session string `json:"session"`
	Accept  string `json:"accept"`
	Body    struct {
		Message string     `json:"message"`
		History []chatTurn `json:"history"`
		Mode    string     `json:"mode"`
		Stream  bool       `json:"stream"`
	} `json:"body"`
}

type fold struct {
	Expanded string `json:"expanded"`
	Hidden   bool   `json:"hidden"`
}

// answerRef names one assistant message of the page.
type answerRef struct {
	ID    string `json:"id"`
	State string `json:"state"`
}

func (a answerRef) sel(sub string) string {
	return strings.TrimSpace(fmt.Sprintf(`.message[data-id=%q] %s`, a.ID, sub))
}

func (a answerRef) badge(node string) string {
	return a.sel(fmt.Sprintf(`.badge[data-node=%q]`, node))
}

// page is one browser tab on the cockpit.
type page struct {
	ctx context.Context
}

func openPage(t *testing.T, browser context.Context, url string) *page {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	var mu sync.Mutex
	var exceptions []string
	err := chromedp.Listen(ctx, func(ev any) {
		if ev, ok := ev.(*runtime.EventExceptionThrown); ok {
			mu.Lock()
			defer mu.Unlock()
			text := ev.ExceptionDetails.Text
			if ev.ExceptionDetails.Exception != nil {
				text += " " + ev.ExceptionDetails.Exception.Description
			}
			exceptions = append(exceptions, text)
		}
	})
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range exceptions {
			t.Errorf("uncaught exception in the page: %s", e)
		}
	})
	p := &page{ctx: ctx}
	// Tabs of one origin share localStorage: start from an empty
	// conversation.
	p.do(t, chromedp.Navigate(url),
		chromedp.Evaluate[chromedp.Void](`localStorage.clear()`),
		chromedp.Reload())
	p.waitReady(t)
	return p
}

func (p *page) do(t *testing.T, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

func eval[T any](t *testing.T, p *page, expr string, opts ...chromedp.EvaluateOption) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		t.Fatalf("evaluate %s: %v", firstLine(expr), err)
	}
	return v
}

func (p *page) waitReady(t *testing.T) {
	t.Helper()
	p.do(t, chromedp.WaitVisible(chromedp.CSS(`#app[data-ready="true"]`)))
}

// send types text in the message box and presses Enter.
func (p *page) send(t *testing.T, text string) {
	t.Helper()
	before := eval[int](t, p, `document.querySelectorAll(".message.assistant").length`)
	p.do(t, chromedp.SendKeys(chromedp.CSS("#input"), text), pressEnter)
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`document.querySelectorAll(".message.assistant").length > %d`, before)))
	if err != nil {
		t.Fatalf("Enter in the message box did not send %q: %v", text, err)
	}
	if left := eval[string](t, p, `document.querySelector("#input").value`); left != "" {
		t.Errorf("message box after sending = %q, want empty", left)
	}
}

// pressEnter sends the Enter key as a keyboard does, with no separate char
// event: chromedp's "\r" also sends one, which would type a new line into
// the emptied message box after the page handled the keydown.
var pressEnter = chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
	for _, typ := range []input.DispatchKeyEventType{input.DispatchKeyEventTypeRawKeyDown, input.DispatchKeyEventTypeKeyUp} {
		_, err := cdp.Call(ctx, tg, input.DispatchKeyEvent, input.DispatchKeyEventParams{
			Type: typ, Key: "Enter", Code: "Enter", WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13,
		})
		if err != nil {
			return err
		}
	}
	return nil
})

// waitAnswer waits until the last answer is no longer streaming.
func (p *page) waitAnswer(t *testing.T) answerRef {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	a, err := chromedp.Run(ctx, chromedp.Poll[answerRef](`(() => {
		const m = [...document.querySelectorAll(".message.assistant")].at(-1);
		return m && m.dataset.state !== "streaming" ? {id: m.dataset.id, state: m.dataset.state} : null;
	})()`, chromedp.WithPollingInterval(20*time.Millisecond)))
	if err != nil {
		t.Fatalf("waiting for the answer: %v", err)
	}
	return a
}

func (p *page) answer(t *testing.T, id string) answerRef {
	t.Helper()
	if id == "" {
		t.Fatal("no answer from an earlier step")
	}
	return answerRef{ID: id}
}

func (p *page) text(t *testing.T, sel string) string {
	t.Helper()
	return eval[string](t, p, fmt.Sprintf(`document.querySelector(%q)?.innerText ?? "(no element)"`, sel))
}

func (p *page) badgeNodes(t *testing.T, a answerRef) []string {
	t.Helper()
	return eval[[]string](t, p, fmt.Sprintf(`[...document.querySelectorAll(%q)].map(b => b.dataset.node)`, a.sel(".badge")))
}

func (p *page) expanded(t *testing.T, a answerRef, node string) fold {
	t.Helper()
	return eval[fold](t, p, fmt.Sprintf(`(() => {
		const b = document.querySelector(%q);
		const d = document.getElementById(b.getAttribute("aria-controls"));
		return {expanded: b.getAttribute("aria-expanded"), hidden: d.hidden || d.offsetParent === null};
	})()`, a.badge(node)))
}

func (p *page) conversationText(t *testing.T) string {
	t.Helper()
	// Built from the parts, not innerText: a tooltip fading out after an
	// earlier step must not count.
	return eval[string](t, p, `[...document.querySelectorAll(".message")].map(m => [
		m.classList[1], m.dataset.state ?? "",
		m.querySelector(".mode-pill")?.dataset.mode ?? "",
		[...m.querySelectorAll(".badge")].map(b => b.dataset.node + "=" + b.dataset.status + ":" + b.querySelector(".badge-label").textContent).join(" "),
		(m.querySelector(".reply") ?? m.querySelector(".user-bubble")).textContent,
	].join(" | ")).join("\n")`)
}

// recordRequests wraps the page's fetch to keep what POST /chat sent.
func (p *page) recordRequests(t *testing.T) {
	t.Helper()
	eval[chromedp.Void](t, p, `(() => {
		window.__chatRequests = [];
		const orig = window.fetch;
		window.fetch = (url, opts = {}) => {
			if (String(url).endsWith("/chat")) {
				const h = opts.headers ?? {};
				window.__chatRequests.push({session: h["X-Chain-Session"] ?? "", accept: h.Accept ?? "", body: JSON.parse(opts.body)});
			}
			return orig(url, opts);
		};
	})()`)
}

func (p *page) requests(t *testing.T) []chatRequest {
	t.Helper()
	return eval[[]chatRequest](t, p, `window.__chatRequests`)
}

// screenshot captures the viewport with the last question at its top, or
// the whole page when full is set.
func (p *page) screenshot(t *testing.T, path string, width, height int64, dark, full bool) {
	t.Helper()
	scheme := "light"
	if dark {
		scheme = "dark"
	}
	media := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
		})
		return err
	})
	opts := []chromedp.EmulateViewportOption{}
	if width < 600 {
		opts = append(opts, chromedp.EmulateMobile, chromedp.EmulateScale(2))
	}
	p.do(t, chromedp.EmulateViewport(width, height, opts...), media,
		// The pointer away from the page, or a hover shows on whatever
		// the new layout put under it.
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, 0, 0),
		// The question at the top, then its answer; the whole page from its
		// top (sticky bars stay where they belong).
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`%t ? scrollTo(0, 0) : [...document.querySelectorAll(".message.user")].at(-1)?.scrollIntoView({block: "start"})`, full)),
		// Let the layout settle and the unfold animation end.
		chromedp.Sleep(300*time.Millisecond))
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	if full {
		// A viewport as tall as the page, so the sticky header and message
		// box sit at its ends instead of over the middle.
		h := eval[int64](t, p, `document.scrollingElement.scrollHeight`)
		p.do(t, chromedp.EmulateViewport(width, h, opts...), chromedp.Sleep(100*time.Millisecond))
	}
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", path, err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func jsString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // a string always marshals
	}
	return string(b)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// ---- browser and proxy processes ---------------------------------------------

func findChromium(t *testing.T) string {
	t.Helper()
	return browsertest.Chromium(t, "the cockpit browser tests")
}

func newBrowser(t *testing.T, chromium string) context.Context {
	t.Helper()
	return browsertest.New(t, chromium, 1280, 800)
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test's directory")
		}
		dir = parent
	}
}

// proxyBinary builds ./cmd/proxy (the build cache makes it quick after the
// first time).
func proxyBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("COCKPIT_PROXY_BIN"); bin != "" {
		return bin
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool is needed to build ./cmd/proxy: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "proxy")
	cmd := exec.Command(gobin, "build", "-o", bin, "./cmd/proxy")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/proxy: %v\n%s", err, out)
	}
	return bin
}

type proxyProc struct {
	url    string
	cmd    *exec.Cmd
	exited chan struct{}
	out    *syncBuffer
	once   sync.Once
}

// startProxy runs bin -demo on a free loopback port and waits for /healthz.
func startProxy(t *testing.T, bin string, args ...string) *proxyProc {
	t.Helper()
	addr := freeAddr(t)
	out := &syncBuffer{}
	cmd := exec.Command(bin, append([]string{"-demo", "-addr", addr}, args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	p := &proxyProc{url: "http://" + addr + "/", cmd: cmd, exited: make(chan struct{}), out: out}
	// Reaps the process; exits when it does (stop kills it).
	go func() {
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
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-p.exited:
			t.Fatalf("proxy %v exited before /healthz answered:\n%s", cmd.Args, out.String())
		default:
		}
		resp, err := client.Get(p.url + "healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("proxy %v: /healthz not ready after 20 s (last error %v):\n%s", cmd.Args, err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *proxyProc) stop(t *testing.T) {
	p.once.Do(func() {
		if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("kill proxy: %v", err)
		}
		<-p.exited
	})
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// closedAddr is a loopback address where nothing listens: connections to
// it are refused at once.
func closedAddr(t *testing.T) string {
	return freeAddr(t)
}

func screenshotDir(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("COCKPIT_SCREENSHOTS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	dir, err := os.MkdirTemp("", "cockpit-screenshots-")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// syncBuffer collects a child process's output; the reaper goroutine of
// exec writes while the test may read.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
