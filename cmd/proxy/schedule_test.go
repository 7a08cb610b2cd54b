package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httputil"
	neturl "net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"chainproxy/internal/fakeollama"
)

// postChain sends one reflexive request, answered whole, and checks it
// succeeds.
func postChain(t *testing.T, base, question string) {
	t.Helper()
	body := fmt.Sprintf(`{"model": "chain/reflexive", "messages": [{"role": "user", "content": %q}]}`, question)
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("POST %q: status %d, want 200", question, resp.StatusCode)
	}
}

// m1Load is how long the one-GPU fake of oneGPU takes to load m1.
const m1Load = 300 * time.Millisecond

// oneGPU starts a fake Ollama answering with script whose memory holds o
// beside m1 or m2, not m1 beside m2 (m1 loads in m1Load), and the proxy
// wired over it: OL1 on o (keep_loaded), M1 on m1, M2 on m2, the chain's
// stages as given (YAML flow), simple_node simple, and as many turns in
// all as the stages allow.
func oneGPU(t *testing.T, script func(int, *api.ChatRequest) fakeollama.Reply, stages, simple string, turns int) (*fakeollama.Server, string) {
	t.Helper()
	fake := fakeollama.NewFunc(t, script)
	fake.SetMemory(fakeollama.Memory{
		Budget:    12e9,
		Bandwidth: 10e9 / m1Load.Seconds(),
		Sizes:     map[string]int64{"o": 1e9, "m1": 10e9, "m2": 6e9},
	})
	return fake, startWired(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, base_url: %[1]q, model: o, keep_loaded: true}
  - {name: M1, provider: ollama, base_url: %[1]q, model: m1}
  - {name: M2, provider: ollama, base_url: %[1]q, model: m2}
chain:
  stages: %[2]s
  simple_node: %[3]s
  max_total_turns: %[4]d
`, fake.URL, stages, simple, turns))
}

// oneTurnEach is the chain of oneGPU with one turn a stage.
const oneTurnEach = "[{node: OL1, max_turns: 1}, {node: M1, max_turns: 1}, {node: M2, max_turns: 1}]"

// postOK posts the JSON body to url and returns the answer, failing the
// test unless it is a 200.
func postOK(t *testing.T, url, body string) []byte {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, out)
	}
	return out
}

// Chains that arrive together on one GPU holding one model at a time run
// their first stages on the loaded model before the switch to the second
// (issue 44): two loads, where first-come order reloads at every call.
func TestChainsGroupedByLoadedModel(t *testing.T) {
	fake := fakeollama.NewFunc(t, func(int, *api.ChatRequest) fakeollama.Reply {
		return fakeollama.Reply{Content: []string{"A finding."}, Delay: 10 * time.Millisecond}
	})
	fake.SetMemory(fakeollama.Memory{
		Budget:    15e9,
		Bandwidth: 10e9 / 0.8, // a load takes 0.8 s
		Sizes:     map[string]int64{"a": 10e9, "b": 10e9},
	})
	base := startWired(t, fmt.Sprintf(`
nodes:
  - {name: A, provider: ollama, base_url: %q, model: a}
  - {name: B, provider: ollama, base_url: %q, model: b}
chain:
  stages: [{node: A, max_turns: 1}, {node: B, max_turns: 1}]
  simple_node: A
  max_total_turns: 2
`, fake.URL, fake.URL))
	const chains = 4
	var wg sync.WaitGroup
	for i := range chains {
		wg.Go(func() { postChain(t, base, fmt.Sprintf("Question %d: review this plan.", i)) })
	}
	wg.Wait()
	if got, want := len(fake.Requests()), 2*chains; got != want {
		t.Errorf("calls = %d, want %d", got, want)
	}
	// a for the first stages, b for the second, and a again once the last
	// chain has ended, for the next request (TestChainEndLoadsWhatComesFirst).
	waitLoads(t, fake, "a", "b", "a")
}

// waitLoads waits until the models fake has loaded are want, the last of
// them done, and fails the test if they are not within 5 s.
func waitLoads(t *testing.T, fake *fakeollama.Server, want ...string) {
	t.Helper()
	var loads []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		loads = loads[:0]
		for _, l := range fake.Loads() {
			loads = append(loads, l.Model)
		}
		held := slices.ContainsFunc(fake.Loaded(), func(r fakeollama.Running) bool { return r.Model == want[len(want)-1] })
		if slices.Equal(loads, want) && held || time.Now().After(deadline) {
			break
		}
	}
	if !slices.Equal(loads, want) {
		t.Fatalf("loads = %q, want %q", loads, want)
	}
}

// A chain's later stage's model loads while its first stage works, once the
// server was seen holding both at once, and a keep_loaded node's calls ask
// Ollama to keep its model for good (keep_alive -1).
func TestLaterStageLoadsEarly(t *testing.T) {
	const firstStage = time.Second // OL1's answer takes at least this long
	// o and m1 fit together, m1 and m2 do not: every chain reloads m1.
	fake, base := oneGPU(t, func(_ int, req *api.ChatRequest) fakeollama.Reply {
		if req.Model == "o" {
			return fakeollama.Reply{Content: []string{"Raw findings."}, Delay: firstStage}
		}
		return fakeollama.Reply{Content: []string{"An answer."}, Delay: 10 * time.Millisecond}
	}, oneTurnEach, "M2", 3)
	// simple_node M2 keeps m2 loaded once the first chain ends (a chain's
	// end loads m1 again for the next one with simple_node OL1:
	// TestChainEndLoadsWhatComesFirst).
	postChain(t, base, "First: review this plan.")
	before := len(fake.Loads())
	sent := time.Now()
	postChain(t, base, "Second: review this plan.")
	var m1 *fakeollama.LoadEvent
	for _, l := range fake.Loads()[before:] {
		if l.Model == "m1" {
			m1 = &l
		}
	}
	if m1 == nil {
		t.Fatalf("second chain's loads = %v, want one of m1", fake.Loads()[before:])
	}
	if got := m1.Start.Sub(sent); got >= firstStage/2 {
		t.Errorf("m1's load began %v after the request, want it while OL1 answers (under %v)", got, firstStage/2)
	}
	for _, b := range fake.Bodies() {
		if b["model"] == "o" && b["keep_alive"] != float64(-1) {
			t.Errorf("OL1's call keep_alive = %v, want -1", b["keep_alive"])
		}
	}
}

// TestChainEndLoadsWhatComesFirst: once a chain has ended, the server
// loads what the next request calls first, so that a user reading the
// answer does not make the next chain wait for its second stage's model
// (issue 44: M1 and M2 do not fit together, and every chain ended on M2).
// With the simple node on the last stage's model, that model stays:
// simple requests would pay the load instead.
func TestChainEndLoadsWhatComesFirst(t *testing.T) {
	for _, tc := range []struct {
		simple string
		// rest is the model loaded once the first chain has ended, or ""
		// for none; loads are the second chain's.
		rest  string
		loads []string
	}{
		{simple: "OL1", rest: "m1", loads: []string{"m2"}},
		{simple: "M2", rest: "", loads: []string{"m1", "m2"}},
	} {
		t.Run("simple_node "+tc.simple, func(t *testing.T) {
			// o and m1 fit together, m1 and m2 do not.
			fake, base := oneGPU(t, func(int, *api.ChatRequest) fakeollama.Reply {
				return fakeollama.Reply{Content: []string{"An answer."}, Delay: 10 * time.Millisecond}
			}, oneTurnEach, tc.simple, 3)
			rest := []string{}
			if tc.rest != "" {
				rest = append(rest, tc.rest)
			}
			postChain(t, base, "First: review this plan.")
			// From a cold server: o, m1, m2, then what the end loads. The
			// user reads the answer for longer than a load takes.
			want := append([]string{"o", "m1", "m2"}, rest...)
			time.Sleep(3 * m1Load)
			waitLoads(t, fake, want...) // by the first chain and after it
			calls := len(fake.Requests())
			postChain(t, base, "Second: review this plan.")
			waitLoads(t, fake, append(append(want, tc.loads...), rest...)...) // by the second chain and after it
			waited := fake.LoadDurations()[calls:]
			for i, req := range fake.Requests()[calls:] {
				if loaded := !slices.Contains(tc.loads, req.Model); loaded && waited[i] >= m1Load/2 {
					t.Errorf("second chain's call of %s waited %v for its model, want it loaded", req.Model, waited[i])
				}
			}
			// /metrics counts every load the server made, early ones too,
			// a load that a call waited for as well once; not o's, which
			// takes 30 ms, under the 100 ms a loaded model may take to
			// answer.
			nodes := map[string]string{"o": "OL1", "m1": "M1", "m2": "M2"}
			byNode := map[string]int{}
			for _, l := range fake.Loads() {
				if l.Took >= 100*time.Millisecond {
					byNode[nodes[l.Model]]++
				}
			}
			waitMetricLoads(t, base, byNode)
		})
	}
}

// waitMetricLoads waits until /metrics counts want's loads by node in
// chainproxy_model_loads_total, and fails the test if it does not within
// 5 s (an early load is counted once the server has answered it).
func waitMetricLoads(t *testing.T, base string, want map[string]int) {
	t.Helper()
	var got map[string]int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got = map[string]int{}
		for line := range strings.Lines(string(b)) {
			rest, ok := strings.CutPrefix(line, "chainproxy_model_loads_total{")
			if !ok {
				continue
			}
			labels, value, _ := strings.Cut(rest, "} ")
			_, node, _ := strings.Cut(labels, `node="`)
			n, _ := strconv.Atoi(strings.TrimSpace(value))
			got[strings.TrimSuffix(node, `"`)] = n
		}
		if maps.Equal(got, want) || time.Now().After(deadline) {
			break
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("chainproxy_model_loads_total by node = %v, want %v (the server's loads)", got, want)
	}
}

