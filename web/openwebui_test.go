package web

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"chainproxy/chain"
	"chainproxy/config"
)

// TestOpenWebUIOllamaMode replays what Open WebUI's backend sends to an
// Ollama connection (OLLAMA_BASE_URL pointed at the proxy) and asserts
// what it reads from each answer. Open WebUI itself is a Python app that
// cannot be installed here (PyPI is out of reach, and its image could not
// be pulled: no Docker daemon), so the requests are read from its source,
// github.com/open-webui/open-webui:
//
//   - backend/open_webui/routers/ollama.py at 598282cf75de358215d045c617e70d28bc48929e:
//     get_all_models (GET /api/tags, then /api/ps: models[].model and
//     expires_at), get_ollama_versions (GET /api/version: "version" read as
//     dotted integers), show_model_info (POST /api/show {"model"}, the
//     answer passed to the browser), generate_chat_completion (POST
//     /api/chat: ":latest" added to a model name without a tag, which must
//     then be in the /api/tags listing; the body re-dumped by pydantic's
//     GenerateChatCompletionForm with exclude_none, so that a message keeps
//     only role, content, tool_calls and images; an error answer's "error"
//     read as the detail).
//   - backend/open_webui/utils/payload.py at 227ce3f63e9eabf4cbdff5f13be7967a869e0d91:
//     convert_payload_openai_to_ollama and convert_messages_openai_to_ollama
//     (a pasted picture's data: URL cut to its base64 in "images", the text
//     parts joined and stripped, tool calls with index, id and object
//     arguments and an empty content, "options" with keep_alive and think
//     moved to the root, tools passed as OpenAI wrote them).
//   - backend/open_webui/utils/response.py at b899de37951fd58e909472741b71e77bb2bddba8:
//     convert_streaming_response_ollama_to_openai (each NDJSON line's
//     model, message.content and done), and its later versions' usage
//     (prompt_eval_count, eval_count, eval_duration, total_duration).
func TestOpenWebUIOllamaMode(t *testing.T) {
	pic := pngBytes(t)
	b64 := base64.StdEncoding.EncodeToString(pic)
	u := imageProxy(t, imageChain)
	u.ov.SetModel("llava", "completion", "tools", "vision")
	for _, n := range []string{"OV", "OT", "MV", "MT"} {
		_ = u.eng.Probe(t.Context(), n) // as the proxy does at startup
	}
	// send_get_request and send_post_request: JSON content type on every
	// call, a bearer key when the connection has one (none here).
	get := func(path string) (int, []byte) {
		req, _ := http.NewRequest(http.MethodGet, u.url+path, nil)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.Bytes()
	}

	// The model list: /api/tags, then /api/ps for expiry times.
	status, body := get("/api/tags")
	var tags struct {
		Models []map[string]any `json:"models"`
	}
	if err := json.Unmarshal(body, &tags); status != 200 || err != nil {
		t.Fatalf("/api/tags: %d %s %v", status, body, err)
	}
	models := map[string]map[string]any{} // request.app.state.OLLAMA_MODELS
	for _, m := range tags.Models {
		id, _ := m["model"].(string)
		if id == "" {
			t.Fatalf("a model without \"model\": %v", m)
		}
		models[id] = m
	}
	for _, want := range []string{"chain/auto:latest", "chain/simple:latest", "chain/reflexive:latest", "OV:latest", "llava:latest"} {
		if models[want] == nil {
			t.Errorf("/api/tags lacks %s, which Open WebUI looks up after adding :latest", want)
		}
	}
	status, body = get("/api/ps")
	var ps struct {
		Models []map[string]any `json:"models"`
	}
	if err := json.Unmarshal(body, &ps); status != 200 || err != nil || len(ps.Models) == 0 {
		t.Fatalf("/api/ps: %d %s %v", status, body, err)
	}
	for _, m := range ps.Models {
		exp, _ := m["expires_at"].(string)
		if _, err := time.Parse(time.RFC3339Nano, exp); models[m["model"].(string)] == nil || err != nil {
			t.Errorf("/api/ps model %v: not listed by /api/tags, or expires_at %q not ISO 8601 (%v)", m["model"], exp, err)
		}
	}

	// The version: the lowest of the connections, compared as integers.
	status, body = get("/api/version")
	var version struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(body, &version); status != 200 || err != nil || !regexp.MustCompile(`^v?\d+(\.\d+)*(-.*)?$`).MatchString(version.Version) {
		t.Errorf("/api/version: %d %s", status, body)
	}

	// The model's details for the browser: it must be in the listing.
	r, err := httpPost(u.url+"/api/show", `{"model":"chain/auto:latest"}`)
	if err != nil || r.status != 200 {
		t.Fatalf("/api/show: %d %s %v", r.status, r.body, err)
	}
	var show map[string]any
	if err := json.Unmarshal(r.body, &show); err != nil {
		t.Fatal(err)
	}
	caps, _ := show["capabilities"].([]any)
	if !slices.Contains(caps, any("vision")) || !slices.Contains(caps, any("tools")) || show["details"] == nil || show["model_info"] == nil {
		t.Errorf("/api/show chain/auto:latest = %s", r.body)
	}

	// A chat with a pasted picture and a tool, streamed, then the turn
	// that sends the tool's result back: the bodies as pydantic dumps them
	// (no tool_call_id, no nulls).
	tool := `{"type":"function","function":{"name":"get_weather","description":"Get the weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}`
	first := `{"model":"chain/auto:latest","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"What is in this picture?","images":["` + b64 + `"]}],"options":{"temperature":0.8,"top_k":40,"num_ctx":8192},"stream":true,"keep_alive":"5m","tools":[` + tool + `]}`
	second := `{"model":"chain/auto:latest","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"What is in this picture?","images":["` + b64 + `"]},{"role":"assistant","content":"","tool_calls":[{"index":0,"id":"call_1","function":{"name":"get_weather","arguments":{"city":"Paris"}}}]},{"role":"tool","content":"sunny"}],"options":{"temperature":0.8},"stream":true,"keep_alive":"5m","tools":[` + tool + `]}`
	for i, payload := range []string{first, second} {
		r, err := httpPost(u.url+"/api/chat", payload)
		if err != nil || r.status != 200 {
			t.Fatalf("/api/chat %d: %d %s %v", i, r.status, r.body, err)
		}
		var content strings.Builder
		var last map[string]any
		sc := bufio.NewScanner(bytes.NewReader(r.body))
		sc.Buffer(nil, 1<<20)
		lines := 0
		for sc.Scan() {
			var line map[string]any
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				t.Fatalf("/api/chat %d: line %q is not JSON", i, sc.Text())
			}
			lines++
			msg, _ := line["message"].(map[string]any)
			if line["model"] != "chain/auto:latest" || msg == nil {
				t.Errorf("/api/chat %d: line without model or message: %s", i, sc.Text())
			}
			c, _ := msg["content"].(string)
			content.WriteString(c)
			last = line
		}
		if content.String() != "I see a red pixel." || last["done"] != true {
			t.Errorf("/api/chat %d: content %q, last line %v", i, content.String(), last)
		}
		// The token counts and the total time; eval_duration, in whole
		// milliseconds of the calls, may be 0 here and left out: Open
		// WebUI then shows "N/A" for the speed.
		for _, k := range []string{"prompt_eval_count", "eval_count", "total_duration"} {
			if n, _ := last[k].(float64); n <= 0 {
				t.Errorf("/api/chat %d: last line's %s = %v", i, k, last[k])
			}
		}
		if lines < 2 {
			t.Errorf("/api/chat %d: %d lines, want a stream", i, lines)
		}
	}
	reqs := u.ov.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the vision node got %d calls, want 2", len(reqs))
	}
	for i, req := range reqs {
		if user := lastUserMessage(req.Messages); len(user.Images) != 1 || !bytes.Equal(user.Images[0], pic) || user.Content != "What is in this picture?" {
			t.Errorf("call %d: the user message reached the node as %+v", i, user)
		}
		if len(req.Tools) != 1 || req.Tools[0].Function.Name != "get_weather" {
			t.Errorf("call %d: tools %+v", i, req.Tools)
		}
	}
	if tm := reqs[1].Messages[len(reqs[1].Messages)-1]; tm.Role != "tool" || tm.Content != "sunny" || tm.ToolName != "get_weather" {
		t.Errorf("the tool result reached the node as %+v", tm)
	}

	// A picture for a model that cannot see: an error Open WebUI shows,
	// read from "error".
	r, err = httpPost(u.url+"/api/chat", `{"model":"OT:latest","messages":[{"role":"user","content":"What is this?","images":["`+b64+`"]}],"stream":true}`)
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(r.body, &e); r.status != 400 || !strings.Contains(e.Error, "messages[0].images[0]") || !strings.Contains(e.Error, "node OT") {
		t.Errorf("a picture for a text model: %d %s", r.status, r.body)
	}
}

