package fakeollama

import (
	"encoding/json"
	"math"
	"net/http"

	"github.com/ollama/ollama/api"
)

// window emulates a model's context window (see SetWindow).
type window struct {
	tokens        int
	charsPerToken float64
	// truncated counts the messages the server dropped silently, as
	// Ollama does for a request that does not send "truncate": false.
	truncated int
	// running is what /api/ps reports as the loaded model's window.
	running int
}

// SetWindow makes the server count each prompt as its characters divided
// by charsPerToken (16 more a message, for the template, and the current
// exchange's thinking) against a window
// of tokens, or the request's options.num_ctx when it sets one, as Ollama
// v0.17.4 does: a request with "truncate": false that does not fit is
// refused with HTTP 400 "the input length exceeds the context length"; any
// other is cut from the front, keeping the system messages and the last
// message, and the number of messages dropped is counted (Truncated). The
// done line reports the prompt's tokens as prompt_eval_count.
func (s *Server) SetWindow(tokens int, charsPerToken float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.window = &window{tokens: tokens, charsPerToken: charsPerToken, running: tokens}
}

// Truncated is how many messages the server dropped silently so far.
func (s *Server) Truncated() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.window == nil {
		return 0
	}
	return s.window.truncated
}

// promptTokens counts req's prompt the way SetWindow describes, with the
// thinking of the messages after the last user message, which Ollama's
// renderers for thinking models keep (v0.17.4 model/renderers/qwen3vl.go,
// deepseek3.go) while they leave out the earlier turns'.
func (w *window) promptTokens(msgs []api.Message, tools api.Tools) int {
	last := -1
	for i, m := range msgs {
		if m.Role == "user" {
			last = i
		}
	}
	chars := 0
	for i, m := range msgs {
		chars += 16 + len(m.Content)
		if i > last {
			chars += len(m.Thinking)
		}
		for _, c := range m.ToolCalls {
			chars += 16 + len(c.Function.Name) + len(c.Function.Arguments.String())
		}
	}
	for _, t := range tools {
		chars += 16 + len(t.Function.Name) + len(t.Function.Description)
		if b, err := json.Marshal(t.Function.Parameters); err == nil {
			chars += len(b)
		}
	}
	return int(math.Ceil(float64(chars) / w.charsPerToken))
}

// fit applies the window to req: the status and message of a refusal, or
// the prompt tokens of what the model gets.
func (s *Server) fit(req *api.ChatRequest) (status int, msg string, prompt int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.window
	if w == nil {
		return 0, "", 0
	}
	limit := w.tokens
	if n, ok := req.Options["num_ctx"].(float64); ok && n > 0 {
		limit = int(n)
		w.running = limit
	}
	n := w.promptTokens(req.Messages, req.Tools)
	if n <= limit {
		return 0, "", n
	}
	if req.Truncate != nil && !*req.Truncate {
		return http.StatusBadRequest, "the input length exceeds the context length", 0
	}
	// Ollama's chatPrompt: drop from the front, keep the system messages
	// and always the last message.
	for i := 1; i < len(req.Messages); i++ {
		var kept []api.Message
		for _, m := range req.Messages[:i] {
			if m.Role == "system" {
				kept = append(kept, m)
			}
		}
		kept = append(kept, req.Messages[i:]...)
		if n = w.promptTokens(kept, req.Tools); n <= limit || i == len(req.Messages)-1 {
			w.truncated += i - (len(kept) - len(req.Messages[i:]))
			return 0, "", min(n, limit)
		}
	}
	return 0, "", min(n, limit)
}

// ps is GET /api/ps. With SetMemory, the loaded models (with the window's
// tokens when SetWindow was called); else the model last called runs with
// the window's tokens.
func (s *Server) ps(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	var models []api.ProcessModelResponse
	if sc := s.sched; sc != nil {
		running := 0
		if s.window != nil {
			running = s.window.running
		}
		s.mu.Unlock()
		for _, r := range sc.running() {
			models = append(models, api.ProcessModelResponse{
				Name: r.Model, Model: r.Model, Size: r.Size, SizeVRAM: r.Size,
				ExpiresAt: r.ExpiresAt, ContextLength: running,
				Details: api.ModelDetails{Format: "gguf", Family: "llama"},
			})
		}
		if models == nil {
			models = []api.ProcessModelResponse{}
		}
		writeJSON(w, http.StatusOK, api.ProcessResponse{Models: models})
		return
	}
	if s.window != nil && len(s.requests) > 0 {
		last := s.requests[len(s.requests)-1].Model
		models = append(models, api.ProcessModelResponse{Name: last, Model: last, ContextLength: s.window.running})
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, api.ProcessResponse{Models: models})
}
