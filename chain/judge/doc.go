// Package judge reads what a model wrote and says what it is, as it
// streams and once it is whole:
//
//   - [AnswerGate]: what of an answer may be shown yet, held back while it
//     may still be a text tool call, a copy of an earlier stage's answer
//     ([FoldPrefix]) or one copy short of a repetition loop; and whether
//     it went into a loop ([ErrLoop], [RepeatNote]).
//   - [ThinkGate]: whether a reasoning went into a repetition loop.
//   - [ParseTextCalls]: the tool calls a small model writes as text
//     (<tool_call>{…}</tool_call>, a bare JSON call, [TOOL:name:{json}]).
//   - [ClientCalls]: whether a call to one of the client's own tools
//     repeats itself, judged by the results the conversation already holds;
//     [ClientError], whether a client's result says its tool failed, and
//     [ClientFileTool], whether a client's tool works on its files.
//
// The repetition detector itself is antiloop's [antiloop.Repeats], the one
// algorithm for a streamed text and a whole one. The judges keep no state
// past one model call: what a stage does with a verdict (a format error fed
// back, a degenerate stage answered by an earlier one) is the engine's, in
// package chain (judging.go), and so is the guard's use on tool calls
// (loopguard.go).
//
// The judges live beside the engine rather than in antiloop because the
// text-call parser builds the engine's tool calls (memory.ToolCall) and
// reads the [TOOL:…] spelling with package tools, which itself imports
// antiloop; the gate needs the parser, to hold a call back. Reasoning is
// split from content (<think> tags) in the node layer, not here.
//
// It imports antiloop, memory, tools and the node layer's and the trace's
// vocabulary, never chain: the engine consumes it.
package judge
