package memory

import "chainproxy/chain/node"

// The messages memory fits are the backends' own (package node, which
// declares the backend contract): named here for memory's API.
type (
	// Message is one message of a conversation (node.Message).
	Message = node.Message
	// Part is an image or a file of a message (node.Part).
	Part = node.Part
	// ToolCall is a model's request to call a tool (node.ToolCall).
	ToolCall = node.ToolCall
)

// Kinds of Part.
const (
	PartImage = node.PartImage
	PartFile  = node.PartFile
)
