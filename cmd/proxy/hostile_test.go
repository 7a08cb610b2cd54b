package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
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
)

// dumpHeaders is every header of r and its URL, as an echoing server shows
// them.
func dumpHeaders(r *http.Request) string {
	var lines []string
	for k, v := range r.Header {
		lines = append(lines, k+": "+strings.Join(v, ","))
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
		if req.Model == "b" {
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": "invalid api key " + r.Header.Get("Authorization") + "; you sent " + dumpHeaders(r)}})
			return
		}
		msg := map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
			map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "echo_ok", "arguments": "{}"}},
			map[string]any{"id": "call_2", "type": "function", "function": map[string]any{"name": "echo_err", "arguments": "{}"}},
		}}
		finish := "tool_calls"
		if slices.ContainsFunc(req.Messages, func(m struct{ Role, Content string }) bool { return m.Role == "tool" }) {
			msg, finish = map[string]any{"role": "assistant", "content": "the tools answered"}, "stop"
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

func TestEchoedSecretsNeverLeave(t *testing.T) {
	up, tool := echoUpstream(t), echoTool(t)
	nodeURL := strings.Replace(up.URL, "http://", "http://nodeuser:"+nodePass+"@", 1) + "/v1"
	cfg := fmt.Sprintf(`server: {addr: "127.0.0.1:0", api_keys: [%q]}
nodes:
  - {name: A, provider: openai, base_url: %q, model: a, api_key: %q}
  - {name: B, provider: openai, base_url: %q, model: b, api_key: %q}
chain:
  stages: [{node: A, max_turns: 3, tools: true}, {node: B, max_turns: 1}]
  simple_node: A
  max_total_turns: 6
tools:
  root: %q
  http:
    - {name: echo_ok, url: %q, read_only: true, headers: {Authorization: "Bearer %s", X-Api-Key: %q}}
    - {name: echo_err, url: %q, read_only: true, headers: {Authorization: "Bearer %s", X-Api-Key: %q}}
`, serverKey, up.URL+"/v1", groqKey, nodeURL, vllmToken, t.TempDir(),
		tool.URL+"/ok?token="+toolQuery, toolBearer, toolKey, tool.URL+"/err?token="+toolQuery, toolBearer, toolKey)
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
	do("POST", "/chat", `{"message":"call the tools","mode":"reflexive","stream":true}`)
	do("POST", "/chat", `{"message":"call the tools","mode":"reflexive"}`)
	do("GET", "/readyz", "")
	stop()
	<-code
	outputs = append(outputs, "log: "+logs.String())

	secrets := []string{serverKey, groqKey, vllmToken, nodePass, toolQuery, toolBearer, toolKey,
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
	for _, want := range []string{"X-Api-Key: ***", "invalid api key Bearer ***"} {
		if !strings.Contains(all, want) {
			t.Errorf("no output shows the echo %q: the hostile servers did not do their part\n%.3000s", want, all)
		}
	}
}
