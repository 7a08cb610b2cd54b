package node

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"chainproxy/config"
	"chainproxy/internal/redact"
)

// errOutputCap stops a backend's stream once a call's output reached its
// cap; chat turns it into a finish "length".
var errOutputCap = errors.New("output cap reached")

// Caps are what the proxy applies to every call of a node, whatever its
// backend (Caps.Chat).
type Caps struct {
	// MaxArgs is tools.max_args_bytes.
	MaxArgs int
	// MaxOutput is nodes[].max_output_bytes; 0 is its default.
	MaxOutput int
	// Redact masks the configured secrets.
	Redact redact.Redactor
}

// Chat calls the backend b with what the proxy applies to every model
// call, whatever the backend:
//
//   - the configured secrets are masked in the content, the reasoning,
//     the tool calls (names, ids and arguments) and the model's name, as
//     they stream (a hostile upstream may write the key it was sent
//     anywhere in its answer);
//   - content and reasoning stop at nodes[].max_output_bytes: the call is
//     cancelled and finishes "length", with Chunk.Cut saying why, so that
//     an upstream streaming without end costs the proxy the cap, not what
//     it sent;
//   - backends keep tool call arguments up to tools.max_args_bytes+1
//     bytes each (see Request.MaxArgsBytes), and max_output_bytes for
//     all the answer's calls together (Request.MaxCallsBytes).
func (cp *Caps) Chat(ctx context.Context, b Backend, req *Request, fn func(Chunk) error) error {
	limit := cp.outputLimit()
	if req.MaxArgsBytes != cp.MaxArgs || req.MaxCallsBytes != limit {
		// Callers build their requests with the caps (Apply); a request
		// that comes without them is copied.
		r := *req
		r.MaxArgsBytes, r.MaxCallsBytes = cp.MaxArgs, limit
		req = &r
	}
	// A backend whose fn fails returns at once and closes the response
	// body unread: a capped call's connection is closed, not drained.
	var mask *masking
	if !cp.Redact.Empty() {
		// Only a configuration with secrets pays for the streams.
		mask = &masking{content: cp.Redact.Stream(), reasoning: cp.Redact.Stream()}
	}
	used := 0
	err := b.Chat(ctx, req, func(c Chunk) error {
		if mask != nil {
			c.Content, c.Reasoning = mask.content.Feed(c.Content), mask.reasoning.Feed(c.Reasoning)
			if c.FinishReason != "" {
				c.Content += mask.content.Flush()
				c.Reasoning += mask.reasoning.Flush()
			}
			// Every string of a call is passed on: its name and id go to
			// the client, the trace and the spans as its arguments do.
			for i := range c.ToolCalls {
				tc := &c.ToolCalls[i]
				tc.ID, tc.Name, tc.Arguments = cp.Redact.Values(tc.ID), cp.Redact.Values(tc.Name), cp.Redact.Values(tc.Arguments)
			}
			c.Model = cp.Redact.Values(c.Model)
			if c.Empty() {
				return nil // all held back: it may be the start of a secret
			}
		}
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

// masking is the two streams a call's content and reasoning are masked in.
type masking struct{ content, reasoning redact.Stream }

// outputLimit is nodes[].max_output_bytes, or its default.
func (cp *Caps) outputLimit() int {
	if cp.MaxOutput > 0 {
		return cp.MaxOutput
	}
	return config.DefaultMaxOutputBytes
}

// Apply returns req with the caps set, for Chat.
func (cp *Caps) Apply(req *Request) *Request {
	req.MaxArgsBytes, req.MaxCallsBytes = cp.MaxArgs, cp.outputLimit()
	return req
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
