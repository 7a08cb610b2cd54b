package memory

// Message is one message of a conversation in the proxy's own neutral form;
// each backend translates it to its wire protocol.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// Reasoning is hidden thinking, kept apart from Content so it never
	// leaks into a reply.
	Reasoning  string     `json:"reasoning_content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	// Name is the tool name of a tool message.
	Name string `json:"name,omitempty"`
}

// ToolCall is a model's request to call a tool.
type ToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is the JSON text the model wrote. It may be invalid JSON: the
	// anti-loop counts that as a format error rather than failing the call.
	Arguments string `json:"arguments"`
}
