package ollama

import (
	"context"
	"strings"

	"chainproxy/chain/node"
)

// LoadedModel is a model an Ollama server holds in memory (node.LoadedModel).
type LoadedModel = node.LoadedModel

var _ node.LoadReader = (*Backend)(nil)

// LoadedModels lists the models the node's server holds in memory now, from
// GET /api/ps, the longest time left first as Ollama sorts them.
func (b *Backend) LoadedModels(ctx context.Context) ([]LoadedModel, error) {
	if b.err != nil {
		return nil, b.err
	}
	ps, err := b.client.ListRunning(ctx)
	if err != nil {
		return nil, upstreamError(ctx, b.node.Name, err)
	}
	out := make([]LoadedModel, 0, len(ps.Models))
	for _, m := range ps.Models {
		name := m.Model
		if name == "" {
			name = m.Name
		}
		out = append(out, LoadedModel{Name: name, Size: m.Size, VRAM: m.SizeVRAM, ExpiresAt: m.ExpiresAt, ContextLength: m.ContextLength})
	}
	return out, nil
}

// ModelSizes is the size in bytes of every model the node's server has,
// from GET /api/tags, keyed by Ollama's name. It is the model's file: a
// loaded model takes more (its context's cache), which /api/ps tells once
// it is loaded.
func (b *Backend) ModelSizes(ctx context.Context) (map[string]int64, error) {
	if b.err != nil {
		return nil, b.err
	}
	list, err := b.client.List(ctx)
	if err != nil {
		return nil, upstreamError(ctx, b.node.Name, err)
	}
	out := make(map[string]int64, len(list.Models))
	for _, m := range list.Models {
		name := m.Model
		if name == "" {
			name = m.Name
		}
		out[name] = m.Size
	}
	return out, nil
}

// SameModel reports whether two of Ollama's model names are one model: a
// name without a tag is its ":latest" one, which is how /api/ps and
// /api/tags name it.
func SameModel(a, b string) bool {
	return withTag(a) == withTag(b)
}

func withTag(name string) string {
	// A tag follows the last ":" after the last "/" (a registry host may
	// carry a port: "host:5000/library/qwen3").
	if strings.Contains(name[strings.LastIndexByte(name, '/')+1:], ":") {
		return name
	}
	return name + ":latest"
}
