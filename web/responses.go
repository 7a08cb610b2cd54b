package web

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"chainproxy/chain"
)

// This file translates OpenAI's Responses API (POST /v1/responses) to and
// from the chain's neutral types. The shapes follow OpenAI's OpenAPI
// description (openai/openai-openapi, components CreateResponse, Response,
// ResponseStreamEvent), against which the tests validate every object.

// responsesRequest is the part of CreateResponse the proxy reads. Other
// fields (client_metadata, text.verbosity, truncation, …) are ignored, as
// OpenAI's own server ignores what a model does not use.
type responsesRequest struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       json.RawMessage   `json:"instructions"`
	Stream             bool              `json:"stream"`
	Store              *bool             `json:"store"`
	PreviousResponseID string            `json:"previous_response_id"`
	Conversation       json.RawMessage   `json:"conversation"`
	Tools              []json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Reasoning          *struct {
		Effort  *string `json:"effort"`
		Summary *string `json:"summary"`
	} `json:"reasoning"`
	Text *struct {
		Format json.RawMessage `json:"format"`
	} `json:"text"`
	Include        []string          `json:"include"`
	User           string            `json:"user"`
	PromptCacheKey string            `json:"prompt_cache_key"`
	Metadata       map[string]string `json:"metadata"`

	// history is the conversation previous_response_id continues, set
	// by the handler (responses) once it is loaded.
	history []chain.Message

	// Set by decodeResponsesRequest.
	instructions string
	items        []chain.Message
	tools        []responseTool
	dropped      []string // hosted tools left out, as "type" or "type name"
	choice       chain.ToolChoice
	// format is text.format as the chain's Params.Format: a JSON schema,
	// "json", or nil for plain text; textFormat is text.format as sent,
	// which the response echoes.
	format     json.RawMessage
	textFormat json.RawMessage
}

// responseTool is a function tool as the Responses API writes it: flat,
// without Chat Completions' "function" wrapper.
type responseTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// responseItem is one input item. Content and Output are a string or an
// array of parts.
type responseItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// ignoredItems are input item types that carry nothing the chain's models
// can use: a reasoning item's content is encrypted for OpenAI's servers,
// and hosted tool calls ran (or not) elsewhere. Codex sends its history
// back with them.
var ignoredItems = map[string]bool{
	"reasoning": true, "web_search_call": true, "file_search_call": true, "code_interpreter_call": true,
	"image_generation_call": true, "computer_call": true, "computer_call_output": true, "local_shell_call": true,
	"local_shell_call_output": true, "custom_tool_call": true, "custom_tool_call_output": true, "mcp_call": true,
	"mcp_list_tools": true, "mcp_approval_request": true, "mcp_approval_response": true, "compaction": true,
	"tool_search_call": true, "tool_search_output": true, "shell_call": true, "shell_call_output": true,
	"apply_patch_call": true, "apply_patch_call_output": true,
}

var responseRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true}

