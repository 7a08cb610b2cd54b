package chain

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"chainproxy/config"
)

// errOutputCap stops a backend's stream once a call's output reached its
// cap; chat turns it into a finish "length".
var errOutputCap = errors.New("output cap reached")

// chat calls the node's backend with the proxy's limits on what one call
// may make it hold: content and reasoning up to nodes[].max_output_bytes,
// after which the call is cancelled and finishes "length" with Chunk.Cut
// saying why, and tool call arguments kept up to maxArgs+1 bytes (see
// Request.MaxArgsBytes). An upstream that streams without end costs the
// proxy the cap, not what it sent.
func (n *Node) chat(ctx context.Context, req *Request, maxArgs int, fn func(Chunk) error) error {
	limit := n.MaxOutputBytes
	if limit <= 0 {
		limit = config.DefaultMaxOutputBytes
	}
	if maxArgs > 0 && req.MaxArgsBytes != maxArgs {
		r := *req
		r.MaxArgsBytes = maxArgs
		req = &r
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // a capped call's connection is closed, not drained
	used := 0
	err := n.Backend.Chat(ctx, req, func(c Chunk) error {
		size := len(c.Content) + len(c.Reasoning)
		if used+size <= limit {
			used += size
			return fn(c)
		}
		room := limit - used
		c.Reasoning = cutUTF8(c.Reasoning, room)
		c.Content = cutUTF8(c.Content, room-len(c.Reasoning))
		// Tool calls come whole in the last chunk: one that arrives with
		// the overflow is complete, and is kept.
		if c.FinishReason == "" || c.FinishReason == "stop" {
			c.FinishReason = "length"
		}
		if len(c.ToolCalls) > 0 {
			c.FinishReason = "tool_calls"
		}
		c.Cut = fmt.Sprintf("output over nodes[].max_output_bytes (%d bytes): the proxy ended the call", limit)
		if err := fn(c); err != nil {
			return err
		}
		return errOutputCap
	})
	if errors.Is(err, errOutputCap) {
		return nil
	}
	return err
}

// cutUTF8 returns s cut to at most n bytes, on a rune boundary.
func cutUTF8(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
