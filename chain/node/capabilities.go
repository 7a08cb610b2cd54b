package node

import (
	"context"
	"errors"
	"fmt"

	"chainproxy/internal/redact"
)

// CapTools is the capability of a model that takes tools, as Ollama's
// /api/show names it.
const CapTools = "tools"

// CapThinking is the capability of a model that thinks before it answers
// and can be asked not to (Ollama's think).
const CapThinking = "thinking"

// ErrModelNotFound is wrapped by a Describer's error when the node's server
// does not have the node's model.
var ErrModelNotFound = errors.New("model not found")

// ErrToolsUnsupported is wrapped by the error of a request whose own tools
// went to a node whose model cannot take tools: the client's to fix.
var ErrToolsUnsupported = errors.New("model cannot take tools")

// ModelInfo is what a node's server tells of the node's model.
type ModelInfo struct {
	// Capabilities are the model's capabilities ("completion", "tools",
	// "thinking", "vision", …); nil when the server does not say.
	Capabilities []string
	// MaxWindow is the longest context the model was trained for (Ollama's
	// model_info "<arch>.context_length"); Window is the window the server
	// runs it with (a loaded Ollama model's context_length, vLLM's
	// max_model_len). 0: not said.
	MaxWindow, Window int
}

// WindowReader is the optional capability of a backend that can tell the
// window its server runs the model with right now (Ollama's /api/ps, once
// the model is loaded); 0 when it cannot tell.
type WindowReader interface {
	LoadedWindow(ctx context.Context) (int, error)
}

// Thinker is the optional capability of a backend that learns from its
// answers whether its model thinks (reasoning apart or in think tags): an
// OpenAI-compatible server's model list rarely says so, and a summary asked
// of a thinking model must ask it not to (Request.NoThink), or its answer
// cap goes on reasoning.
type Thinker interface {
	Thinks() bool
}

// Describer is the optional capability of a backend that can look its model
// up on its server. Describe fails with an error wrapping ErrModelNotFound
// when the server lacks the model.
type Describer interface {
	Describe(ctx context.Context) (ModelInfo, error)
}

// ModelNotFoundError is a node's server lacking the node's model.
type ModelNotFoundError struct {
	Node, Model, BaseURL string
	// Hint says how to get the model, when the server's kind tells.
	Hint string
}

func (e *ModelNotFoundError) Error() string {
	msg := fmt.Sprintf("model %q not found on %s", e.Model, redact.URL(e.BaseURL))
	if e.Hint != "" {
		msg += ": " + e.Hint
	}
	return msg
}

// Is makes errors.Is(err, ErrModelNotFound) hold.
func (e *ModelNotFoundError) Is(target error) bool { return target == ErrModelNotFound }
