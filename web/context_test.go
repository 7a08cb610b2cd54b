package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ollama/ollama/api"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/chain/trace"
	"chainproxy/config"
	"chainproxy/internal/fakeollama"
	"chainproxy/internal/fakeopenai"
	"chainproxy/internal/nodetest"
	"chainproxy/internal/redistest"
	"chainproxy/store"
)

// summarizing answers the summarizer's requests with a summary and every
// other request with an answer, counting both.
type summarizing struct {
	*fakeollama.Server
	summaries, answers atomic.Int32
}

func isSummaryRequest(req *api.ChatRequest) bool {
	return len(req.Messages) > 0 && strings.HasPrefix(req.Messages[0].Content, "You summarise the earlier part")
}

func newSummarizing(t *testing.T) *summarizing {
	s := &summarizing{}
	s.Server = fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply {
		if isSummaryRequest(req) {
			s.summaries.Add(1)
			return fakeollama.Reply{Content: []string{"The user asked about topics 1 to 20; list_dir ran on ."}}
		}
		s.answers.Add(1)
		return fakeollama.Reply{Content: []string{"Your first question was about topic-1."}}
	})
	return s
}

// longConversation is a system instruction, n question/answer pairs whose
// answers weigh size bytes, and a last question: 30 pairs of 1.6 KB make
// the 52 KB conversation of the issue.
func longConversation(n, size int) []map[string]string {
	msgs := []map[string]string{{"role": "system", "content": "You are a helpful assistant."}}
	for i := 1; i <= n; i++ {
		msgs = append(msgs,
			map[string]string{"role": "user", "content": fmt.Sprintf("Question %d: tell me about topic-%d.", i, i)},
			map[string]string{"role": "assistant", "content": fmt.Sprintf("Answer %d: ", i) + strings.Repeat("lorem ipsum ", size/12)})
	}
	return append(msgs, map[string]string{"role": "user", "content": "What was my first question about?"})
}

// contextProxy serves yamlText's nodes with real Ollama backends, keeping
// summaries and traces in st (a fresh in-process store when nil).
func contextProxy(t *testing.T, yamlText string, st store.Store) *httptest.Server {
	srv, _ := contextEngine(t, yamlText, st)
	return srv
}

// contextEngine is contextProxy with its engine.
func contextEngine(t *testing.T, yamlText string, st store.Store) (*httptest.Server, *chain.Engine) {
	t.Helper()
	cfg, err := config.Parse([]byte(yamlText))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Root = ""
	if st == nil {
		st = store.NewMemory(10000, 50)
	}
	set := nodetest.Build(t, cfg, nil)
	eng, err := chain.New(cfg, chain.Deps{Nodes: set, Memory: st, Guard: antiloop.NewGuard(st, cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL)})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, n := range cfg.Nodes {
		names = append(names, n.Name)
	}
	srv := httptest.NewServer(New(Options{Config: cfg, Engine: eng, Traces: st, Logger: slog.New(slog.DiscardHandler), Metrics: NewMetrics(names, nil, nil)}))
	t.Cleanup(srv.Close)
	return srv, eng
}

func windowConfig(url string, window int) string {
	cw := ""
	if window > 0 {
		cw = fmt.Sprintf(", context_window: %d", window)
	}
	return fmt.Sprintf("nodes:\n  - {name: A, provider: ollama, base_url: %q, model: a-model, timeout: 10s%s}\nchain:\n  stages: [{node: A, max_turns: 2}]\n  simple_node: A\n", url, cw)
}

type contextAnswer struct {
	status  int
	traceID string
	trace   chain.Trace
	body    []byte
}

func askLong(t *testing.T, srv *httptest.Server, msgs any, stream bool) contextAnswer {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "chain/simple", "stream": stream, "messages": msgs})
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	a := contextAnswer{status: resp.StatusCode, traceID: resp.Header.Get("X-Chain-Trace-Id"), body: data}
	if !stream && resp.StatusCode == http.StatusOK {
		var r struct {
			Chain chain.Trace `json:"chain"`
		}
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		a.trace = r.Chain
	}
	return a
}

