package web

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"chainproxy/chain"
	"chainproxy/chain/node"
	"chainproxy/config"
	"chainproxy/internal/fakeollama"
)

// messagesExchange is one POST /v1/messages as a client sees it: the
// message, from the body or rebuilt from the stream, and the stream's
// events in order.
type messagesExchange struct {
	status int
	header http.Header
	raw    []byte
	msg    map[string]any
	events []map[string]any
	trace  *chain.Trace
}

func messagesPost(t *testing.T, url, body string, hdr ...string) *messagesExchange {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/v1/messages?beta=true", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	x := &messagesExchange{status: resp.StatusCode, header: resp.Header, raw: raw}
	if resp.StatusCode != 200 {
		return x
	}
	var chainJSON any
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, f := range sseFrames(t, raw) {
			name, data, ok := strings.Cut(f, "\ndata: ")
			if !ok || !strings.HasPrefix(name, "event: ") {
				t.Fatalf("frame %q is not an event with data", f)
			}
			var ev map[string]any
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatal(err)
			}
			if ev["type"] != strings.TrimPrefix(name, "event: ") {
				t.Errorf("event name %q, data type %v", name, ev["type"])
			}
			x.events = append(x.events, ev)
			switch ev["type"] {
			case "message_start":
				x.msg = ev["message"].(map[string]any)
			case "content_block_start":
				x.msg["content"] = append(x.msg["content"].([]any), ev["content_block"])
			case "content_block_delta":
				blocks := x.msg["content"].([]any)
				b := blocks[int(ev["index"].(float64))].(map[string]any)
				d := ev["delta"].(map[string]any)
				switch d["type"] {
				case "text_delta":
					b["text"] = b["text"].(string) + d["text"].(string)
				case "thinking_delta":
					b["thinking"] = b["thinking"].(string) + d["thinking"].(string)
				case "signature_delta":
					b["signature"] = d["signature"]
				case "input_json_delta":
					b["partial_json"] = d["partial_json"]
				}
			case "message_delta":
				d := ev["delta"].(map[string]any)
				x.msg["stop_reason"], x.msg["usage"] = d["stop_reason"], ev["usage"]
				chainJSON = ev["chain"]
			}
		}
	} else {
		if err := json.Unmarshal(raw, &x.msg); err != nil {
			t.Fatal(err)
		}
		chainJSON = x.msg["chain"]
	}
	if chainJSON != nil {
		b, _ := json.Marshal(chainJSON)
		x.trace = new(chain.Trace)
		_ = json.Unmarshal(b, x.trace)
	}
	return x
}

// blocks returns the message's content blocks of type typ.
func (x *messagesExchange) blocks(typ string) []map[string]any {
	var out []map[string]any
	for _, b := range x.msg["content"].([]any) {
		if m := b.(map[string]any); m["type"] == typ {
			out = append(out, m)
		}
	}
	return out
}

func (x *messagesExchange) text() string {
	var b strings.Builder
	for _, m := range x.blocks("text") {
		b.WriteString(m["text"].(string))
	}
	return b.String()
}

// eventTypes lists the stream's event types in order, a run of deltas as one.
func (x *messagesExchange) eventTypes() string {
	var names []string
	for _, ev := range x.events {
		typ := ev["type"].(string)
		if d, ok := ev["delta"].(map[string]any); ok && typ == "content_block_delta" {
			typ += "(" + d["type"].(string) + ")"
		}
		if n := len(names); n > 0 && names[n-1] == typ {
			continue
		}
		names = append(names, typ)
	}
	return strings.Join(names, " ")
}

