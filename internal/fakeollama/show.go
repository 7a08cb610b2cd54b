package fakeollama

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/ollama/ollama/api"
	"github.com/ollama/ollama/types/model"
)

// DefaultCapabilities are what /api/show reports of a model the test did
// not declare: a chat model whose template takes tools.
var DefaultCapabilities = []string{"completion", "tools"}

// SetModel declares a model /api/show knows, with its capabilities. Once a
// model is declared, /api/show knows only the declared ones and answers
// 404 for the others, as Ollama does for a model it was never given.
func (s *Server) SetModel(name string, caps ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.models == nil {
		s.models = map[string][]string{}
	}
	s.models[name] = caps
}

// SetContextLength makes /api/show report n as every model's trained
// context length (model_info "llama.context_length").
func (s *Server) SetContextLength(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.contextLength = n
}

// show is POST /api/show: the model's details and capabilities, or 404 with
// Ollama's message for a model it does not have.
func (s *Server) show(w http.ResponseWriter, r *http.Request) {
	var req api.ShowRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	name := req.Model
	if name == "" {
		//lint:ignore SA1019 older clients send name
		name = req.Name
	}
	s.mu.Lock()
	caps, ok := s.models[name]
	if s.models == nil {
		caps, ok = DefaultCapabilities, true
	}
	ctxLen := s.contextLength
	s.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("model '%s' not found", name)})
		return
	}
	resp := api.ShowResponse{
		Template:  "{{ .Prompt }}",
		Details:   api.ModelDetails{Format: "gguf", Family: "llama", Families: []string{"llama"}},
		ModelInfo: map[string]any{"general.architecture": "llama"},
	}
	if ctxLen > 0 {
		resp.ModelInfo["llama.context_length"] = ctxLen
	}
	for _, c := range caps {
		resp.Capabilities = append(resp.Capabilities, model.Capability(c))
	}
	if slices.Contains(caps, "tools") {
		resp.Template = "{{ if .Tools }}{{ .Tools }}{{ end }}{{ .Prompt }}"
	}
	writeJSON(w, http.StatusOK, resp)
}

// refuse answers a chat as Ollama v0.17.4 does once models are declared
// (SetModel), messages included: 404 for a model it does not have, 400 for
// tools sent to a model whose capabilities lack them. Refused requests are recorded but use no reply.
func (s *Server) refuse(req *api.ChatRequest) (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.models == nil {
		return 0, ""
	}
	caps, ok := s.models[req.Model]
	switch {
	case !ok:
		return http.StatusNotFound, fmt.Sprintf("model '%s' not found", req.Model)
	case len(req.Tools) > 0 && !slices.Contains(caps, "tools"):
		return http.StatusBadRequest, fmt.Sprintf("registry.ollama.ai/library/%s does not support tools", req.Model)
	}
	return 0, ""
}