// TestOpenWebUITasksOllamaMode: Open WebUI's own requests (title, tags,
// follow-ups, search queries, …) reach an Ollama connection as /api/chat
// with the task prompt as the one user message, not streamed
// (convert_payload_openai_to_ollama of backend/open_webui/utils/payload.py).
// The chat they carry as history asks an analytical question; each is
// still answered in simple mode, by one node, whether the chat's model is
// chain/auto or chain/reflexive.
func TestOpenWebUITasksOllamaMode(t *testing.T) {
	s := newTestServer(t, testConfig, func(c *config.Config) { c.Server.MaxBodyBytes = 1 << 20 })
	// The chat's model is the task model unless Open WebUI is told
	// otherwise: chain/auto, or chain/reflexive for a user who always
	// wants the chain.
	for _, tc := range []struct{ model, task string }{
		{"chain/auto:latest", "title"}, {"chain/auto:latest", "tags"}, {"chain/auto:latest", "follow-ups"},
		{"chain/auto:latest", "queries"}, {"chain/auto:latest", "autocomplete"}, {"chain/auto:latest", "image-prompt"},
		{"chain/auto:latest", "emoji"}, {"chain/auto:latest", "tool-selection"},
		{"chain/reflexive:latest", "title"}, {"chain/reflexive:latest", "follow-ups"}, {"chain/reflexive:latest", "tool-selection"},
	} {
		f := filepath.Join("testdata", "agents", "open-webui-"+tc.task+".json")
		t.Run(tc.model+"/"+tc.task, func(t *testing.T) {
			var req struct {
				Messages []map[string]any `json:"messages"`
			}
			raw, err := os.ReadFile(f)
			if err != nil || json.Unmarshal(raw, &req) != nil {
				t.Fatalf("%s: %v", f, err)
			}
			body, _ := json.Marshal(map[string]any{"model": tc.model, "messages": req.Messages, "stream": false})
			resp := s.post(t, "/api/chat", string(body))
			out := readAll(t, resp.Body)
			var answer struct {
				Chain chain.Trace `json:"chain"`
			}
			if resp.StatusCode != http.StatusOK || json.Unmarshal(out, &answer) != nil {
				t.Fatalf("%d %s", resp.StatusCode, out)
			}
			if answer.Chain.Mode != chain.ModeSimple || len(answer.Chain.Stages) != 1 || !strings.HasPrefix(answer.Chain.Reasons[0], "Open WebUI's ") {
				t.Errorf("mode %q, %d stages, reasons %q: want Open WebUI's request answered simply", answer.Chain.Mode, len(answer.Chain.Stages), answer.Chain.Reasons)
			}
		})
	}
}
