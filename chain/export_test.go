package chain

// SummaryWaiters is how many requests wait for summarizer calls in
// progress, the one making each call included: a test waits on it rather
// than sleeping until a second request has joined the call.
func SummaryWaiters(e *Engine) int { return e.summaries.Waiting() }
