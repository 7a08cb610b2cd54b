// Package memory is the proxy's conversation memory: it makes every prompt
// the chain sends fit the window of the node that receives it, and says
// what it did to make it fit.
//
// Small local models have small windows (Ollama runs one with 4,096 tokens
// unless told otherwise) and an upstream that gets a longer prompt cuts it
// silently, from the front: the user's question goes first. So before each
// model call the engine measures the prompt (Estimate, calibrated per model
// from the prompt tokens each call reports) and, when it does not fit, asks
// Fit for one that does, in a fixed order that never loses the user's
// words: older tool results are shortened, every earlier question is kept
// verbatim in a short list, recent turns stay raw, and older turns are
// folded into one summary made by a summarizer node and cached by the hash
// of the turns it covers, so that the next request of the same
// conversation (clients resend the whole history) reuses it.
//
// It is a package of its own, below chain, because the messages, the
// window arithmetic and the summary cache are one concept with no need of
// the stage engine: chain owns the calls (it runs the summarizer and
// records what was sent), memory owns what goes in them (the earlier
// stages' findings that head a stage's question among them: Findings), and
// lets concurrent requests share one summarizer call (Flights). Message and
// ToolCall are the backends' own (package node, which imports no memory):
// memory names them for its API, as chain does.
package memory
