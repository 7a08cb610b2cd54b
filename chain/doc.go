// Package chain is the stage engine: it answers a request with one node
// (simple mode) or runs the reflexive chain, stage after stage (by default
// OL1 research and tools → M1 analysis → M2 review), each stage receiving what
// the earlier ones found, under per-stage and global turn budgets, with every
// tool call passed through the anti-loop guards. It records a Trace of all of
// it.
//
// The package defines the Backend interface its model endpoints implement
// (subpackages ollama, openai and mock) and the neutral message types they
// translate. It knows nothing of HTTP serving: it must not import web or gin.
// Callers observe a run through Events delivered to a callback.
package chain
