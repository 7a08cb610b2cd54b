// Package judge reads what a model wrote and says what it is: the tool
// calls a small model writes as text (<tool_call>{…}</tool_call>, a bare
// JSON call, [TOOL:name:{json}]) rather than as real calls.
//
// The judges work on text alone and keep no state between calls: what a
// stage does with a verdict (a format error fed back, a degenerate stage
// answered by an earlier one) is the engine's, in package chain
// (judging.go). They live beside the engine rather than in antiloop
// because they build its tool calls (memory.ToolCall) and read the
// [TOOL:…] spelling with package tools, which itself imports antiloop.
//
// It imports antiloop, memory and tools, never chain: the engine consumes
// it.
package judge
