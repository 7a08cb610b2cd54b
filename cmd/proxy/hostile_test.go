package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Hostile servers: an upstream and a tool endpoint that echo every secret
// they were sent. None of the configured secrets may reach an answer, a
// trace, the cockpit's stream, /readyz or a log line, at debug level with
// prompts logged.

// Secrets of the hostile configuration, each in a shape the generic
// patterns do not know (or did not, before the redactor by value).
const (
	serverKey  = "server-key-AAAA-123"
	groqKey    = "gsk_groqkeyBBBB123"
	vllmToken  = "vllm-token-CCCC123"
	nodePass   = "pass-DDDD123"
	toolQuery  = "tool-query-FFFF123"
	toolBearer = "tool-bearer-GGGG123"
	toolKey    = "hf_toolkeyHHHH123"
	mcpBearer  = "mcp-bearer-IIII123"
	mcpEnv     = "mcp-env-token-JJJJ123"
	cToken     = "cnode-token-LLLL123"
)

// dumpHeaders is every header of r and its URL, as an echoing server shows
// them, and each credential bare: without its scheme, or a query value
// unescaped, so that only masking by value can catch it.
func dumpHeaders(r *http.Request) string {
	var lines []string
	for k, v := range r.Header {
		lines = append(lines, k+": "+strings.Join(v, ","))
		if f := strings.Fields(strings.Join(v, " ")); len(f) > 1 {
			lines = append(lines, "bare "+f[len(f)-1])
		}
	}
	for _, v := range r.URL.Query() {
		lines = append(lines, "bare "+strings.Join(v, " "))
	}
	sort.Strings(lines)
	return r.URL.String() + "\n" + strings.Join(lines, "\n")
}

// echoUpstream is an OpenAI-compatible server: model "a" calls the two
// echo tools, then answers; model "b" refuses every call with a 401 that
// echoes what it got, as its /models does.
func echoUpstream(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": "invalid key; you sent " + dumpHeaders(r)}})
			return
		}
		var req struct {
			Model    string
			Messages []struct{ Role, Content string }
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("upstream: %v", err)
		}
		if req.Model == "c" {
			// Fails mid-stream, in an error event that echoes the key.
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"}}]}\n\n")
			sseEvent(w, map[string]any{"error": map[string]any{"message": "quota exceeded for key " + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")}})
			return
		}
		if req.Model == "b" {
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": "invalid api key " + r.Header.Get("Authorization") + "; you sent " + dumpHeaders(r)}})
			return
		}
		msg := map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
			map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "echo_ok", "arguments": "{}"}},
			map[string]any{"id": "call_2", "type": "function", "function": map[string]any{"name": "echo_err", "arguments": "{}"}},
			map[string]any{"id": "call_3", "type": "function", "function": map[string]any{"name": "web__whoami", "arguments": "{}"}},
			map[string]any{"id": "call_4", "type": "function", "function": map[string]any{"name": "loc__env", "arguments": "{}"}},
		}}
		finish := "tool_calls"
		if slices.ContainsFunc(req.Messages, func(m struct{ Role, Content string }) bool { return m.Role == "tool" }) {
			// A hostile upstream writes the key it got into its answer.
			msg, finish = map[string]any{"role": "assistant", "content": "the tools answered; you sent me " + r.Header.Get("Authorization")}, "stop"
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "x", "object": "chat.completion", "created": 1, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}})
	}))
	t.Cleanup(s.Close)
	return s
}

// echoTool answers with what it got: /ok with 200, anything else with 500.
func echoTool(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/ok" {
			w.WriteHeader(http.StatusInternalServerError)
		}
		fmt.Fprintf(w, "you sent %s\n%s", dumpHeaders(r), body)
	}))
	t.Cleanup(s.Close)
	return s
}

// echoMCP is a streamable HTTP MCP server whose tool whoami answers with
// the headers it got.
func echoMCP(t *testing.T) *httptest.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "echo", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{Name: "whoami", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var lines []string
			if req.Extra != nil {
				for k, v := range req.Extra.Header {
					lines = append(lines, k+": "+strings.Join(v, ","), "bare "+strings.TrimPrefix(strings.Join(v, ","), "Bearer "))
				}
			}
			sort.Strings(lines)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "you sent " + strings.Join(lines, "\n")}}}, nil
		})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return ts
}

