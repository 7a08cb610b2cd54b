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
package antiloop
