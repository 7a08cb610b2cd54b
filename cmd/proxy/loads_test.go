package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"chainproxy/internal/fakeollama"
	"chainproxy/internal/fakeopenai"
)

// loadsConfig is a chain on one GPU: OL1 and M2 on one Ollama whose memory
// holds one of their models at a time, M1 on an OpenAI-compatible server.
const loadsConfig = `
nodes:
  - {name: OL1, provider: ollama, base_url: %[1]q, model: small}
  - {name: M1, provider: openai, base_url: %[2]q, model: mid}
  - {name: M2, provider: ollama, base_url: %[1]q, model: big}
chain:
  stages: [{node: OL1, max_turns: 1}, {node: M1, max_turns: 1}, {node: M2, max_turns: 1}]
  simple_node: M2
tools:
  root: ""
`

// loadCall is what the tests read of a trace's model call.
type loadCall struct {
	QueueMS      *int64 `json:"queue_ms"`
	DurationMS   int64  `json:"duration_ms"`
	LoadMS       *int64 `json:"load_ms"`
	GenerationMS *int64 `json:"generation_ms"`
}

// chatCalls sends a request for model and returns its trace's calls by
// node.
func chatCalls(t *testing.T, base, model string) map[string][]loadCall {
	t.Helper()
	resp, err := http.Post(base+"/v1/chat/completions", "application/json",
		strings.NewReader(fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"compare the two plans step by step"}]}`, model)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s", model, resp.StatusCode, body)
	}
	var out struct {
		Chain struct {
			Stages []struct {
				Node   string     `json:"node"`
				Status string     `json:"status"`
				Calls  []loadCall `json:"calls"`
			} `json:"stages"`
		} `json:"chain"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	calls := map[string][]loadCall{}
	for _, st := range out.Chain.Stages {
		if st.Status != "ok" {
			t.Errorf("%s: stage %s = %s, want ok", model, st.Node, st.Status)
		}
		calls[st.Node] = append(calls[st.Node], st.Calls...)
	}
	return calls
}

