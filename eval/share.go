package eval

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"chainproxy/chain"
	"chainproxy/chain/trace"
)

// TraceStore keeps a trace document under a key: the proxy's store
// (store.Store satisfies it).
type TraceStore interface {
	PutTrace(ctx context.Context, key string, doc []byte) error
}

// SummaryFeed is the optional capability of a TraceStore that shares the
// cockpit's trace list between the proxies on one store (store.Store's
// PutSummary, which web's TraceFeed reads): a summary put there under
// trace.TraceKey(owner, id) is listed in their cockpits.
type SummaryFeed interface {
	PutSummary(ctx context.Context, key string, data []byte) error
}

// Sharing keeps each answer's trace, and each judging's, where a proxy's
// cockpit lists and opens it: in the store a server on the same
// configuration reads (Redis), as the document the server itself stores
// (trace.TraceDocument), under the callers who may open it, and its
// summary in the shared trace list, as a replica of its own would.
type Sharing struct {
	Store TraceStore
	// Owners are the callers a document is kept under (trace.TraceKey):
	// "" for a server without API keys, else each admin key's
	// trace.CallerID.
	Owners []string
	// Redact masks the prompts a kept trace shows, as the server's are.
	Redact func(string) string
	// Failed, when set, hears of a trace that could not be kept; the
	// report still has its result, and the traces file the trace.
	Failed func(traceID string, err error)

	once    sync.Once
	replica string        // the run's name in the shared list
	seq     atomic.Uint64 // numbers its summaries, as a replica's news
}

// questionCap caps a listed question, in bytes, as the server's list does.
const questionCap = 200

// summary is the head of the trace document of req, run as traceID: the
// chain as the cockpit's list shows it.
func summary(traceID string, latencyMS int64, req *chain.RunRequest, started int64, tr *chain.Trace, runErr error) trace.TraceSummary {
	s := trace.TraceSummary{TraceID: traceID, Started: started, Question: question(req.Messages), Mode: tr.Mode,
		Status: trace.TraceStatus(tr, runErr), DurationMS: latencyMS, Client: req.Client}
	s.Stages, s.Tokens = trace.Badges(tr)
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
	return capQuestion(q)
}

// capQuestion caps a listed question at questionCap bytes.
func capQuestion(q string) string {
	if len(q) > questionCap {
		q = strings.ToValidUTF8(q[:questionCap], "") + "…"
	}
	return q
}

// put keeps the trace document of sum and tr under each owner.
func (s *Sharing) put(ctx context.Context, sum *trace.TraceSummary, tr *chain.Trace) error {
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
	doc := trace.TraceDocument(head, body)
	var errs []error
	for _, who := range s.Owners {
		errs = append(errs, s.Store.PutTrace(ctx, trace.TraceKey(who, sum.TraceID), doc))
	}
	if feed, ok := s.Store.(SummaryFeed); ok && len(s.Owners) > 0 && errors.Join(errs...) == nil {
		errs = append(errs, s.list(ctx, feed, sum))
	}
	return errors.Join(errs...)
}

// list puts sum in the shared trace list, once, under the first owner:
// an admin key lists every owner's chains, so a copy under each admin
// would be listed once per admin. It is listed after its document is
// kept, so that a cockpit that lists it opens it.
func (s *Sharing) list(ctx context.Context, feed SummaryFeed, sum *trace.TraceSummary) error {
	s.once.Do(func() { s.replica = "eval-" + newID()[:12] })
	who := s.Owners[0]
	data, err := json.Marshal(&trace.SharedSummary{Replica: s.replica, Seq: s.seq.Add(1), Owner: who, At: time.Now().UnixMilli(), Summary: *sum})
	if err != nil {
		return err
	}
	return feed.PutSummary(ctx, trace.TraceKey(who, sum.TraceID), data)
}
