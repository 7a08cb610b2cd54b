// Package fakeollama is an httptest server that speaks Ollama's native API
// the way a real Ollama does: POST /api/chat streaming NDJSON (or one JSON
// object when the request says "stream": false), GET /api/version and
// POST /api/show (a model's details and capabilities). Each
// test scripts the replies and then asserts on the requests the server
// recorded.
//
// Asked to (SetMemory), it also emulates Ollama's model scheduler: models
// that load into a memory budget at a bandwidth, wait for the ones they
// evict, and unload after their keep-alive, reported in load_duration,
// GET /api/ps and GET /api/tags, with POST /api/generate's preload.
//
// It is for tests only: the ollama backend's, the proxy's end-to-end
// tests, and the load harness's chain scenario (bench/load -chains).
package fakeollama

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
)

// Version is what GET /api/version reports.
const Version = "0.17.4"

// ToolCall is a scripted tool call. Ollama sends tool calls whole, with
// their arguments as a JSON object.
type ToolCall struct {
	// ID is sent as is. Empty, like the Ollama versions that sent none.
	ID   string
	Name string
	Args map[string]any
}

// Reply scripts one answer of POST /api/chat. In a stream, the thinking
// pieces go first, one line each, then the content pieces, then one line
// with every tool call, then the final "done" line (or what Error, Hang or
// Cut put in its place).
type Reply struct {
	// Thinking are pieces of message.thinking.
	Thinking []string
	// Content are pieces of message.content.
	Content []string
	// ToolCalls arrive together in one message, as Ollama sends them.
	ToolCalls []ToolCall
	// DoneReason is the final line's done_reason; "stop" when empty.
	DoneReason string
	// PromptEvalCount and EvalCount are the final line's token counts.
	PromptEvalCount, EvalCount int

	// Status, when set, answers this HTTP status with {"error": Error}
	// before anything is streamed.
	Status int
	// Error without Status ends the stream after the pieces with a
	// {"error": Error} line instead of the done line, as Ollama does when a
	// runner fails mid-generation.
	Error string
	// Hang blocks after the pieces until the client goes away; Canceled
	// then reports it.
	Hang bool
	// Cut drops the connection after the pieces, without a done line.
	Cut bool
	// EndEarly ends the stream after the pieces with neither a done line
	// nor an error, the body closed cleanly: Ollama v0.17.4 does so when
	// the model writes one token more than 30 times in a row (its token
	// repeat limit, llm/server.go Completion; ollama/ollama#8786).
	EndEarly bool
	// Delay is waited before each line.
	Delay time.Duration
}

// Server is a scripted fake Ollama. Its methods are safe for concurrent use.
type Server struct {
	*httptest.Server

	script func(call int, req *api.ChatRequest) Reply
	quit   chan struct{}
	conns  atomic.Int64
	// stopOnce lets Stop run once, though a program and a test's cleanup
	// may both call it.
	stopOnce sync.Once

	mu            sync.Mutex
	requests      []api.ChatRequest
	bodies        []map[string]any
	versionStatus int
	hanging       chan struct{}
	hangOnce      sync.Once
	canceled      chan struct{}
	cancelOnce    sync.Once
	// models are the models /api/show knows, with their capabilities;
	// nil: every model, with DefaultCapabilities.
	models map[string][]string
	// window, when set, emulates the model's context window (SetWindow).
	window *window
	// contextLength is the trained length /api/show reports; 0: none.
	contextLength int
	// sched, when set, emulates Ollama's model scheduler (SetMemory).
	sched *sched
	// generates are the bodies of /api/generate calls with a prompt.
	generates []api.GenerateRequest
	// loadDurations are the load_duration of each chat call, by call.
	loadDurations []time.Duration
}

// New starts a server that answers the n-th POST /api/chat with replies[n];
// the last reply repeats. With no replies it answers "ok". The server is
// closed when the test ends.
func New(t testing.TB, replies ...Reply) *Server {
	if len(replies) == 0 {
		replies = []Reply{{Content: []string{"ok"}}}
	}
	return NewFunc(t, func(call int, _ *api.ChatRequest) Reply {
		return replies[min(call, len(replies)-1)]
	})
}