// TestKeepLoadedWinsOverClient: a keep_loaded node's calls are sent
// keep_alive -1 wherever the node serves (the chain's first stage, a
// later one, simple_node, a relay to it) and whatever keep_alive the
// client sends: a client's keep_alive wins only on nodes the operator did
// not keep loaded, since the load scheduling counts a kept model as held
// for good. With base_urls, every host is sent -1.
func TestKeepLoadedWinsOverClient(t *testing.T) {
	hosts := [2]*fakeollama.Server{}
	for i := range hosts {
		hosts[i] = fakeollama.NewFunc(t, func(int, *api.ChatRequest) fakeollama.Reply {
			return fakeollama.Reply{Content: []string{"A finding."}}
		})
	}
	other := fakeollama.NewFunc(t, func(int, *api.ChatRequest) fakeollama.Reply {
		return fakeollama.Reply{Content: []string{"An answer."}}
	})
	base := startWired(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, base_urls: [%q, %q], model: o, keep_loaded: true}
  - {name: M1, provider: ollama, base_url: %q, model: m1}
chain:
  stages: [{node: OL1, max_turns: 1}, {node: M1, max_turns: 1}, {node: OL1, max_turns: 1}]
  simple_node: OL1
  max_total_turns: 3
`, hosts[0].URL, hosts[1].URL, other.URL))
	for _, model := range []string{"chain/reflexive", "chain/simple", "OL1", "chain/simple", "OL1"} {
		for _, keep := range []string{`"keep_alive": 0`, `"keep_alive": "5m"`} {
			body := fmt.Sprintf(`{"model": %q, "stream": false, %s, "messages": [{"role": "user", "content": "review this plan"}]}`, model, keep)
			resp, err := http.Post(base+"/api/chat", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s with %s: status %d, want 200", model, keep, resp.StatusCode)
			}
		}
	}
	for i, h := range hosts {
		bodies := h.Bodies()
		if len(bodies) == 0 {
			t.Errorf("host %d got no call, want some", i)
		}
		for _, b := range bodies {
			if b["keep_alive"] != float64(-1) {
				t.Errorf("host %d: OL1's call keep_alive = %v, want -1", i, b["keep_alive"])
			}
		}
	}
	// M1 is not kept: the chain sends its node's keep_alive (none).
	for _, b := range other.Bodies() {
		if ka, ok := b["keep_alive"]; ok {
			t.Errorf("M1's call keep_alive = %v, want none", ka)
		}
	}
}

// TestScheduledServerDownThenBack: nodes whose Ollama server the load
// scheduling shares, the server down at first (docker compose starts it
// with the proxy), then back on the same address: while it is down the
// chains fail with 502 (their calls, early loads and reads of what the
// server holds failing); once it is back, concurrent chains all answer at
// once, none held by what the failures left in the scheduling's account.
func TestScheduledServerDownThenBack(t *testing.T) {
	addr := deadAddr(t)
	u := "http://" + addr
	base := startWired(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, base_url: %[1]q, model: o, keep_loaded: true}
  - {name: M1, provider: ollama, base_url: %[1]q, model: m1}
  - {name: M2, provider: ollama, base_url: %[1]q, model: m2}
chain:
  stages: [{node: OL1, max_turns: 1}, {node: M1, max_turns: 1}, {node: M2, max_turns: 1}]
  simple_node: OL1
  max_total_turns: 3
tools:
  root: ""
`, u))
	chat := func() int {
		resp, err := http.Post(base+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"chain/reflexive","messages":[{"role":"user","content":"review this plan step by step"}]}`))
		if err != nil {
			t.Error(err)
			return 0
		}
		defer resp.Body.Close()
		return resp.StatusCode
	}
	for i := range 3 {
		if code := chat(); code != http.StatusBadGateway {
			t.Fatalf("chain %d with the server down: %d, want 502", i, code)
		}
	}

	fake := fakeollama.NewFunc(t, func(int, *api.ChatRequest) fakeollama.Reply {
		return fakeollama.Reply{Content: []string{"A finding."}, Delay: 10 * time.Millisecond}
	})
	fake.SetMemory(fakeollama.Memory{
		Budget:    12e9,
		Bandwidth: 100e9,
		Sizes:     map[string]int64{"o": 1e9, "m1": 10e9, "m2": 6e9},
	})
	target, _ := neturl.Parse(fake.URL)
	serveAt(t, addr, httputil.NewSingleHostReverseProxy(target))

	const chains = 4
	var wg sync.WaitGroup
	codes := make([]int, chains)
	for i := range chains {
		wg.Go(func() { codes[i] = chat() })
	}
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("chain %d after the server is back: %d, want 200", i, c)
		}
	}
	if got, want := len(fake.Requests()), 3*chains; got != want {
		t.Errorf("calls = %d, want %d", got, want)
	}
}

// TestNoEarlyLoadWithKeepAliveZero: a later stage whose node has
// keep_alive 0 is not loaded early: Ollama takes an empty generate with
// keep_alive 0 for an unload (routes.go GenerateHandler, ollama stop), so
// the early load would load nothing, and the scheduling would count the
// model as held.
func TestNoEarlyLoadWithKeepAliveZero(t *testing.T) {
	fake := fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply {
		if req.Model == "o" {
			return fakeollama.Reply{Content: []string{"Raw findings."}, Delay: 200 * time.Millisecond}
		}
		return fakeollama.Reply{Content: []string{"An answer."}, Delay: 10 * time.Millisecond}
	})
	// o and m2 are seen held together (7 GB): m1 (5 GB) fits beside o.
	fake.SetMemory(fakeollama.Memory{
		Budget:    12e9,
		Bandwidth: 100e9,
		Sizes:     map[string]int64{"o": 1e9, "m1": 5e9, "m2": 6e9},
	})
	target, _ := neturl.Parse(fake.URL)
	fwd := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	var preloads []string // model and keep_alive of each empty generate
	addr := deadAddr(t)
	serveAt(t, addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/generate" {
			body, _ := io.ReadAll(r.Body)
			var g struct {
				Model     string `json:"model"`
				Prompt    string `json:"prompt"`
				KeepAlive any    `json:"keep_alive"`
			}
			if err := json.Unmarshal(body, &g); err == nil && g.Prompt == "" {
				mu.Lock()
				preloads = append(preloads, fmt.Sprintf("%s %v", g.Model, g.KeepAlive))
				mu.Unlock()
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		fwd.ServeHTTP(w, r)
	}))
	u := "http://" + addr
	base := startWired(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, base_url: %[1]q, model: o, keep_loaded: true}
  - {name: M1, provider: ollama, base_url: %[1]q, model: m1, keep_alive: "0"}
  - {name: M2, provider: ollama, base_url: %[1]q, model: m2}
chain:
  stages: [{node: OL1, max_turns: 1}, {node: M1, max_turns: 1}, {node: M2, max_turns: 1}]
  simple_node: OL1
  max_total_turns: 3
tools:
  root: ""
`, u))
	// The first chain shows the server holding o and m2 at once; the
	// third warms with what the read after it learned.
	for _, q := range []string{"First", "Second", "Third"} {
		postChain(t, base, q+": review this plan.")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range preloads {
		if strings.HasPrefix(p, "m1 ") {
			t.Errorf("early load %q sent, want none for a keep_alive 0 node", p)
		}
	}
}

