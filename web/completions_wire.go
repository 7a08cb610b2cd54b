package web

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"slices"
	"strconv"
	"time"

	"chainproxy/chain"
	"chainproxy/internal/jsonx"
)

// This file translates OpenAI's chat completion wire format to and from the
// chain's neutral types. The functions are pure so they can be table-tested.

// chatRequest is the subset of OpenAI's CreateChatCompletionRequest the proxy
// understands. Unknown fields are ignored, as OpenAI's own server does for
// fields it does not use.
//
// It has 16 JSON fields, goccy/go-json's most for matching keys without
// regard to case as encoding/json does: with more, unmarshal's fast path
// would read {"Messages": …} as no messages (TestChatRequestKeys).
type chatRequest struct {
	Model            string          `json:"model"`
	Messages         []wireMessage   `json:"messages"`
	Stream           bool            `json:"stream"`
	StreamOptions    *streamOptions  `json:"stream_options"`
	Tools            []wireTool      `json:"tools"`
	ToolChoice       json.RawMessage `json:"tool_choice"`
	Temperature      *float64        `json:"temperature"`
	TopP             *float64        `json:"top_p"`
	MaxTokens        *int            `json:"max_tokens"`
	MaxCompletionTok *int            `json:"max_completion_tokens"`
	Stop             json.RawMessage `json:"stop"`
	Seed             *int64          `json:"seed"`
	N                *int            `json:"n"`
	User             string          `json:"user"`
	ResponseFormat   json.RawMessage `json:"response_format"`
	// KeepAlive is Ollama's keep_alive, which Ollama's OpenAI layer does
	// not take either: a duration string, seconds, -1 or 0.
	KeepAlive json.RawMessage `json:"keep_alive"`

	// Parsed once by decodeChatRequest.
	choice    chain.ToolChoice
	stops     []string
	keepAlive *time.Duration
	// format is response_format as the chain's Params.Format: a JSON
	// schema, "json", or nil for text.
	format json.RawMessage
	// legacy is set when the client offered its tools as the deprecated
	// functions: it reads a call as message.function_call.
	legacy bool
	// callID, for a legacy client, is the ID its follow-up gives the call
	// this request's answer may pass back (chain.RunRequest.ClientCallID).
	callID string
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// wireMessage is a message as OpenAI clients send it. Content is a string or
// an array of parts, hence the raw form.
type wireMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	Name             string          `json:"name,omitempty"`
	ToolCalls        []wireToolCall  `json:"tool_calls,omitempty"`
	ToolCallID       string          `json:"tool_call_id,omitempty"`
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	// FunctionCall is the deprecated form of ToolCalls, one call without
	// an ID, in an assistant message of a client of the functions API.
	FunctionCall *wireFunctionCall `json:"function_call,omitempty"`

	text  string       // Content's text, set by decodeChatRequest
	parts []chain.Part // Content's images and files
	lead  int          // where its last text part starts (contentParts)
}

type wireToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type wireTool struct {
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

// wireFunction is a function a client offers: a tool's function, or an
// item of the deprecated functions (OpenAPI ChatCompletionFunctions).
type wireFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// wireFunctionCall is the deprecated function_call of an assistant
// message, a response message or a stream delta.
type wireFunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// validRoles are the roles the chain takes; a "function" message, the
// deprecated form of a tool result, is read as a tool message (legacyCall).
var validRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true}