func TestDecodeMessagesRequest(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		// msgs is the chain's messages as role:content|… , calls and
		// results included.
		msgs     string
		tools    string
		dropped  string
		choice   chain.ToolChoice
		thinking bool
	}{
		{"string content", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
			"user:hi", "", "", chain.ToolChoice{Mode: "auto"}, false},
		{"system blocks and a system entry in messages", `{"model":"m","system":[{"type":"text","text":"A","cache_control":{"type":"ephemeral"}},{"type":"text","text":"B"}],"messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"q"}]},{"role":"system","content":[{"type":"text","text":"env"}]}],"thinking":{"type":"adaptive","display":"omitted"},"context_management":{"edits":[]},"output_config":{"effort":"high"},"metadata":{"user_id":"u"}}`,
			"system:A\nB\n\nenv|user:<system-reminder>x</system-reminder>\nq", "", "", chain.ToolChoice{Mode: "auto"}, false},
		{"tool loop", `{"model":"m","messages":[{"role":"user","content":"w?"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"redacted_thinking","data":"x"},{"type":"text","text":"let me see"},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city": "Paris"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"sunny"},{"type":"tool_reference","tool_name":"Later"}]},{"type":"tool_result","tool_use_id":"toolu_2","content":"boom","is_error":true},{"type":"text","text":"and?"}]}],"tools":[{"name":"get_weather","input_schema":{"type":"object"}},{"type":"web_search_20250305","name":"web_search"},{"type":"bash_20250124","name":"bash"},{"name":"Later","input_schema":{"type":"object"},"defer_loading":true}],"tool_choice":{"type":"any"}}`,
			`user:w?|assistant:let me see[get_weather({"city":"Paris"}) toolu_1](think t)|tool:sunny<toolu_1 get_weather>|tool:Error: boom<toolu_2 >|user:and?`,
			"get_weather", "web_search_20250305, bash_20250124, Later (deferred)", chain.ToolChoice{Mode: "required"}, false},
		{"tool choice by name, thinking disabled", `{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"name":"f","description":"d","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"f"},"thinking":{"type":"disabled"}}`,
			"user:x", "f", "", chain.ToolChoice{Mode: "function", Name: "f"}, false},
		{"thinking enabled", `{"model":"m","messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"none"},"thinking":{"type":"enabled","budget_tokens":2048}}`,
			"user:x", "", "", chain.ToolChoice{Mode: "none"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := decodeMessagesRequest([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range req.msgs {
				s := m.Role + ":" + m.Content
				for _, c := range m.ToolCalls {
					s += "[" + c.Name + "(" + c.Arguments + ") " + c.ID + "]"
				}
				if m.Reasoning != "" {
					s += "(think " + m.Reasoning + ")"
				}
				if m.Role == "tool" {
					s += "<" + m.ToolCallID + " " + m.Name + ">"
				}
				got = append(got, s)
			}
			if g := strings.Join(got, "|"); g != tc.msgs {
				t.Errorf("messages:\n got %s\nwant %s", g, tc.msgs)
			}
			var names []string
			for _, tool := range req.tools {
				names = append(names, tool.Name)
			}
			if g := strings.Join(names, ","); g != tc.tools {
				t.Errorf("tools = %s, want %s", g, tc.tools)
			}
			if g := strings.Join(req.dropped, ", "); g != tc.dropped {
				t.Errorf("dropped = %s, want %s", g, tc.dropped)
			}
			if req.choice != tc.choice || req.thinking != tc.thinking {
				t.Errorf("choice %+v thinking %v, want %+v %v", req.choice, req.thinking, tc.choice, tc.thinking)
			}
		})
	}
}

// TestDecodeClaudeCodeRequest decodes a request Claude Code 2.1.331 sent
// (captured by a recording fake upstream, `claude -p "What is 2+2?"
// --model chain/auto`; paths rewritten): its system blocks and its system
// entry inside messages become one system message, the question stays
// the user's, its 11 client tools pass, its deferred placeholder is left
// out, and adaptive thinking with display omitted sends no thinking back.
func TestDecodeClaudeCodeRequest(t *testing.T) {
	body, err := os.ReadFile("testdata/claude_code_request.json")
	if err != nil {
		t.Fatal(err)
	}
	req, err := decodeMessagesRequest(body)
	if err == nil {
		err = checkMessagesLimits(req, 4096)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !req.Stream || *req.MaxTokens != 32000 || req.thinking || req.Metadata == nil || !strings.Contains(req.Metadata.UserID, "session_id") {
		t.Errorf("stream %v max_tokens %d thinking %v metadata %+v", req.Stream, *req.MaxTokens, req.thinking, req.Metadata)
	}
	if len(req.msgs) != 2 || req.msgs[0].Role != "system" || req.msgs[1].Role != "user" {
		t.Fatalf("messages = %d, roles %v", len(req.msgs), req.msgs)
	}
	if sys := req.msgs[0].Content; !strings.Contains(sys, "You are a Claude agent") || !strings.Contains(sys, "# Environment") {
		t.Errorf("system text lacks the system field or the system entry: %.200s", sys)
	}
	if q := req.msgs[1].Content; !strings.HasSuffix(q, "What is 2+2?") || !strings.HasPrefix(q, "<system-reminder>") {
		t.Errorf("user text = %.200s…", q)
	}
	if len(req.tools) != 11 || strings.Join(req.dropped, ",") != "DeferredToolPlaceholder (deferred)" {
		t.Errorf("tools %d, dropped %v", len(req.tools), req.dropped)
	}
	// The classifier reads the question, not Claude Code's reminders.
	next := chain.UserTexts(req.toRunRequest().Messages)
	if um, ok := next(); !ok || !strings.Contains(um.Text, "What is 2+2?") {
		t.Errorf("user text judged: %q", um.Text)
	}
}

// TestDecodeClaudeCodeToolResult decodes Claude Code's next request
// after the recording fake answered with a Bash tool_use (same capture,
// `claude -p "run the check command" --allowedTools Bash`): its system
// entry here is a string, the assistant's call becomes the chain's tool
// call and the tool_result block the tool message that resumes it.
func TestDecodeClaudeCodeToolResult(t *testing.T) {
	body, err := os.ReadFile("testdata/claude_code_tool_result.json")
	if err != nil {
		t.Fatal(err)
	}
	req, err := decodeMessagesRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range req.msgs {
		roles = append(roles, m.Role)
	}
	if got := strings.Join(roles, ","); got != "system,user,assistant,tool" {
		t.Fatalf("roles = %s", got)
	}
	call, result := req.msgs[2].ToolCalls, req.msgs[3]
	if len(call) != 1 || call[0].Name != "Bash" || call[0].ID != "toolu_01" || !strings.Contains(call[0].Arguments, `"command":"echo chain-resumed-ok"`) {
		t.Errorf("assistant calls = %+v", call)
	}
	if result.ToolCallID != "toolu_01" || result.Name != "Bash" || result.Content != "chain-resumed-ok" {
		t.Errorf("tool message = %+v", result)
	}
	if !strings.Contains(req.msgs[0].Content, "# Environment") {
		t.Errorf("the system entry inside messages is not in the system text")
	}
}

// TestMessagesBadRequests: each mistake gets a 400 in Anthropic's shape,
// naming what is wrong.
func TestMessagesBadRequests(t *testing.T) {
	s := newTestServer(t, testConfig)
	for _, tc := range []struct{ body, want string }{
		{`{"model":"chain/auto"}`, "messages: at least one message"},
		{`{"messages":[{"role":"user","content":"hi"}]}`, "model: Field required"},
		{`{"model":"chain/auto","messages":[{"role":"tool","content":"hi"}]}`, `messages[0].role: "tool" is not one of`},
		{`{"model":"chain/auto","messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"text/plain","data":"aGk="}}]}]}`, `media_type "text/plain" is not an image type`},
		{`{"model":"chain/auto","messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"file_1"}}]}]}`, "the proxy keeps no files"},
		{`{"model":"chain/auto","messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"not base64!"}}]}]}`, "source.data is not base64"},
		{`{"model":"chain/auto","messages":[{"role":"assistant","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"aGk="}}]}]}`, `block type "image" is not supported in a assistant message`},
		{`{"model":"chain/auto","messages":[{"role":"user","content":[{"type":"tool_result","content":"x"}]}]}`, "needs a tool_use_id"},
		{`{"model":"chain/auto","messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":[1]}]}]}`, "input: want a JSON object"},
		{`{"model":"chain/auto","messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"tool","name":"nope"}}`, `tool "nope" is not in tools`},
		{`{"model":"chain/auto","messages":[{"role":"user","content":"x"}],"thinking":{"type":"enabled"}}`, "budget_tokens: Field required"},
		{`{"model":"chain/auto","messages":[{"role":"user","content":"x"}],"thinking":{"type":"maybe"}}`, `thinking.type: "maybe"`},
		{`{"model":"chain/auto","messages":[{"role":"user","content":"x"}],"temperature":1.5}`, "temperature: must be between 0 and 1"},
		{`{"model":"chain/auto","messages":[{"role":"user","content":"x"}],"max_tokens":0}`, "max_tokens: must be at least 1"},
		{`{"model":"chain/auto","messages":[{"role":"user","content":"x"}],"stop_sequences":["a","b","c","d","e"]}`, "too many stop sequences"},
		{`{"model":"chain/auto","messages":[{"role":"user","content":7}]}`, "messages[0].content: want a string or an array"},
		{`{"model":"chain/auto","messages":[{"role":"user","content":"x"}],"tools":[{"input_schema":{}}]}`, "tools[0].name: Field required"},
		{`{"model":"chain/auto","messages":`, "invalid JSON"},
	} {
		x := messagesPost(t, s.URL, tc.body)
		var e anthropicErrorBody
		if err := json.Unmarshal(x.raw, &e); err != nil || x.status != 400 || e.Type != "error" || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, tc.want) {
			t.Errorf("%s: %d %s, want 400 invalid_request_error with %q", tc.body, x.status, x.raw, tc.want)
		}
	}
}

// TestAnthropicStatus is the table of Anthropic's error types, from the
// errors statusFor maps.
func TestAnthropicStatus(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		typ    string
	}{
		{invalid("x", "bad"), 400, "invalid_request_error"},
		{errUnauthorized, 401, "authentication_error"},
		{errForbiddenOrigin, 403, "permission_error"},
		{&chain.UnknownModelError{Model: "x"}, 404, "not_found_error"},
		{errTooLarge, 413, "request_too_large"},
		{&node.UpstreamError{Node: "M1", Kind: node.KindStatus, Status: 429}, 429, "rate_limit_error"},
		{&node.QueueFullError{Node: "M1"}, 529, "overloaded_error"},
		{&node.UpstreamError{Node: "M1", Kind: node.KindConnect}, 502, "api_error"},
		{&node.UpstreamError{Node: "M1", Kind: node.KindTimeout}, 504, "timeout_error"},
		{errors.New("boom"), 500, "api_error"},
	} {
		status, obj := statusFor(tc.err)
		gotStatus, body := anthropicStatus(tc.err, status, obj)
		if gotStatus != tc.status || body.Type != "error" || body.Error.Type != tc.typ || body.Error.Message == "" {
			t.Errorf("%v: %d %+v, want %d %s", tc.err, gotStatus, body, tc.status, tc.typ)
		}
	}
	// At the end of a stream only the status and code are left: a full
	// queue is still overloaded.
	status, obj := statusFor(&node.QueueFullError{Node: "M1"})
	if _, body := anthropicStatus(nil, status, obj); body.Error.Type != "overloaded_error" {
		t.Errorf("a full queue mid-stream = %s", body.Error.Type)
	}
}

