package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"chainproxy/chain/node"
)

var _ node.Describer = (*Backend)(nil)

// modelList is GET /v1/models. Capabilities is not OpenAI's: some
// compatible servers list them per model, and they are taken when present.
type modelList struct {
	Data []struct {
		ID           string   `json:"id"`
		Capabilities []string `json:"capabilities"`
		// MaxModelLen is vLLM's window for the model.
		MaxModelLen int `json:"max_model_len"`
	} `json:"data"`
	// Error is LM Studio's answer, with status 200, on a path it does not
	// serve (lmstudio-ai/lmstudio-bug-tracker#618): a base_url without
	// /v1, which lists no model and would pass for a server that lists
	// none.
	Error json.RawMessage `json:"error"`
}

// sameModel reports whether a listed model id is the configured model:
// the same name, or, for a name without a tag, its ":latest" (Ollama's
// /v1/models lists "tiny:latest" for the model its API and CLI also take
// as "tiny"). The tag follows the name's last "/", as a registry's port
// comes before it ("registry.local:5000/tiny").
func sameModel(listed, model string) bool {
	name := model[strings.LastIndex(model, "/")+1:]
	return listed == model || !strings.Contains(name, ":") && listed == model+":latest"
}

// Describe looks the node's model up in GET /v1/models. A server that lists
// models but not this one lacks it; a server that lists none (some serve
// one model and list nothing) is taken at its word that it has it. The
// capabilities are those the listing gives, else unknown (tools assumed).
//
// The chain asks it in the path of a user's request, with that request's
// context: it is bounded as a chat call answered whole is, or a server
// that sent its headers and stalled would hold the request for good.
func (b *Backend) Describe(ctx context.Context) (node.ModelInfo, error) {
	if d := b.node.CallTimeout(false); d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(b.node.BaseURL, "/")+"/models", nil)
	if err != nil {
		return node.ModelInfo{}, fmt.Errorf("openai: node %s: %w", b.node.Name, err)
	}
	if b.node.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+b.node.APIKey)
	}
	resp, err := b.http.Do(hreq)
	if err != nil {
		return node.ModelInfo{}, node.TransportError(ctx, b.node.Name, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return node.ModelInfo{}, node.TransportError(ctx, b.node.Name, err)
	}
	if resp.StatusCode >= http.StatusBadRequest {
		msg := errorMessage(data)
		if msg == "" {
			msg = resp.Status
		}
		return node.ModelInfo{}, &node.UpstreamError{Node: b.node.Name, Kind: node.KindStatus, Status: resp.StatusCode, Message: msg}
	}
	var list modelList
	if json.Unmarshal(data, &list) != nil || len(list.Data) == 0 {
		if msg := eventErrorMessage(list.Error); msg != "" {
			return node.ModelInfo{}, &node.UpstreamError{Node: b.node.Name, Kind: node.KindProtocol, Message: msg}
		}
		return node.ModelInfo{}, nil
	}
	for _, m := range list.Data {
		if sameModel(m.ID, b.node.Model) {
			return node.ModelInfo{Capabilities: m.Capabilities, Window: m.MaxModelLen}, nil
		}
	}
	return node.ModelInfo{}, &node.ModelNotFoundError{Node: b.node.Name, Model: b.node.Model, BaseURL: b.node.BaseURL}
}
