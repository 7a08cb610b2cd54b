// Package eval measures whether the chain is worth it on a user's own
// models: it runs the same questions through each mode (every node alone,
// chain/reflexive, chain/auto), scores the answers, and reports accuracy
// with its uncertainty beside the cost (latency, tokens, model calls).
//
// It is a seam of its own, not part of cmd/proxy, because everything in it
// but the engine's construction is pure data work (reading items, scoring
// replies, statistics, the table, the JSON and the HTML page) that is
// tested without a process; and not part of web, because it drives the
// engine directly (the proxy's own chain.Engine, through the small Runner
// interface), with no HTTP hop. It imports chain for the request and
// trace types and must not import web.
package eval