// TestMessagesNonStreamGolden pins a reflexive message whole: thinking,
// text, stop_reason, usage and the trace.
func TestMessagesNonStreamGolden(t *testing.T) {
	s := newTestServer(t, testConfig)
	x := messagesPost(t, s.URL, `{"model":"chain/reflexive","max_tokens":1024,"thinking":{"type":"enabled","budget_tokens":512},"system":"Be brief.","messages":[{"role":"user","content":"compare things"}]}`)
	if x.status != 200 {
		t.Fatalf("status %d: %s", x.status, x.raw)
	}
	if x.text() != "Final answer from M2." || x.msg["stop_reason"] != "end_turn" {
		t.Errorf("text %q, stop_reason %v", x.text(), x.msg["stop_reason"])
	}
	if th := x.blocks("thinking"); len(th) != 1 || th[0]["thinking"] != "hidden M2 thoughts" || th[0]["signature"] == "" {
		t.Errorf("thinking blocks = %v", th)
	}
	if x.header.Get("X-Chain-Mode") != "reflexive" || x.trace == nil || len(x.trace.Stages) != 3 {
		t.Errorf("mode %q, trace %+v", x.header.Get("X-Chain-Mode"), x.trace)
	}
	u := x.msg["usage"].(map[string]any)
	if u["input_tokens"].(float64) <= 0 || u["output_tokens"].(float64) <= 0 {
		t.Errorf("usage = %v", u)
	}
	golden(t, "messages.json.golden", normalize(t, bytes.ReplaceAll(x.raw, []byte(x.header.Get("X-Chain-Trace-Id")), []byte("TRACE"))))
}