// decodeResponsesRequest parses and validates a Responses request body.
func decodeResponsesRequest(body []byte) (*responsesRequest, error) {
	var req responsesRequest
	if err := decodeBody(body, &req); err != nil {
		return nil, err
	}
	if req.Model == "" {
		return nil, invalid("model", "you must provide a model parameter")
	}
	var err error
	if req.instructions, err = stringOrNull(req.Instructions); err != nil {
		return nil, invalid("instructions", "instructions must be a string")
	}
	if err := req.decodeInput(); err != nil {
		return nil, err
	}
	if !absent(req.Conversation) {
		// The Agents SDK sends it for a run given a conversationId. Going
		// on without the conversation's items would answer without the
		// history the client counts on.
		return nil, invalid("conversation", "conversation is not supported: the proxy keeps no conversations; use previous_response_id (with store) or send the whole history in input")
	}
	if len(req.items) == 0 && req.PreviousResponseID == "" {
		return nil, invalid("input", "input must be a non-empty string or array of items")
	}
	if t := req.Temperature; t != nil && (*t < 0 || *t > 2) {
		return nil, invalid("temperature", "temperature must be between 0 and 2, got %v", *t)
	}
	if p := req.TopP; p != nil && (*p < 0 || *p > 1) {
		return nil, invalid("top_p", "top_p must be between 0 and 1, got %v", *p)
	}
	if m := req.MaxOutputTokens; m != nil && *m < 1 {
		return nil, invalid("max_output_tokens", "max_output_tokens must be at least 1, got %d", *m)
	}
	for i, raw := range req.Tools {
		var t responseTool
		if err := json.Unmarshal(raw, &t); err != nil || t.Type == "" {
			return nil, invalid(fmt.Sprintf("tools[%d]", i), "tools[%d] must be an object with a type", i)
		}
		if t.Type != "function" {
			// A hosted tool (web_search, file_search, a namespace of
			// tools, a custom grammar tool…) runs on OpenAI's servers:
			// the proxy leaves it out rather than failing the request,
			// since clients such as Codex always send some.
			d := t.Type
			if t.Name != "" {
				d += " " + t.Name
			}
			req.dropped = append(req.dropped, d)
			continue
		}
		if t.Name == "" {
			return nil, invalid(fmt.Sprintf("tools[%d].name", i), "tools[%d].name is required", i)
		}
		if len(t.Parameters) > 0 && string(t.Parameters) != "null" && !json.Valid(t.Parameters) {
			return nil, invalid(fmt.Sprintf("tools[%d].parameters", i), "tools[%d].parameters must be a JSON schema object", i)
		}
		req.tools = append(req.tools, t)
	}
	if req.choice, err = req.toolChoice(); err != nil {
		return nil, err
	}
	if err := req.decodeTextFormat(); err != nil {
		return nil, err
	}
	return &req, nil
}

// decodeTextFormat reads text.format: {"type": "text"}, {"type":
// "json_object"}, or {"type": "json_schema", "name", "schema", "strict"},
// which `codex exec --output-schema` and the SDKs' responses.parse send
// and then parse the answer as JSON. The answering node gets it as the
// chain's format, which holds its output to the schema (Ollama's format,
// an OpenAI-compatible server's response_format).
func (r *responsesRequest) decodeTextFormat() error {
	if r.Text == nil || absent(r.Text.Format) {
		return nil
	}
	var f struct {
		Type   string          `json:"type"`
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
	}
	if err := json.Unmarshal(r.Text.Format, &f); err != nil {
		return invalid("text.format", "text.format must be an object with a type (text, json_object or json_schema)")
	}
	switch f.Type {
	case "text":
	case "json_object":
		r.format = json.RawMessage(`"json"`)
	case "json_schema":
		schema := bytes.TrimSpace(f.Schema)
		if len(schema) == 0 || schema[0] != '{' {
			return invalid("text.format.schema", "missing required parameter text.format.schema: a JSON schema object")
		}
		if f.Name == "" {
			return invalid("text.format.name", "missing required parameter text.format.name")
		}
		r.format = schema
	default:
		return invalid("text.format.type", "text.format.type %q is not one of text, json_object, json_schema", f.Type)
	}
	var buf bytes.Buffer
	_ = json.Compact(&buf, r.Text.Format) // valid JSON: it decoded
	r.textFormat = buf.Bytes()
	return nil
}

