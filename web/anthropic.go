package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"chainproxy/chain"
)

// This file translates Anthropic's Messages API (POST /v1/messages, for
// Claude Code and the Anthropic SDKs) to and from the chain's neutral
// types. Anthropic publishes no OpenAPI document: the shapes follow its
// SDKs' types (anthropic-sdk-go, @anthropic-ai/sdk), with which the tests
// decode every answer and event.

// messagesRequest is the part of a Messages request the proxy reads. Other
// fields (cache_control on blocks, context_management, output_config,
// service_tier, container, mcp_servers, …) are ignored: they tune
// Anthropic's own serving, which the chain's nodes do not have.
type messagesRequest struct {
	Model         string             `json:"model"`
	Messages      []anthropicMessage `json:"messages"`
	System        json.RawMessage    `json:"system"`
	MaxTokens     *int               `json:"max_tokens"`
	Stream        bool               `json:"stream"`
	StopSequences []string           `json:"stop_sequences"`
	Temperature   *float64           `json:"temperature"`
	TopP          *float64           `json:"top_p"`
	TopK          *int               `json:"top_k"`
	Tools         []json.RawMessage  `json:"tools"`
	ToolChoice    json.RawMessage    `json:"tool_choice"`
	Thinking      json.RawMessage    `json:"thinking"`
	Metadata      *struct {
		UserID string `json:"user_id"`
	} `json:"metadata"`

	// Set by decodeMessagesRequest.
	msgs     []chain.Message
	tools    []chain.Tool
	dropped  []string // tools left out, as "type" or "name (deferred)"
	choice   chain.ToolChoice
	thinking bool // the node's reasoning goes back as thinking blocks
}

// anthropicMessage is one entry of messages; Content is a string or an
// array of content blocks.
type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// anthropicBlock is any content block: each type uses some fields.
type anthropicBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
	// tool_use
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	// tool_result: Content is a string or an array of blocks.
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	// thinking
	Thinking string `json:"thinking"`
	// image and document
	Source *anthropicSource `json:"source"`
	Title  string           `json:"title"`
}

// anthropicSource is where an image's or a document's bytes are.
type anthropicSource struct {
	Type      string `json:"type"` // base64, url, file, text
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
	FileID    string `json:"file_id"`
}

// blockPart reads an image or document block of a user message at param
// into the chain's part: bytes in base64 or an image's https URL, which
// the proxy never fetches.
func blockPart(b *anthropicBlock, param string) (chain.Part, error) {
	src := b.Source
	if src == nil {
		return chain.Part{}, invalid(param+".source", "%s: an %s block needs a source", param, b.Type)
	}
	sp := param + ".source"
	switch {
	case src.Type == "file" || src.FileID != "":
		return chain.Part{}, invalid(sp+".file_id", "%s names file %q: the proxy keeps no files; send the bytes (source type base64)", sp, src.FileID)
	case b.Type == "image" && src.Type == "url":
		if !strings.HasPrefix(src.URL, "https://") {
			return chain.Part{}, invalid(sp+".url", "%s.url must be an https URL", sp)
		}
		return chain.Part{Kind: chain.PartImage, URL: src.URL, Param: param}, nil
	case src.Type != "base64":
		takes := "its bytes (source type base64)"
		if b.Type == "image" {
			takes += " or an https URL"
		}
		return chain.Part{}, invalid(sp+".type", "%s.type %q: the proxy takes an %s as %s", sp, src.Type, b.Type, takes)
	case !validBase64(src.Data):
		return chain.Part{}, invalid(sp+".data", "%s.data is not base64", sp)
	case b.Type == "image" && !strings.HasPrefix(src.MediaType, "image/"):
		return chain.Part{}, invalid(sp+".media_type", "%s.media_type %q is not an image type", sp, src.MediaType)
	case b.Type == "image":
		return chain.Part{Kind: chain.PartImage, MediaType: src.MediaType, Data: src.Data, Param: param}, nil
	}
	return chain.Part{Kind: chain.PartFile, MediaType: src.MediaType, Data: src.Data, Filename: b.Title, Param: param}, nil
}