// decodeChatRequest parses and validates a chat completion request body.
func decodeChatRequest(body []byte) (*chatRequest, error) {
	var req chatRequest
	if err := unmarshal(body, &req); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te):
			return nil, invalid(te.Field, "invalid type for %s: want %s", te.Field, te.Type)
		case errors.As(err, &se):
			return nil, invalid("", "invalid JSON in request body at byte %d: %v", se.Offset, err)
		}
		return nil, invalid("", "invalid JSON in request body: %v", err)
	}
	if req.Model == "" {
		return nil, invalid("model", "you must provide a model parameter")
	}
	if len(req.Messages) == 0 {
		return nil, invalid("messages", "messages must be a non-empty array")
	}
	if mayHaveExtras(body) {
		if err := req.extras(body); err != nil {
			return nil, err
		}
	}
	var pending string // the ID given to the last legacy function_call
	var ids legacyIDs
	var count partCount
	for i := range req.Messages {
		m := &req.Messages[i]
		if m.FunctionCall != nil || m.Role == "function" {
			var err error
			if pending, err = m.legacyCall(req.Messages, i, pending, &ids); err != nil {
				return nil, err
			}
		}
		if !validRoles[m.Role] {
			return nil, invalid(fmt.Sprintf("messages[%d].role", i), "invalid role %q in messages[%d] (want system, developer, user, assistant, tool or function)", m.Role, i)
		}
		if m.Role == "tool" && m.ToolCallID == "" {
			return nil, invalid(fmt.Sprintf("messages[%d].tool_call_id", i), "messages[%d] has role tool but no tool_call_id", i)
		}
		if m.Role != "assistant" && absent(m.Content) {
			return nil, invalid(fmt.Sprintf("messages[%d].content", i), "missing required parameter messages[%d].content: a %s message needs content (a string or an array of parts)", i, m.Role)
		}
		text, parts, lead, err := contentParts(m.Content, place{"messages", i, "content"}, m.Role == "user")
		if err != nil {
			return nil, err
		}
		m.text, m.parts, m.lead = text, parts, lead
		if err := count.add(parts); err != nil {
			return nil, err
		}
	}
	if req.legacy {
		// The answer's call will sit at len(Messages) in the follow-up.
		req.callID = ids.at(req.Messages, len(req.Messages))
	}
	if req.N != nil && *req.N != 1 {
		return nil, invalid("n", "n must be 1 (got %d): the chain produces one answer", *req.N)
	}
	if t := req.Temperature; t != nil && (*t < 0 || *t > 2) {
		return nil, invalid("temperature", "temperature must be between 0 and 2, got %v", *t)
	}
	if p := req.TopP; p != nil && (*p < 0 || *p > 1) {
		return nil, invalid("top_p", "top_p must be between 0 and 1, got %v", *p)
	}
	if m := req.maxTokens(); m != nil && *m < 1 {
		param := "max_tokens"
		if req.MaxCompletionTok != nil {
			param = "max_completion_tokens"
		}
		return nil, invalid(param, "%s must be at least 1, got %d", param, *m)
	}
	for i, t := range req.Tools {
		if t.Type != "function" {
			return nil, invalid(fmt.Sprintf("tools[%d].type", i), "tools[%d].type must be \"function\"", i)
		}
		if t.Function.Name == "" {
			return nil, invalid(fmt.Sprintf("tools[%d].function.name", i), "tools[%d].function.name is required", i)
		}
	}
	var err error
	if req.choice.Mode == "" { // not set by a legacy function_call
		if req.choice, err = req.toolChoice(); err != nil {
			return nil, err
		}
	}
	if req.stops, err = req.stop(); err != nil {
		return nil, err
	}
	if req.keepAlive, err = decodeKeepAlive(req.KeepAlive); err != nil {
		return nil, err
	}
	if req.format, err = req.responseFormat(); err != nil {
		return nil, err
	}
	return &req, nil
}

// chatExtras are the request fields that chatRequest has no room for (it
// holds goccy/go-json's most, 16) and that must not go unread: the
// deprecated functions and function_call, which older clients (go-openai's
// Functions, LangChain's and AutoGen's function agents) still send in place
// of tools and tool_choice, and outputs the chain cannot give, which a
// client would otherwise wait for in vain.
type chatExtras struct {
	Functions    []wireFunction  `json:"functions"`
	FunctionCall json.RawMessage `json:"function_call"`
	Logprobs     *bool           `json:"logprobs"`
	TopLogprobs  *int            `json:"top_logprobs"`
	Modalities   []string        `json:"modalities"`
	Audio        json.RawMessage `json:"audio"`
}

// extraKeys are chatExtras' keys, for mayHaveExtras.
var extraKeys = [...]string{"functions", "function_call", "logprobs", "top_logprobs", "modalities", "audio"}

