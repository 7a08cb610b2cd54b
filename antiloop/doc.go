// Package antiloop computes tool-call signatures and guards against repeated
// calls.
//
// A signature is the xxhash64 of a tool's name and the canonical JSON of its
// arguments (see [Canonical]), so that two calls that differ only in key order,
// whitespace or the spelling of a number are recognised as the same call. The
// [Guard] uses signatures and tool_call IDs, kept in a [Store] with a TTL, to
// decide whether a call may run, gets a stored result, or is refused.
//
// The package holds no tool, model or HTTP logic and imports no other package
// of this project: the chain and tools packages consume it.
package antiloop