// stringOrNull reads a JSON string; absent or null is "".
func stringOrNull(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

// decodeInput turns input, a string or a list of items, into messages:
// function_call items join the assistant message before them as its tool
// calls, and function_call_output items become tool messages, so that a
// client's tool results resume a chain waiting for them as on Chat
// Completions. The images and files of an output (Codex's view_image
// answers with an input_image part) go in a user message after the run
// of tool messages: the chain's nodes take them in user messages, and
// the tool messages of one turn stay together after its calls.
func (r *responsesRequest) decodeInput() error {
	raw := bytes.TrimSpace(r.Input)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if raw[0] == '"' {
		text, err := contentText(raw, place{"input", -1, ""})
		if err != nil {
			return err
		}
		r.items = []chain.Message{{Role: "user", Content: text}}
		return nil
	}
	var items []responseItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return invalid("input", "input must be a string or an array of items")
	}
	names := map[string]string{} // call_id → function name
	open := -1                   // the assistant message that takes the next function calls
	var outParts []chain.Part    // the parts of the outputs just read
	var count partCount
	flush := func() {
		if len(outParts) > 0 {
			r.items = append(r.items, chain.Message{Role: "user", Parts: outParts})
			outParts = nil
		}
	}
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		if it.Type != "function_call_output" {
			flush()
		}
		switch typ := it.Type; {
		case typ == "message" || typ == "" && it.Role != "":
			if !responseRoles[it.Role] {
				return invalid(param+".role", "invalid role %q in input[%d] (want system, developer, user or assistant)", it.Role, i)
			}
			if absent(it.Content) {
				return invalid(param+".content", "missing required parameter input[%d].content: a message needs content (a string or an array of parts)", i)
			}
			text, parts, lead, err := contentParts(it.Content, place{"input", i, "content"}, it.Role == "user")
			if err == nil {
				err = count.add(parts)
			}
			if err != nil {
				return err
			}
			r.items = append(r.items, chain.Message{Role: it.Role, Content: text, Parts: parts, Lead: lead})
			open = -1
			if it.Role == "assistant" {
				open = len(r.items) - 1
			}
		case typ == "function_call":
			if it.CallID == "" || it.Name == "" {
				return invalid(param, "input[%d] is a function_call without call_id or name", i)
			}
			names[it.CallID] = it.Name
			if open < 0 {
				r.items = append(r.items, chain.Message{Role: "assistant"})
				open = len(r.items) - 1
			}
			r.items[open].ToolCalls = append(r.items[open].ToolCalls, chain.ToolCall{ID: it.CallID, Name: it.Name, Arguments: it.Arguments})
		case typ == "function_call_output":
			if it.CallID == "" {
				return invalid(param+".call_id", "input[%d] is a function_call_output without call_id", i)
			}
			out, parts, _, err := contentParts(it.Output, place{"input", i, "output"}, true)
			if err == nil {
				err = count.add(parts)
			}
			if err != nil {
				return err
			}
			r.items = append(r.items, chain.Message{Role: "tool", ToolCallID: it.CallID, Name: names[it.CallID], Content: out})
			outParts = append(outParts, parts...)
			open = -1
		case ignoredItems[typ]:
		case typ == "item_reference":
			return invalid(param, "input[%d] is an item_reference: the proxy keeps no items; send the item itself or use previous_response_id", i)
		default:
			return invalid(param+".type", "input[%d] has type %q, which the proxy does not take (message, function_call, function_call_output)", i, typ)
		}
	}
	flush()
	return nil
}

func (r *responsesRequest) toolChoice() (chain.ToolChoice, error) {
	raw, tc, done, err := toolChoiceMode(r.ToolChoice)
	if done {
		return tc, err
	}
	var obj struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Type == "" {
		return chain.ToolChoice{}, invalid("tool_choice", `tool_choice must be "auto", "none", "required" or an object with a type`)
	}
	if obj.Type != "function" {
		// A hosted tool or an allowed-tools list: what is left is auto.
		return chain.ToolChoice{Mode: "auto"}, nil
	}
	for _, t := range r.tools {
		if t.Name == obj.Name {
			return chain.ToolChoice{Mode: "function", Name: obj.Name}, nil
		}
	}
	return chain.ToolChoice{}, invalid("tool_choice", "tool_choice names function %q, which is not in tools", obj.Name)
}

