// Package fakeopenai is an httptest server that speaks OpenAI's chat
// completions API the way OpenAI does: POST /v1/chat/completions streamed as
// server-sent events of chat.completion.chunk objects ending with
// "data: [DONE]" (or one chat.completion object when "stream" is false),
// error bodies in OpenAI's shape, and GET /v1/models. Each test scripts the
// replies and then asserts on the requests the server recorded.
//
// Use BaseURL (the server's URL + "/v1") as a client's base URL. It is for
// tests only: the openai backend's, and the proxy's end-to-end tests.
package fakeopenai

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Created is the "created" time of every response, fixed so that
// transcripts are stable.
const Created = 1735689600

// ToolCall is a scripted tool call, streamed as OpenAI does: the first
// fragment carries index, id, type and name with empty arguments, the next
// ones the arguments in pieces.
type ToolCall struct {
	// ID defaults to "call_<n>" with n the call's index.
	ID   string
	Name string
	// Arguments is the JSON text, sent as written (even when invalid).
	Arguments string
}

// Reply scripts one answer of POST /v1/chat/completions. In a stream, the
// first chunk carries the role, then come the reasoning deltas, the content
// deltas, the tool call fragments, a chunk with the finish reason and, when
// the request asked for stream_options.include_usage, a usage chunk whose
// choices are empty; then "data: [DONE]" (or what StreamError, Hang or Cut
// put in their place).
type Reply struct {
	// Reasoning are reasoning deltas, sent in the field ReasoningField.
	Reasoning []string
	// ReasoningField is "reasoning_content" (the default, DeepSeek and vLLM)
	// or "reasoning" (OpenRouter, recent vLLM).
	ReasoningField string
	// Content are content deltas.
	Content []string
	// ToolCalls are streamed as fragments.
	ToolCalls []ToolCall
	// Fragments is how many pieces each call's arguments are cut into (3
	// when zero).
	Fragments int
	// Interleave sends the fragments of parallel calls in turn (0, 1, 0,
	// 1…) instead of one call after the other, as some servers do.
	Interleave bool
	// FinishReason defaults to "tool_calls" when there are tool calls,
	// else "stop".
	FinishReason string
	// PromptTokens and CompletionTokens are the usage.
	PromptTokens, CompletionTokens int
	// Model is the model the answer says answered; the request's when
	// empty.
	Model string

	// Status, when set, answers this HTTP status with an error body of
	// Error, ErrorType and ErrorCode before anything is streamed.
	Status    int
	Error     string
	ErrorType string
	ErrorCode string
	// StreamError ends the stream after the deltas with a
	// data: {"error": …} event, as OpenAI and Azure do on a failure
	// mid-generation. An unstreamed answer gets it as a 500, or as a 200
	// with ErrorIn200.
	StreamError string
	// ErrorField sends StreamError as llama.cpp's server did before it
	// moved to data: events (ggml-org/llama.cpp 15ae7dd,
	// examples/server/utils.hpp server_sent_event(sink, "error", …)): an
	// "error:" field, which is no field of the SSE standard, holding
	// llama.cpp's error object, then "data: [DONE]".
	ErrorField bool
	// ErrorIn200 answers an unstreamed request's StreamError with status
	// 200 and the error body, as OpenRouter does for an error once the
	// model has started (https://openrouter.ai/docs/errors).
	ErrorIn200 bool
	// SameIndex sends each tool call whole in one delta, every one with
	// index 0 and its own id, as Ollama's /v1 does (openai/openai.go
	// toToolCalls copies the call's index, which its parsers leave at 0:
	// ollama/ollama#15457).
	SameIndex bool
	// Hang blocks after the deltas until the client goes away; Canceled
	// then reports it.
	Hang bool
	// Cut drops the connection after the deltas, without finish reason
	// or [DONE].
	Cut bool
	// Delay is waited before each event.
	Delay time.Duration
}

// Server is a scripted fake OpenAI. Its methods are safe for concurrent use.
type Server struct {
	*httptest.Server

	script func(call int, req *openai.ChatCompletionRequest) Reply
	quit   chan struct{}
	conns  atomic.Int64

	mu                  sync.Mutex
	requests            []openai.ChatCompletionRequest
	bodies              []map[string]any
	headers             []http.Header
	served              int // requests that used a reply
	models              []string
	modelsStatus        int
	maxModelLen         int
	rejectStreamOptions bool
	hanging             chan struct{}
	hangOnce            sync.Once
	canceled            chan struct{}
	cancelOnce          sync.Once
}