// anthropicTool is a client tool: a name and its input_schema. A tool
// with another type is a server tool Anthropic runs itself.
type anthropicTool struct {
	Type         string          `json:"type"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	DeferLoading bool            `json:"defer_loading"`
}

// ignoredBlocks are block types that carry nothing the chain's models can
// use: a redacted thinking block is encrypted for Anthropic's servers,
// and server tool calls ran (or not) on them.
var ignoredBlocks = map[string]bool{
	"redacted_thinking": true, "server_tool_use": true, "web_search_tool_result": true, "web_fetch_tool_result": true,
	"code_execution_tool_result": true, "bash_code_execution_tool_result": true, "text_editor_code_execution_tool_result": true,
	"mcp_tool_use": true, "mcp_tool_result": true, "container_upload": true, "tool_search_tool_result": true,
}

// decodeMessagesRequest parses and validates a Messages request body.
func decodeMessagesRequest(body []byte) (*messagesRequest, error) {
	var req messagesRequest
	if err := unmarshal(body, &req); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, invalid(te.Field, "%s: invalid type, want %s", te.Field, te.Type)
		}
		return nil, invalid("", "invalid JSON in request body: %v", err)
	}
	if req.Model == "" {
		return nil, invalid("model", "model: Field required")
	}
	if len(req.Messages) == 0 {
		return nil, invalid("messages", "messages: at least one message is required")
	}
	if m := req.MaxTokens; m != nil && *m < 1 {
		return nil, invalid("max_tokens", "max_tokens: must be at least 1, got %d", *m)
	}
	if t := req.Temperature; t != nil && (*t < 0 || *t > 1) {
		return nil, invalid("temperature", "temperature: must be between 0 and 1, got %v", *t)
	}
	if p := req.TopP; p != nil && (*p < 0 || *p > 1) {
		return nil, invalid("top_p", "top_p: must be between 0 and 1, got %v", *p)
	}
	if k := req.TopK; k != nil && *k < 0 {
		return nil, invalid("top_k", "top_k: must not be negative, got %d", *k)
	}
	if err := req.decodeTools(); err != nil {
		return nil, err
	}
	var err error
	if req.choice, err = req.toolChoice(); err != nil {
		return nil, err
	}
	if req.thinking, err = decodeThinking(req.Thinking); err != nil {
		return nil, err
	}
	system, err := blocksText(req.System, "system")
	if err != nil {
		return nil, err
	}
	if err := req.decodeMessages(system); err != nil {
		return nil, err
	}
	return &req, nil
}

// blocksText reads a string or an array of text blocks (system, a system
// entry of messages) as one text, its blocks a line apart. Other blocks
// are refused.
func blocksText(raw json.RawMessage, param string) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", invalid(param, "%s: want a string or an array of text blocks", param)
		}
		return s, nil
	}
	var blocks []anthropicBlock
	if err := unmarshal(raw, &blocks); err != nil {
		return "", invalid(param, "%s: want a string or an array of text blocks", param)
	}
	if err := checkMessageParts(len(blocks), param); err != nil {
		return "", err
	}
	texts := make([]string, 0, len(blocks))
	for i, b := range blocks {
		switch b.Type {
		case "text":
			texts = append(texts, b.Text)
		case "image", "document":
			return "", invalid(fmt.Sprintf("%s[%d]", param, i), "%s[%d] is an %s: only a user message's content and its tool results take images and documents", param, i, b.Type)
		default:
			return "", invalid(fmt.Sprintf("%s[%d].type", param, i), "%s[%d]: block type %q is not supported here (text only)", param, i, b.Type)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// toolResultContent reads a tool_result's content: a string, or blocks
// whose texts, a line apart, are the result and whose images and
// documents come back as parts (Claude Code's Read answers for an image
// file with an image block). Other blocks are skipped, the text around
// them still the result: Claude Code's tool search answers with
// tool_reference blocks, which the chain cannot show its model.
func toolResultContent(raw json.RawMessage, param string) (string, []chain.Part, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		text, err := blocksText(raw, param)
		return text, nil, err
	}
	var blocks []anthropicBlock
	if err := unmarshal(raw, &blocks); err != nil {
		return "", nil, invalid(param, "%s: want a string or an array of content blocks", param)
	}
	if err := checkMessageParts(len(blocks), param); err != nil {
		return "", nil, err
	}
	var (
		texts []string
		parts []chain.Part
	)
	for i := range blocks {
		switch blocks[i].Type {
		case "text":
			texts = append(texts, blocks[i].Text)
		case "image", "document":
			part, err := blockPart(&blocks[i], fmt.Sprintf("%s[%d]", param, i))
			if err != nil {
				return "", nil, err
			}
			parts = append(parts, part)
		}
	}
	return strings.Join(texts, "\n"), parts, nil
}

// decodeMessages turns messages into the chain's: system text first (the
// system field, then every role "system" entry Claude Code puts inside
// messages); a user message's tool_result blocks become tool messages,
// before its text, so that a client's tool results resume a chain
// waiting for them as on Chat Completions; an assistant message's
// tool_use blocks become its tool calls and its thinking its reasoning.
// The images and documents of a tool result go with the user message
// after the tool messages: the chain's nodes take them in user messages,
// as every front sends them (OpenAI's tool messages hold text only).
func (r *messagesRequest) decodeMessages(system string) error {
	var systems []string
	if system != "" {
		systems = append(systems, system)
	}
	names := map[string]string{} // tool_use id → tool name
	msgs := make([]chain.Message, 0, len(r.Messages)+1)
	var count partCount
	for i, m := range r.Messages {
		param := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "user", "assistant", "system":
		default:
			return invalid(param+".role", "%s.role: %q is not one of user, assistant (or system)", param, m.Role)
		}
		raw := bytes.TrimSpace(m.Content)
		if m.Role == "system" {
			text, err := blocksText(raw, param+".content")
			if err != nil {
				return err
			}
			if text != "" {
				systems = append(systems, text)
			}
			continue
		}
		var blocks []anthropicBlock
		switch {
		case len(raw) > 0 && raw[0] == '"':
			text, err := contentText(raw, place{list: "messages", index: i, field: "content"})
			if err != nil {
				return invalid(param+".content", "%s.content: want a string or an array of content blocks", param)
			}
			blocks = []anthropicBlock{{Type: "text", Text: text}}
		case len(raw) > 0 && raw[0] == '[':
			if err := unmarshal(raw, &blocks); err != nil {
				return invalid(param+".content", "%s.content: want a string or an array of content blocks", param)
			}
			if err := checkMessageParts(len(blocks), param+".content"); err != nil {
				return err
			}
		default:
			return invalid(param+".content", "%s.content: want a string or an array of content blocks", param)
		}
		cm := chain.Message{Role: m.Role}
		var texts []string
		for j, b := range blocks {
			bp := fmt.Sprintf("%s.content[%d]", param, j)
			switch {
			case b.Type == "text":
				texts = append(texts, b.Text)
			case (b.Type == "image" || b.Type == "document") && m.Role == "user":
				part, err := blockPart(&blocks[j], bp)
				if err != nil {
					return err
				}
				cm.Parts = append(cm.Parts, part)
			case b.Type == "thinking" && m.Role == "assistant":
				cm.Reasoning += b.Thinking
			case b.Type == "tool_use" && m.Role == "assistant":
				if b.ID == "" || b.Name == "" {
					return invalid(bp, "%s: a tool_use block needs an id and a name", bp)
				}
				args, err := toolInput(b.Input)
				if err != nil {
					return invalid(bp+".input", "%s.input: %v", bp, err)
				}
				names[b.ID] = b.Name
				cm.ToolCalls = append(cm.ToolCalls, chain.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
			case b.Type == "tool_result" && m.Role == "user":
				if b.ToolUseID == "" {
					return invalid(bp+".tool_use_id", "%s: a tool_result block needs a tool_use_id", bp)
				}
				out, parts, err := toolResultContent(b.Content, bp+".content")
				if err != nil {
					return err
				}
				cm.Parts = append(cm.Parts, parts...)
				if b.IsError {
					// The chain's messages have no error flag: the model
					// reads it in the text, as the Anthropic API shows it.
					out = "Error: " + out
				}
				msgs = append(msgs, chain.Message{Role: "tool", ToolCallID: b.ToolUseID, Name: names[b.ToolUseID], Content: out})
			case ignoredBlocks[b.Type]:
			default:
				return invalid(bp+".type", "%s: block type %q is not supported in a %s message", bp, b.Type, m.Role)
			}
		}
		if err := count.add(cm.Parts); err != nil {
			return err
		}
		cm.Content = strings.Join(texts, "\n")
		if m.Role == "user" && len(texts) > 1 {
			// Where the last text block starts: the blocks before it are
			// what the client put before the user's words.
			cm.Lead = len(cm.Content) - len(texts[len(texts)-1])
		}
		if m.Role == "user" && len(texts) == 0 && len(cm.Parts) == 0 {
			continue // tool results only
		}
		msgs = append(msgs, cm)
	}
	if len(systems) > 0 {
		msgs = append([]chain.Message{{Role: "system", Content: strings.Join(systems, "\n\n")}}, msgs...)
	}
	r.msgs = msgs
	return nil
}

// toolInput is a tool_use block's input as the chain's arguments: compact
// JSON text, {} when absent.
func toolInput(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "{}", nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil || raw[0] != '{' {
		return "", errors.New("want a JSON object")
	}
	return buf.String(), nil
}

// decodeTools keeps the client's tools, with their input_schema. A server
// tool (web_search_*, bash_*, text_editor_*, computer_*, code_execution_*,
// …) runs on Anthropic's servers and a deferred tool is not meant to be
// shown to the model until a tool search loads it: both are left out of
// what the model sees and said once in the trace, rather than failing the
// request.
func (r *messagesRequest) decodeTools() error {
	for i, raw := range r.Tools {
		var t anthropicTool
		if err := unmarshal(raw, &t); err != nil {
			return invalid(fmt.Sprintf("tools[%d]", i), "tools[%d]: want an object with a name and an input_schema", i)
		}
		switch {
		case t.Type != "" && t.Type != "custom":
			r.dropped = append(r.dropped, t.Type)
			continue
		case t.Name == "":
			return invalid(fmt.Sprintf("tools[%d].name", i), "tools[%d].name: Field required", i)
		case t.DeferLoading:
			r.dropped = append(r.dropped, t.Name+" (deferred)")
			continue
		}
		schema := bytes.TrimSpace(t.InputSchema)
		if len(schema) == 0 || string(schema) == "null" {
			schema = nil
		} else if schema[0] != '{' {
			return invalid(fmt.Sprintf("tools[%d].input_schema", i), "tools[%d].input_schema: want a JSON schema object", i)
		}
		r.tools = append(r.tools, chain.Tool{Name: t.Name, Description: t.Description, Parameters: schema})
	}
	return nil
}

func (r *messagesRequest) toolChoice() (chain.ToolChoice, error) {
	raw := bytes.TrimSpace(r.ToolChoice)
	if len(raw) == 0 || string(raw) == "null" {
		return chain.ToolChoice{Mode: "auto"}, nil
	}
	var tc struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &tc); err != nil {
		return chain.ToolChoice{}, invalid("tool_choice", `tool_choice: want {"type": "auto"}, {"type": "any"}, {"type": "tool", "name": …} or {"type": "none"}`)
	}
	switch tc.Type {
	case "auto", "none":
		return chain.ToolChoice{Mode: tc.Type}, nil
	case "any":
		return chain.ToolChoice{Mode: "required"}, nil
	case "tool":
		for _, t := range r.tools {
			if t.Name == tc.Name {
				return chain.ToolChoice{Mode: "function", Name: tc.Name}, nil
			}
		}
		return chain.ToolChoice{}, invalid("tool_choice.name", "tool_choice.name: tool %q is not in tools", tc.Name)
	}
	return chain.ToolChoice{}, invalid("tool_choice.type", "tool_choice.type: %q is not one of auto, any, tool, none", tc.Type)
}

// decodeThinking reads thinking: {"type": "enabled", "budget_tokens": n},
// {"type": "adaptive"} or {"type": "disabled"}, with an optional display
// ("summarized", "omitted"). The chain's nodes keep their own reasoning
// settings, as on the other fronts (Ollama's think): what the client
// chooses is whether the node's reasoning comes back, as thinking blocks.
// As from Anthropic's API, it does only when thinking is enabled (or
// adaptive) and its display not omitted: a client that did not ask reads
// content[0] as the text (the SDKs' msg.content[0].text). The trace keeps
// the reasoning either way.
func decodeThinking(raw json.RawMessage) (bool, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return false, nil
	}
	var th struct {
		Type         string `json:"type"`
		BudgetTokens *int   `json:"budget_tokens"`
		Display      string `json:"display"`
	}
	if err := json.Unmarshal(raw, &th); err != nil {
		return false, invalid("thinking", `thinking: want {"type": "enabled", "budget_tokens": …}, {"type": "adaptive"} or {"type": "disabled"}`)
	}
	switch th.Type {
	case "disabled":
		return false, nil
	case "enabled":
		if th.BudgetTokens == nil || *th.BudgetTokens < 1 {
			return false, invalid("thinking.budget_tokens", "thinking.budget_tokens: Field required (a positive number of tokens)")
		}
	case "adaptive":
	default:
		return false, invalid("thinking.type", "thinking.type: %q is not one of enabled, adaptive, disabled", th.Type)
	}
	return th.Display != "omitted", nil
}

// checkMessagesLimits is checkLimits for a Messages request.
func checkMessagesLimits(req *messagesRequest, maxMessages int) error {
	switch {
	case len(req.Messages) > maxMessages:
		return invalid("messages", "messages: too many messages: %d, at most %d (server.max_messages)", len(req.Messages), maxMessages)
	case len(req.Tools) > maxTools:
		return invalid("tools", "tools: too many tools: %d, at most %d", len(req.Tools), maxTools)
	case len(req.StopSequences) > maxStops:
		return invalid("stop_sequences", "stop_sequences: too many stop sequences: %d, at most %d", len(req.StopSequences), maxStops)
	case req.Metadata != nil && len(req.Metadata.UserID) > 4*maxIDBytes:
		// Claude Code's user_id is a JSON object of ids, about 180 bytes.
		return invalid("metadata.user_id", "metadata.user_id: %d bytes, at most %d", len(req.Metadata.UserID), 4*maxIDBytes)
	}
	return nil
}

func (r *messagesRequest) model() string { return r.Model }

// user is Claude Code's session id, which it sends as metadata.user_id.
func (r *messagesRequest) user() string {
	if r.Metadata != nil {
		return r.Metadata.UserID
	}
	return ""
}

func (r *messagesRequest) droppedTools() []string { return r.dropped }

// toRunRequest converts a validated request to the chain's form.
func (r *messagesRequest) toRunRequest() *chain.RunRequest {
	req := &chain.RunRequest{
		Model:       r.Model,
		Messages:    r.msgs,
		ClientTools: r.tools,
		ToolChoice:  r.choice,
		Params:      chain.Params{Temperature: r.Temperature, TopP: r.TopP, TopK: r.TopK, MaxTokens: r.MaxTokens, Stop: r.StopSequences},
	}
	if len(r.dropped) > 0 {
		req.Notes = []string{"tools left out (server tools the proxy cannot run, deferred tools): " + strings.Join(r.dropped, ", ")}
	}
	return req
}

// Response types, after the SDKs' Message, ContentBlock and Usage.

// Fields of Anthropic's own serving (a code execution container, cache
// diagnostics, a refusal's details, the inference region, service tier,
// speed) are always written, as null: the SDKs' types require them.

type anthropicResponse struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []any          `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	StopDetails  *struct{}      `json:"stop_details"`
	Container    *struct{}      `json:"container"`
	Diagnostics  *struct{}      `json:"diagnostics"`
	Usage        anthropicUsage `json:"usage"`
	// "chain", the trace, is added to the encoded object by withChain.
}