// TestModelLoadsThroughWiring: each model call's time is split into its
// queue, its model's load (Ollama's load_duration) and generation, in the
// trace and in /metrics, through the real wiring with a fake Ollama that
// can hold one model at a time: the reflexive chain loads OL1's model,
// then M2's in its place; simple mode on M2 right after finds its model
// loaded. The OpenAI-compatible node reports no load: its split is
// omitted, its queue is not.
func TestModelLoadsThroughWiring(t *testing.T) {
	ol := fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply {
		return fakeollama.Reply{Content: []string{"what " + req.Model + " found"}, PromptEvalCount: 10, EvalCount: 3}
	})
	// 6 GB at 20 GB/s: a load takes 300 ms, three times the threshold.
	ol.SetMemory(fakeollama.Memory{Budget: 10e9, Bandwidth: 20e9, Sizes: map[string]int64{"small": 6e9, "big": 6e9}})
	oa := fakeopenai.New(t)
	base := startWired(t, fmt.Sprintf(loadsConfig, ol.URL, oa.BaseURL()))

	chained := chatCalls(t, base, "chain/reflexive")
	simple := chatCalls(t, base, "chain/simple")

	tests := []struct {
		name   string
		calls  []loadCall
		loaded bool // whether the call loaded its model
		split  bool // whether the node reports one
	}{
		{"OL1 loads small", chained["OL1"], true, true},
		{"M1 reports no load", chained["M1"], false, false},
		{"M2 loads big in small's place", chained["M2"], true, true},
		{"simple M2 finds big loaded", simple["M2"], false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.calls) != 1 {
				t.Fatalf("calls = %+v, want one", tt.calls)
			}
			c := tt.calls[0]
			if c.QueueMS == nil {
				t.Errorf("queue_ms missing: the proxy always knows its queue")
			}
			if !tt.split {
				if c.LoadMS != nil || c.GenerationMS != nil {
					t.Errorf("load_ms, generation_ms = %v, %v, want both omitted", ptr(c.LoadMS), ptr(c.GenerationMS))
				}
				return
			}
			if c.LoadMS == nil || c.GenerationMS == nil {
				t.Fatalf("load_ms, generation_ms = %v, %v, want both", ptr(c.LoadMS), ptr(c.GenerationMS))
			}
			if *c.LoadMS+*c.GenerationMS != c.DurationMS {
				t.Errorf("load_ms + generation_ms = %d + %d, want duration_ms %d", *c.LoadMS, *c.GenerationMS, c.DurationMS)
			}
			if got := *c.LoadMS >= 250; got != tt.loaded {
				t.Errorf("load_ms = %d, want a 300 ms load: %t", *c.LoadMS, tt.loaded)
			}
		})
	}
	if got := len(ol.Loads()); got != 2 {
		t.Errorf("fake Ollama loaded %d models, want 2", got)
	}

	t.Run("metrics", func(t *testing.T) {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		text := string(b)
		for _, want := range []string{
			`chainproxy_model_loads_total{model="small",node="OL1"} 1`,
			`chainproxy_model_loads_total{model="big",node="M2"} 1`,
			`chainproxy_model_load_seconds_count{model="small",node="OL1"} 1`,
			`chainproxy_model_load_seconds_count{model="big",node="M2"} 1`,
		} {
			if !strings.Contains(text, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
		if strings.Contains(text, `chainproxy_model_loads_total{model="mid"`) {
			t.Error("/metrics counts loads of the OpenAI-compatible node, which reports none")
		}
	})
}

func ptr(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestModelLoadsOfResumedChain: a chain resumed with a client tool's result
// carries the calls and stages of its first request in its trace; /metrics
// counts each load, stage and client tool call once, whichever stage
// awaited the client.
func TestModelLoadsOfResumedChain(t *testing.T) {
	for _, tt := range []struct{ name, node, model string }{
		{"OL1 awaits the client", "OL1", "small"},
		{"M2 awaits the client after OL1 and M1 ended", "M2", "big"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ol := fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply {
				if req.Model == tt.model && !slices.ContainsFunc(req.Messages, func(m api.Message) bool { return m.Role == "tool" }) {
					return fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{{ID: "call_w", Name: "get_weather", Args: map[string]any{"city": "Paris"}}}}
				}
				return fakeollama.Reply{Content: []string{"what " + req.Model + " found"}}
			})
			ol.SetMemory(fakeollama.Memory{Budget: 10e9, Bandwidth: 20e9, Sizes: map[string]int64{"small": 6e9, "big": 6e9}})
			oa := fakeopenai.New(t)
			base := startWired(t, strings.Replace(fmt.Sprintf(loadsConfig, ol.URL, oa.BaseURL()), "{node: "+tt.node+", max_turns: 1}", "{node: "+tt.node+", max_turns: 2, tools: true}", 1))

			tool := `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
			user := `{"role":"user","content":"what is the weather in Paris?"}`
			post := func(messages string) (finish string, message json.RawMessage) {
				t.Helper()
				resp, err := http.Post(base+"/v1/chat/completions", "application/json",
					strings.NewReader(`{"model":"chain/reflexive","messages":[`+messages+`],`+tool+`}`))
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%d %s", resp.StatusCode, body)
				}
				var out struct {
					Choices []struct {
						FinishReason string          `json:"finish_reason"`
						Message      json.RawMessage `json:"message"`
					} `json:"choices"`
				}
				if err := json.Unmarshal(body, &out); err != nil || len(out.Choices) != 1 {
					t.Fatalf("answer %s: %v", body, err)
				}
				return out.Choices[0].FinishReason, out.Choices[0].Message
			}
			finish, call := post(user)
			if finish != "tool_calls" {
				t.Fatalf("first answer's finish_reason = %q, want tool_calls", finish)
			}
			var calls struct {
				ToolCalls []struct{ ID string } `json:"tool_calls"`
			}
			if err := json.Unmarshal(call, &calls); err != nil || len(calls.ToolCalls) != 1 {
				t.Fatalf("first answer's message = %s, want one tool call", call)
			}
			result := fmt.Sprintf(`{"role":"tool","tool_call_id":%q,"content":"sunny"}`, calls.ToolCalls[0].ID)
			if finish, _ := post(user + "," + string(call) + "," + result); finish != "stop" {
				t.Fatalf("resumed answer's finish_reason = %q, want stop", finish)
			}
			if got := len(ol.Loads()); got != 2 {
				t.Errorf("fake Ollama loaded %d models, want 2 (small, then big)", got)
			}
			resp, err := http.Get(base + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			for _, want := range []string{
				`chainproxy_model_loads_total{model="small",node="OL1"} 1`,
				`chainproxy_model_loads_total{model="big",node="M2"} 1`,
				// Each stage once, with its final status, and the client's
				// call once: the trace of the resumed request holds them too.
				`chainproxy_stages_total{node="OL1",status="ok"} 1`,
				`chainproxy_stages_total{node="M1",status="ok"} 1`,
				`chainproxy_stages_total{node="M2",status="ok"} 1`,
				`chainproxy_stage_turns_count{node="OL1"} 1`,
				`chainproxy_tool_calls_total{status="client",tool="(client)"} 1`,
			} {
				if !strings.Contains(string(b), want) {
					t.Errorf("/metrics lacks %s", want)
				}
			}
			if strings.Contains(string(b), `status="awaiting_client"`) {
				t.Errorf("/metrics counts a stage awaiting the client, which is counted once it ends")
			}
			if t.Failed() {
				for _, l := range strings.Split(string(b), "\n") {
					if strings.HasPrefix(l, "chainproxy_stage") || strings.HasPrefix(l, "chainproxy_tool_calls") {
						t.Log(l)
					}
				}
			}
		})
	}
}

// TestEvalModelLoads: proxy eval counts each mode's model loads from its
// traces. On a fake Ollama that holds one of the two models at a time, the
// plan (item by item, the modes' order turned at each item) loads: item 1,
// OL1 small, M2 big, the chain small and big; item 2, M2 nothing (big is
// loaded), the chain small and big, OL1 small. One request at a time, so
// that the loads follow the plan's order.
func TestEvalModelLoads(t *testing.T) {
	ol := fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply {
		return fakeollama.Reply{Content: []string{"what " + req.Model + " found"}}
	})
	// 6 GB at 40 GB/s: a load takes 150 ms, past the 100 ms threshold.
	ol.SetMemory(fakeollama.Memory{Budget: 10e9, Bandwidth: 40e9, Sizes: map[string]int64{"small": 6e9, "big": 6e9}})
	cfg, data, out := evalFiles(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, base_url: %[1]q, model: small}
  - {name: M2, provider: ollama, base_url: %[1]q, model: big}
chain:
  stages: [{node: OL1, max_turns: 1}, {node: M2, max_turns: 1}]
  simple_node: M2
tools:
  root: ""
`, ol.URL), `{"id":"one","question":"What is 2+2?","answer":"4","match":"number"}
{"id":"two","question":"What is 3+3?","answer":"6","match":"number"}
`)
	code, stdout, stderr := runEvalCmd(t, "-config", cfg, "-data", data, "-modes", "OL1,M2,chain/reflexive", "-concurrency", "1", "-out", out)
	if code != 0 {
		t.Fatalf("eval exit code = %d, want 0; stderr:\n%s", code, stderr)
	}
	_, raw := readReport(t, out)
	got := map[string]any{}
	for _, m := range raw["modes"].([]any) {
		m := m.(map[string]any)
		got[m["mode"].(string)] = m["model_loads"]
	}
	want := map[string]any{"OL1": 2.0, "M2": 1.0, "chain/reflexive": 4.0}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("report.json model_loads = %v, want %v", got, want)
		tr, _ := os.ReadFile(filepath.Join(out, "traces.jsonl"))
		t.Logf("traces:\n%s", tr)
	}
	if n := len(ol.Loads()); n != 7 {
		t.Errorf("fake Ollama loaded %d models, want 7", n)
	}
	if !strings.Contains(stdout, "loads") {
		t.Errorf("the table has no loads column:\n%s", stdout)
	}
	html, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), "model loads") {
		t.Error("report.html does not show the model loads")
	}
}