// mayHaveExtras reports whether body may hold one of extraKeys as a key, at
// any depth: a name in quotes, matched without regard to ASCII case as
// encoding/json matches keys, before white space and a colon. Only then is
// the body decoded again for chatExtras. It looks at the colons only, a
// byte in a hundred of a request, with IndexByte between them: a few
// hundred nanoseconds on the agent requests of testdata, 1 to 2.5 % of their
// decoding. (A key that spells a letter as a \u escape is not found: no
// client writes one.)
func mayHaveExtras(body []byte) bool {
	for i := 0; ; i++ {
		j := bytes.IndexByte(body[i:], ':')
		if j < 0 {
			return false
		}
		i += j
		end := i // the key's closing quote, when there is one
		for end > 0 && (body[end-1] == ' ' || body[end-1] == '\t' || body[end-1] == '\n' || body[end-1] == '\r') {
			end--
		}
		if end < 2 || body[end-1] != '"' {
			continue
		}
		end--
		switch body[end-1] | 0x20 { // the keys end in s, l or o
		case 's', 'l', 'o':
		default:
			continue
		}
		for _, k := range extraKeys {
			if start := end - len(k); start > 0 && body[start-1] == '"' && bytes.EqualFold(body[start:end], []byte(k)) {
				return true
			}
		}
	}
}

// extras reads chatExtras from body: the deprecated functions become the
// request's tools and function_call its tool choice, and what the chain
// cannot answer is refused as OpenAI refuses a parameter a model does not
// take, rather than dropped.
func (r *chatRequest) extras(body []byte) error {
	var x chatExtras
	if err := decodeBody(body, &x); err != nil {
		return err
	}
	switch {
	case x.Logprobs != nil && *x.Logprobs:
		return unsupported("logprobs", "unsupported_parameter", "Unsupported parameter: 'logprobs': the chain's answer carries no token log probabilities; leave logprobs out or false")
	case x.TopLogprobs != nil && *x.TopLogprobs != 0:
		return unsupported("top_logprobs", "unsupported_parameter", "Unsupported parameter: 'top_logprobs': the chain's answer carries no token log probabilities; leave top_logprobs out or 0")
	case slices.Contains(x.Modalities, "audio"):
		return unsupported("modalities", "unsupported_value", "Unsupported value: 'modalities' does not support 'audio': the chain answers in text only")
	case !absent(x.Audio):
		return unsupported("audio", "unsupported_parameter", "Unsupported parameter: 'audio': the chain answers in text only, not in audio")
	}
	if x.Functions != nil {
		if len(r.Tools) > 0 {
			return invalid("functions", "functions is the deprecated form of tools: send one or the other, not both")
		}
		for i, f := range x.Functions {
			if f.Name == "" {
				return invalid(fmt.Sprintf("functions[%d].name", i), "functions[%d].name is required", i)
			}
			r.Tools = append(r.Tools, wireTool{Type: "function", Function: f})
		}
		r.legacy = true
	}
	if absent(x.FunctionCall) {
		return nil
	}
	if !absent(r.ToolChoice) {
		return invalid("function_call", "function_call is the deprecated form of tool_choice: send one or the other, not both")
	}
	var mode string
	if json.Unmarshal(x.FunctionCall, &mode) == nil {
		if mode != "auto" && mode != "none" {
			return invalid("function_call", "function_call %q is not one of auto, none", mode)
		}
		r.choice = chain.ToolChoice{Mode: mode}
		return nil
	}
	var named wireFunctionCall
	if err := json.Unmarshal(x.FunctionCall, &named); err != nil || named.Name == "" {
		return invalid("function_call", `function_call must be "auto", "none" or {"name": …}`)
	}
	for _, f := range x.Functions {
		if f.Name == named.Name {
			r.choice = chain.ToolChoice{Mode: "function", Name: named.Name}
			return nil
		}
	}
	return invalid("function_call", "function_call names function %q, which is not in functions", named.Name)
}

