package chain_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"chainproxy/chain"
)

// TestResolveAliases: served names win over patterns, the most specific
// matching pattern wins whatever the map order, and an unknown name's
// error names every model and alias.
func TestResolveAliases(t *testing.T) {
	h := newHarness(t, threeNodes+`
model_aliases:
  "claude-*": chain/auto
  "claude-*haiku*": chain/simple
  "claude-opus-?": chain/reflexive
  "big-*": M1
  "OL*": chain/reflexive
`)
	for _, tc := range []struct {
		model string
		want  chain.Route
	}{
		{"claude-sonnet-4-6", chain.Route{}},
		{"claude-haiku-4-5-20251001", chain.Route{Mode: chain.ModeSimple}},
		{"claude-3-5-haiku-latest", chain.Route{Mode: chain.ModeSimple}},
		{"claude-opus-5", chain.Route{Mode: chain.ModeReflexive}},
		{"big-one", chain.Route{Mode: chain.ModeSimple, Node: "M1"}},
		{"OL1", chain.Route{Mode: chain.ModeSimple, Node: "OL1"}}, // a node's own name is never aliased
	} {
		got, err := h.engine.Resolve(tc.model)
		if err != nil || got != tc.want {
			t.Errorf("Resolve(%s) = %+v, %v; want %+v", tc.model, got, err, tc.want)
		}
	}
	_, err := h.engine.Resolve("gpt-9")
	var ue *chain.UnknownModelError
	if !errors.As(err, &ue) || !errors.Is(err, chain.ErrUnknownModel) {
		t.Fatalf("Resolve(gpt-9) = %v, want an UnknownModelError", err)
	}
	for _, want := range []string{`"gpt-9"`, "chain/auto", "chain/reflexive", "OL1", "M2", "claude-*haiku* → chain/simple"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	// The run resolves the same way: an aliased name reaches the chain.
	res, err := h.engine.Run(context.Background(), &chain.RunRequest{Model: "claude-haiku-4-5", Messages: []chain.Message{{Role: "user", Content: "compare the files"}}}, nil)
	if err != nil || res.Trace.Mode != chain.ModeSimple {
		t.Fatalf("run through an alias: %v %+v", err, res)
	}
}

// TestCountTokens: the estimate grows with the prompt and the tools, and
// an unknown model is refused as Resolve refuses it.
func TestCountTokens(t *testing.T) {
	h := newHarness(t, threeNodes)
	ctx := context.Background()
	short, err := h.engine.CountTokens(ctx, chain.ModelAuto, []chain.Message{{Role: "user", Content: "hi"}}, nil)
	if err != nil || short <= 0 {
		t.Fatalf("CountTokens = %d, %v", short, err)
	}
	long, _ := h.engine.CountTokens(ctx, chain.ModelReflexive, []chain.Message{{Role: "user", Content: strings.Repeat("word ", 400)}}, nil)
	withTools, _ := h.engine.CountTokens(ctx, "OL1", []chain.Message{{Role: "user", Content: "hi"}}, []chain.Tool{{Name: "Bash", Description: "Run a command", Parameters: []byte(`{"type":"object"}`)}})
	if long < 400 || withTools <= short {
		t.Errorf("estimates: short %d, long %d, with tools %d", short, long, withTools)
	}
	if _, err := h.engine.CountTokens(ctx, "gpt-9", nil, nil); !errors.Is(err, chain.ErrUnknownModel) {
		t.Errorf("CountTokens(gpt-9) = %v", err)
	}
}
