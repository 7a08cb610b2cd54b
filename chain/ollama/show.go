package ollama

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/ollama/ollama/api"

	"chainproxy/chain"
	"chainproxy/internal/redact"
)

var _ chain.Describer = (*Backend)(nil)

// Describe looks the node's model up with POST /api/show: its capabilities
// ("completion", "tools", "thinking", "vision", …) say whether it takes
// tools, and a 404 that Ollama does not have it.
func (b *Backend) Describe(ctx context.Context) (chain.ModelInfo, error) {
	if b.err != nil {
		return chain.ModelInfo{}, b.err
	}
	resp, err := b.client.Show(ctx, &api.ShowRequest{Model: b.node.Model})
	if err != nil {
		var se api.StatusError
		if errors.As(err, &se) && se.StatusCode == http.StatusNotFound {
			return chain.ModelInfo{}, b.notFound()
		}
		return chain.ModelInfo{}, upstreamError(ctx, b.node.Name, err)
	}
	caps := make([]string, len(resp.Capabilities))
	for i, c := range resp.Capabilities {
		caps[i] = string(c)
	}
	return chain.ModelInfo{Capabilities: caps}, nil
}

func (b *Backend) notFound() error {
	return &chain.ModelNotFoundError{Node: b.node.Name, Model: b.node.Model, BaseURL: b.node.BaseURL, Hint: "ollama pull " + b.node.Model}
}

// namedError adds node and model to Ollama's message when a call finds the
// model missing (HTTP 404, `model "x" not found, try pulling it first`):
// with three models on one server, which node asked matters.
func (b *Backend) namedError(err error) error {
	var ue *chain.UpstreamError
	if errors.As(err, &ue) && ue.Kind == chain.KindStatus && ue.Status == http.StatusNotFound {
		ue.Message = fmt.Sprintf("%s (node %s, model %q on %s): ollama pull %s", ue.Message, b.node.Name, b.node.Model, redact.URL(b.node.BaseURL), b.node.Model)
	}
	return err
}