// legacyCall reads message i of msgs, from a client of the functions API,
// as the tool messages the chain knows: an assistant's function_call
// becomes a tool call, and a "function" message, its result, a tool message
// answering it. Neither carries an ID; the call is given one from its place
// (ids), and the result takes the one of the call before it (pending, which
// it returns cleared; a call returns its own).
func (m *wireMessage) legacyCall(msgs []wireMessage, i int, pending string, ids *legacyIDs) (string, error) {
	if m.Role == "function" {
		if m.Name == "" {
			return "", invalid(fmt.Sprintf("messages[%d].name", i), "messages[%d] has role function but no name", i)
		}
		if pending == "" {
			pending = ids.at(msgs, i)
		}
		m.Role, m.ToolCallID = "tool", pending
		return "", nil
	}
	if m.Role != "assistant" {
		return "", invalid(fmt.Sprintf("messages[%d].function_call", i), "messages[%d] has a function_call but role %s: only an assistant calls functions", i, m.Role)
	}
	tc := wireToolCall{ID: ids.at(msgs, i), Type: "function"}
	tc.Function.Name, tc.Function.Arguments = m.FunctionCall.Name, m.FunctionCall.Arguments
	m.ToolCalls = append(m.ToolCalls, tc)
	return tc.ID, nil
}

// legacyIDs names the legacy function calls of a conversation. The ID of
// the call in message i is the same every time the conversation up to it
// is sent: the chain passes a call back under the ID the client's
// follow-up will give it (chain.RunRequest.ClientCallID), which finds the
// chain to resume. It holds a hash of the messages before i, so that
// another conversation under the same conversation key (the same user
// field, or the same first question) with a call at the same place does
// not resume this one's chain.
type legacyIDs struct {
	h    hash.Hash64 // FNV-1a of msgs[:next], as decodeChatRequest made them
	next int
}

// at is the ID of the call in message i of msgs, whose messages before i
// are decoded (legacy calls read, text set).
func (l *legacyIDs) at(msgs []wireMessage, i int) string {
	if l.h == nil {
		l.h = fnv.New64a()
	}
	var b []byte
	for ; l.next < i; l.next++ {
		m := &msgs[l.next]
		b = appendField(b[:0], m.Role)
		b = appendField(b, m.text)
		b = appendField(b, m.Name)
		b = appendField(b, m.ToolCallID)
		for _, tc := range m.ToolCalls {
			b = appendField(b, tc.ID)
			b = appendField(b, tc.Function.Name)
			b = appendField(b, tc.Function.Arguments)
		}
		l.h.Write(append(b, '\n'))
	}
	return "call_function_" + strconv.Itoa(i) + "_" + strconv.FormatUint(l.h.Sum64(), 16)
}

// appendField appends s with its length first: fields so written never
// read as other fields.
func appendField(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func (r *chatRequest) maxTokens() *int {
	if r.MaxCompletionTok != nil {
		return r.MaxCompletionTok
	}
	return r.MaxTokens
}

// toolChoiceMode reads a tool_choice as Chat Completions and Responses
// both take it: absent or null is auto, a string is a mode. done is false
// when it is an object, which each reads its own way from raw, trimmed.
func toolChoiceMode(choice json.RawMessage) (raw []byte, tc chain.ToolChoice, done bool, err error) {
	raw = bytes.TrimSpace(choice)
	if len(raw) == 0 || string(raw) == "null" {
		return raw, chain.ToolChoice{Mode: "auto"}, true, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto", "none", "required":
			return raw, chain.ToolChoice{Mode: s}, true, nil
		}
		return raw, chain.ToolChoice{}, true, invalid("tool_choice", "tool_choice %q is not one of auto, none, required", s)
	}
	return raw, chain.ToolChoice{}, false, nil
}

func (r *chatRequest) toolChoice() (chain.ToolChoice, error) {
	raw, tc, done, err := toolChoiceMode(r.ToolChoice)
	if done {
		return tc, err
	}
	var obj struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Type != "function" || obj.Function.Name == "" {
		return chain.ToolChoice{}, invalid("tool_choice", `tool_choice must be "auto", "none", "required" or {"type":"function","function":{"name":…}}`)
	}
	for _, t := range r.Tools {
		if t.Function.Name == obj.Function.Name {
			return chain.ToolChoice{Mode: "function", Name: obj.Function.Name}, nil
		}
	}
	return chain.ToolChoice{}, invalid("tool_choice", "tool_choice names function %q, which is not in tools", obj.Function.Name)
}