// TestOllamaFrontLoadDuration: the proxy's own /api/chat and /api/generate
// answer Ollama's load_duration (ns) on the done line, as Ollama does: the
// time this request's model calls spent loading their models, read by
// Ollama's Go client. The reflexive chain loads small and big (300 ms
// each); simple mode on M2 right after finds big loaded. eval_duration is
// the calls' time without their loads, so that the two fit within
// total_duration as Ollama's do.
func TestOllamaFrontLoadDuration(t *testing.T) {
	for _, tt := range []struct {
		name     string
		generate bool
		stream   bool
	}{
		{"chat whole", false, false},
		{"chat streamed", false, true},
		{"generate whole", true, false},
		{"generate streamed", true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ol := fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply {
				return fakeollama.Reply{Content: []string{"what " + req.Model + " found"}, PromptEvalCount: 10, EvalCount: 3}
			})
			// 6 GB at 20 GB/s: a load takes 300 ms.
			ol.SetMemory(fakeollama.Memory{Budget: 10e9, Bandwidth: 20e9, Sizes: map[string]int64{"small": 6e9, "big": 6e9}})
			oa := fakeopenai.New(t)
			base := startWired(t, fmt.Sprintf(loadsConfig, ol.URL, oa.BaseURL()))
			client := ollamaClient(t, base)

			chained := ollamaMetrics(t, client, "chain/reflexive", tt.generate, tt.stream)
			if got, want := chained.LoadDuration, 500*time.Millisecond; got < want {
				t.Errorf("reflexive load_duration = %v, want at least %v (two 300 ms loads)", got, want)
			}
			if sum := chained.LoadDuration + chained.EvalDuration; sum > chained.TotalDuration {
				t.Errorf("load_duration + eval_duration = %v + %v, want within total_duration %v", chained.LoadDuration, chained.EvalDuration, chained.TotalDuration)
			}
			simple := ollamaMetrics(t, client, "chain/simple", tt.generate, tt.stream)
			if got, want := simple.LoadDuration, 100*time.Millisecond; got >= want {
				t.Errorf("simple load_duration = %v, want under %v (big is loaded)", got, want)
			}
			if simple.TotalDuration <= 0 {
				t.Errorf("simple total_duration = %v, want it set", simple.TotalDuration)
			}
		})
	}
}

