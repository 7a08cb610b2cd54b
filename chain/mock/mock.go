// Package mock is a scripted model backend: its behaviour is data
// (config.MockScript), so the demo, the tests and users can make a node answer,
// call tools, loop, stall or fail without any model server.
//
// It is deterministic and keeps no state between calls: the turn played is the
// number of assistant messages after the last user message, so the same
// conversation always gets the same answer. A scenario is picked from the
// user's own words as the classifier judges them (classify.Blocks), so that
// the blocks an agent client injects pick no scenario.
package mock

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"chainproxy/chain"
	"chainproxy/chain/node"
	"chainproxy/classify"
	"chainproxy/config"
)

// Backend is a scripted model.
type Backend struct {
	node   string
	script config.MockScript
	blocks *classify.Blocks
}

var (
	_ node.Backend = (*Backend)(nil)
	_ node.Prober  = (*Backend)(nil)
)

// New returns the scripted backend of a mock node, reading the user's words
// as a classifier with no classify.ignore_blocks does.
func New(node config.Node) *Backend { return NewWithBlocks(node, classify.NewBlocks(nil)) }

// NewWithBlocks returns the scripted backend of a mock node that reads the
// user's words as blocks (built from classify.ignore_blocks) leave them.
func NewWithBlocks(node config.Node, blocks *classify.Blocks) *Backend {
	b := &Backend{node: node.Name, blocks: blocks}
	if node.Mock != nil {
		b.script = *node.Mock
	}
	return b
}

// Probe reports the node as reachable unless it is scripted offline.
func (b *Backend) Probe(ctx context.Context) error {
	if b.script.Offline {
		return b.offline()
	}
	return nil
}

func (b *Backend) offline() error {
	return &node.UpstreamError{Node: b.node, Kind: node.KindConnect, Message: "connection refused (scripted offline)"}
}

// Chat plays the scripted turn for this point of the conversation.
func (b *Backend) Chat(ctx context.Context, req *node.Request, fn func(node.Chunk) error) error {
	if b.script.Offline {
		return b.offline()
	}
	turnIdx := turnIndex(req.Messages)
	user := b.blocks.Judge(chain.UserTexts(req.Messages)).Text
	turns := b.script.Turns
	lower := strings.ToLower(user)
	// The system text is lowered only for a scenario that reads it: stage
	// prompts are long, and the chain benchmarks measure the engine, not
	// the mock.
	system, lowered := "", false
	for _, s := range b.script.Scenarios {
		if s.When == "" && s.System == "" || s.When != "" && !strings.Contains(lower, strings.ToLower(s.When)) {
			continue
		}
		if s.System != "" {
			if !lowered {
				system, lowered = strings.ToLower(systemText(req.Messages)), true
			}
			if !strings.Contains(system, strings.ToLower(s.System)) {
				continue
			}
		}
		turns = s.Turns
		break
	}
	if len(turns) == 0 {
		turns = []config.MockTurn{{Content: "(mock " + b.node + " has no script)"}}
	}
	turn := turns[min(turnIdx, len(turns)-1)]
	if err := sleep(ctx, b.script.Delay); err != nil {
		return err
	}
	if turn.Fail != "" {
		return &node.UpstreamError{Node: b.node, Kind: node.KindStatus, Status: 500, Message: turn.Fail}
	}
	usage := &chain.Usage{PromptTokens: promptTokens(req.Messages)}
	if turn.Reasoning != "" {
		if err := fn(node.Chunk{Reasoning: turn.Reasoning}); err != nil {
			return err
		}
	}
	content := turn.Content
	if len(req.Tools) == 0 && len(turn.ToolCalls) > 0 && content == "" {
		content = b.script.Final
		if content == "" {
			content = "I have gathered {tools} tool results and answer from them."
		}
	}
	content = strings.ReplaceAll(content, "{user}", user)
	content = strings.ReplaceAll(content, "{tools}", fmt.Sprint(toolResults(req.Messages)))
	for i, piece := range pieces(content) {
		if i > 0 && b.script.ChunkDelay > 0 {
			if req.Idle != nil {
				req.Idle()
			}
			if err := sleep(ctx, b.script.ChunkDelay); err != nil {
				return err
			}
		}
		usage.CompletionTokens++
		if err := fn(node.Chunk{Content: piece}); err != nil {
			return err
		}
	}
	last := node.Chunk{FinishReason: "stop", Usage: usage}
	if len(req.Tools) > 0 && len(turn.ToolCalls) > 0 {
		for i, tc := range turn.ToolCalls {
			args := tc.RawArgs
			if args == "" {
				raw, err := json.Marshal(orEmpty(tc.Args))
				if err != nil {
					return fmt.Errorf("mock %s: encoding scripted arguments: %w", b.node, err)
				}
				args = string(raw)
			}
			id := tc.ID
			if id == "" {
				id = fmt.Sprintf("call_%d_%d", turnIdx, i)
			}
			last.ToolCalls = append(last.ToolCalls, chain.ToolCall{ID: id, Name: tc.Name, Arguments: args})
			usage.CompletionTokens += 8
		}
		last.FinishReason = "tool_calls"
	}
	usage.TotalTokens = usage.PromptTokens + usage.CompletionTokens
	return fn(last)
}

// turnIndex returns how many assistant messages follow the last user
// message: the index of the turn to play.
func turnIndex(msgs []chain.Message) int {
	n := 0
	for i := len(msgs) - 1; i >= 0 && msgs[i].Role != "user"; i-- {
		if msgs[i].Role == "assistant" {
			n++
		}
	}
	return n
}

// systemText is the call's first system message, "" without one.
func systemText(msgs []chain.Message) string {
	for _, m := range msgs {
		if m.Role == "system" {
			return m.Content
		}
	}
	return ""
}

func toolResults(msgs []chain.Message) int {
	n := 0
	for _, m := range msgs {
		if m.Role == "tool" {
			n++
		}
	}
	return n
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// pieces splits text into word-sized chunks, as a model streams tokens.
func pieces(s string) []string {
	var out []string
	for len(s) > 0 {
		i := strings.IndexByte(s[1:], ' ')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// promptTokens approximates a tokenizer: one token per four bytes.
func promptTokens(msgs []chain.Message) int {
	n := 0
	for _, m := range msgs {
		n += utf8.RuneCountInString(m.Content)
	}
	return n/4 + 1
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