// responseFormat reads response_format: {"type": "text"}, {"type":
// "json_object"}, or {"type": "json_schema", "json_schema": {"name",
// "schema", "strict"}}, which the SDKs' chat.completions.parse send before
// parsing the answer as JSON. The answering node gets it as the chain's
// format, which holds its output to the schema (Ollama's format, an
// OpenAI-compatible server's response_format); one the proxy cannot pass
// on is refused, since an answer in prose would fail the client's parse.
func (r *chatRequest) responseFormat() (json.RawMessage, error) {
	if absent(r.ResponseFormat) {
		return nil, nil
	}
	var f struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(r.ResponseFormat, &f); err != nil {
		return nil, invalid("response_format", "response_format must be an object with a type (text, json_object or json_schema)")
	}
	switch f.Type {
	case "text":
		return nil, nil
	case "json_object":
		return json.RawMessage(`"json"`), nil
	case "json_schema":
	default:
		return nil, invalid("response_format.type", "response_format.type %q is not one of text, json_object, json_schema", f.Type)
	}
	if f.JSONSchema == nil {
		return nil, invalid("response_format.json_schema", "missing required parameter response_format.json_schema")
	}
	if f.JSONSchema.Name == "" {
		return nil, invalid("response_format.json_schema.name", "missing required parameter response_format.json_schema.name")
	}
	schema := bytes.TrimSpace(f.JSONSchema.Schema)
	switch {
	case absent(schema):
		// The schema is optional in OpenAI's description: the answer
		// must still be JSON.
		return json.RawMessage(`"json"`), nil
	case schema[0] != '{':
		return nil, invalid("response_format.json_schema.schema", "response_format.json_schema.schema must be a JSON schema object")
	}
	return schema, nil
}

func (r *chatRequest) stop() ([]string, error) {
	raw := bytes.TrimSpace(r.Stop)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, invalid("stop", "stop must be a string or an array of strings")
	}
	return many, nil
}

func (r *chatRequest) model() string { return r.Model }

func (r *chatRequest) user() string { return r.User }

// droppedTools is nil: Chat Completions leaves none of the client's tools
// out.
func (r *chatRequest) droppedTools() []string { return nil }

