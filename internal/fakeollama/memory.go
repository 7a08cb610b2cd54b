package fakeollama

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ollama/ollama/api"
)

// SetMemory turns on the emulation of Ollama's scheduler (see Memory). Call
// it before the first request. Once on, a model missing from m.Sizes is
// answered 404 as Ollama answers a model it does not have, each answer's
// final line reports load_duration, GET /api/ps lists the loaded models and
// GET /api/tags the models of m.Sizes with their sizes.
func (s *Server) SetMemory(m Memory) {
	m.Sizes = maps.Clone(m.Sizes)
	sc := newSched(m)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sched != nil {
		s.sched.close()
	}
	s.sched = sc
}

// Loads returns every model load so far, in order; nil without SetMemory.
func (s *Server) Loads() []LoadEvent {
	if sc := s.scheduler(); sc != nil {
		return sc.loadEvents()
	}
	return nil
}

// Loaded returns the models loaded now, as /api/ps lists them; nil
// without SetMemory.
func (s *Server) Loaded() []Running {
	if sc := s.scheduler(); sc != nil {
		return sc.running()
	}
	return nil
}

// LoadDurations returns the load_duration each POST /api/chat's answer
// reports (the wait for its model's runner, a load included), by call in
// the order of Requests; 0 for a call not given its runner (yet).
func (s *Server) LoadDurations() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.loadDurations)
}

// Generates returns the decoded body of every POST /api/generate with a
// prompt so far (a preload, with none, is not recorded).
func (s *Server) Generates() []api.GenerateRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.generates)
}

func (s *Server) scheduler() *sched {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sched
}

// schedule takes model's runner when the server emulates the scheduler: how
// long that took (load_duration) and the function that gives it back, or
// the status and message of a refusal. Without the emulation it returns a
// no-op release at once; with a nil release and no status, the client went
// away while it waited.
func (s *Server) schedule(r *http.Request, model string, keep *api.Duration) (time.Duration, func(), int, string) {
	sc := s.scheduler()
	if sc == nil {
		return 0, func() {}, 0, ""
	}
	if _, ok := sc.cfg.Sizes[model]; !ok {
		return 0, nil, http.StatusNotFound, fmt.Sprintf("model '%s' not found", model)
	}
	var k *time.Duration
	if keep != nil {
		k = &keep.Duration
	}
	load, release, err := sc.acquire(r.Context(), model, k)
	if err != nil {
		return 0, nil, 0, ""
	}
	return load, release, 0, ""
}

// tags is GET /api/tags: the models of SetMemory with their sizes, else the
// models SetModel declared, with no size.
func (s *Server) tags(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	sizes := map[string]int64{}
	if s.sched != nil {
		sizes = s.sched.cfg.Sizes
	} else {
		for name := range s.models {
			sizes[name] = 0
		}
	}
	s.mu.Unlock()
	models := []api.ListModelResponse{}
	for name, size := range sizes {
		models = append(models, api.ListModelResponse{
			Name: name, Model: name, Size: size,
			ModifiedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
			Details:    api.ModelDetails{Format: "gguf", Family: "llama"},
		})
	}
	slices.SortFunc(models, func(a, b api.ListModelResponse) int { return strings.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, api.ListResponse{Models: models})
}

// generate is POST /api/generate. Without a prompt it is Ollama's preload
// (routes.go GenerateHandler): the model is loaded and kept for the
// request's keep_alive, answered with done_reason "load", or with a
// keep_alive of 0 unloaded, done_reason "unload"; neither reports metrics.
// With a prompt, the script answers it as a chat of one user message, its
// pieces in "response" and "thinking".
func (s *Server) generate(w http.ResponseWriter, r *http.Request) {
	var req api.GenerateRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	sc := s.scheduler()
	if sc != nil {
		if _, ok := sc.cfg.Sizes[req.Model]; !ok {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("model '%s' not found", req.Model)})
			return
		}
	}
	if req.Prompt == "" {
		reason := "load"
		if req.KeepAlive != nil && req.KeepAlive.Duration == 0 {
			reason = "unload"
		}
		if sc != nil {
			var k *time.Duration
			if req.KeepAlive != nil {
				k = &req.KeepAlive.Duration
			}
			if _, err := sc.preload(r.Context(), req.Model, k); err != nil {
				return
			}
		}
		writeJSON(w, http.StatusOK, api.GenerateResponse{Model: req.Model, CreatedAt: time.Now().UTC(), Done: true, DoneReason: reason})
		return
	}
	s.mu.Lock()
	call := len(s.generates)
	s.generates = append(s.generates, req)
	s.mu.Unlock()
	load, release, status, msg := s.schedule(r, req.Model, req.KeepAlive)
	if status != 0 {
		writeJSON(w, status, map[string]string{"error": msg})
		return
	}
	if release == nil {
		return
	}
	defer release()
	chat := api.ChatRequest{Model: req.Model, Messages: []api.Message{{Role: "user", Content: req.Prompt}}, Options: req.Options}
	reply := s.script(call, &chat)
	var lines []api.GenerateResponse
	for _, l := range replyLines(req.Model, reply) {
		if l.Message.Content != "" || l.Message.Thinking != "" {
			lines = append(lines, api.GenerateResponse{Model: req.Model, CreatedAt: l.CreatedAt, Response: l.Message.Content, Thinking: l.Message.Thinking})
		}
	}
	d := doneLine(req.Model, reply, load)
	final := api.GenerateResponse{Model: req.Model, CreatedAt: d.CreatedAt, Done: true, DoneReason: d.DoneReason, Metrics: d.Metrics}
	if req.Stream != nil && !*req.Stream {
		var resp, thinking strings.Builder
		for _, l := range lines {
			resp.WriteString(l.Response)
			thinking.WriteString(l.Thinking)
		}
		final.Response, final.Thinking = resp.String(), thinking.String()
		if !s.wait(r, reply.Delay*time.Duration(len(lines)+1)) {
			return
		}
		writeJSON(w, http.StatusOK, final)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for _, line := range append(lines, final) {
		if !s.wait(r, reply.Delay) {
			return
		}
		b, _ := json.Marshal(line)
		w.Write(append(b, '\n'))
		rc.Flush()
	}
}