// NewFunc starts a server whose replies are computed by script from the call
// number (0 first) and the decoded request.
func NewFunc(t testing.TB, script func(call int, req *api.ChatRequest) Reply) *Server {
	s := Start(script)
	t.Cleanup(s.Stop)
	return s
}

// Start is NewFunc for a program rather than a test (the load harness's
// chain scenario): the caller calls Stop.
func Start(script func(call int, req *api.ChatRequest) Reply) *Server {
	s := &Server{
		script:   script,
		quit:     make(chan struct{}),
		hanging:  make(chan struct{}),
		canceled: make(chan struct{}),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/chat", s.chat)
	mux.HandleFunc("GET /api/version", s.version)
	mux.HandleFunc("POST /api/show", s.show)
	mux.HandleFunc("GET /api/ps", s.ps)
	mux.HandleFunc("GET /api/tags", s.tags)
	mux.HandleFunc("POST /api/generate", s.generate)
	s.Server = httptest.NewUnstartedServer(mux)
	s.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	return s
}

// Stop releases hanging handlers first (Close waits for them), closes the
// server, then stops the scheduler. Calls after the first do nothing.
func (s *Server) Stop() { s.stopOnce.Do(s.stop) }

func (s *Server) stop() {
	close(s.quit)
	s.CloseClientConnections()
	s.Close()
	s.mu.Lock()
	sc := s.sched
	s.mu.Unlock()
	if sc != nil {
		sc.close()
	}
}

// Requests returns the decoded body of every /api/chat call so far.
func (s *Server) Requests() []api.ChatRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]api.ChatRequest(nil), s.requests...)
}

// Bodies returns the raw JSON body of every /api/chat call so far, decoded
// as maps, for wire-exact assertions (numbers are float64).
func (s *Server) Bodies() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.bodies...)
}

// Hanging is closed once a Hang reply has sent its pieces and waits for
// the client to go away.
func (s *Server) Hanging() <-chan struct{} { return s.hanging }

// Conns returns how many TCP connections clients opened so far: a client
// that reuses its connections opens one for sequential calls.
func (s *Server) Conns() int { return int(s.conns.Load()) }

// Canceled is closed once a Hang reply saw its client go away.
func (s *Server) Canceled() <-chan struct{} { return s.canceled }

// SetVersionStatus makes GET /api/version answer status (0 restores 200),
// to make the node fail its probe.
func (s *Server) SetVersionStatus(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.versionStatus = status
}

func (s *Server) version(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	status := s.versionStatus
	s.mu.Unlock()
	if status != 0 && status != http.StatusOK {
		writeJSON(w, status, map[string]string{"error": http.StatusText(status)})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"version": Version})
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var req api.ChatRequest
	var raw map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	s.mu.Lock()
	call := len(s.requests)
	s.requests = append(s.requests, req)
	s.bodies = append(s.bodies, raw)
	s.loadDurations = append(s.loadDurations, 0)
	s.mu.Unlock()

	if status, msg := s.refuse(&req); status != 0 {
		writeJSON(w, status, map[string]string{"error": msg})
		return
	}
	status, msg, prompt := s.fit(&req)
	if status != 0 {
		writeJSON(w, status, map[string]string{"error": msg})
		return
	}
	load, release, status, msg := s.schedule(r, req.Model, req.KeepAlive)
	if status != 0 {
		writeJSON(w, status, map[string]string{"error": msg})
		return
	}
	if release == nil {
		return // the client went away while the model loaded
	}
	defer release()
	s.mu.Lock()
	s.loadDurations[call] = load
	s.mu.Unlock()
	reply := s.script(call, &req)
	if prompt > 0 {
		reply.PromptEvalCount = prompt
	}
	if reply.Status != 0 {
		msg := reply.Error
		if msg == "" {
			msg = http.StatusText(reply.Status)
		}
		writeJSON(w, reply.Status, map[string]string{"error": msg})
		return
	}
	lines := replyLines(req.Model, reply)
	if req.Stream != nil && !*req.Stream {
		s.whole(w, r, req.Model, reply, lines, load)
		return
	}

	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for _, line := range lines {
		if !s.wait(r, reply.Delay) {
			return
		}
		b, _ := json.Marshal(line)
		w.Write(append(b, '\n'))
		rc.Flush()
	}
	switch {
	case reply.Hang:
		s.hang(r)
	case reply.Cut:
		// Abort the response: the connection closes without the final
		// zero-length chunk, as when an upstream process dies.
		panic(http.ErrAbortHandler)
	case reply.Error != "":
		b, _ := json.Marshal(map[string]string{"error": reply.Error})
		w.Write(append(b, '\n'))
	case reply.EndEarly:
	default:
		if !s.wait(r, reply.Delay) {
			return
		}
		b, _ := json.Marshal(doneLine(req.Model, reply, load))
		w.Write(append(b, '\n'))
		// Ollama flushes every line; the end of the body follows apart.
		rc.Flush()
	}
}