// TestMessagesStreamGolden pins a reflexive stream's whole transcript:
// message_start and a ping as each earlier stage starts, the thinking
// block with its signature, the text block, message_delta with the trace,
// message_stop.
func TestMessagesStreamGolden(t *testing.T) {
	s := newTestServer(t, testConfig)
	s.Config.Handler = New(Options{Config: s.cfg, Engine: mustEngine(t, s.cfg), Traces: s.store, Keepalive: time.Hour})
	x := messagesPost(t, s.URL, `{"model":"chain/reflexive","stream":true,"max_tokens":1024,"thinking":{"type":"adaptive"},"system":[{"type":"text","text":"Be brief."}],"messages":[{"role":"user","content":[{"type":"text","text":"compare"}]}]}`)
	if x.status != 200 {
		t.Fatalf("status %d: %s", x.status, x.raw)
	}
	want := "message_start ping content_block_start content_block_delta(thinking_delta) content_block_delta(signature_delta) content_block_stop " +
		"content_block_start content_block_delta(text_delta) content_block_stop message_delta message_stop"
	if got := x.eventTypes(); got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
	if x.text() != "Final answer from M2." || x.trace == nil || x.trace.Mode != "reflexive" || x.msg["stop_reason"] != "end_turn" {
		t.Errorf("text %q, stop %v, trace %+v", x.text(), x.msg["stop_reason"], x.trace)
	}
	var out strings.Builder
	for _, f := range sseFrames(t, x.raw) {
		if name, data, ok := strings.Cut(f, "\ndata: "); ok {
			data = strings.ReplaceAll(data, x.header.Get("X-Chain-Trace-Id"), "TRACE")
			f = name + "\ndata: " + string(normalizeCompact(t, []byte(data)))
		}
		out.WriteString(f + "\n\n")
	}
	golden(t, "messages_stream.sse.golden", []byte(out.String()))
}