func TestEchoedSecretsNeverLeave(t *testing.T) {
	up, tool, mcpSrv := echoUpstream(t), echoTool(t), echoMCP(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	nodeURL := strings.Replace(up.URL, "http://", "http://nodeuser:"+nodePass+"@", 1) + "/v1"
	cfg := fmt.Sprintf(`server: {addr: "127.0.0.1:0", api_keys: [%q]}
nodes:
  - {name: A, provider: openai, base_url: %q, model: a, api_key: %q}
  - {name: B, provider: openai, base_url: %q, model: b, api_key: %q}
  - {name: C, provider: openai, base_url: %q, model: c, api_key: %q}
chain:
  stages: [{node: A, max_turns: 3, tools: true}, {node: B, max_turns: 1}]
  simple_node: A
  max_total_turns: 6
tools:
  root: %q
  http:
    - {name: echo_ok, url: %q, read_only: true, headers: {Authorization: "Bearer %s", X-Api-Key: %q}}
    - {name: echo_err, url: %q, read_only: true, headers: {Authorization: "Bearer %s", X-Api-Key: %q}}
  mcp:
    - {name: web, url: %q, headers: {Authorization: "Bearer %s"}}
    - {name: loc, command: [%q], env: {%s: "1", MCP_TOKEN: %q}, read_only_tools: [env]}
`, serverKey, up.URL+"/v1", groqKey, nodeURL, vllmToken, up.URL+"/v1", cToken, t.TempDir(),
		tool.URL+"/ok?token="+toolQuery, toolBearer, toolKey, tool.URL+"/err?token="+toolQuery, toolBearer, toolKey,
		mcpSrv.URL, mcpBearer, exe, serveEnv, mcpEnv)
	base, logs, stop, code := startProxy(t, cfg, "-log-level", "debug", "-log-prompts")

	var outputs []string
	do := func(method, path, body string) *http.Response {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+serverKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		outputs = append(outputs, method+" "+path+": "+string(b))
		return resp
	}
	ask := `{"model":"chain/reflexive","messages":[{"role":"user","content":"call the tools"}]`
	resp := do("POST", "/v1/chat/completions", ask+`}`)
	do("GET", "/v1/chain/traces/"+resp.Header.Get("X-Chain-Trace-Id"), "")
	resp = do("POST", "/v1/chat/completions", ask+`,"stream":true}`)
	do("GET", "/v1/chain/traces/"+resp.Header.Get("X-Chain-Trace-Id"), "")
	// Straight to the node that echoes its key in a 401: an error answer,
	// whole and streamed, with its trace.
	resp = do("POST", "/v1/chat/completions", `{"model":"B","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode < 400 {
		t.Errorf("model B: status %d, want an error answer", resp.StatusCode)
	}
	do("POST", "/v1/chat/completions", `{"model":"B","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	// A node failing after the stream began: the error chunk.
	do("POST", "/v1/chat/completions", `{"model":"C","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	do("POST", "/chat", `{"message":"hi","mode":"simple","stream":true}`)
	do("POST", "/chat", `{"message":"call the tools","mode":"reflexive","stream":true}`)
	do("POST", "/chat", `{"message":"call the tools","mode":"reflexive"}`)
	do("GET", "/readyz", "")
	stop()
	<-code
	outputs = append(outputs, "log: "+logs.String())

	secrets := []string{serverKey, groqKey, vllmToken, nodePass, toolQuery, toolBearer, toolKey, mcpBearer, mcpEnv, cToken,
		base64.StdEncoding.EncodeToString([]byte("nodeuser:" + nodePass))}
	all := strings.Join(outputs, "\n")
	for _, s := range secrets {
		if strings.Contains(all, s) {
			for _, o := range outputs {
				if i := strings.Index(o, s); i >= 0 {
					t.Errorf("secret %q in %.60s…: …%s…", s, o, o[max(0, i-120):min(len(o), i+60)])
				}
			}
		}
	}
	// The servers did echo: the test would prove nothing otherwise.
	for _, want := range []string{"X-Api-Key: ***", "invalid api key Bearer ***", "you sent me Bearer ***", "MCP_TOKEN=***", "Authorization: Bearer ***", "quota exceeded for key ***", "bare ***"} {
		if !strings.Contains(all, want) {
			t.Errorf("no output shows the echo %q: the hostile servers did not do their part\n%.3000s", want, all)
		}
	}
}

// heapPeak samples the heap in use every few milliseconds and returns a
// function that stops sampling and reports the peak above the heap at the
// start. The proxy runs in the test's process, so this is its heap (the
// fakes below generate what they send and hold none of it).
func heapPeak() (stop func() uint64) {
	base := heapInuse(true)
	var peak uint64
	done, finished := make(chan struct{}), make(chan struct{})
	go func() { // exits when stop closes done
		defer close(finished)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				peak = max(peak, heapInuse(false))
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-finished
		if peak < base {
			return 0
		}
		return peak - base
	}
}

func heapInuse(gc bool) uint64 {
	if gc {
		runtime.GC()
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// maxHeapGrowth is what one hostile request may add to the proxy's heap:
// the 4 MiB output cap, the copies a growing buffer leaves for the
// collector, and the request's own buffers. Without the caps the same
// requests held gigabytes.
const maxHeapGrowth = 64 << 20

// sseEvent writes one server-sent event.
func sseEvent(w io.Writer, v any) error {
	b, _ := json.Marshal(v)
	_, err := fmt.Fprintf(w, "data: %s\n\n", b)
	return err
}

// endlessUpstream streams content (model "endless") or one tool call whose
// arguments grow to 100 MiB (model "bigcall") until the proxy hangs up.
// A request carrying a tool result gets a short answer.
func endlessUpstream(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model    string
			Messages []struct{ Role string }
		}
		json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "text/event-stream")
		fl := http.NewResponseController(w)
		delta := func(d map[string]any) error {
			return sseEvent(w, map[string]any{"choices": []any{map[string]any{"index": 0, "delta": d}}})
		}
		if slices.ContainsFunc(req.Messages, func(m struct{ Role string }) bool { return m.Role == "tool" }) {
			delta(map[string]any{"content": "refused, fine"})
			sseEvent(w, map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}})
			fmt.Fprint(w, "data: [DONE]\n\n")
			return
		}
		chunk := strings.Repeat("all work and no play ", 50) // 1 KiB
		switch req.Model {
		case "endless":
			// Text that never repeats, so that only the cap stops it
			// (the repetition guard would cut a loop).
			for i := 0; r.Context().Err() == nil; i++ {
				line := fmt.Sprintf("Step %d: the value %x becomes %x after %d rounds.\n", i, i*7919, i*104729, i%97)
				if delta(map[string]any{"content": line}) != nil {
					return
				}
				if i%64 == 0 {
					fl.Flush()
				}
			}
		case "bigcall":
			call := func(args string, first bool) map[string]any {
				c := map[string]any{"index": 0, "function": map[string]any{"arguments": args}}
				if first {
					c["id"], c["type"], c["function"] = "call_big", "function", map[string]any{"name": "echo_ok", "arguments": args}
				}
				return map[string]any{"tool_calls": []any{c}}
			}
			delta(call(`{"q":"`, true))
			frag := strings.Repeat(chunk, 64) // 64 KiB
			for range 1600 {                  // 100 MiB
				if delta(call(frag, false)) != nil {
					return
				}
			}
			delta(call(`"}`, false))
			sseEvent(w, map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "tool_calls"}}})
			fmt.Fprint(w, "data: [DONE]\n\n")
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// streamAnswer posts a streamed chat request and returns the content it
// streamed, its last finish_reason and its trace.
func streamAnswer(t *testing.T, base, model string) (content, finish string, trace json.RawMessage) {
	t.Helper()
	resp, err := http.Post(base+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"`+model+`","stream":true,"messages":[{"role":"user","content":"go on"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: status %d: %s", model, resp.StatusCode, b)
	}
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta        struct{ Content string }
				FinishReason string `json:"finish_reason"`
			}
			Chain json.RawMessage
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("%s: bad chunk %.200s: %v", model, data, err)
		}
		for _, c := range ch.Choices {
			b.WriteString(c.Delta.Content)
			if c.FinishReason != "" {
				finish = c.FinishReason
			}
		}
		if ch.Chain != nil {
			trace = ch.Chain
		}
	}
	return b.String(), finish, trace
}

// TestEndlessStreamBounded: an upstream that streams without end costs the
// proxy its output cap, not what it sent: the answer stops at 4 MiB with
// finish_reason "length", and the trace says the proxy ended the call.
func TestEndlessStreamBounded(t *testing.T) {
	up := endlessUpstream(t)
	base, _, stop, code := startProxy(t, fmt.Sprintf(`server: {addr: "127.0.0.1:0"}
nodes:
  - {name: A, provider: openai, base_url: %q, model: endless, timeout: 60s}
chain: {stages: [{node: A, max_turns: 1}], simple_node: A, max_total_turns: 2}
`, up.URL+"/v1"))
	defer func() { stop(); <-code }()
	peak := heapPeak()
	content, finish, trace := streamAnswer(t, base, "A")
	grew := peak()
	t.Logf("endless stream: %d bytes relayed, heap peak +%d MiB", len(content), grew>>20)
	if finish != "length" || len(content) > 4<<20 || len(content) < 4<<20-2048 {
		t.Errorf("answer of %d bytes, finish %q; want about 4 MiB (nodes[].max_output_bytes) and length", len(content), finish)
	}
	if !strings.Contains(string(trace), "max_output_bytes") {
		t.Errorf("trace does not say the call was cut: %.600s", trace)
	}
	if grew > maxHeapGrowth {
		t.Errorf("heap grew by %d MiB, want at most %d MiB", grew>>20, maxHeapGrowth>>20)
	}
}

// TestHugeToolCallBounded: one streamed tool call whose arguments grow to
// 100 MiB is refused with an error the model sees; the proxy keeps no more
// than tools.max_args_bytes of it, and the trace no more than
// tools.trace_result_bytes.
func TestHugeToolCallBounded(t *testing.T) {
	up, tool := endlessUpstream(t), echoTool(t)
	base, _, stop, code := startProxy(t, fmt.Sprintf(`server: {addr: "127.0.0.1:0"}
nodes:
  - {name: A, provider: openai, base_url: %q, model: bigcall, timeout: 60s}
chain: {stages: [{node: A, max_turns: 2, tools: true}], simple_node: A, max_total_turns: 3}
tools:
  root: %q
  http: [{name: echo_ok, url: %q, read_only: true}]
`, up.URL+"/v1", t.TempDir(), tool.URL+"/ok"))
	defer func() { stop(); <-code }()
	peak := heapPeak()
	content, _, trace := streamAnswer(t, base, "chain/reflexive")
	grew := peak()
	t.Logf("100 MiB tool call: heap peak +%d MiB, trace %d bytes", grew>>20, len(trace))
	var tr struct {
		Stages []struct {
			ToolsUsed []struct {
				Name, Status, Result string
				Args                 json.RawMessage
			} `json:"tools_used"`
		}
	}
	if err := json.Unmarshal(trace, &tr); err != nil || len(tr.Stages) == 0 || len(tr.Stages[0].ToolsUsed) == 0 {
		t.Fatalf("trace without the call (%v): %.600s", err, trace)
	}
	u := tr.Stages[0].ToolsUsed[0]
	if u.Status != "error" || !strings.Contains(u.Result, "tools.max_args_bytes") {
		t.Errorf("call: status %q, result %.200q; want an error naming tools.max_args_bytes", u.Status, u.Result)
	}
	if len(u.Args) > 70<<10 {
		t.Errorf("trace keeps %d bytes of the arguments, want at most tools.trace_result_bytes (64 KiB)", len(u.Args))
	}
	if content != "refused, fine" {
		t.Errorf("answer %q, want the model's answer after the refusal", content)
	}
	if grew > maxHeapGrowth {
		t.Errorf("heap grew by %d MiB, want at most %d MiB", grew>>20, maxHeapGrowth>>20)
	}
}
