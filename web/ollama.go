package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"chainproxy/chain"
)

// This file translates Ollama's native API (/api/chat, /api/generate) to
// and from the chain's neutral types. The shapes are those of
// github.com/ollama/ollama/api (types.go, v0.17.4) and its server
// (server/routes.go): the tests decode the proxy's answers with that
// package's own client. The request types are the proxy's own, not api's,
// so that tool parameters and arguments pass through as raw JSON (api's
// typed schema drops keywords it does not know) and keep_alive is read as
// on the other endpoints.

// ollamaChatRequest is Ollama's ChatRequest; GenerateRequest's prompt,
// system and images are read into it too.
type ollamaChatRequest struct {
	Model     string            `json:"model"`
	Messages  []ollamaMessage   `json:"messages"`
	Stream    *bool             `json:"stream"`
	Format    json.RawMessage   `json:"format"`
	KeepAlive json.RawMessage   `json:"keep_alive"`
	Tools     []wireTool        `json:"tools"`
	Options   map[string]any    `json:"options"`
	Think     json.RawMessage   `json:"think"`
	Prompt    string            `json:"prompt"`
	System    string            `json:"system"`
	Images    []json.RawMessage `json:"images"`
	// Suffix and Raw ask /api/generate for a completion the chain cannot
	// give: text between a prefix and a suffix (an editor's
	// fill-in-the-middle), or a prompt already in the model's template.
	// Both are refused rather than answered as chat.
	Suffix string `json:"suffix"`
	Raw    bool   `json:"raw"`

	keepAlive *time.Duration
	think     *bool // nil: unset
	params    chain.Params
}

type ollamaMessage struct {
	Role       string            `json:"role"`
	Content    string            `json:"content"`
	Thinking   string            `json:"thinking,omitempty"`
	Images     []json.RawMessage `json:"images,omitempty"`
	ToolCalls  []ollamaToolCall  `json:"tool_calls,omitempty"`
	ToolName   string            `json:"tool_name,omitempty"`
	ToolCallID string            `json:"tool_call_id,omitempty"`

	parts []chain.Part // Images read, set by decodeOllamaRequest
}

