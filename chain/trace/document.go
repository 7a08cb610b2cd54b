package trace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
)

// The stored trace document: what GET /v1/chain/traces/{id} answers with
// and the trace store keeps, under TraceKey. It lives here, beside the
// trace it wraps, because two writers make it: the server, for each
// request, and proxy eval, for each item it asks, so that an eval's
// answer opens in the cockpit of a server on the same store.

// TraceSummary is one chain in the trace list (GET /v1/chain/traces and
// its event stream), and the head of a stored trace document.
type TraceSummary struct {
	TraceID string `json:"trace_id"`
	// Started is when the chain started, in Unix milliseconds.
	Started int64 `json:"started"`
	// Question names the request: the first line of the user's words
	// the classifier judged, or of a client's own request's name, else of
	// the user's last message.
	Question string       `json:"question"`
	Mode     string       `json:"mode"`
	Stages   []StageBadge `json:"stages"`
	// Status is "running" until the request ends, then the chain's:
	// "failed", "cancelled", "awaiting_client" (then "abandoned" once
	// chain.resume_ttl passed without its resumption), a stage's stop
	// ("stopped_repeat", …), "degenerate" or "ok" (see TraceStatus).
	Status     string `json:"status"`
	DurationMS int64  `json:"duration_ms"`
	Tokens     int    `json:"tokens"`
	// Client is the caller's User-Agent.
	Client string `json:"client"`
	// Resumed is set on a chain that went on with a client's tool results.
	Resumed bool `json:"resumed,omitempty"`
}

// SharedSummary is a TraceSummary as a replica shares it with the others
// on one store (the TraceFeed of web): whose chain it is, and which
// replica sent it when, so that a replica knows its own chains, the
// latest news of each chain, and how old it is. proxy eval shares its
// answers' summaries so too, as a replica of its own, for the cockpit's
// list to show them.
type SharedSummary struct {
	Replica string `json:"replica"`
	// Seq numbers the replica's news, in the order it sent them: a list
	// read from the store may be older than a change already heard.
	Seq   uint64 `json:"seq"`
	Owner string `json:"owner"`
	// At is when it was sent, in Unix milliseconds (the replicas' clocks
	// are taken to agree within seconds).
	At      int64        `json:"at"`
	Summary TraceSummary `json:"summary"`
}

// StageBadge is a stage as the list shows it.
type StageBadge struct {
	Node   string `json:"node"`
	Status string `json:"status"`
	Turns  int    `json:"turns"`
}

// TraceCancelled is the status of a chain whose client went away before
// its answer (a stopped stream, a dropped connection), and of its stages
// still running then: the trace so far is stored, and opens.
const TraceCancelled = "cancelled"

// Badges are tr's stages as the list shows them, and its tokens.
func Badges(tr *Trace) ([]StageBadge, int) {
	out := make([]StageBadge, 0, len(tr.Stages))
	for _, st := range tr.Stages {
		// A resumed chain's earlier stages are not seen again while it
		// runs: they come back with its trace at the end.
		if st.Node != "" {
			out = append(out, StageBadge{Node: st.Node, Status: st.Status, Turns: st.Turns})
		}
	}
	return out, tr.Usage().TotalTokens
}

// TraceStatus is the list's word for how a chain ended: cancelled when
// its client went away, failed when the request failed, awaiting_client
// when a stage waits for the client's tools, else the first stage stop or
// degenerate answer, else ok.
func TraceStatus(tr *Trace, err error) string {
	if errors.Is(err, context.Canceled) {
		return TraceCancelled
	}
	if tr == nil || err != nil || len(tr.Stages) == 0 {
		return StageFailed
	}
	status := StageOK
	for _, st := range tr.Stages {
		switch {
		case st.Status == StageAwaitingClient:
			return st.Status
		case status == StageOK && (strings.HasPrefix(st.Status, "stopped_") || st.Status == StageDegenerate):
			status = st.Status
		}
	}
	return status
}

// TraceDocument is the stored document: head, a TraceSummary encoded as a
// JSON object, with "chain": the encoded trace added as its last field.
// The two are encoded by the caller, with its own encoder.
func TraceDocument(head, trace []byte) []byte {
	doc := make([]byte, 0, len(head)+len(trace)+10)
	doc = append(doc, head[:len(head)-1]...)
	doc = append(doc, `,"chain":`...)
	doc = append(doc, trace...)
	return append(doc, '}')
}

// CallerID is the non-secret identity of an API key (RunRequest.Caller):
// a fixed-length hash, so that state keyed by it neither reveals the key
// nor grows with it. A server without keys has the caller "".
func CallerID(key string) string {
	sum := sha256.Sum256([]byte("chainproxy caller\x00" + key))
	return hex.EncodeToString(sum[:12])
}

// TraceKey scopes a trace id to its caller, in the trace store: another
// key looks up another name and gets 404, as if the trace did not exist.
func TraceKey(who, id string) string {
	if who == "" {
		return id
	}
	return who + "." + id
}
