package node

// Message is one message of a conversation in the proxy's own neutral form;
// each backend translates it to its wire protocol.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// Parts are the message's images and files, beside its text: sent,
	// after the text, to the nodes that can take them (a vision model for
	// an image, an OpenAI-compatible server for a file); nil for the text
	// messages that are nearly all of them.
	Parts []Part `json:"parts,omitempty"`
	// Lead, in a user message whose content came as several text parts,
	// is where the last of them starts in Content (0 otherwise): what
	// comes before is context the client attached (Continue sends each
	// @-mention as a text part before the user's own words), which the
	// classifier sets aside. It is not sent to nodes.
	Lead int `json:"lead,omitempty"`
	// Reasoning is hidden thinking, kept apart from Content so it never
	// leaks into a reply.
	Reasoning  string     `json:"reasoning_content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	// Name is the tool name of a tool message.
	Name string `json:"name,omitempty"`
}

// Kinds of Part.
const (
	PartImage = "image"
	PartFile  = "file"
)

// Part is an image or a file of a message. An image is its bytes (Data,
// base64, with MediaType) or an https URL that only a node able to fetch
// it can take: the proxy never fetches it. A file is its bytes (Data) or
// an upstream file id, with its file name, passed on as the client sent it.
type Part struct {
	Kind string `json:"kind"`
	// Data is the bytes in standard base64, without a data: prefix.
	Data string `json:"data,omitempty"`
	// URL is an image's https URL, when the client sent one instead of
	// the bytes.
	URL string `json:"url,omitempty"`
	// MediaType is the bytes' type ("image/png"); "" when unknown.
	MediaType string `json:"media_type,omitempty"`
	// Detail is an image's detail as OpenAI's clients set it ("low",
	// "high", "auto"), passed on to OpenAI-compatible nodes.
	Detail string `json:"detail,omitempty"`
	// FileID and Filename are a file's.
	FileID   string `json:"file_id,omitempty"`
	Filename string `json:"filename,omitempty"`
	// Param is where the client put the part ("messages[1].content[2]"),
	// which an error about it names.
	Param string `json:"param,omitempty"`
}

// DataURL is an image's bytes as a data: URL, or its https URL.
func (p *Part) DataURL() string {
	if p.Data == "" {
		return p.URL
	}
	return "data:" + p.MediaType + ";base64," + p.Data
}

// ToolCall is a model's request to call a tool.
type ToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is the JSON text the model wrote. It may be invalid JSON: the
	// anti-loop counts that as a format error rather than failing the call.
	Arguments string `json:"arguments"`
}
