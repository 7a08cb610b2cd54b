package chain

// answerFinish is the client's finish_reason for an answer whose last model
// call ended with upstream reason: "length" and "content_filter" tell the
// client its answer is cut or withheld and pass through; anything else is a
// complete answer. "tool_calls" does not pass: the answer given here carries
// no calls (a call the proxy ran, or asked of a call that offered no tools,
// is not the client's to make), and the client-tools path sets its own.
func answerFinish(upstream string) string {
	switch upstream {
	case "length", "content_filter":
		return upstream
	}
	return "stop"
}