// toRunRequest converts a validated request to the chain's form.
func (r *chatRequest) toRunRequest() *chain.RunRequest {
	msgs := make([]chain.Message, len(r.Messages))
	for i, m := range r.Messages {
		// An assistant's reasoning_content, as the proxy's answers write
		// it, goes back to the nodes that take it (Ollama's thinking).
		msgs[i] = chain.Message{Role: m.Role, Content: m.text, Parts: m.parts, Lead: m.lead, Reasoning: m.ReasoningContent, ToolCallID: m.ToolCallID, Name: m.Name}
		for _, tc := range m.ToolCalls {
			msgs[i].ToolCalls = append(msgs[i].ToolCalls, chain.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
	}
	var tools []chain.Tool
	for _, t := range r.Tools {
		tools = append(tools, chain.Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	return &chain.RunRequest{
		Model:        r.Model,
		Messages:     msgs,
		ClientTools:  tools,
		ClientCallID: r.callID,
		ToolChoice:   r.choice,
		KeepAlive:    r.keepAlive,
		Params: chain.Params{
			Temperature: r.Temperature,
			TopP:        r.TopP,
			MaxTokens:   r.maxTokens(),
			Stop:        r.stops,
			Seed:        r.Seed,
			Format:      r.format,
		},
	}
}

// Response types, shaped after OpenAI's CreateChatCompletionResponse and
// CreateChatCompletionStreamResponse: required fields are always present,
// nullable ones are written as null rather than omitted.

type chatResponse struct {
	ID      string      `json:"id"`
	Object  string      `json:"object"`
	Created int64       `json:"created"`
	Model   string      `json:"model"`
	Choices []choice    `json:"choices"`
	Usage   chain.Usage `json:"usage"`
	// "chain", the trace, is added to the encoded object by withChain.
}

type choice struct {
	Index        int             `json:"index"`
	Message      responseMessage `json:"message"`
	Logprobs     *struct{}       `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
}

type responseMessage struct {
	Role             string         `json:"role"`
	Content          *string        `json:"content"`
	Refusal          *string        `json:"refusal"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []wireToolCall `json:"tool_calls,omitempty"`
	// FunctionCall replaces ToolCalls for a client of the functions API.
	FunctionCall *wireFunctionCall `json:"function_call,omitempty"`
}

type chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *chain.Usage  `json:"usage,omitempty"`
	// The last chunk gets "chain", the trace, from withChain.
}

type chunkChoice struct {
	Index        int       `json:"index"`
	Delta        delta     `json:"delta"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type delta struct {
	Role             string            `json:"role,omitempty"`
	Content          *string           `json:"content,omitempty"`
	ReasoningContent string            `json:"reasoning_content,omitempty"`
	ToolCalls        []wireToolCall    `json:"tool_calls,omitempty"`
	FunctionCall     *wireFunctionCall `json:"function_call,omitempty"`
}

func wireCalls(calls []chain.ToolCall, indexed bool) []wireToolCall {
	out := make([]wireToolCall, len(calls))
	for i, c := range calls {
		out[i].ID, out[i].Type = c.ID, "function"
		out[i].Function.Name, out[i].Function.Arguments = c.Name, c.Arguments
		if indexed {
			out[i].Index = &i
		}
	}
	return out
}

// toResponse builds the non-stream response.
func toResponse(id, model string, created int64, res *chain.Result, content string) *chatResponse {
	msg := responseMessage{Role: "assistant", Content: &content, ReasoningContent: res.Message.Reasoning}
	if len(res.Message.ToolCalls) > 0 {
		msg.ToolCalls = wireCalls(res.Message.ToolCalls, false)
		if content == "" {
			msg.Content = nil
		}
	}
	return &chatResponse{
		ID: id, Object: "chat.completion", Created: created, Model: model,
		Choices: []choice{{Message: msg, FinishReason: res.FinishReason}},
		Usage:   res.Usage(),
	}
}

// legacyCall is the first of calls as the deprecated function_call: the
// functions API has one call a turn, and its clients read no other.
func legacyCall(calls []chain.ToolCall) *wireFunctionCall {
	return &wireFunctionCall{Name: calls[0].Name, Arguments: calls[0].Arguments}
}

// legacyFinish is finish as a client of the functions API reads it:
// "function_call" where a client of tools reads "tool_calls".
func legacyFinish(finish string) string {
	if finish == "tool_calls" {
		return "function_call"
	}
	return finish
}

// toLegacy gives toResponse's answer with tool calls the shape a client
// of the functions API reads: message.function_call and finish_reason
// "function_call" (OpenAPI ChatCompletionResponseMessage.function_call).
func (r *chatResponse) toLegacy(res *chain.Result) {
	c := &r.Choices[0]
	c.Message.ToolCalls, c.Message.FunctionCall = nil, legacyCall(res.Message.ToolCalls)
	c.FinishReason = legacyFinish(c.FinishReason)
}

// appendAnswer appends the chat.completion toResponse makes for an answer
// without tool calls, and its trace: the bytes json.Marshal writes for it,
// then "chain" as withChain adds it (FuzzAnswerFrame). A
// non-stream answer is written so, not through an encoder: it was a tenth
// of what a non-stream relay costs the proxy over a bare reverse proxy.
func appendAnswer(b []byte, id, model string, created int64, content, reasoning, finish string, u chain.Usage, trace []byte) []byte {
	b = appendHead(b, "chat.completion", id, model, created)
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	b = jsonx.AppendString(b, content)
	b = append(b, `,"refusal":null`...)
	if reasoning != "" {
		b = append(b, `,"reasoning_content":`...)
		b = jsonx.AppendString(b, reasoning)
	}
	b = append(b, `},"logprobs":null,"finish_reason":`...)
	b = jsonx.AppendString(b, finish)
	b = append(b, `}],"usage":`...)
	b = appendUsage(b, u)
	b = append(b, `,"chain":`...)
	b = append(b, trace...)
	return append(b, '}')
}

// answerSize is the room appendAnswer needs, so that the answer is made in
// one allocation: its fixed text, id, usage and finish reason take about
// 310 bytes, and escapes make a text longer (a third covers code, whose
// newlines, tabs and quotes add a fifth to a quarter).
func answerSize(content, reasoning, model string, trace []byte) int {
	text := len(content) + len(reasoning)
	return 384 + text + text/3 + len(model) + len(trace)
}

// newChunk is a stream chunk with one choice carrying d.
func newChunk(id, model string, created int64, d delta, finish *string) *chunk {
	return &chunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model,
		Choices: []chunkChoice{{Delta: d, FinishReason: finish}}}
}

// completionID makes the proxy's own completion ID; upstream IDs are never
// passed through, so IDs stay unique across nodes.
func completionID(traceID string) string { return "chatcmpl-" + traceID }

// The chunks of a stream are written from their parts, the constant ones
// encoded once per stream: each is the encoding of the chunk newChunk would
// make (TestChunkFrames), without an encoder's pass.
const (
	contentOpen     = `[{"index":0,"delta":{"content":`
	roleContentOpen = `[{"index":0,"delta":{"role":"assistant","content":`
	contentClose    = `},"logprobs":null,"finish_reason":null}]}`
	finishOpen      = `[{"index":0,"delta":{},"logprobs":null,"finish_reason":`
)

// chunkHead is a stream's chunks up to their choices:
// {"id":…,"object":"chat.completion.chunk","created":…,"model":…,"choices":
func chunkHead(id, model string, created int64) []byte {
	b := make([]byte, 0, 96+len(id)+len(model))
	b = appendHead(b, "chat.completion.chunk", id, model, created)
	return append(b, `,"choices":`...)
}

// appendHead opens a chat object of type object with the members before
// its choices, as encoding/json writes them: id, object, created, model.
func appendHead(b []byte, object, id, model string, created int64) []byte {
	b = append(b, `{"id":`...)
	b = jsonx.AppendString(b, id)
	b = append(b, `,"object":"`...)
	b = append(b, object...)
	b = append(b, `","created":`...)
	b = strconv.AppendInt(b, created, 10)
	b = append(b, `,"model":`...)
	return jsonx.AppendString(b, model)
}

// appendUsageChunk appends the usage chunk after head: no choices, the
// counts.
func appendUsageChunk(b, head []byte, u chain.Usage) []byte {
	b = append(b, head...)
	b = append(b, `[],"usage":`...)
	b = appendUsage(b, u)
	return append(b, '}')
}

// appendUsage appends u as encoding/json writes chain.Usage.
func appendUsage(b []byte, u chain.Usage) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(u.PromptTokens), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CompletionTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.TotalTokens), 10)
	return append(b, '}')
}

// appendDelta appends the choices of the chunk newChunk would make with a
// delta of the role "assistant" (when role), the content (when text is not
// empty or role is set) and the reasoning (when not empty), after the
// stream's chunkHead. Every delta of a stream is written this way, not by
// marshal: goccy/go-json's encoder takes a 9 KiB stack frame, and called
// from deep in a run it doubled every streaming goroutine's stack to
// 32 KiB, most of the memory that open streams hold.
func appendDelta(dst []byte, role bool, text, reasoning string) []byte {
	if reasoning == "" && (text != "" || role) { // most chunks
		open := contentOpen
		if role {
			open = roleContentOpen
		}
		dst = append(dst, open...)
		dst = jsonx.AppendString(dst, text)
		return append(dst, contentClose...)
	}
	dst = append(dst, `[{"index":0,"delta":{`...)
	sep := false
	if role {
		dst = append(dst, `"role":"assistant"`...)
		sep = true
	}
	if text != "" || role {
		if sep {
			dst = append(dst, ',')
		}
		dst = append(dst, `"content":`...)
		dst = jsonx.AppendString(dst, text)
		sep = true
	}
	if reasoning != "" {
		if sep {
			dst = append(dst, ',')
		}
		dst = append(dst, `"reasoning_content":`...)
		dst = jsonx.AppendString(dst, reasoning)
	}
	return append(dst, contentClose...)
}