// TestMessagesStreamToolUse: a client tool call streams as a tool_use
// block with its input in one input_json_delta, stop_reason tool_use;
// the tool_result sent back resumes the chain.
func TestMessagesStreamToolUse(t *testing.T) {
	s := newTestServer(t, testConfig, func(c *config.Config) { c.Server.MaxBodyBytes = 1 << 20 })
	tools := `"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}},{"type":"web_search_20250305","name":"web_search"}]`
	x := messagesPost(t, s.URL, `{"model":"chain/simple","stream":true,"max_tokens":100,`+tools+`,"messages":[{"role":"user","content":"weather in Paris?"}]}`)
	if x.status != 200 || x.msg["stop_reason"] != "tool_use" {
		t.Fatalf("status %d stop %v: %s", x.status, x.msg["stop_reason"], x.raw)
	}
	if got := x.header.Get("X-Chain-Dropped-Tools"); got != "web_search_20250305" {
		t.Errorf("X-Chain-Dropped-Tools = %q", got)
	}
	if !strings.Contains(x.eventTypes(), "content_block_start content_block_delta(input_json_delta) content_block_stop message_delta message_stop") {
		t.Errorf("events = %s", x.eventTypes())
	}
	use := x.blocks("tool_use")
	if len(use) != 1 || use[0]["name"] != "get_weather" || use[0]["partial_json"] != `{"city":"Paris"}` {
		t.Fatalf("tool_use = %v", use)
	}
	if !strings.Contains(strings.Join(x.trace.Reasons, "|"), "tools left out (server tools the proxy cannot run, deferred tools): web_search_20250305") {
		t.Errorf("reasons = %v", x.trace.Reasons)
	}
	next := `{"model":"chain/simple","max_tokens":100,` + tools + `,"messages":[{"role":"user","content":"weather in Paris?"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"` + use[0]["id"].(string) + `","name":"get_weather","input":{"city":"Paris"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + use[0]["id"].(string) + `","content":"sunny"}]}]}`
	y := messagesPost(t, s.URL, next)
	if y.status != 200 || y.text() != "It is sunny in Paris." || y.msg["stop_reason"] != "end_turn" {
		t.Errorf("after the tool result: %d %s", y.status, y.raw)
	}
}

