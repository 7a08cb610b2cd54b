package web_test

// Browser tests of the cockpit's traces view (#/traces, #/traces/{id})
// against the real proxy binary with -demo, fed by real clients: the Go
// OpenAI client (github.com/sashabaranov/go-openai) sends the chains, the
// page only watches them.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	openai "github.com/sashabaranov/go-openai"

	"chainproxy/internal/redistest"
	"chainproxy/store"
)

// keyStorage is where the page keeps the API key (app.js KEY_KEY).
const keyStorage = "chain-cockpit:api-key"

// openTraces opens the traces view with key in a tab and waits for its
// stream to be live.
func openTraces(t *testing.T, browser context.Context, url, key string) *page {
	t.Helper()
	p := openPage(t, browser, url)
	p.do(t, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`localStorage.setItem(%q, %q); location.hash = "#/traces"`, keyStorage, key)))
	p.poll(t, `document.querySelector("#traces-live")?.dataset.state === "live"`, 20*time.Second)
	return p
}

// poll waits until expr is true in the page.
func (p *page) poll(t *testing.T, expr string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, timeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		page := eval[string](t, p, `location.hash + "\n" + document.querySelector("main").innerText.slice(0, 1500)`)
		t.Fatalf("waiting for %s: %v; the page shows:\n%s", firstLine(expr), err, page)
	}
}

func waitRow(t *testing.T, p *page, id, status string) {
	t.Helper()
	p.poll(t, fmt.Sprintf(`document.querySelector('.trace-row[data-id=%q]')?.dataset.status === %q`, id, status), 20*time.Second)
}

// timelineSums is what a shown trace's timeline adds up to.
type timelineSums struct {
	Total    float64 `json:"total"`
	Segments float64 `json:"segments"`
	Kinds    string  `json:"kinds"`
}

