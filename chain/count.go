package chain

import (
	"context"

	"chainproxy/chain/toolfit"
	"chainproxy/memory"
)

// CountTokens estimates the prompt tokens of msgs and tools for model, as
// context fitting does: their characters at the characters-per-token ratio
// calibrated for the model of the node that would first receive them (the named node;
// the first stage's for chain/reflexive; the simple node otherwise, since
// most requests are simple). It reads no upstream: clients ask it before
// every turn (Anthropic's count_tokens), and an estimate is what fitting
// itself acts on.
func (e *Engine) CountTokens(ctx context.Context, model string, msgs []Message, tools []Tool) (int, error) {
	route, err := e.Resolve(model)
	if err != nil {
		return 0, err
	}
	node := route.Node
	switch {
	case node != "":
	case route.Mode == ModeReflexive && len(e.cfg.Chain.Stages) > 0:
		node = e.cfg.Chain.Stages[0].Node
	default:
		node = e.cfg.Chain.SimpleNode
	}
	ratio := memory.DefaultRatio
	if n := e.nodes[node]; n != nil {
		ratio = e.calibration.Ratio(ctx, n.Model)
	}
	return memory.Tokens(memory.Chars(msgs)+toolfit.Chars(tools), ratio), nil
}
