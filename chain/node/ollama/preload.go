package ollama

import (
	"context"
	"time"

	"github.com/ollama/ollama/api"

	"chainproxy/chain/node"
	"chainproxy/config"
)

var _ node.ModelLoader = (*Backend)(nil)

// Resident lists the models the server holds (LoadedModels) with the
// memory each takes, keyed as config.FullModelName spells them.
func (b *Backend) Resident(ctx context.Context) (map[string]int64, error) {
	ms, err := b.LoadedModels(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(ms))
	for _, m := range ms {
		out[config.FullModelName(m.Name)] = m.Size
	}
	return out, nil
}

// Sizes lists the models the server has (ModelSizes), keyed as
// config.FullModelName spells them.
func (b *Backend) Sizes(ctx context.Context) (map[string]int64, error) {
	ms, err := b.ModelSizes(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(ms))
	for m, s := range ms {
		out[config.FullModelName(m)] = s
	}
	return out, nil
}

// Preload loads the node's model: Ollama's empty /api/generate, which
// loads a model and answers once it is loaded. It sends the num_ctx the
// node's calls send, since Ollama reloads a runner whose options differ
// (runnerRef.needsReload), and their keep_alive, which becomes the
// runner's.
func (b *Backend) Preload(ctx context.Context, keepAlive *time.Duration, numCtx int) error {
	if b.err != nil {
		return b.err
	}
	req := &api.GenerateRequest{Model: b.node.Model}
	if keepAlive != nil {
		req.KeepAlive = &api.Duration{Duration: *keepAlive}
	}
	if numCtx > 0 {
		req.Options = map[string]any{"num_ctx": numCtx}
	}
	if err := b.client.Generate(ctx, req, func(api.GenerateResponse) error { return nil }); err != nil {
		return upstreamError(ctx, b.node.Name, err)
	}
	return nil
}
