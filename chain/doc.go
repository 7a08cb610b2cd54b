// Package chain is the stage engine: it answers a request with one node
// (simple mode) or runs the reflexive chain, stage after stage (by default
// OL1 research and tools → M1 analysis → M2 review), each stage receiving what
// the earlier ones found, under per-stage and global turn budgets, with every
// tool call passed through the anti-loop guards and every answer through the
// judges (subpackage judge; the engine acts on their verdicts in judging.go).
// It records a Trace of all of it.
//
// The nodes it calls are package node's: the backend contract, the
// backends (node/ollama, node/openai; a scripted one in chain/mock) and
// the neutral message types they translate, which this package names too.
// It knows nothing of HTTP serving: it must not import web or gin.
// Callers observe a run through Events delivered to a callback.
//
// What needs none of the engine's workings lives in subpackages, which
// import the node layer and never chain: the trace and its events (trace),
// the choice of tools for a small window (toolfit), the OpenTelemetry
// spans (spans) and the judges (judge). docs/architecture.md draws the
// packages and one model call's layers.
//
// # Client tools in the chain
//
// In the reflexive chain, the stages with tools are offered the client's
// tools beside the server's. When a stage calls a client tool, the server
// calls of that turn run, and the response ends with the client's calls
// (finish_reason "tool_calls", stage status awaiting_client). The client's
// follow-up, ending with its tool messages, resumes the chain inside that
// stage, with the turns already used counted against the budgets.
//
// What resumption needs is kept in a ResumeStore (memory, or Redis shared
// by replicas) for chain.resume_ttl, under a hash of the conversation key
// and a tool-call ID the proxy issues, rather than encoded in the
// conversation: a paused stage holds what the client never sees (the
// stage's own messages with the server tools' results, its repeat memory,
// the earlier stages' findings), often many kilobytes, which no tool-call
// ID can carry; and state sent through the client would have to be signed
// and would leak tool results to it. The cost is that an expired or lost
// state cannot resume: the chain then starts again, with the client's
// results in the conversation as the first stage's evidence, never an
// error.
package chain