// checkResponsesLimits is checkLimits for a Responses request.
func checkResponsesLimits(req *responsesRequest, maxMessages int) error {
	switch {
	case len(req.items) > maxMessages:
		return invalid("input", "too many input items: %d, at most %d (server.max_messages)", len(req.items), maxMessages)
	case len(req.Tools) > maxTools:
		return invalid("tools", "too many tools: %d, at most %d", len(req.Tools), maxTools)
	case len(req.User) > maxIDBytes:
		return invalid("user", "user is %d bytes, at most %d", len(req.User), maxIDBytes)
	case len(req.PromptCacheKey) > maxIDBytes:
		return invalid("prompt_cache_key", "prompt_cache_key is %d bytes, at most %d", len(req.PromptCacheKey), maxIDBytes)
	case len(req.PreviousResponseID) > maxIDBytes:
		return invalid("previous_response_id", "previous_response_id is %d bytes, at most %d", len(req.PreviousResponseID), maxIDBytes)
	}
	return nil
}

func (r *responsesRequest) model() string { return r.Model }

// user is the client's user, else its prompt_cache_key: Codex sends its
// conversation id there.
func (r *responsesRequest) user() string { return cmp.Or(r.User, r.PromptCacheKey) }

func (r *responsesRequest) droppedTools() []string { return r.dropped }

// toRunRequest converts a validated request to the chain's form; history
// is the conversation of previous_response_id, if any.
func (r *responsesRequest) toRunRequest(history []chain.Message) *chain.RunRequest {
	var msgs []chain.Message
	if r.instructions != "" {
		// Instructions are not carried over from a previous response, as
		// OpenAI documents: they go first, before the history.
		msgs = append(msgs, chain.Message{Role: "system", Content: r.instructions})
	}
	msgs = append(msgs, history...)
	msgs = append(msgs, r.items...)
	var tools []chain.Tool
	for _, t := range r.tools {
		ct := chain.Tool{Name: t.Name, Parameters: t.Parameters}
		if string(ct.Parameters) == "null" {
			ct.Parameters = nil
		}
		if t.Description != nil {
			ct.Description = *t.Description
		}
		tools = append(tools, ct)
	}
	req := &chain.RunRequest{
		Model:       r.Model,
		Messages:    msgs,
		ClientTools: tools,
		ToolChoice:  r.choice,
		Params:      chain.Params{Temperature: r.Temperature, TopP: r.TopP, MaxTokens: r.MaxOutputTokens, Format: r.format},
	}
	if len(r.dropped) > 0 {
		req.Notes = []string{"hosted tools left out (the proxy cannot run them): " + strings.Join(r.dropped, ", ")}
	}
	return req
}

// Response types, after OpenAI's Response: required fields are always
// written, nullable ones as null.

type responseObject struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"`
	CompletedAt        *int64             `json:"completed_at"`
	Error              *responseError     `json:"error"`
	IncompleteDetails  *incompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int               `json:"max_output_tokens"`
	Model              string             `json:"model"`
	Output             []any              `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Reasoning          responseReasoning  `json:"reasoning"`
	Store              bool               `json:"store"`
	Temperature        *float64           `json:"temperature"`
	Text               responseText       `json:"text"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	Tools              []responseTool     `json:"tools"`
	TopP               *float64           `json:"top_p"`
	Truncation         string             `json:"truncation"`
	Usage              *responseUsage     `json:"usage,omitempty"` // omitted, not null, until the end: the schema has no null
	Metadata           map[string]string  `json:"metadata"`
	// "chain", the trace, is added to the encoded object by withChain.
}

type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incompleteDetails struct {
	Reason string `json:"reason"`
}

type responseReasoning struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

// responseText echoes the request's text.format; {"type": "text"} when
// it had none.
type responseText struct {
	Format json.RawMessage `json:"format"`
}

type responseUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens     int `json:"cached_tokens"`
		CacheWriteTokens int `json:"cache_write_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// The output items: a message, a function call, a reasoning summary.

type messageItem struct {
	Type    string       `json:"type"`
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputText `json:"content"`
}

type outputText struct {
	Type        string     `json:"type"`
	Text        string     `json:"text"`
	Annotations []struct{} `json:"annotations"`
	Logprobs    []struct{} `json:"logprobs"`
}

type functionCallItem struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	Status    string `json:"status"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type reasoningItem struct {
	Type    string        `json:"type"`
	ID      string        `json:"id"`
	Summary []summaryText `json:"summary"`
}