// ollamaToolCall is a whole tool call: Ollama sends arguments as a JSON
// object, never in fragments.
type ollamaToolCall struct {
	ID       string `json:"id,omitempty"`
	Function struct {
		Index     int             `json:"index"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

var ollamaRoles = map[string]bool{"system": true, "user": true, "assistant": true, "tool": true}

// decodeOllamaRequest parses and validates a /api/chat body, or a
// /api/generate body when generate is set (prompt and system in, no
// messages).
func decodeOllamaRequest(body []byte, generate bool) (*ollamaChatRequest, error) {
	var req ollamaChatRequest
	if err := decodeBody(body, &req); err != nil {
		return nil, err
	}
	if req.Model == "" {
		return nil, invalid("model", "model is required")
	}
	if generate {
		if len(req.Messages) > 0 {
			return nil, invalid("messages", "/api/generate takes a prompt, not messages: use /api/chat")
		}
		if req.Suffix != "" {
			return nil, invalid("suffix", "suffix: fill-in-the-middle completion is not served: the proxy answers a prompt through its nodes' chat; send an editor's autocompletion to the model server itself")
		}
		if req.Raw {
			return nil, invalid("raw", "raw: a prompt already in the model's template is not served: the proxy answers through its nodes' chat, which applies the template; leave raw out, or send the request to the model server itself")
		}
		// Without a prompt, Ollama loads (or unloads) the model whatever
		// else is sent: no messages, then, and nothing for the chain.
		if req.Prompt != "" {
			if req.System != "" {
				req.Messages = append(req.Messages, ollamaMessage{Role: "system", Content: req.System})
			}
			req.Messages = append(req.Messages, ollamaMessage{Role: "user", Content: req.Prompt, Images: req.Images})
		}
	}
	var count partCount
	for i, m := range req.Messages {
		req.Messages[i].Role = strings.ToLower(m.Role) // as Ollama's Message.UnmarshalJSON
		if !ollamaRoles[req.Messages[i].Role] {
			return nil, invalid(fmt.Sprintf("messages[%d].role", i), "invalid role %q in messages[%d] (want system, user, assistant or tool)", m.Role, i)
		}
		if len(m.Images) > 0 {
			param := fmt.Sprintf("messages[%d].images", i)
			if generate {
				param = "images"
			}
			if req.Messages[i].Role != "user" {
				return nil, invalid(param, "%s: only user messages take images", param)
			}
			if err := checkMessageParts(len(m.Images), param); err != nil {
				return nil, err
			}
			parts, err := ollamaImages(m.Images, param)
			if err != nil {
				return nil, err
			}
			if err := count.add(parts); err != nil {
				return nil, err
			}
			req.Messages[i].parts = parts
		}
		for j, tc := range m.ToolCalls {
			if tc.Function.Name == "" {
				return nil, invalid(fmt.Sprintf("messages[%d].tool_calls[%d].function.name", i, j), "messages[%d].tool_calls[%d] has no function name", i, j)
			}
		}
	}
	for i, t := range req.Tools {
		if t.Type != "function" && t.Type != "" {
			return nil, invalid(fmt.Sprintf("tools[%d].type", i), "tools[%d].type must be \"function\"", i)
		}
		if t.Function.Name == "" {
			return nil, invalid(fmt.Sprintf("tools[%d].function.name", i), "tools[%d].function.name is required", i)
		}
	}
	var err error
	if req.keepAlive, err = decodeKeepAlive(req.KeepAlive); err != nil {
		return nil, err
	}
	if req.think, err = decodeThink(req.Think); err != nil {
		return nil, err
	}
	if req.params, err = ollamaOptions(req.Options); err != nil {
		return nil, err
	}
	if f := bytes.TrimSpace(req.Format); len(f) > 0 && string(f) != "null" && string(f) != `""` {
		// Ollama takes "json" or a JSON schema object.
		if string(f) != `"json"` && f[0] != '{' {
			return nil, invalid("format", `format must be "json" or a JSON schema object`)
		}
		req.params.Format = f
	}
	return &req, nil
}

// decodeThink reads think as Ollama does: a bool, or "high", "medium",
// "low" (thinking on).
func decodeThink(raw json.RawMessage) (*bool, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return &b, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil && (s == "high" || s == "medium" || s == "low") {
		on := true
		return &on, nil
	}
	return nil, invalid("think", `think must be true, false, "high", "medium" or "low"`)
}

// ollamaOptions maps the options the chain forwards (temperature, top_p,
// top_k, num_predict, stop, seed); the others (num_ctx, num_gpu, …) belong
// to a model's runner and are ignored, as each node keeps its own. top_k
// reaches Ollama nodes only (OpenAI's API has none), as from Anthropic's.
func ollamaOptions(opts map[string]any) (chain.Params, error) {
	var p chain.Params
	num := func(k string) (float64, bool, error) {
		v, ok := opts[k]
		if !ok || v == nil {
			return 0, false, nil
		}
		f, isNum := v.(float64)
		if !isNum {
			return 0, false, invalid("options."+k, "options.%s must be a number", k)
		}
		return f, true, nil
	}
	if f, ok, err := num("temperature"); err != nil {
		return p, err
	} else if ok {
		if f < 0 || f > 2 {
			return p, invalid("options.temperature", "options.temperature must be between 0 and 2, got %v", f)
		}
		p.Temperature = &f
	}
	if f, ok, err := num("top_p"); err != nil {
		return p, err
	} else if ok {
		if f < 0 || f > 1 {
			return p, invalid("options.top_p", "options.top_p must be between 0 and 1, got %v", f)
		}
		p.TopP = &f
	}
	if f, ok, err := num("top_k"); err != nil {
		return p, err
	} else if ok {
		// Ollama reads it as an integer, 0 or less turning it off.
		n := int(f)
		p.TopK = &n
	}
	if f, ok, err := num("num_predict"); err != nil {
		return p, err
	} else if ok && f > 0 {
		// Ollama's -1 and -2 mean "no limit" and "fill the context".
		n := int(f)
		p.MaxTokens = &n
	}
	if f, ok, err := num("seed"); err != nil {
		return p, err
	} else if ok {
		n := int64(f)
		p.Seed = &n
	}
	if v, ok := opts["stop"]; ok && v != nil {
		list, isList := v.([]any)
		if !isList {
			return p, invalid("options.stop", "options.stop must be an array of strings")
		}
		for _, s := range list {
			str, isStr := s.(string)
			if !isStr {
				return p, invalid("options.stop", "options.stop must be an array of strings")
			}
			p.Stop = append(p.Stop, str)
		}
		if len(p.Stop) > maxStops {
			return p, invalid("options.stop", "too many stop sequences: %d, at most %d", len(p.Stop), maxStops)
		}
	}
	return p, nil
}

// checkOllamaLimits is checkLimits for an Ollama request.
func checkOllamaLimits(req *ollamaChatRequest, maxMessages int) error {
	switch {
	case len(req.Messages) > maxMessages:
		return invalid("messages", "too many messages: %d, at most %d (server.max_messages)", len(req.Messages), maxMessages)
	case len(req.Tools) > maxTools:
		return invalid("tools", "too many tools: %d, at most %d", len(req.Tools), maxTools)
	}
	return nil
}

// toRunRequest converts a validated request to the chain's form. Ollama's
// clients often send tool results without tool_call_id (older ones have
// only tool_name): each is paired with the first call of the assistant
// message before it that has no result yet, by name, else in order.
func (r *ollamaChatRequest) toRunRequest() *chain.RunRequest {
	msgs := make([]chain.Message, 0, len(r.Messages))
	var open []chain.ToolCall // the last assistant message's calls without a result
	for i, m := range r.Messages {
		cm := chain.Message{Role: m.Role, Content: m.Content, Parts: m.parts, Reasoning: m.Thinking, Name: m.ToolName, ToolCallID: m.ToolCallID}
		switch m.Role {
		case "assistant":
			open = open[:0]
			for j, tc := range m.ToolCalls {
				id := tc.ID
				if id == "" {
					id = fmt.Sprintf("call_%d_%d", i, j)
				}
				args := "{}"
				if a := bytes.TrimSpace(tc.Function.Arguments); len(a) > 0 && string(a) != "null" {
					var buf bytes.Buffer
					if json.Compact(&buf, a) == nil {
						args = buf.String()
					}
				}
				call := chain.ToolCall{ID: id, Name: tc.Function.Name, Arguments: args}
				cm.ToolCalls = append(cm.ToolCalls, call)
				open = append(open, call)
			}
		case "tool":
			k := -1
			for j, c := range open {
				if cm.ToolCallID != "" && c.ID == cm.ToolCallID || cm.ToolCallID == "" && (cm.Name == "" || c.Name == cm.Name) {
					k = j
					break
				}
			}
			if k >= 0 {
				cm.ToolCallID, cm.Name = open[k].ID, open[k].Name
				open = append(open[:k], open[k+1:]...)
			} else if cm.ToolCallID == "" {
				cm.ToolCallID = fmt.Sprintf("call_%d", i)
			}
		}
		msgs = append(msgs, cm)
	}
	var tools []chain.Tool
	for _, t := range r.Tools {
		tools = append(tools, chain.Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	return &chain.RunRequest{
		Model:       r.Model,
		Messages:    msgs,
		ClientTools: tools,
		ToolChoice:  chain.ToolChoice{Mode: "auto"},
		KeepAlive:   r.keepAlive,
		Params:      r.params,
	}
}

// Response types, after api.ChatResponse and api.GenerateResponse.

type ollamaChatChunk struct {
	Model      string           `json:"model"`
	CreatedAt  time.Time        `json:"created_at"`
	Message    *ollamaMessage   `json:"message,omitempty"`
	Response   *string          `json:"response,omitempty"`
	Thinking   string           `json:"thinking,omitempty"`
	ToolCalls  []ollamaToolCall `json:"tool_calls,omitempty"`
	Done       bool             `json:"done"`
	DoneReason string           `json:"done_reason,omitempty"`
	ollamaMetrics
	// The last object gets "chain", the trace, from withChain.
}

// ollamaMetrics are Ollama's counters, durations in nanoseconds.
type ollamaMetrics struct {
	TotalDuration      int64 `json:"total_duration,omitempty"`
	LoadDuration       int64 `json:"load_duration,omitempty"`
	PromptEvalCount    int   `json:"prompt_eval_count,omitempty"`
	PromptEvalDuration int64 `json:"prompt_eval_duration,omitempty"`
	EvalCount          int   `json:"eval_count,omitempty"`
	EvalDuration       int64 `json:"eval_duration,omitempty"`
}

// metricsOf is Ollama's counters for this request's own calls: the tokens
// as res.Usage counts them; the time spent loading models as load_duration
// (as Ollama reports its answering call's load) and the rest of the calls'
// time as evaluation time, over the calls started at since or later, in the
// trace's milliseconds (a resumed chain's trace holds its earlier requests'
// calls too; the chain does not see how a node splits a call's time
// between prompt and answer, so prompt evaluation is left out); the whole
// request's time as the total.
func metricsOf(res *chain.Result, total time.Duration, since int64) ollamaMetrics {
	tr, u := &res.Trace, res.Usage()
	m := ollamaMetrics{TotalDuration: total.Nanoseconds(), PromptEvalCount: u.PromptTokens, EvalCount: u.CompletionTokens}
	ms := func(v int64) int64 { return (time.Duration(v) * time.Millisecond).Nanoseconds() }
	for _, st := range tr.Stages {
		for _, c := range st.Calls {
			if c.StartMS < since {
				continue
			}
			if c.LoadMS != nil && c.GenerationMS != nil {
				m.LoadDuration += ms(*c.LoadMS)
				m.EvalDuration += ms(*c.GenerationMS)
			} else {
				m.EvalDuration += ms(c.DurationMS)
			}
		}
	}
	return m
}

// doneReason is Ollama's done_reason for a chain finish reason: Ollama
// says "stop" after tool calls too, and "length" at the token limit.
func doneReason(finish string) string {
	if finish == "length" {
		return "length"
	}
	return "stop"
}

func ollamaCalls(calls []chain.ToolCall) []ollamaToolCall {
	out := make([]ollamaToolCall, len(calls))
	for i, c := range calls {
		out[i].ID = c.ID
		out[i].Function.Index = i
		out[i].Function.Name = c.Name
		// Ollama's clients decode arguments into a map (the Go client's
		// ToolCallFunctionArguments, ollama-python's Mapping): anything
		// but an object (a no-argument call's "", a call cut at the
		// token limit) failed the whole answer, so it goes as {}, as to
		// Anthropic's clients; the trace keeps what the node wrote.
		out[i].Function.Arguments = callInput(c.Arguments)
	}
	return out
}