// TestMessagesStreamFailure: a node failing before any output gets its
// status in Anthropic's shape; failing once the stream is under way, the
// stream ends with an error event carrying the trace.
func TestMessagesStreamFailure(t *testing.T) {
	s := newTestServer(t, testConfig)
	x := messagesPost(t, s.URL, `{"model":"chain/simple","stream":true,"messages":[{"role":"user","content":"boom"}]}`)
	var e anthropicErrorBody
	if err := json.Unmarshal(x.raw, &e); err != nil || x.status != 502 || e.Error.Type != "api_error" {
		t.Fatalf("a run failing before any output: %d %s, want 502 api_error", x.status, x.raw)
	}
	node := ollamaNode("A", fakeollama.New(t, fakeollama.Reply{Content: []string{"half "}, Error: "runner died"}).URL)
	_, srv := wireProxy(t, []config.Node{node}, oneStage)
	x = messagesPost(t, srv.URL, `{"model":"A","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if x.status != 200 {
		t.Fatalf("status %d: %s", x.status, x.raw)
	}
	last := x.events[len(x.events)-1]
	errObj, _ := last["error"].(map[string]any)
	if last["type"] != "error" || !strings.Contains(errObj["message"].(string), "runner died") || errObj["chain"] == nil {
		t.Errorf("last event = %v", last)
	}
}

// TestMessagesKeysAndModels: the key is read from x-api-key as from
// Authorization, its errors are Anthropic's; an aliased model name runs;
// an unknown one is a 404 naming what exists; /v1/models lists the
// aliases; count_tokens answers from the estimate.
func TestMessagesKeysAndModels(t *testing.T) {
	s := newTestServer(t, testConfig, func(c *config.Config) {
		c.Server.APIKeys = []string{"sk-right"}
		c.ModelAliases = map[string]string{"claude-*": "chain/auto", "claude-*haiku*": "chain/simple", "claude-opus-4-1": "chain/reflexive"}
	})
	body := `{"model":"claude-haiku-4-5-20251001","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`
	if x := messagesPost(t, s.URL, body, "x-api-key", "sk-wrong"); x.status != 401 || !bytes.Contains(x.raw, []byte(`"type":"authentication_error"`)) {
		t.Errorf("wrong key: %d %s", x.status, x.raw)
	}
	x := messagesPost(t, s.URL, body, "x-api-key", "sk-right")
	if x.status != 200 || x.header.Get("X-Chain-Mode") != "simple" || x.msg["model"] != "claude-haiku-4-5-20251001" {
		t.Errorf("aliased model with x-api-key: %d %s", x.status, x.raw)
	}
	if x := messagesPost(t, s.URL, body, "Authorization", "Bearer sk-right"); x.status != 200 {
		t.Errorf("Bearer key: %d %s", x.status, x.raw)
	}
	x = messagesPost(t, s.URL, `{"model":"gpt-9","messages":[{"role":"user","content":"hi"}]}`, "x-api-key", "sk-right")
	if x.status != 404 || !bytes.Contains(x.raw, []byte(`"type":"not_found_error"`)) || !bytes.Contains(x.raw, []byte("chain/reflexive")) || !bytes.Contains(x.raw, []byte("claude-*haiku*")) {
		t.Errorf("unknown model: %d %s", x.status, x.raw)
	}
	get := func(path string) (int, string) {
		req, _ := http.NewRequest("GET", s.URL+path, nil)
		req.Header.Set("x-api-key", "sk-right")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return resp.StatusCode, string(readAll(t, resp.Body))
	}
	// A name is listed with the model it stands for; patterns are not
	// models (issue 41).
	if code, list := get("/v1/models"); code != 200 || strings.Contains(list, `"id":"claude-*`) || !strings.Contains(list, `{"id":"claude-opus-4-1","object":"model","created":`) || !strings.Contains(list, `"alias_for":"chain/reflexive"`) {
		t.Errorf("/v1/models = %d %s, want claude-opus-4-1 listed and no pattern", code, list)
	}
	if code, one := get("/v1/models/claude-sonnet-4-6"); code != 200 || !strings.Contains(one, `"alias_for":"chain/auto"`) {
		t.Errorf("/v1/models/claude-sonnet-4-6 = %d %s", code, one)
	}
	req, _ := http.NewRequest("POST", s.URL+"/v1/messages/count_tokens?beta=true", strings.NewReader(`{"model":"claude-sonnet-4-6","system":"s","messages":[{"role":"user","content":"`+strings.Repeat("word ", 100)+`"}]}`))
	req.Header.Set("x-api-key", "sk-right")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var count struct {
		InputTokens int `json:"input_tokens"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&count); err != nil || resp.StatusCode != 200 || count.InputTokens < 500/8 {
		// 500 characters, at most 8 a token whatever the calibration learned
		// from the calls above
		t.Errorf("count_tokens: %d %+v %v", resp.StatusCode, count, err)
	}
	resp.Body.Close()
}

// TestMessagesInTraceList: a chain that came through /v1/messages is
// listed in GET /v1/chain/traces like any other, and its trace is stored.
func TestMessagesInTraceList(t *testing.T) {
	s := newTestServer(t, testConfig)
	x := messagesPost(t, s.URL, `{"model":"chain/reflexive","messages":[{"role":"user","content":"compare things"}]}`, "User-Agent", "claude-cli/2.1.331 (external, sdk-cli)")
	if x.status != 200 {
		t.Fatalf("%d %s", x.status, x.raw)
	}
	id := x.header.Get("X-Chain-Trace-Id")
	var list struct {
		Data []struct {
			TraceID string `json:"trace_id"`
			Status  string `json:"status"`
			Client  string `json:"client"`
		} `json:"data"`
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := http.Get(s.URL + "/v1/chain/traces")
		if err != nil {
			t.Fatal(err)
		}
		_ = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if n := len(list.Data); n > 0 && list.Data[n-1].TraceID == id && list.Data[n-1].Status != "running" || time.Now().After(deadline) {
			break
		}
	}
	if n := len(list.Data); n == 0 || list.Data[n-1].TraceID != id || list.Data[n-1].Status != "ok" || !strings.HasPrefix(list.Data[n-1].Client, "claude-cli/") {
		t.Fatalf("trace list = %+v, want %s ok from claude-cli", list.Data, id)
	}
	resp, err := http.Get(s.URL + "/v1/chain/traces/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("stored trace: %d", resp.StatusCode)
	}
}

// BenchmarkDecodeClaudeCodeRequest: what decoding one Claude Code turn
// (about 50 KB: its system prompt, 12 tools) costs the proxy.
func BenchmarkDecodeClaudeCodeRequest(b *testing.B) {
	body, err := os.ReadFile("testdata/claude_code_request.json")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := decodeMessagesRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}

// TestMessagesPingWhileWaiting: while a node has said nothing yet, the
// stream is kept alive with ping events after message_start, which the
// SDKs read and skip.
func TestMessagesPingWhileWaiting(t *testing.T) {
	f := fakeollama.New(t, fakeollama.Reply{Hang: true})
	_, srv := wireProxy(t, []config.Node{ollamaNode("A", f.URL)}, oneStage)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/messages", strings.NewReader(`{"model":"A","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var lines []string
	for sc.Scan() {
		if lines = append(lines, sc.Text()); sc.Text() == "event: ping" {
			break
		}
	}
	if len(lines) < 3 || lines[0] != "event: message_start" || lines[len(lines)-1] != "event: ping" {
		t.Fatalf("stream began %q, want message_start then a ping", lines)
	}
	if !sc.Scan() || sc.Text() != `data: {"type":"ping"}` {
		t.Errorf("ping data = %q", sc.Text())
	}
}