// whole answers a "stream": false request with one object carrying the
// accumulated message, as Ollama's ChatHandler does.
func (s *Server) whole(w http.ResponseWriter, r *http.Request, model string, reply Reply, lines []api.ChatResponse, load time.Duration) {
	switch {
	case reply.Hang:
		s.hang(r)
		return
	case reply.Cut:
		panic(http.ErrAbortHandler)
	case reply.Error != "":
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": reply.Error})
		return
	}
	resp := doneLine(model, reply, load)
	var content, thinking strings.Builder
	for _, l := range lines {
		content.WriteString(l.Message.Content)
		thinking.WriteString(l.Message.Thinking)
		resp.Message.ToolCalls = append(resp.Message.ToolCalls, l.Message.ToolCalls...)
	}
	resp.Message.Content = content.String()
	resp.Message.Thinking = thinking.String()
	if !s.wait(r, reply.Delay) {
		return
	}
	writeJSON(w, http.StatusOK, resp)
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

// replyLines are the streamed lines of reply before the final one.
func replyLines(model string, reply Reply) []api.ChatResponse {
	var lines []api.ChatResponse
	line := func(m api.Message) api.ChatResponse {
		m.Role = "assistant"
		return api.ChatResponse{Model: model, CreatedAt: time.Now().UTC(), Message: m}
	}
	for _, p := range reply.Thinking {
		lines = append(lines, line(api.Message{Thinking: p}))
	}
	for _, p := range reply.Content {
		lines = append(lines, line(api.Message{Content: p}))
	}
	if len(reply.ToolCalls) > 0 {
		calls := make([]api.ToolCall, len(reply.ToolCalls))
		for i, tc := range reply.ToolCalls {
			args := api.NewToolCallFunctionArguments()
			// A map has no order; encoding it first sorts the keys, so
			// the wire order is stable from run to run.
			b, _ := json.Marshal(tc.Args)
			json.Unmarshal(b, &args)
			calls[i] = api.ToolCall{ID: tc.ID, Function: api.ToolCallFunction{Index: i, Name: tc.Name, Arguments: args}}
		}
		lines = append(lines, line(api.Message{ToolCalls: calls}))
	}
	return lines
}

// doneLine is the final line; load is its load_duration, a microsecond
// when the server does not emulate loads.
func doneLine(model string, reply Reply, load time.Duration) api.ChatResponse {
	reason := reply.DoneReason
	if reason == "" {
		reason = "stop"
	}
	if load <= 0 {
		load = time.Microsecond
	}
	return api.ChatResponse{
		Model:      model,
		CreatedAt:  time.Now().UTC(),
		Message:    api.Message{Role: "assistant"},
		Done:       true,
		DoneReason: reason,
		Metrics: api.Metrics{
			TotalDuration:      time.Millisecond,
			LoadDuration:       load,
			PromptEvalCount:    reply.PromptEvalCount,
			PromptEvalDuration: time.Microsecond,
			EvalCount:          reply.EvalCount,
			EvalDuration:       time.Microsecond,
		},
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
