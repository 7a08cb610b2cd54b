package eval

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"chainproxy/chain"
)

// TraceStore keeps a trace document under a key: the proxy's store
// (store.Store satisfies it).
type TraceStore interface {
	PutTrace(ctx context.Context, key string, doc []byte) error
}

// Sharing keeps each answer's trace where a proxy's cockpit opens it: in
// the store a server on the same configuration reads (Redis), as the
// document the server itself stores (chain.TraceDocument), under the
// callers who may open it.
type Sharing struct {
	Store TraceStore
	// Owners are the callers a document is kept under (chain.TraceKey):
	// "" for a server without API keys, else each admin key's
	// chain.CallerID.
	Owners []string
	// Redact masks the prompts a kept trace shows, as the server's are.
	Redact func(string) string
	// Failed, when set, hears of a trace that could not be kept; the
	// report still has its result, and the traces file the trace.
	Failed func(traceID string, err error)
}

// questionCap caps a listed question, in bytes, as the server's list does.
const questionCap = 200

// summary is the head of res's trace document: the chain as the cockpit's
// list shows it.
func summary(res *Result, req *chain.RunRequest, started int64, tr *chain.Trace, runErr error) chain.TraceSummary {
	s := chain.TraceSummary{TraceID: res.TraceID, Started: started, Question: question(req.Messages), Mode: tr.Mode,
		Status: chain.TraceStatus(tr, runErr), DurationMS: res.LatencyMS, Client: req.Client}
	s.Stages, s.Tokens = chain.Badges(tr)
	return s
}

// question is the first line of the last user message, capped.
func question(msgs []chain.Message) string {
	var q string
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			q = strings.TrimSpace(msgs[i].Content)
			break
		}
	}
	q, _, _ = strings.Cut(q, "\n")
	if len(q) > questionCap {
		q = strings.ToValidUTF8(q[:questionCap], "") + "…"
	}
	return q
}

// put keeps the trace document of sum and tr under each owner.
func (s *Sharing) put(ctx context.Context, sum *chain.TraceSummary, tr *chain.Trace) error {
	if tr.HasPrompts() {
		full := tr.WithPrompts(s.Redact)
		tr = &full
	}
	body, err := json.Marshal(tr)
	if err != nil {
		return err
	}
	head, err := json.Marshal(sum)
	if err != nil {
		return err
	}
	doc := chain.TraceDocument(head, body)
	var errs []error
	for _, who := range s.Owners {
		errs = append(errs, s.Store.PutTrace(ctx, chain.TraceKey(who, sum.TraceID), doc))
	}
	return errors.Join(errs...)
}
