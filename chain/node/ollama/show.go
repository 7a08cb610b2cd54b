package ollama

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/ollama/ollama/api"

	"chainproxy/chain/node"
	"chainproxy/internal/redact"
)

var _ node.Describer = (*Backend)(nil)

// Describe looks the node's model up with POST /api/show: its capabilities
// ("completion", "tools", "thinking", "vision", …) say whether it takes
// tools, and a 404 that Ollama does not have it.
func (b *Backend) Describe(ctx context.Context) (node.ModelInfo, error) {
	if b.err != nil {
		return node.ModelInfo{}, b.err
	}
	resp, err := b.client.Show(ctx, &api.ShowRequest{Model: b.node.Model})
	if err != nil {
		var se api.StatusError
		if errors.As(err, &se) && se.StatusCode == http.StatusNotFound {
			return node.ModelInfo{}, b.notFound()
		}
		return node.ModelInfo{}, upstreamError(ctx, b.node.Name, err)
	}
	caps := make([]string, len(resp.Capabilities))
	for i, c := range resp.Capabilities {
		caps[i] = string(c)
	}
	info := node.ModelInfo{Capabilities: caps, MaxWindow: maxWindow(resp.ModelInfo)}
	// Best effort: a model not loaded yet has no window to read.
	info.Window, _ = b.LoadedWindow(ctx)
	return info, nil
}

// maxWindow reads "<arch>.context_length" from /api/show's model_info.
func maxWindow(info map[string]any) int {
	arch, _ := info["general.architecture"].(string)
	if v, ok := info[arch+".context_length"].(float64); ok && arch != "" {
		return int(v)
	}
	for k, v := range info {
		if f, ok := v.(float64); ok && strings.HasSuffix(k, ".context_length") {
			return int(f)
		}
	}
	return 0
}

var _ node.WindowReader = (*Backend)(nil)

// LoadedWindow is the context length Ollama runs the node's model with, from
// GET /api/ps; 0 while the model is not loaded.
func (b *Backend) LoadedWindow(ctx context.Context) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	ps, err := b.client.ListRunning(ctx)
	if err != nil {
		return 0, upstreamError(ctx, b.node.Name, err)
	}
	for _, m := range ps.Models {
		if m.Name == b.node.Model || m.Model == b.node.Model || m.Name == b.node.Model+":latest" {
			return m.ContextLength, nil
		}
	}
	return 0, nil
}

func (b *Backend) notFound() error {
	return &node.ModelNotFoundError{Node: b.node.Name, Model: b.node.Model, BaseURL: b.node.BaseURL, Hint: "ollama pull " + b.node.Model}
}

// namedError adds node and model to Ollama's message when a call finds the
// model missing (HTTP 404, `model "x" not found, try pulling it first`):
// with three models on one server, which node asked matters.
func (b *Backend) namedError(err error) error {
	var ue *node.UpstreamError
	if errors.As(err, &ue) && ue.Kind == node.KindStatus && ue.Status == http.StatusNotFound {
		ue.Message = fmt.Sprintf("%s (node %s, model %q on %s): ollama pull %s", ue.Message, b.node.Name, b.node.Model, redact.URL(b.node.BaseURL), b.node.Model)
	}
	return err
}