// New starts a server that answers the n-th chat completion with
// replies[n]; the last reply repeats. With no replies it answers "ok". The
// server is closed when the test ends.
func New(t testing.TB, replies ...Reply) *Server {
	if len(replies) == 0 {
		replies = []Reply{{Content: []string{"ok"}}}
	}
	return NewFunc(t, func(call int, _ *openai.ChatCompletionRequest) Reply {
		return replies[min(call, len(replies)-1)]
	})
}

// NewFunc starts a server whose replies are computed by script from the call
// number (0 first) and the decoded request.
func NewFunc(t testing.TB, script func(call int, req *openai.ChatCompletionRequest) Reply) *Server {
	s := &Server{
		script:   script,
		quit:     make(chan struct{}),
		models:   []string{"fake-model"},
		hanging:  make(chan struct{}),
		canceled: make(chan struct{}),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.chat)
	mux.HandleFunc("GET /v1/models", s.listModels)
	s.Server = httptest.NewUnstartedServer(mux)
	s.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(func() {
		// Release hanging handlers first: Close waits for them.
		close(s.quit)
		s.CloseClientConnections()
		s.Close()
	})
	return s
}

// BaseURL is the base URL an OpenAI client is given: URL + "/v1".
func (s *Server) BaseURL() string { return s.URL + "/v1" }

// Requests returns every chat completion request so far, decoded.
func (s *Server) Requests() []openai.ChatCompletionRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]openai.ChatCompletionRequest(nil), s.requests...)
}

// Bodies returns the raw JSON body of every chat completion request so far,
// decoded as maps, for wire-exact assertions (numbers are float64).
func (s *Server) Bodies() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.bodies...)
}

// Headers returns the headers of every chat completion request so far.
func (s *Server) Headers() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.headers...)
}

// Hanging is closed once a Hang reply has sent its deltas and waits for the
// client to go away.
func (s *Server) Hanging() <-chan struct{} { return s.hanging }

// Conns returns how many TCP connections clients opened so far: a client
// that reuses its connections opens one for sequential calls.
func (s *Server) Conns() int { return int(s.conns.Load()) }

// Canceled is closed once a Hang reply saw its client go away.
func (s *Server) Canceled() <-chan struct{} { return s.canceled }

// SetModels sets the model IDs GET /v1/models lists ("fake-model" by default).
func (s *Server) SetModels(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models = ids
}

// SetMaxModelLen makes GET /v1/models give every model n as its
// max_model_len, as vLLM does.
func (s *Server) SetMaxModelLen(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxModelLen = n
}

// SetModelsStatus makes GET /v1/models answer status (0 restores 200), to
// make the node fail its probe.
func (s *Server) SetModelsStatus(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.modelsStatus = status
}

// RejectStreamOptions makes the server answer 400 to any request carrying
// stream_options, as some OpenAI-compatible servers do. Rejected requests
// are recorded but use no reply.
func (s *Server) RejectStreamOptions(reject bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejectStreamOptions = reject
}