// TestKeepLoadedSharedRunner: a node on the same model and server as a
// keep_loaded one (the summarizer on OL1's model, typically) sends
// keep_alive -1 too: Ollama runs one runner for both and takes each
// request's keep_alive for it (v0.17.4 server/sched.go, useLoadedRunner),
// so the other node's default would have the kept model unloaded five
// minutes after its call.
func TestKeepLoadedSharedRunner(t *testing.T) {
	fake := fakeollama.NewFunc(t, func(int, *api.ChatRequest) fakeollama.Reply {
		return fakeollama.Reply{Content: []string{"A finding."}}
	})
	base := startWired(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, base_url: %[1]q, model: o, keep_loaded: true}
  - {name: M1, provider: ollama, base_url: %[1]q, model: "o:latest"}
  - {name: M2, provider: ollama, base_url: %[1]q, model: m2}
chain:
  stages: [{node: OL1, max_turns: 1}, {node: M1, max_turns: 1}, {node: M2, max_turns: 1}]
  simple_node: M1
  max_total_turns: 3
tools:
  root: ""
`, fake.URL))
	postChain(t, base, "review this plan")
	var kept, other int
	for _, b := range fake.Bodies() {
		switch {
		case b["model"] == "m2":
			other++
			if ka, ok := b["keep_alive"]; ok {
				t.Errorf("M2's call keep_alive = %v, want none", ka)
			}
		case b["keep_alive"] != float64(-1):
			t.Errorf("%v's call keep_alive = %v, want -1", b["model"], b["keep_alive"])
		default:
			kept++
		}
	}
	if kept != 2 || other != 1 {
		t.Errorf("calls on o, m2 = %d, %d, want 2, 1", kept, other)
	}
}

// TestNoEarlyLoadForRefusedRequest: a reflexive request refused before
// anything runs (an image no node can see) loads no model early: its
// stages never run, and the load would evict what other chains use.
func TestNoEarlyLoadForRefusedRequest(t *testing.T) {
	fake := fakeollama.NewFunc(t, func(int, *api.ChatRequest) fakeollama.Reply {
		return fakeollama.Reply{Content: []string{"A finding."}, Delay: 10 * time.Millisecond}
	})
	// o beside m1 or m2, not m1 beside m2: once the server was seen
	// holding o and m2, m1 fits beside o and may load early.
	fake.SetMemory(fakeollama.Memory{
		Budget:    8e9,
		Bandwidth: 100e9,
		Sizes:     map[string]int64{"o": 1e9, "m1": 5e9, "m2": 6e9},
	})
	var mu sync.Mutex
	preloads := 0
	target, _ := neturl.Parse(fake.URL)
	fwd := httputil.NewSingleHostReverseProxy(target)
	addr := deadAddr(t)
	serveAt(t, addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/generate" {
			mu.Lock()
			preloads++
			mu.Unlock()
		}
		fwd.ServeHTTP(w, r)
	}))
	base := startWired(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, base_url: %[1]q, model: o, keep_loaded: true}
  - {name: M1, provider: ollama, base_url: %[1]q, model: m1}
  - {name: M2, provider: ollama, base_url: %[1]q, model: m2}
chain:
  stages: [{node: OL1, max_turns: 1}, {node: M1, max_turns: 1}, {node: M2, max_turns: 1}]
  simple_node: M2
  max_total_turns: 3
tools:
  root: ""
`, "http://"+addr))
	// Three chains show the server holding o and m2 at once, and leave
	// m1 evicted, fitting beside o (simple_node M2: a chain's end keeps
	// m2, TestChainEndLoadsWhatComesFirst).
	for _, q := range []string{"First", "Second", "Third"} {
		postChain(t, base, q+": review this plan.")
	}
	mu.Lock()
	before := preloads
	mu.Unlock()
	const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
	for i := range 5 {
		body := `{"model": "chain/reflexive", "messages": [{"role": "user", "content": [{"type": "text", "text": "review this plan step by step"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,` + png + `"}}]}]}`
		resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("request %d with an image: status %d, want 400", i, resp.StatusCode)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got := preloads - before; got != 0 {
		t.Errorf("early loads for refused requests = %d, want 0", got)
	}
}