// anthropicUsage is Usage, and MessageDeltaUsage as a subset of it.
type anthropicUsage struct {
	InputTokens              int       `json:"input_tokens"`
	OutputTokens             int       `json:"output_tokens"`
	CacheCreationInputTokens int       `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int       `json:"cache_read_input_tokens"`
	CacheCreation            *struct{} `json:"cache_creation"`
	OutputTokensDetails      *struct{} `json:"output_tokens_details"`
	ServerToolUse            *struct{} `json:"server_tool_use"`
	InferenceGeo             *string   `json:"inference_geo"`
	ServiceTier              *string   `json:"service_tier"`
	Speed                    *string   `json:"speed"`
}

type textBlock struct {
	Type      string    `json:"type"`
	Text      string    `json:"text"`
	Citations *[]string `json:"citations"`
}

type thinkingBlock struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

// toolUseBlock is a client tool call; its caller is the model itself
// ("direct"), as opposed to a server tool's code.
type toolUseBlock struct {
	Type   string          `json:"type"`
	ID     string          `json:"id"`
	Name   string          `json:"name"`
	Input  json.RawMessage `json:"input"`
	Caller directCaller    `json:"caller"`
}

type directCaller struct {
	Type string `json:"type"`
}

var direct = directCaller{Type: "direct"}

// thinkingSignature signs nothing: Anthropic's signature lets its servers
// check thinking sent back to them, and the SDKs expect the field. The
// chain reads thinking sent back as it is, so the value only names where
// the block came from.
const thinkingSignature = "chainproxy-unsigned"

// stopReason is Anthropic's stop_reason for a chain finish reason. A stop
// sequence is never named: the nodes report a matched stop sequence as an
// ordinary stop, so that answer says end_turn.
func stopReason(finish string) string {
	switch finish {
	case "tool_calls":
		return "tool_use"
	case "length":
		return "max_tokens"
	}
	return "end_turn"
}

// callInput is a tool call's arguments as a tool_use block's input: an
// object, {} when the model wrote something else (the chain's trace has
// what it wrote).
func callInput(args string) json.RawMessage {
	a := bytes.TrimSpace([]byte(args))
	if len(a) > 0 && a[0] == '{' && json.Valid(a) {
		return a
	}
	return json.RawMessage("{}")
}

func anthropicUsageOf(res *chain.Result) anthropicUsage {
	u := res.Usage()
	return anthropicUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
}

// anthropicContent is the answer's content blocks: thinking (when the
// client takes it), text, then one tool_use per client tool call. An
// answer with nothing else has one empty text block.
func anthropicContent(res *chain.Result, thinking bool) []any {
	var out []any
	if thinking && res.Message.Reasoning != "" {
		out = append(out, thinkingBlock{Type: "thinking", Thinking: res.Message.Reasoning, Signature: thinkingSignature})
	}
	if res.Message.Content != "" || len(res.Message.ToolCalls) == 0 {
		out = append(out, textBlock{Type: "text", Text: res.Message.Content})
	}
	for _, c := range res.Message.ToolCalls {
		out = append(out, toolUseBlock{Type: "tool_use", ID: c.ID, Name: c.Name, Input: callInput(c.Arguments), Caller: direct})
	}
	return out
}