func storedTrace(t *testing.T, srv *httptest.Server, id string) chain.Trace {
	t.Helper()
	resp, err := http.Get(srv.URL + "/v1/chain/traces/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Chain chain.Trace `json:"chain"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	return doc.Chain
}

func actions(ct *chain.ContextTrace) []string {
	var out []string
	if ct == nil {
		return nil
	}
	for _, a := range ct.Actions {
		out = append(out, a.Action)
	}
	return out
}

// The scenario: a 52 KB conversation through a node with a
// 2,048-token window. Nothing is cut by the upstream, the request that
// reaches it holds the first question, the trace says what was fitted, and
// the stored trace shows the prompt with its fitted parts marked. The same
// conversation sent again makes no summarizer call.
func TestContextLongConversation(t *testing.T) {
	fake := newSummarizing(t)
	fake.SetWindow(2048, 4)
	srv := contextProxy(t, windowConfig(fake.URL, 2048), nil)
	conv := longConversation(30, 1600)

	a := askLong(t, srv, conv, false)
	if a.status != http.StatusOK {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	if n := fake.Truncated(); n != 0 {
		t.Fatalf("the upstream cut %d messages", n)
	}
	if fake.summaries.Load() != 1 {
		t.Fatalf("%d summarizer calls, want 1", fake.summaries.Load())
	}
	reqs, bodies := fake.Requests(), fake.Bodies()
	last := reqs[len(reqs)-1]
	var sent strings.Builder
	for _, m := range last.Messages {
		sent.WriteString(m.Content)
	}
	if !strings.Contains(sent.String(), "Question 1: tell me about topic-1.") || !strings.Contains(sent.String(), "What was my first question about?") {
		t.Fatal("the first or the last question did not reach the model")
	}
	b := bodies[len(bodies)-1]
	if b["truncate"] != false || b["options"].(map[string]any)["num_ctx"] != float64(2048) {
		t.Fatalf("want truncate false and num_ctx 2048, got truncate %v options %v", b["truncate"], b["options"])
	}
	st := a.trace.Stages[0]
	if st.Context == nil || st.Context.Window != 2048 || st.Context.EstimatedTokens == 0 || st.Context.EstimatedTokens > 2048 {
		t.Fatalf("context trace %+v", st.Context)
	}
	if acts := actions(st.Context); !strings.Contains(strings.Join(acts, ","), "summarized") {
		t.Fatalf("actions %v, want summarized", acts)
	}
	if st.Context.ReportedTokens == 0 || st.Context.Overflow {
		t.Fatalf("reported %d overflow %v", st.Context.ReportedTokens, st.Context.Overflow)
	}
	if len(st.Calls) != 2 || st.Calls[0].Kind != "summary" || st.Calls[0].Node != "A" || st.Calls[0].Usage.PromptTokens == 0 {
		t.Fatalf("want the summarizer call then the answer in calls, got %+v", st.Calls)
	}
	if st.Calls[1].Messages != nil {
		t.Fatal("a response must not carry the prompts")
	}

	stored := storedTrace(t, srv, a.traceID)
	marks := map[string]bool{}
	for _, m := range stored.Stages[0].Calls[1].Messages {
		marks[m.Fit] = true
	}
	if !marks[trace.FitSummary] || !marks[trace.FitEarlierQuestions] {
		t.Fatalf("stored prompt marks %v, want summary and earlier_questions", marks)
	}

	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `chainproxy_context_actions_total{action="summarized",node="A"} 1`) {
		t.Fatalf("metrics lack the fitting count:\n%s", metrics)
	}

	// The client resends the whole history: the summary is reused.
	a = askLong(t, srv, conv, false)
	if a.status != http.StatusOK || fake.summaries.Load() != 1 {
		t.Fatalf("status %d, %d summarizer calls: want the cached summary", a.status, fake.summaries.Load())
	}
	if acts := strings.Join(actions(a.trace.Stages[0].Context), ","); !strings.HasPrefix(acts, "reused") || strings.Contains(acts, "summarized") {
		t.Fatalf("actions %s, want the summary reused", acts)
	}
}

// A summarizer that cannot be reached: the older turns are dropped, with
// the earlier questions listed and a marker of what is missing.
func TestContextSummarizerDown(t *testing.T) {
	fake := newSummarizing(t)
	fake.SetWindow(2048, 4)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	yaml := strings.Replace(windowConfig(fake.URL, 2048), "chain:", fmt.Sprintf("  - {name: S, provider: ollama, base_url: %q, model: s-model, timeout: 2s}\nmemory: {summarizer: S}\nchain:", down.URL), 1)
	srv := contextProxy(t, yaml, nil)
	a := askLong(t, srv, longConversation(30, 1600), false)
	if a.status != http.StatusOK {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	st := a.trace.Stages[0]
	if acts := strings.Join(actions(st.Context), ","); !strings.Contains(acts, "dropped") {
		t.Fatalf("actions %s, want dropped", acts)
	}
	if fake.Truncated() != 0 {
		t.Fatal("the upstream cut the prompt")
	}
	reqs := fake.Requests()
	var sent strings.Builder
	for _, m := range reqs[len(reqs)-1].Messages {
		sent.WriteString(m.Content + "\n")
	}
	if !strings.Contains(sent.String(), "are not shown: they did not fit") || !strings.Contains(sent.String(), "[turn 1] Question 1") {
		t.Fatalf("want the omitted marker and the first question in the prompt:\n%.2000s", sent.String())
	}
}

// A last message that cannot fit the window with the answer's reserve is
// the client's to shorten: 400 context_length_exceeded naming the node,
// its window and the estimate, streamed or not; never a cut, never a 500.
func TestContextTooLong(t *testing.T) {
	fake := newSummarizing(t)
	fake.SetWindow(2048, 4)
	srv := contextProxy(t, windowConfig(fake.URL, 2048), nil)
	msgs := []map[string]string{{"role": "user", "content": strings.Repeat("word ", 4000)}}
	for _, stream := range []bool{false, true} {
		a := askLong(t, srv, msgs, stream)
		var e struct {
			Error struct {
				Message string
				Code    string
				Param   string
			}
		}
		if err := json.Unmarshal(a.body, &e); a.status != http.StatusBadRequest || err != nil {
			t.Fatalf("stream %v: status %d: %s", stream, a.status, a.body)
		}
		if e.Error.Code != "context_length_exceeded" || e.Error.Param != "messages" || !strings.Contains(e.Error.Message, "node A") || !strings.Contains(e.Error.Message, "2048 tokens") {
			t.Fatalf("stream %v: %+v", stream, e.Error)
		}
	}
	if len(fake.Requests()) != 0 {
		t.Fatal("a prompt known not to fit was sent")
	}
}

// A node of unknown window whose tokenizer is denser than assumed refuses
// the first prompt: the proxy learns its window from /api/ps, fits harder
// and retries once, and the trace says so.
func TestContextRefit(t *testing.T) {
	fake := newSummarizing(t)
	fake.SetWindow(2048, 2)
	srv := contextProxy(t, windowConfig(fake.URL, 0), nil)
	a := askLong(t, srv, longConversation(30, 1600), false)
	if a.status != http.StatusOK {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	acts := strings.Join(actions(a.trace.Stages[0].Context), ",")
	if !strings.Contains(acts, "refit") {
		t.Fatalf("actions %s, want refit", acts)
	}
	if w := a.trace.Stages[0].Context.Window; w != 2048 {
		t.Fatalf("window %d, want 2048 learned from /api/ps", w)
	}
	if fake.Truncated() != 0 {
		t.Fatal("the upstream cut the prompt")
	}
}

// Two replicas sharing a real Redis share the summaries: the second
// replica answers the same conversation without a summarizer call.
func TestContextSummariesSharedByReplicas(t *testing.T) {
	rs := redistest.Start(t)
	fake := newSummarizing(t)
	fake.SetWindow(2048, 4)
	open := func() store.Store {
		st, err := store.Open(context.Background(), rs.URL(), 50, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	a := contextProxy(t, windowConfig(fake.URL, 2048), open())
	b := contextProxy(t, windowConfig(fake.URL, 2048), open())
	conv := longConversation(30, 1600)
	if r := askLong(t, a, conv, false); r.status != http.StatusOK {
		t.Fatalf("replica a: %d %s", r.status, r.body)
	}
	r := askLong(t, b, conv, false)
	if r.status != http.StatusOK || fake.summaries.Load() != 1 {
		t.Fatalf("replica b: status %d, %d summarizer calls in all, want 1", r.status, fake.summaries.Load())
	}
	if acts := strings.Join(actions(r.trace.Stages[0].Context), ","); !strings.HasPrefix(acts, "reused") || strings.Contains(acts, "summarized") {
		t.Fatalf("replica b actions %s, want the summary reused", acts)
	}
}

// OpenAI-compatible nodes: of unknown window, an upstream refusal reaches
// the client as context_length_exceeded naming the node; with vLLM's
// max_model_len, the prompt is fitted to it, and a reported prompt at the
// window is flagged as an overflow.
func TestContextOpenAINodes(t *testing.T) {
	refusing := fakeopenai.New(t, fakeopenai.Reply{Status: 400, Error: "This model's maximum context length is 1024 tokens. However, you requested 14000 tokens.", ErrorType: "invalid_request_error", ErrorCode: "context_length_exceeded"})
	yaml := func(url string) string {
		return fmt.Sprintf("nodes:\n  - {name: A, provider: openai, base_url: %q, model: fake-model, timeout: 10s}\nchain:\n  stages: [{node: A, max_turns: 1}]\n  simple_node: A\n", url)
	}
	srv := contextProxy(t, yaml(refusing.BaseURL()), nil)
	a := askLong(t, srv, longConversation(30, 1600), false)
	if a.status != http.StatusBadRequest || !strings.Contains(string(a.body), `"code":"context_length_exceeded"`) || !strings.Contains(string(a.body), "node A refused the prompt") {
		t.Fatalf("status %d: %s", a.status, a.body)
	}

	vllm := fakeopenai.New(t, fakeopenai.Reply{Content: []string{"ok"}, PromptTokens: 1100, CompletionTokens: 1})
	vllm.SetMaxModelLen(1024)
	srv, eng := contextEngine(t, yaml(vllm.BaseURL()), nil)
	if err := eng.Probe(context.Background(), "A"); err != nil {
		t.Fatal(err)
	}
	a = askLong(t, srv, longConversation(30, 1600), false)
	if a.status != http.StatusOK {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	ct := a.trace.Stages[0].Context
	if ct == nil || ct.Window != 1024 || len(ct.Actions) == 0 || !ct.Overflow || ct.ReportedTokens != 1100 {
		t.Fatalf("context %+v", ct)
	}
}

// TestContextSummarizerNoThink: a summarizer whose model thinks (qwen3,
// deepseek-r1) is asked not to, since its 512-token cap would go to its
// reasoning and leave no summary; a model that does not think gets no
// think field (Ollama refuses think: true to it, and the field would say
// nothing), and the answering call keeps the model's own default.
func TestContextSummarizerNoThink(t *testing.T) {
	for _, tc := range []struct {
		caps []string
		want any // the summary call's think, as decoded from its body
	}{
		{[]string{"completion", "tools", "thinking"}, false},
		{[]string{"completion", "tools"}, nil},
	} {
		fake := newSummarizing(t)
		fake.SetWindow(2048, 4)
		fake.SetModel("a-model", tc.caps...)
		srv := contextProxy(t, windowConfig(fake.URL, 2048), nil)
		if a := askLong(t, srv, longConversation(30, 1600), false); a.status != http.StatusOK {
			t.Fatalf("status %d: %s", a.status, a.body)
		}
		summaries := 0
		for i, req := range fake.Requests() {
			think := fake.Bodies()[i]["think"]
			if !isSummaryRequest(&req) {
				if think != nil {
					t.Errorf("caps %v: the answering call sent think %v", tc.caps, think)
				}
				continue
			}
			summaries++
			if think != tc.want {
				t.Errorf("caps %v: the summary call sent think %v, want %v", tc.caps, think, tc.want)
			}
		}
		if summaries == 0 {
			t.Fatalf("caps %v: no summary call", tc.caps)
		}
	}
}