type summaryText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func newOutputText(text string) outputText {
	return outputText{Type: "output_text", Text: text, Annotations: []struct{}{}, Logprobs: []struct{}{}}
}

// responseID is the proxy's id for the response of the request whose
// Server.objectID is objID.
func responseID(objID string) string { return "resp_" + objID }

// newResponseObject is the response to req in progress: no output yet.
func newResponseObject(id string, created int64, req *responsesRequest) *responseObject {
	o := &responseObject{
		ID: id, Object: "response", CreatedAt: created, Status: "in_progress",
		MaxOutputTokens: req.MaxOutputTokens, Model: req.Model, Output: []any{},
		ParallelToolCalls: req.ParallelToolCalls == nil || *req.ParallelToolCalls,
		Store:             req.Store != nil && *req.Store,
		Temperature:       req.Temperature, TopP: req.TopP, Truncation: "disabled",
		Tools: req.tools, ToolChoice: req.ToolChoice, Metadata: req.Metadata,
	}
	o.Text.Format = req.textFormat
	if o.Text.Format == nil {
		o.Text.Format = json.RawMessage(`{"type":"text"}`)
	}
	if o.Tools == nil {
		o.Tools = []responseTool{}
	}
	if o.Metadata == nil {
		o.Metadata = map[string]string{}
	}
	if len(bytes.TrimSpace(o.ToolChoice)) == 0 || string(o.ToolChoice) == "null" {
		o.ToolChoice = json.RawMessage(`"auto"`)
	}
	if req.instructions != "" {
		o.Instructions = &req.instructions
	}
	if req.PreviousResponseID != "" {
		o.PreviousResponseID = &req.PreviousResponseID
	}
	if req.Reasoning != nil {
		o.Reasoning = responseReasoning{Effort: req.Reasoning.Effort, Summary: req.Reasoning.Summary}
	}
	return o
}

// complete fills o from the run's result: status, usage and output.
func (o *responseObject) complete(res *chain.Result, completedAt int64, output []any) {
	o.Output = output
	o.Status = "completed"
	if res.FinishReason == "length" {
		o.Status = "incomplete"
		o.IncompleteDetails = &incompleteDetails{Reason: "max_output_tokens"}
	} else {
		o.CompletedAt = &completedAt
	}
	u := res.Usage()
	o.Usage = &responseUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
}

// outputItems are res's output: the reasoning, the message, then each
// function call. Item ids are the request's objectID and the output
// index, as the stream's are.
func outputItems(traceID string, res *chain.Result) []any {
	out := []any{}
	if res.Message.Reasoning != "" {
		out = append(out, reasoningItem{Type: "reasoning", ID: "rs_" + traceID + "_0", Summary: []summaryText{{Type: "summary_text", Text: res.Message.Reasoning}}})
	}
	if res.Message.Content != "" || len(res.Message.ToolCalls) == 0 {
		out = append(out, messageItem{Type: "message", ID: "msg_" + traceID + "_" + itoa(len(out)), Status: "completed", Role: "assistant",
			Content: []outputText{newOutputText(res.Message.Content)}})
	}
	for _, c := range res.Message.ToolCalls {
		out = append(out, functionCallItem{Type: "function_call", ID: "fc_" + c.ID, Status: "completed", CallID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	return out
}

// responseErrorFor is a failed response's error, from the run's status
// and error as statusFor maps them. A chain failure is a server_error and
// a full queue rate_limit_exceeded, of Response's documented codes; a
// prompt longer than the window is context_length_exceeded, which the
// OpenAPI list lacks but OpenAI's server sends in response.failed, and
// which Codex alone reads as fatal: it retries every other code with the
// same prompt (codex-rs codex-api/src/sse/responses.rs).
func responseErrorFor(status int, obj errorObject) *responseError {
	code := "server_error"
	switch {
	case obj.Code != nil && *obj.Code == "context_length_exceeded":
		code = *obj.Code
	case status == http.StatusTooManyRequests:
		code = "rate_limit_exceeded"
	}
	return &responseError{Code: code, Message: obj.Message}
}
