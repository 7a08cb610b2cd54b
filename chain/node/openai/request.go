package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"chainproxy/chain/node"
	"chainproxy/internal/jsonx"
)

// chatRequest is the body of POST /chat/completions, shaped after OpenAI's
// CreateChatCompletionRequest: the fields the proxy sets.
//
// It is not go-openai's ChatCompletionRequest, whose messages and tools
// marshal themselves: each through a second encoding/json pass, which made
// encoding the request the largest cost of relaying a stream. Those
// marshalers also drop the content of a tool message when it is empty,
// which OpenAI refuses, and its float32 temperature cannot say 0 (omitempty).
type chatRequest struct {
	Model               string          `json:"model"`
	Messages            []message       `json:"messages"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	MaxTokens           int             `json:"max_tokens,omitempty"`
	MaxCompletionTokens int             `json:"max_completion_tokens,omitempty"`
	Stop                []string        `json:"stop,omitempty"`
	Seed                *int64          `json:"seed,omitempty"`
	Stream              bool            `json:"stream,omitempty"`
	StreamOptions       *streamOptions  `json:"stream_options,omitempty"`
	ResponseFormat      json.RawMessage `json:"response_format,omitempty"`
	// ChatTemplateKwargs, set for a call asked not to think
	// (node.Request.NoThink), goes to the model's chat template.
	ChatTemplateKwargs *templateKwargs `json:"chat_template_kwargs,omitempty"`

	// tools are the tools' declarations (node.ToolDeclaration), written
	// into the encoded request by encode: through the encoder, each
	// schema would be compacted again on every call.
	tools []json.RawMessage
}

// encode is the request's JSON body: the bytes encoding/json writes for
// it, with the tools' declarations after the other members
// (FuzzRequestEncode compares the two).
//
// It is written by hand. encoding/json walks the request by reflection, a
// third of the cost of relaying a short request; goccy/go-json's encoder
// takes a 9 KiB stack frame, which, this deep in a run, grew every
// streaming goroutine's stack from 16 to 32 KiB (a stack copy per request,
// and 16 KiB more that an open stream holds). The tools, most of a large
// request, are written as they were declared (node.ToolDeclaration).
func (r *chatRequest) encode() ([]byte, error) {
	n := 256 + len(r.Model)
	for i := range r.Messages {
		n += 64 + messageSize(&r.Messages[i])
	}
	for _, t := range r.tools {
		n += len(t) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `{"model":`...)
	b = jsonx.AppendString(b, r.Model)
	b = append(b, `,"messages":`...)
	if r.Messages == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Messages {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendMessage(b, &r.Messages[i])
		}
		b = append(b, ']')
	}
	var err error
	if r.Temperature != nil {
		b = append(b, `,"temperature":`...)
		if b, err = appendFloat(b, *r.Temperature); err != nil {
			return nil, err
		}
	}
	if r.TopP != nil {
		b = append(b, `,"top_p":`...)
		if b, err = appendFloat(b, *r.TopP); err != nil {
			return nil, err
		}
	}
	if r.MaxTokens != 0 {
		b = append(b, `,"max_tokens":`...)
		b = strconv.AppendInt(b, int64(r.MaxTokens), 10)
	}
	if r.MaxCompletionTokens != 0 {
		b = append(b, `,"max_completion_tokens":`...)
		b = strconv.AppendInt(b, int64(r.MaxCompletionTokens), 10)
	}
	if len(r.Stop) > 0 {
		b = append(b, `,"stop":[`...)
		for i, s := range r.Stop {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonx.AppendString(b, s)
		}
		b = append(b, ']')
	}
	if r.Seed != nil {
		b = append(b, `,"seed":`...)
		b = strconv.AppendInt(b, *r.Seed, 10)
	}
	if r.Stream {
		b = append(b, `,"stream":true`...)
	}
	if r.StreamOptions != nil {
		b = append(b, `,"stream_options":{"include_usage":`...)
		b = strconv.AppendBool(b, r.StreamOptions.IncludeUsage)
		b = append(b, '}')
	}
	if len(r.ResponseFormat) > 0 {
		// Made by json.Marshal (responseFormat): compact already.
		b = append(b, `,"response_format":`...)
		b = append(b, r.ResponseFormat...)
	}
	if k := r.ChatTemplateKwargs; k != nil {
		b = append(b, `,"chat_template_kwargs":{"enable_thinking":`...)
		b = strconv.AppendBool(b, k.EnableThinking)
		b = append(b, `,"thinking":`...)
		b = strconv.AppendBool(b, k.Thinking)
		b = append(b, '}')
	}
	if len(r.tools) > 0 {
		b = append(b, `,"tools":[`...)
		for i, t := range r.tools {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, t...)
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}

// messageSize is about what m takes encoded: its texts and arguments.
func messageSize(m *message) int {
	n := len(m.ToolCallID)
	switch c := m.Content.(type) {
	case *string:
		n += len(*c)
	case []contentPart:
		for _, p := range c {
			n += 64
			if p.Text != nil {
				n += len(*p.Text)
			}
			if p.ImageURL != nil {
				n += len(p.ImageURL.URL)
			}
			if p.File != nil {
				n += len(p.File.FileData) + len(p.File.FileID) + len(p.File.Filename)
			}
		}
	}
	for _, tc := range m.ToolCalls {
		n += 64 + len(tc.ID) + len(tc.Function.Name) + len(tc.Function.Arguments)
	}
	return n
}

func appendMessage(b []byte, m *message) []byte {
	b = append(b, `{"role":`...)
	b = jsonx.AppendString(b, m.Role)
	switch c := m.Content.(type) {
	case *string:
		b = append(b, `,"content":`...)
		b = jsonx.AppendString(b, *c)
	case []contentPart:
		b = append(b, `,"content":[`...)
		for i := range c {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendPart(b, &c[i])
		}
		b = append(b, ']')
	}
	if len(m.ToolCalls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i, tc := range m.ToolCalls {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = jsonx.AppendString(b, tc.ID)
			b = append(b, `,"type":`...)
			b = jsonx.AppendString(b, tc.Type)
			b = append(b, `,"function":{"name":`...)
			b = jsonx.AppendString(b, tc.Function.Name)
			b = append(b, `,"arguments":`...)
			b = jsonx.AppendString(b, tc.Function.Arguments)
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	if m.ToolCallID != "" {
		b = append(b, `,"tool_call_id":`...)
		b = jsonx.AppendString(b, m.ToolCallID)
	}
	return append(b, '}')
}

func appendPart(b []byte, p *contentPart) []byte {
	b = append(b, `{"type":`...)
	b = jsonx.AppendString(b, p.Type)
	if p.Text != nil {
		b = append(b, `,"text":`...)
		b = jsonx.AppendString(b, *p.Text)
	}
	if u := p.ImageURL; u != nil {
		b = append(b, `,"image_url":{"url":`...)
		b = jsonx.AppendString(b, u.URL)
		if u.Detail != "" {
			b = append(b, `,"detail":`...)
			b = jsonx.AppendString(b, u.Detail)
		}
		b = append(b, '}')
	}
	if f := p.File; f != nil {
		b = append(b, `,"file":{`...)
		sep := false
		for _, kv := range [...][2]string{{"file_data", f.FileData}, {"file_id", f.FileID}, {"filename", f.Filename}} {
			if kv[1] == "" {
				continue
			}
			if sep {
				b = append(b, ',')
			}
			sep = true
			b = append(b, '"')
			b = append(b, kv[0]...)
			b = append(b, `":`...)
			b = jsonx.AppendString(b, kv[1])
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendFloat writes f as encoding/json does: the shortest decimal that
// reads back as f, in exponent form only for very small or large numbers.
func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("json: unsupported value: %s", strconv.FormatFloat(f, 'g', -1, 64))
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 is written e-9, as encoding/json writes it.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// templateKwargs are the variables vLLM, SGLang and llama-server pass to
// the model's chat template (chat_template_kwargs; llama.cpp
// tools/server/README.md). Thinking models' templates read one of two
// names: enable_thinking (Qwen3, GLM-4.5; on unless false) or thinking
// (DeepSeek-V3.1, Granite 3.2: off by default, on where the server's
// --default-chat-template-kwargs turned it on), as vLLM's "Reasoning
// Outputs" page says. A template reads only the names it knows, so both
// are sent.
type templateKwargs struct {
	EnableThinking bool `json:"enable_thinking"`
	Thinking       bool `json:"thinking"`
}

// message is an input message. Content is a *string, or a []contentPart
// for a message with images or files. It is left out only for an
// assistant message that makes tool calls and says nothing (OpenAI's
// schema allows null there, and some servers refuse an empty string); a
// tool message's content is always sent, even empty.
type message struct {
	Role       string     `json:"role"`
	Content    any        `json:"content,omitempty"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// contentPart is one part of a message's content: its text, an image (a
// data: URL or the client's https URL, which the node fetches itself) or a
// file, as the client sent them.
type contentPart struct {
	Type     string    `json:"type"`
	Text     *string   `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
	File     *fileRef  `json:"file,omitempty"`
}

type imageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

type fileRef struct {
	FileData string `json:"file_data,omitempty"`
	FileID   string `json:"file_id,omitempty"`
	Filename string `json:"filename,omitempty"`
}

// contentParts is m's content as parts: its text first, then its images
// and files in the order the client sent them.
func contentParts(m *node.Message) []contentPart {
	out := make([]contentPart, 0, len(m.Parts)+1)
	if m.Content != "" {
		out = append(out, contentPart{Type: "text", Text: &m.Content})
	}
	for i := range m.Parts {
		p := &m.Parts[i]
		if p.Kind == node.PartFile {
			f := &fileRef{FileID: p.FileID, Filename: p.Filename, FileData: p.Data}
			if p.Data != "" && p.MediaType != "" {
				f.FileData = p.DataURL()
			}
			out = append(out, contentPart{Type: "file", File: f})
			continue
		}
		out = append(out, contentPart{Type: "image_url", ImageURL: &imageURL{URL: p.DataURL(), Detail: p.Detail}})
	}
	return out
}

type toolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// reasoningModel reports the model names OpenAI serves as reasoning
// models, which refuse max_tokens and want max_completion_tokens.
func reasoningModel(model string) bool {
	for _, p := range []string{"o1", "o3", "o4", "gpt-5", "gpt-6"} {
		if strings.HasPrefix(model, p) {
			return true
		}
	}
	return false
}

// newChatRequest translates a chain request to a chat completion request.
//
// The "developer" role is sent as "system": OpenAI treats the two alike
// and many compatible servers know only "system". Earlier reasoning is not
// sent back (DeepSeek refuses reasoning_content in input messages), nor the
// tool name of a tool message, which OpenAI's schema does not have.
func newChatRequest(req *node.Request) *chatRequest {
	out := &chatRequest{
		Model:    req.Model,
		Messages: make([]message, len(req.Messages)),
	}
	for i, m := range req.Messages {
		om := &out.Messages[i]
		om.Role, om.ToolCallID = m.Role, m.ToolCallID
		if m.Role == "developer" {
			om.Role = "system"
		}
		switch {
		case len(m.Parts) > 0:
			om.Content = contentParts(&req.Messages[i])
		case m.Content != "" || m.Role != "assistant" || len(m.ToolCalls) == 0:
			om.Content = &req.Messages[i].Content
		}
		if len(m.ToolCalls) > 0 {
			om.ToolCalls = make([]toolCall, len(m.ToolCalls))
			for j, tc := range m.ToolCalls {
				om.ToolCalls[j] = toolCall{ID: tc.ID, Type: "function", Function: functionCall{Name: tc.Name, Arguments: tc.Arguments}}
			}
		}
	}
	if len(req.Tools) > 0 {
		out.tools = make([]json.RawMessage, len(req.Tools))
		for i, t := range req.Tools {
			// Parameters are valid JSON by node.Tool's contract: not
			// checked again on every call.
			out.tools[i] = t.Declaration
			if len(out.tools[i]) == 0 {
				out.tools[i] = node.ToolDeclaration(t)
			}
		}
	}
	p := req.Params
	out.Temperature, out.TopP, out.Stop, out.Seed = p.Temperature, p.TopP, p.Stop, p.Seed
	out.ResponseFormat = responseFormat(p.Format)
	if p.MaxTokens != nil {
		if reasoningModel(req.Model) {
			out.MaxCompletionTokens = *p.MaxTokens
		} else {
			// max_tokens, not max_completion_tokens: it is the one that
			// every compatible server understands.
			out.MaxTokens = *p.MaxTokens
		}
	}
	return out
}

// responseFormat is Ollama's format as OpenAI's response_format: "json" is
// JSON mode, a schema object a json_schema format; anything else is unset.
func responseFormat(format json.RawMessage) json.RawMessage {
	f := bytes.TrimSpace(format)
	switch {
	case len(f) == 0 || string(f) == "null" || string(f) == `""`:
		return nil
	case string(f) == `"json"`:
		return json.RawMessage(`{"type":"json_object"}`)
	case f[0] == '{':
		b, _ := json.Marshal(map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "format", "schema": json.RawMessage(f)}})
		return b
	}
	return nil
}
