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
