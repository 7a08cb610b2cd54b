package chain

import "chainproxy/chain/node"

// The conversation's vocabulary, which requests, results and traces speak
// as the backends do: declared with the backend contract in package node,
// named here too because the engine's API is written in them.
type (
	// Message is one message of a conversation (node.Message).
	Message = node.Message
	// Part is an image or a file of a message (node.Part).
	Part = node.Part
	// ToolCall is a model's request to call a tool (node.ToolCall).
	ToolCall = node.ToolCall
	// Tool is a function offered to a model (node.Tool).
	Tool = node.Tool
	// Params are the sampling options forwarded to a model (node.Params).
	Params = node.Params
	// Usage counts tokens as OpenAI reports them (node.Usage).
	Usage = node.Usage
)

// Kinds of Part.
const (
	PartImage = node.PartImage
	PartFile  = node.PartFile
)

// Hosts reports the hosts of node when it has several (base_urls); nil
// for a node of one host.
func (e *Engine) Hosts(name string) []node.HostState {
	if _, ok := e.nodes[name]; !ok {
		return nil
	}
	return e.set.Hosts(name)
}

// AdmissionStatus is the shared admission's status (node.AdmissionShared
// or node.AdmissionLocal), or "" when the limits are not shared (no Redis).
func (e *Engine) AdmissionStatus() string { return e.set.AdmissionStatus() }