func openTrace(t *testing.T, p *page, id string) {
	t.Helper()
	p.do(t, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = "#/traces/%s"`, id)))
	p.poll(t, fmt.Sprintf(`!document.querySelector("#trace-detail").hidden && document.querySelector(".td-trace-id")?.textContent === %q`, id), 20*time.Second)
}

func readTimeline(t *testing.T, p *page) timelineSums {
	t.Helper()
	return eval[timelineSums](t, p, `(() => {
		const tl = document.querySelector("#trace-detail .timeline");
		const segs = [...tl.querySelectorAll(".tl-chain .tl-seg")];
		return {total: +tl.dataset.total, segments: segs.reduce((n, s) => n + +s.dataset.ms, 0), kinds: segs.map(s => s.dataset.label).join(" ")};
	})()`)
}

func badgeStatuses(t *testing.T, p *page) map[string]string {
	t.Helper()
	return eval[map[string]string](t, p, `Object.fromEntries([...document.querySelectorAll("#trace-detail .badge")].map(b => [b.dataset.node, b.dataset.status]))`)
}

func newClient(url, key string) *openai.Client {
	cfg := openai.DefaultConfig(key)
	cfg.BaseURL = url + "v1"
	return openai.NewClientWithConfig(cfg)
}

var weatherTool = openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
	Name: "get_weather", Description: "The weather in a city.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
}}

func TestCockpitTraces(t *testing.T) {
	chromium := findChromium(t)
	bin := proxyBinary(t)
	cfgPath := filepath.Join(t.TempDir(), "keys.yaml")
	if err := os.WriteFile(cfgPath, []byte("server:\n  api_keys: [key-a, key-b]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	demo := startProxy(t, bin, "-config", cfgPath)
	browser := newBrowser(t, chromium)
	p := openTraces(t, browser, demo.url, "key-a")
	client := newClient(demo.url, "key-a")
	var streamed, waiting, resumed string // trace ids, for later steps

	t.Run("a chain from the Go OpenAI client appears while its stages run", func(t *testing.T) {
		before := eval[[]string](t, p, `[...document.querySelectorAll(".trace-row")].map(r => r.dataset.id)`)
		errc := make(chan error, 1)
		go func() { // exits when the stream ends
			s, err := client.CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{
				Model: "chain/reflexive", Stream: true, Messages: []openai.ChatCompletionMessage{{Role: "user", Content: reflexiveQuestion}},
			})
			if err != nil {
				errc <- err
				return
			}
			defer s.Close()
			for {
				if _, err := s.Recv(); err != nil {
					if errors.Is(err, io.EOF) {
						err = nil
					}
					errc <- err
					return
				}
			}
		}()
		// The row shows up running: the page heard of the chain before it
		// ended.
		p.poll(t, fmt.Sprintf(`[...document.querySelectorAll(".trace-row")].some(r => !%s.includes(r.dataset.id) && r.dataset.status === "running")`, jsStrings(before)), 10*time.Second)
		streamed = eval[string](t, p, `document.querySelector(".trace-row").dataset.id`)
		if err := <-errc; err != nil {
			t.Fatalf("stream: %v", err)
		}
		waitRow(t, p, streamed, "ok")
		row := p.text(t, fmt.Sprintf(`.trace-row[data-id=%q]`, streamed))
		for _, want := range []string{firstLine(reflexiveQuestion), "OL1", "M1", "M2", "reflexive", "tokens", "Go-http-client"} {
			if !strings.Contains(row, want) {
				t.Errorf("row lacks %q; it reads:\n%s", want, row)
			}
		}
	})

	t.Run("a trace opens at its own address, unfolded, with a timeline that adds up", func(t *testing.T) {
		p.do(t, chromedp.Click(chromedp.CSS(fmt.Sprintf(`.trace-row[data-id=%q] a`, streamed))))
		p.poll(t, fmt.Sprintf(`location.hash === "#/traces/%s" && document.querySelector(".td-trace-id")?.textContent === %q`, streamed, streamed), 10*time.Second)
		if got := badgeStatuses(t, p); !maps(got, map[string]string{"OL1": "ok", "M1": "ok", "M2": "ok"}) {
			t.Errorf("badges = %v, want OL1, M1, M2 ok", got)
		}
		if open := eval[[]string](t, p, `[...document.querySelectorAll("#trace-detail .badge")].map(b => b.getAttribute("aria-expanded"))`); slices.Contains(open, "false") {
			t.Errorf("badges expanded = %q, want every stage unfolded", open)
		}
		tl := readTimeline(t, p)
		if tl.Total <= 0 || tl.Segments != tl.Total {
			t.Errorf("timeline segments add up to %v ms, want the trace's %v ms (segments %s)", tl.Segments, tl.Total, tl.Kinds)
		}
		// One time is one x on every row: the rows' tracks are as wide.
		if widths := eval[[]float64](t, p, `[...new Set([...document.querySelectorAll("#trace-detail .tl-track")].map(e => Math.round(e.getBoundingClientRect().width)))]`); len(widths) != 1 {
			t.Errorf("timeline track widths = %v, want one width for every row", widths)
		}
		calls := eval[int](t, p, `document.querySelectorAll("#trace-detail .tl-call .tl-gen").length`)
		tools := eval[[]string](t, p, `[...document.querySelectorAll("#trace-detail .tl-tool-row")].map(r => r.dataset.tool)`)
		if calls < 4 || !slices.Contains(tools, "list_dir") || !slices.Contains(tools, "read_file") {
			t.Errorf("timeline has %d model calls and tools %q, want OL1's turns, M1 and M2, list_dir and read_file", calls, tools)
		}
		// What each model call was sent, from the stored trace: OL1's
		// calls, each starting with its role prompt.
		prompts := eval[[]string](t, p, `[...document.querySelectorAll('#trace-detail .stage-detail[data-node="OL1"] .pv-call')].map(c => c.querySelector(".pv-msg")?.dataset.role + ":" + c.querySelectorAll(".pv-msg").length)`)
		if len(prompts) < 3 || !strings.HasPrefix(prompts[0], "system:") {
			t.Errorf("OL1's prompts = %q, want one per model call, each opening with the system prompt", prompts)
		}
		// The address alone opens it, in a new tab (a shared link).
		q := openPage(t, browser, demo.url)
		q.do(t, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`localStorage.setItem(%q, "key-a")`, keyStorage)),
			chromedp.Navigate(demo.url+"#/traces/"+streamed), chromedp.Reload())
		q.poll(t, fmt.Sprintf(`document.querySelector(".td-trace-id")?.textContent === %q && document.querySelectorAll("#trace-detail .badge").length === 3`, streamed), 10*time.Second)
		p.do(t, chromedp.Evaluate[chromedp.Void](`location.hash = "#/traces"`))
	})

	t.Run("an awaiting_client chain shows the waiting stage, then the resumed one", func(t *testing.T) {
		msgs := []openai.ChatCompletionMessage{{Role: "user", Content: "weather: what is the weather in Paris?"}}
		first, err := client.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "chain/reflexive", Messages: msgs, Tools: []openai.Tool{weatherTool}})
		if err != nil {
			t.Fatal(err)
		}
		waiting = first.Header().Get("X-Chain-Trace-Id")
		if first.Choices[0].FinishReason != openai.FinishReasonToolCalls || len(first.Choices[0].Message.ToolCalls) != 1 {
			t.Fatalf("first answer = %+v, want a get_weather call", first.Choices[0])
		}
		waitRow(t, p, waiting, "awaiting_client")
		openTrace(t, p, waiting)
		if got := badgeStatuses(t, p); got["OL1"] != "awaiting_client" {
			t.Errorf("badges = %v, want OL1 awaiting_client", got)
		}
		call := first.Choices[0].Message.ToolCalls[0]
		msgs = append(msgs, first.Choices[0].Message, openai.ChatCompletionMessage{Role: "tool", ToolCallID: call.ID, Content: "sunny, 24°C"})
		second, err := client.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "chain/reflexive", Messages: msgs, Tools: []openai.Tool{weatherTool}})
		if err != nil {
			t.Fatal(err)
		}
		resumed = second.Header().Get("X-Chain-Trace-Id")
		if resumed != waiting {
			t.Errorf("resumed chain's id = %s, want the waiting chain's %s: one chain, one trace", resumed, waiting)
		}
		p.do(t, chromedp.Evaluate[chromedp.Void](`location.hash = "#/traces"`))
		waitRow(t, p, resumed, "ok")
		if row := p.text(t, fmt.Sprintf(`.trace-row[data-id=%q]`, resumed)); !strings.Contains(row, "resumed") {
			t.Errorf("resumed row reads %q, want it marked resumed", row)
		}
		openTrace(t, p, resumed)
		if got := badgeStatuses(t, p); !maps(got, map[string]string{"OL1": "ok", "M1": "ok", "M2": "ok"}) {
			t.Errorf("badges = %v, want the resumed OL1 and the stages after it ok", got)
		}
		// The client's round trip is on the timeline, and the resumed turn
		// starts after it: the wait is a gap in OL1's model calls.
		got := eval[map[string]float64](t, p, `(() => {
			const c = document.querySelector("#trace-detail .tl-client-row .tl-client");
			const gens = [...document.querySelectorAll("#trace-detail .tl-call .tl-gen")];
			return {clientEnd: c ? +c.dataset.start + +c.dataset.ms : -1, secondCall: gens.length > 1 ? +gens[1].dataset.start : -1};
		})()`)
		if got["clientEnd"] < 0 || got["secondCall"] < got["clientEnd"] {
			t.Errorf("client round trip ends at %v ms, OL1's resumed call starts at %v ms; want the call after the round trip", got["clientEnd"], got["secondCall"])
		}
		if tl := readTimeline(t, p); tl.Segments != tl.Total {
			t.Errorf("resumed timeline segments add up to %v ms, want %v", tl.Segments, tl.Total)
		}
		p.do(t, chromedp.Evaluate[chromedp.Void](`location.hash = "#/traces"`))
	})

	t.Run("the cockpit's weather scenario runs the client tool round trip", func(t *testing.T) {
		p.do(t, chromedp.Evaluate[chromedp.Void](`location.hash = "#/"`))
		p.poll(t, `!document.querySelector("#empty").hidden`, 10*time.Second)
		p.do(t, chromedp.Click(chromedp.CSS(`#demo [data-client-tool="get_weather"]`)))
		if offered := eval[bool](t, p, `!document.querySelector("#client-tool").hidden`); !offered {
			t.Error("the weather example does not say the page offers get_weather")
		}
		p.do(t, chromedp.Focus(chromedp.CSS("#input")), pressEnter)
		// While the page runs the tool, OL1 shows as waiting for the client.
		p.poll(t, `document.querySelector('#conversation .message.assistant .badge[data-node="OL1"]')?.dataset.status === "awaiting_client"`, 10*time.Second)
		a := p.waitAnswer(t)
		if a.State != "done" {
			t.Fatalf("answer state = %q (error %q), want done", a.State, p.text(t, a.sel(".error-box")))
		}
		if got := eval[map[string]string](t, p, fmt.Sprintf(`Object.fromEntries([...document.querySelectorAll(%q)].map(b => [b.dataset.node, b.dataset.status]))`, a.sel(".badge"))); !maps(got, map[string]string{"OL1": "ok", "M1": "ok", "M2": "ok"}) {
			t.Errorf("badges = %v, want the resumed chain's stages ok", got)
		}
		if reply := p.text(t, a.sel(".reply")); !strings.Contains(reply, "get_weather") {
			t.Errorf("reply = %q, want M2's weather answer", reply)
		}
		// Its link opens the resumed trace, whose OL1 ran the page's tool.
		link := eval[string](t, p, fmt.Sprintf(`document.querySelector(%q).getAttribute("href")`, a.sel(".trace-link")))
		p.do(t, chromedp.Click(chromedp.CSS(a.sel(".trace-link"))))
		p.poll(t, fmt.Sprintf(`location.hash === %q && "#/traces/" + document.querySelector(".td-trace-id")?.textContent === %q && document.querySelector("#trace-detail .tl-client-row") !== null`, link, link), 10*time.Second)
		if result := p.text(t, `#trace-detail .stage-detail[data-node="OL1"] .tool-call[data-tool="get_weather"] .tc-result`); !strings.Contains(result, "made up by the cockpit") {
			t.Errorf("get_weather result in the trace = %q, want the page's", result)
		}
		// The list: one chain, resumed and ok; the wait for the page's
		// tool is a part of it, not an entry of its own.
		p.do(t, chromedp.Evaluate[chromedp.Void](`location.hash = "#/traces"`))
		p.poll(t, `[...document.querySelectorAll(".trace-row")].filter(r => r.textContent.includes("HeadlessChrome") && r.textContent.includes("weather")).map(r => r.dataset.status).join(" ") === "ok"`, 10*time.Second)
	})

	t.Run("a second key cannot see the first key's traces", func(t *testing.T) {
		// Another browser: tabs of one origin share the stored key.
		other := openTraces(t, newBrowser(t, chromium), demo.url, "key-b")
		if ids := eval[[]string](t, other, `[...document.querySelectorAll(".trace-row")].map(r => r.dataset.id)`); len(ids) != 0 {
			t.Errorf("key b lists %q, want none of key a's chains", ids)
		}
		other.do(t, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = "#/traces/%s"`, streamed)))
		other.poll(t, `document.querySelector("#trace-body .error-message")?.textContent.includes("404")`, 10*time.Second)
	})

	t.Run("each demo scenario of the banner ends as it promises", func(t *testing.T) {
		stories := regexp.MustCompile(`(?m)^  (\w+) +.+ → (\w+)$`).FindAllStringSubmatch(demo.out.String(), -1)
		if len(stories) < 5 {
			t.Fatalf("banner lists %d scenarios, want them all:\n%s", len(stories), demo.out.String())
		}
		for _, s := range stories {
			word, status := s[1], s[2]
			t.Run(word, func(t *testing.T) {
				req := openai.ChatCompletionRequest{Model: "chain/reflexive", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: word + ": compare the files in the workspace"}}}
				if word == "weather" {
					req.Tools = []openai.Tool{weatherTool}
				}
				res, err := client.CreateChatCompletion(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				id := res.Header().Get("X-Chain-Trace-Id")
				p.poll(t, fmt.Sprintf(`["%s"].includes(document.querySelector('.trace-row[data-id=%q]')?.dataset.status)`, status, id), 20*time.Second)
			})
		}
		// The status filter keeps the loop stops only.
		p.do(t, chromedp.SetValue(chromedp.CSS("#f-status"), "stopped"),
			chromedp.Evaluate[chromedp.Void](`document.querySelector("#f-status").dispatchEvent(new Event("change"))`))
		shown := eval[[]string](t, p, `[...document.querySelectorAll(".trace-row:not([hidden])")].map(r => r.dataset.status)`)
		if len(shown) < 2 || slices.ContainsFunc(shown, func(s string) bool { return !strings.HasPrefix(s, "stopped_") }) {
			t.Errorf("rows shown under loop stops = %q, want the stopped chains only", shown)
		}
		p.do(t, chromedp.Evaluate[chromedp.Void](`(s => { s.selectedIndex = 0; s.dispatchEvent(new Event("change")); })(document.querySelector("#f-status"))`))
	})

	t.Run("no glued turns in the trace, the cockpit or the details blocks", func(t *testing.T) {
		const glued, apart = "workspace.Raw findings", "Let me look at the workspace.\n\nRaw findings"
		// The stored trace.
		req, _ := http.NewRequest("GET", demo.url+"v1/chain/traces/"+streamed, nil)
		req.Header.Set("Authorization", "Bearer key-a")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Chain struct {
				Stages []struct{ Output string } `json:"stages"`
			} `json:"chain"`
		}
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if err != nil || len(doc.Chain.Stages) == 0 || !strings.Contains(doc.Chain.Stages[0].Output, apart) {
			t.Errorf("stored OL1 output = %+v (%v), want its turns a paragraph apart", doc.Chain.Stages, err)
		}
		// The cockpit: two paragraphs in OL1's unfolded output.
		openTrace(t, p, streamed)
		paras := eval[[]string](t, p, `[...document.querySelectorAll('#trace-detail .stage-detail[data-node="OL1"] .sd-output p')].map(p => p.textContent)`)
		if len(paras) < 2 || slices.ContainsFunc(paras, func(p string) bool { return strings.Contains(p, glued) }) {
			t.Errorf("OL1's output paragraphs = %q, want its turns apart", paras)
		}
		// The <details> blocks of X-Chain-Render: details.
		req, _ = http.NewRequest("POST", demo.url+"v1/chat/completions", strings.NewReader(fmt.Sprintf(`{"model":"chain/reflexive","messages":[{"role":"user","content":%q}]}`, reflexiveQuestion)))
		req.Header.Set("Authorization", "Bearer key-a")
		req.Header.Set("X-Chain-Render", "details")
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out openai.ChatCompletionResponse
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil || len(out.Choices) == 0 {
			t.Fatalf("details answer: %v", err)
		}
		// The block's attribute keeps the break as &#10; character references.
		if c := out.Choices[0].Message.Content; strings.Contains(c, glued) || !strings.Contains(c, strings.ReplaceAll(apart, "\n", "&#10;")) {
			t.Errorf("details blocks glue OL1's turns:\n%s", c)
		}
		p.do(t, chromedp.Evaluate[chromedp.Void](`location.hash = "#/traces"`))
	})

	t.Run("screenshots", func(t *testing.T) {
		shots := screenshotDir(t)
		for _, s := range []struct {
			name          string
			hash          string
			width, height int64
			dark          bool
		}{
			{"traces", "#/traces", 1280, 800, false},
			{"traces-dark", "#/traces", 1280, 800, true},
			{"trace-timeline", "#/traces/" + resumed, 1280, 1000, false},
			{"traces-narrow", "#/traces", 375, 740, false},
			{"trace-narrow-dark", "#/traces/" + streamed, 375, 740, true},
		} {
			p.do(t, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = %q`, s.hash)), chromedp.Sleep(300*time.Millisecond))
			p.screenshot(t, filepath.Join(shots, s.name+".png"), s.width, s.height, s.dark, false)
		}
		t.Logf("screenshots in %s", shots)
		// UPDATE_SCREENSHOT=1: the README's picture of a trace's timeline.
		if os.Getenv("UPDATE_SCREENSHOT") == "1" {
			b, err := os.ReadFile(filepath.Join(shots, "trace-timeline.png"))
			if err == nil {
				err = os.WriteFile(filepath.Join(repoRoot(t), "docs", "traces.png"), b, 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestCockpitPromptView: a stored trace whose calls carry their messages
// and whose stage was fitted to its window (as the context fitting writes
// it) shows each call's prompt with the fitted parts marked, and the
// fitting's actions. The trace is put in the proxy's own trace store, a
// real Redis, as the proxy would store it.
func TestCockpitPromptView(t *testing.T) {
	chromium := findChromium(t)
	rd := redistest.Start(t)
	bin := proxyBinary(t)
	cfgPath := filepath.Join(t.TempDir(), "redis.yaml")
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, "store:\n  redis_url: %s\n", rd.URL()), 0o644); err != nil {
		t.Fatal(err)
	}
	demo := startProxy(t, bin, "-config", cfgPath)
	st, err := store.NewRedis(rd.URL(), 500)
	if err != nil {
		t.Fatal(err)
	}
	const id = "feedc0ffee0000000000abcd"
	doc := `{"trace_id":"` + id + `","started":1795560000000,"question":"What did we decide about the rollback?","mode":"simple","status":"ok","duration_ms":2400,"tokens":5200,"client":"test",
	"chain":{"mode":"simple","reasons":["short question"],"turns":1,"stages":[{"node":"M1","model":"qwen3","turns":1,"status":"ok","start_ms":5,"duration_ms":2390,
	"usage":{"prompt_tokens":5100,"completion_tokens":100,"total_tokens":5200},"tools_used":[],"output":"We keep a manual rollback.",
	"context":{"window":4096,"estimated_tokens":3900,"reported_tokens":4100,"overflow":true,"actions":[
		{"action":"summarized","from_turn":1,"to_turn":6,"summary_id":"s-1","detail":"6 turns folded into a summary"},
		{"action":"shortened","from_turn":7,"to_turn":7,"detail":"read_file result cut in the middle"}]},
	"calls":[
		{"turn":0,"kind":"summary","node":"OL1","start_ms":5,"queue_ms":0,"duration_ms":900,"usage":{"total_tokens":800},
		 "messages":[{"role":"system","content":"Summarise the conversation so far."},{"role":"user","content":"turns 1-6 …"}]},
		{"turn":1,"start_ms":910,"queue_ms":40,"duration_ms":1440,"usage":{"total_tokens":4400},"finish_reason":"stop",
		 "messages":[
			{"role":"system","content":"Summary of earlier turns: the team chose a manual rollback.","fit":"summary"},
			{"role":"system","content":"Earlier questions: 1. What is the plan?","fit":"earlier_questions"},
			{"role":"assistant","content":"","tool_calls":[{"id":"c1","name":"read_file","arguments":"{\"path\":\"notes.md\"}"}]},
			{"role":"tool","name":"read_file","tool_call_id":"c1","content":"# Notes … [12000 characters cut] … end","fit":"shortened"},
			{"role":"user","content":"What did we decide about the rollback?"}]}]}]}}`
	if err := st.PutTrace(context.Background(), id, []byte(doc)); err != nil {
		t.Fatal(err)
	}
	p := openPage(t, newBrowser(t, chromium), demo.url)
	openTrace(t, p, id)
	got := eval[map[string]any](t, p, `(() => {
		const pv = document.querySelector('#trace-detail .stage-detail[data-node="M1"] .prompt-view');
		if (!pv) return {missing: true};
		return {
			calls: [...pv.querySelectorAll(".pv-call")].map(c => c.dataset.kind),
			fits: [...pv.querySelectorAll(".pv-msg[data-fit]")].map(m => m.dataset.fit),
			marks: [...pv.querySelectorAll(".pv-fit")].map(m => m.textContent),
			roles: [...pv.querySelectorAll(".pv-call:last-of-type .pv-msg")].map(m => m.dataset.role),
			actions: [...pv.querySelectorAll(".pv-action")].map(a => a.textContent),
			overflow: pv.querySelector(".pv-context").dataset.overflow,
			window: pv.querySelector(".pv-window").textContent,
			toolCall: pv.querySelector(".pv-tool-call")?.textContent ?? "",
			summaryRow: document.querySelector('#trace-detail .tl-call[data-kind="summary"] .tl-label')?.textContent ?? "",
		};
	})()`)
	want := map[string]any{
		"calls":      []any{"summary", "turn"},
		"fits":       []any{"summary", "earlier_questions", "shortened"},
		"roles":      []any{"system", "system", "assistant", "tool", "user"},
		"overflow":   "true",
		"window":     "window 4,096 tokens · estimated 3,900 · reported 4,100",
		"toolCall":   `→ read_file {"path":"notes.md"}`,
		"summaryRow": "summary (OL1)",
	}
	for k, w := range want {
		if fmt.Sprint(got[k]) != fmt.Sprint(w) {
			t.Errorf("%s = %v, want %v", k, got[k], w)
		}
	}
	if marks := fmt.Sprint(got["marks"]); !strings.Contains(marks, "fitted: summary of earlier turns") || !strings.Contains(marks, "fitted: shortened to fit") {
		t.Errorf("fit marks = %s, want each fitted message marked in words", marks)
	}
	if actions := fmt.Sprint(got["actions"]); !strings.Contains(actions, "summarized turns 1–6 (summary s-1): 6 turns folded into a summary") || !strings.Contains(actions, "shortened turn 7: read_file result cut in the middle") {
		t.Errorf("context actions = %s, want each listed with its turns", actions)
	}
	p.screenshot(t, filepath.Join(screenshotDir(t), "trace-prompt.png"), 1280, 1600, false, false)
}

func maps(got, want map[string]string) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

func jsStrings(s []string) string {
	b, _ := json.Marshal(s)
	if s == nil {
		return "[]"
	}
	return string(b)
}