func (s *Server) listModels(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	status, ids, maxLen := s.modelsStatus, s.models, s.maxModelLen
	s.mu.Unlock()
	if status != 0 && status != http.StatusOK {
		writeError(w, status, http.StatusText(status), "server_error", "")
		return
	}
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
		// MaxModelLen is vLLM's window of the model; 0 leaves it out.
		MaxModelLen int `json:"max_model_len,omitempty"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, id := range ids {
		list.Data = append(list.Data, model{ID: id, Object: "model", Created: Created, OwnedBy: "fakeopenai", MaxModelLen: maxLen})
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var req openai.ChatCompletionRequest
	var raw map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "We could not parse the JSON body of your request.", "invalid_request_error", "")
		return
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		writeError(w, http.StatusBadRequest, "We could not parse the JSON body of your request.", "invalid_request_error", "")
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.bodies = append(s.bodies, raw)
	s.headers = append(s.headers, r.Header.Clone())
	reject := s.rejectStreamOptions && raw["stream_options"] != nil
	call := s.served
	if !reject {
		s.served++
	}
	s.mu.Unlock()
	if reject {
		writeError(w, http.StatusBadRequest, "Unrecognized request argument supplied: stream_options", "invalid_request_error", "")
		return
	}

	reply := s.script(call, &req)
	if reply.Status != 0 {
		msg := reply.Error
		if msg == "" {
			msg = http.StatusText(reply.Status)
		}
		typ := reply.ErrorType
		if typ == "" {
			typ = "server_error"
			if reply.Status < 500 {
				typ = "invalid_request_error"
			}
		}
		writeError(w, reply.Status, msg, typ, reply.ErrorCode)
		return
	}
	id := fmt.Sprintf("chatcmpl-fake%d", call)
	if reply.Model != "" {
		req.Model = reply.Model
	}
	if !req.Stream {
		s.whole(w, r, id, req.Model, reply)
		return
	}
	s.stream(w, r, id, req, reply)
}

// Wire types, with the fields in OpenAI's order and its nulls.
type (
	chunk struct {
		ID                string          `json:"id"`
		Object            string          `json:"object"`
		Created           int64           `json:"created"`
		Model             string          `json:"model"`
		SystemFingerprint string          `json:"system_fingerprint"`
		Choices           []choice        `json:"choices"`
		Usage             json.RawMessage `json:"usage,omitempty"`
	}
	choice struct {
		Index        int             `json:"index"`
		Delta        map[string]any  `json:"delta"`
		Logprobs     json.RawMessage `json:"logprobs"`
		FinishReason *string         `json:"finish_reason"`
	}
	toolDelta struct {
		Index    int     `json:"index"`
		ID       string  `json:"id,omitempty"`
		Type     string  `json:"type,omitempty"`
		Function fnDelta `json:"function"`
	}
	fnDelta struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	}
	usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	}
)

var null = json.RawMessage("null")

func (s *Server) stream(w http.ResponseWriter, r *http.Request, id string, req openai.ChatCompletionRequest, reply Reply) {
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	event := func(data []byte) bool {
		if !s.wait(r, reply.Delay) {
			return false
		}
		fmt.Fprintf(w, "data: %s\n\n", data)
		rc.Flush()
		return true
	}
	send := func(delta map[string]any, finish *string) bool {
		c := chunk{
			ID: id, Object: "chat.completion.chunk", Created: Created, Model: req.Model,
			SystemFingerprint: "fp_fake",
			Choices:           []choice{{Delta: delta, Logprobs: null, FinishReason: finish}},
		}
		if includeUsage {
			c.Usage = null
		}
		b, _ := json.Marshal(c)
		return event(b)
	}

	if !send(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil) {
		return
	}
	field := reply.ReasoningField
	if field == "" {
		field = "reasoning_content"
	}
	for _, p := range reply.Reasoning {
		if !send(map[string]any{field: p}, nil) {
			return
		}
	}
	for _, p := range reply.Content {
		if !send(map[string]any{"content": p}, nil) {
			return
		}
	}
	for _, td := range toolFragments(reply) {
		if !send(map[string]any{"tool_calls": []toolDelta{td}}, nil) {
			return
		}
	}
	switch {
	case reply.Hang:
		s.hang(r)
		return
	case reply.Cut:
		// Abort the response: the connection closes without the final
		// zero-length chunk, as when an upstream process dies.
		panic(http.ErrAbortHandler)
	case reply.StreamError != "" && reply.ErrorField:
		b, _ := json.Marshal(map[string]any{"code": http.StatusInternalServerError, "message": reply.StreamError, "type": "server_error"})
		fmt.Fprintf(w, "error: %s\n\n", b)
		event([]byte("[DONE]"))
		return
	case reply.StreamError != "":
		b, _ := json.Marshal(errorBody(reply.StreamError, "server_error", ""))
		event(b)
		return
	}
	finish := finishReason(reply)
	if !send(map[string]any{}, &finish) {
		return
	}
	if includeUsage {
		u, _ := json.Marshal(usageOf(reply))
		c := chunk{
			ID: id, Object: "chat.completion.chunk", Created: Created, Model: req.Model,
			SystemFingerprint: "fp_fake", Choices: []choice{}, Usage: u,
		}
		b, _ := json.Marshal(c)
		if !event(b) {
			return
		}
	}
	event([]byte("[DONE]"))
}

// toolFragments cuts the reply's tool calls into the deltas OpenAI streams.
func toolFragments(reply Reply) []toolDelta {
	n := reply.Fragments
	if n <= 0 {
		n = 3
	}
	perCall := make([][]toolDelta, len(reply.ToolCalls))
	for i, tc := range reply.ToolCalls {
		id := tc.ID
		if id == "" {
			id = fmt.Sprintf("call_%d", i)
		}
		if reply.SameIndex {
			perCall[i] = []toolDelta{{ID: id, Type: "function", Function: fnDelta{Name: tc.Name, Arguments: tc.Arguments}}}
			continue
		}
		perCall[i] = append(perCall[i], toolDelta{Index: i, ID: id, Type: "function", Function: fnDelta{Name: tc.Name}})
		for _, piece := range cut(tc.Arguments, n) {
			perCall[i] = append(perCall[i], toolDelta{Index: i, Function: fnDelta{Arguments: piece}})
		}
	}
	var out []toolDelta
	if !reply.Interleave {
		for _, c := range perCall {
			out = append(out, c...)
		}
		return out
	}
	for k := 0; ; k++ {
		more := false
		for _, c := range perCall {
			if k < len(c) {
				out = append(out, c[k])
				more = true
			}
		}
		if !more {
			return out
		}
	}
}

// cut splits s into n pieces of about equal length (fewer when s is short).
func cut(s string, n int) []string {
	if s == "" {
		return nil
	}
	n = min(n, len(s))
	var out []string
	for i := range n {
		out = append(out, s[i*len(s)/n:(i+1)*len(s)/n])
	}
	return out
}

func finishReason(reply Reply) string {
	switch {
	case reply.FinishReason != "":
		return reply.FinishReason
	case len(reply.ToolCalls) > 0:
		return "tool_calls"
	default:
		return "stop"
	}
}

func usageOf(reply Reply) usage {
	return usage{reply.PromptTokens, reply.CompletionTokens, reply.PromptTokens + reply.CompletionTokens}
}

// whole answers a "stream": false request with one chat.completion object.
func (s *Server) whole(w http.ResponseWriter, r *http.Request, id, model string, reply Reply) {
	switch {
	case reply.Hang:
		s.hang(r)
		return
	case reply.Cut:
		panic(http.ErrAbortHandler)
	case reply.StreamError != "" && reply.ErrorIn200:
		writeJSON(w, http.StatusOK, errorBody(reply.StreamError, "server_error", ""))
		return
	case reply.StreamError != "":
		writeError(w, http.StatusInternalServerError, reply.StreamError, "server_error", "")
		return
	}
	if !s.wait(r, reply.Delay) {
		return
	}
	msg := map[string]any{"role": "assistant", "content": strings.Join(reply.Content, ""), "refusal": nil}
	if len(reply.Content) == 0 {
		msg["content"] = nil
	}
	if len(reply.Reasoning) > 0 {
		field := reply.ReasoningField
		if field == "" {
			field = "reasoning_content"
		}
		msg[field] = strings.Join(reply.Reasoning, "")
	}
	if len(reply.ToolCalls) > 0 {
		var calls []map[string]any
		for i, tc := range reply.ToolCalls {
			id := tc.ID
			if id == "" {
				id = fmt.Sprintf("call_%d", i)
			}
			calls = append(calls, map[string]any{
				"id": id, "type": "function",
				"function": map[string]any{"name": tc.Name, "arguments": tc.Arguments},
			})
		}
		msg["tool_calls"] = calls
	}
	finish := finishReason(reply)
	writeJSON(w, http.StatusOK, map[string]any{
		"id":                 id,
		"object":             "chat.completion",
		"created":            Created,
		"model":              model,
		"system_fingerprint": "fp_fake",
		"choices": []map[string]any{{
			"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish,
		}},
		"usage": usageOf(reply),
	})
}

// wait sleeps d unless the client goes away first; it reports whether to go on.
func (s *Server) wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	case <-s.quit:
		return false
	}
}

func (s *Server) hang(r *http.Request) {
	s.hangOnce.Do(func() { close(s.hanging) })
	select {
	case <-r.Context().Done():
		s.cancelOnce.Do(func() { close(s.canceled) })
	case <-s.quit:
	}
}

func errorBody(msg, typ, code string) map[string]any {
	var c any
	if code != "" {
		c = code
	}
	return map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": c}}
}

func writeError(w http.ResponseWriter, status int, msg, typ, code string) {
	writeJSON(w, status, errorBody(msg, typ, code))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