// TestResumedChainLoadsLaterStagesEarly: a chain resumed with the client's
// tool results loads its later stages' models early again, from the stage
// it resumes in: while it waited for the client, another request evicted
// the model it had loaded early (m1, which does not fit beside m2).
func TestResumedChainLoadsLaterStagesEarly(t *testing.T) {
	const resumedTurn = time.Second // OL1's turn after the tool result
	// o and m1 fit together, m1 and m2 do not.
	fake, base := oneGPU(t, func(_ int, req *api.ChatRequest) fakeollama.Reply {
		toolResult := slices.ContainsFunc(req.Messages, func(m api.Message) bool { return m.Role == "tool" })
		switch {
		case req.Model == "o" && len(req.Tools) > 0 && !toolResult:
			return fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{{ID: "call_w", Name: "get_weather", Args: map[string]any{"city": "Paris"}}}}
		case req.Model == "o" && toolResult:
			return fakeollama.Reply{Content: []string{"Raw findings."}, Delay: resumedTurn}
		}
		return fakeollama.Reply{Content: []string{"An answer."}, Delay: 10 * time.Millisecond}
	}, "[{node: OL1, max_turns: 2, tools: true}, {node: M1, max_turns: 1}, {node: M2, max_turns: 1}]", "M2", 4)
	postChain(t, base, "First: review this plan.") // the scheduling learns the server's memory
	post := func(model, messages string) []byte {
		t.Helper()
		tool := `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
		return postOK(t, base+"/v1/chat/completions", `{"model":`+strconv.Quote(model)+`,"messages":[`+messages+`],`+tool+`}`)
	}
	user := `{"role":"user","content":"Review this plan against the weather in Paris."}`
	var paused struct {
		Choices []struct {
			Message json.RawMessage `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(post("chain/reflexive", user), &paused); err != nil || len(paused.Choices) != 1 {
		t.Fatalf("paused answer: %v", err)
	}
	var call struct {
		ToolCalls []struct{ ID string } `json:"tool_calls"`
	}
	if err := json.Unmarshal(paused.Choices[0].Message, &call); err != nil || len(call.ToolCalls) != 1 {
		t.Fatalf("paused answer's message = %s, want one tool call", paused.Choices[0].Message)
	}
	// Another client's request for M2 evicts m1 meanwhile.
	post("chain/simple", `{"role":"user","content":"hello"}`)
	before := len(fake.Loads())
	sent := time.Now()
	resumed := post("chain/reflexive", user+","+string(paused.Choices[0].Message)+
		fmt.Sprintf(`,{"role":"tool","tool_call_id":%q,"content":"sunny"}`, call.ToolCalls[0].ID))
	if !strings.Contains(string(resumed), "resumed in stage OL1") {
		t.Fatalf("the second request did not resume the chain: %.400s", resumed)
	}
	var m1 *fakeollama.LoadEvent
	for _, l := range fake.Loads()[before:] {
		if l.Model == "m1" {
			m1 = &l
		}
	}
	if m1 == nil {
		t.Fatalf("resumed chain's loads = %v, want one of m1", fake.Loads()[before:])
	}
	if got := m1.Start.Sub(sent); got >= resumedTurn/2 {
		t.Errorf("m1's load began %v after the resuming request, want it while OL1 answers (under %v)", got, resumedTurn/2)
	}
}
