// Package antiloop computes tool-call signatures, guards against repeated
// calls, and finds repetition loops in what models write.
//
// A signature is the xxhash64 of a tool's name and the canonical JSON of its
// arguments (see [Canonical]), so that two calls that differ only in key order,
// whitespace or the spelling of a number are recognised as the same call. The
// [Guard] uses signatures and tool_call IDs, kept in a [Store] with a TTL, to
// decide whether a call may run, gets a stored result, or is refused; a read
// that stamps what it read ([Guard.AdmitStamped]) is served a stored result
// only while that is unchanged.
//
// [Repeats] finds repetition loops in a model's answer or reasoning, with
// one algorithm for a streamed text and a whole one.
//
// The package holds no tool, model or HTTP logic and imports no other package
// of this project: the chain and tools packages consume it.
//
// # The rest of the anti-loop guard
//
// Three parts of what keeps a chain out of loops live elsewhere, because
// each needs what this package must not import:
//
//   - The answer judges, in package chain/judge: the gate that streams an
//     answer while holding back a text tool call, a copy of an earlier
//     stage's answer or a repeat (it runs [Repeats]), the gate on
//     reasoning, and the parser of tool calls written as text. The parser
//     reads [TOOL:…] calls with package tools, which imports this one, and
//     builds the engine's tool calls, so it cannot live here.
//   - A stage's own loop rules, in package chain: the same call run again
//     within a stage, a volatile call polled past antiloop.max_polls, the
//     same error three times (stopped_repeat), turns without progress
//     (stopped_no_progress) and stored reads dropped after a write are kept
//     in loopguard.go and applied in toolcalls.go, where the guard is
//     asked. They are the engine's state for one stage and its tools'
//     identities, kept beside its other state. Calls to the client's own
//     tools, which hold no such state, are judged by chain/judge's
//     ClientCalls.
//   - What a verdict of the judges does to a stage, in package chain
//     (judging.go): a degenerate stage answered by an earlier one, a format
//     error fed back to the model.
package antiloop
