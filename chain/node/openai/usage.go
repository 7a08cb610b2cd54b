package openai

import (
	"strconv"

	"chainproxy/chain/node"
)

// usage is an answer's usage object as servers write it: node.Usage with
// counts read leniently (count). The counts are a report, not the answer:
// one the proxy cannot read as a small integer must not fail a call whose
// content may already be with the client.
type usage struct {
	PromptTokens     count `json:"prompt_tokens"`
	CompletionTokens count `json:"completion_tokens"`
	TotalTokens      count `json:"total_tokens"`
}

// chain returns u as the chain reports it; nil when u is.
func (u *usage) chain() *node.Usage {
	if u == nil {
		return nil
	}
	return &node.Usage{PromptTokens: int(u.PromptTokens), CompletionTokens: int(u.CompletionTokens), TotalTokens: int(u.TotalTokens)}
}

// count is a token count as a server writes it. OpenRouter writes
// cost-weighted counts with decimals for image models answering on
// /chat/completions ("total_tokens":14429.92, BerriAI/litellm#28001),
// which an int refuses, failing the whole answer. A number is truncated
// toward zero, a negative one read as 0, one past maxCount as maxCount;
// anything else (null, a string) leaves the count as it was.
type count int

// maxCount caps a count: no model reads or writes more tokens in a call,
// and the chain sums counts across stages without overflowing.
const maxCount = 1<<31 - 1

// UnmarshalJSON reads the count as the chunk decoder does (parseCount):
// the general decoder and it read the same usage (FuzzDecodeChunk).
func (c *count) UnmarshalJSON(data []byte) error {
	if n, ok := parseCount(data); ok {
		*c = n
	}
	return nil
}

// parseCount reads raw, a JSON value, as a count; false when it is not a
// number. A number in JSON's grammar is one strconv reads; one past
// float64's range reads as an infinity, which the bounds take in.
func parseCount(raw []byte) (count, bool) {
	d := chunkDecoder{data: raw}
	if !d.number() || d.i != len(raw) {
		return 0, false
	}
	f, _ := strconv.ParseFloat(string(raw), 64)
	switch {
	case f <= 0:
		return 0, true
	case f >= maxCount:
		return maxCount, true
	}
	return count(f), true // truncated toward zero
}