// ollamaClient is Ollama's Go client on the proxy at base.
func ollamaClient(t *testing.T, base string) *api.Client {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	return api.NewClient(u, http.DefaultClient)
}

// ollamaMetrics sends one question to model through /api/chat (or
// /api/generate) and returns the done line's counters.
func ollamaMetrics(t *testing.T, client *api.Client, model string, generate, stream bool) api.Metrics {
	t.Helper()
	var m api.Metrics
	var done bool
	var err error
	if generate {
		err = client.Generate(t.Context(), &api.GenerateRequest{Model: model, Prompt: "compare the two plans step by step", Stream: &stream},
			func(r api.GenerateResponse) error {
				m, done = r.Metrics, r.Done
				return nil
			})
	} else {
		err = client.Chat(t.Context(), &api.ChatRequest{Model: model, Messages: []api.Message{{Role: "user", Content: "compare the two plans step by step"}}, Stream: &stream},
			func(r api.ChatResponse) error {
				m, done = r.Metrics, r.Done
				return nil
			})
	}
	if err != nil || !done {
		t.Fatalf("%s: done %t, err %v", model, done, err)
	}
	return m
}

// TestConcurrentCallsOneLoad: two calls that arrive together at a node
// whose model is not loaded (max_concurrency 2) both wait for the one load,
// and Ollama reports it to each (its load_duration runs from the request's
// arrival to the runner's readiness): each trace keeps its call's wait,
// /metrics counts the load once.
func TestConcurrentCallsOneLoad(t *testing.T) {
	ol := fakeollama.NewFunc(t, func(int, *api.ChatRequest) fakeollama.Reply {
		return fakeollama.Reply{Content: []string{"an answer"}}
	})
	// 6 GB at 20 GB/s: a load takes 300 ms.
	ol.SetMemory(fakeollama.Memory{Budget: 10e9, Bandwidth: 20e9, Sizes: map[string]int64{"big": 6e9}})
	base := startWired(t, fmt.Sprintf(`
nodes:
  - {name: M2, provider: ollama, base_url: %q, model: big, max_concurrency: 2}
chain:
  stages: [{node: M2, max_turns: 1}]
  simple_node: M2
tools:
  root: ""
`, ol.URL))
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { chatCalls(t, base, "M2") })
	}
	wg.Wait()
	if got := len(ol.Loads()); got != 1 {
		t.Fatalf("fake Ollama loaded %d models, want 1", got)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`chainproxy_model_loads_total{model="big",node="M2"} 1`,
		`chainproxy_model_load_seconds_count{model="big",node="M2"} 1`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestEvalCountsSharedLoadOnce: items asked together that wait for one
// model load count it once in the report, as the server loaded it once;
// Ollama reports the load to each waiting call.
func TestEvalCountsSharedLoadOnce(t *testing.T) {
	ol := fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply {
		return fakeollama.Reply{Content: []string{"4"}}
	})
	// 6 GB at 10 GB/s: a load takes 600 ms, long enough for both items'
	// calls to arrive while it runs.
	ol.SetMemory(fakeollama.Memory{Budget: 10e9, Bandwidth: 10e9, Sizes: map[string]int64{"small": 6e9}})
	cfg, data, out := evalFiles(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, base_url: %[1]q, model: small, max_concurrency: 2}
chain:
  stages: [{node: OL1, max_turns: 1}]
  simple_node: OL1
tools:
  root: ""
`, ol.URL), `{"id":"one","question":"What is 2+2?","answer":"4","match":"number"}
{"id":"two","question":"What is 1+3?","answer":"4","match":"number"}
`)
	code, _, stderr := runEvalCmd(t, "-config", cfg, "-data", data, "-modes", "OL1", "-concurrency", "2", "-out", out)
	if code != 0 {
		t.Fatalf("eval exit code = %d, want 0; stderr:\n%s", code, stderr)
	}
	_, raw := readReport(t, out)
	var got float64
	for _, m := range raw["modes"].([]any) {
		got += m.(map[string]any)["model_loads"].(float64)
	}
	if want := len(ol.Loads()); got != float64(want) {
		t.Errorf("report.json model_loads = %v, want %d (the fake's loads)", got, want)
	}
}

// evalFiles writes an eval run's configuration and data set in a
// temporary directory and returns their paths and the report's.
func evalFiles(t *testing.T, config, set string) (cfg, data, out string) {
	t.Helper()
	dir := t.TempDir()
	cfg, data = filepath.Join(dir, "proxy.yaml"), filepath.Join(dir, "set.jsonl")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(data, []byte(set), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, data, filepath.Join(dir, "out")
}
