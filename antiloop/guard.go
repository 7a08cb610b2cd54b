package antiloop

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
)

// Store keeps the guard's state with an expiry. Implementations live in the
// store package (in-process memory, or Redis shared by replicas).
type Store interface {
	// Claim sets key (value "pending") for ttl only if absent; true when this caller claimed it.
	Claim(ctx context.Context, key string, ttl time.Duration) (bool, error)
	// Get returns the value stored under key.
	Get(ctx context.Context, key string) ([]byte, bool, error)
	// Set stores val under key for ttl.
	Set(ctx context.Context, key string, val []byte, ttl time.Duration) error
	// Delete removes key; removing an absent key is no error.
	Delete(ctx context.Context, key string) error
}

// Verdict is what the guard decides for one tool call.
type Verdict uint8

// Verdicts. The zero Verdict is none of them, so that a forgotten Decision
// never reads as permission to execute.
const (
	// Execute: run the call, then [Guard.Record] its result.
	Execute Verdict = iota + 1
	// Cached: do not run the call; Decision.Result is the stored result.
	Cached
	// Blocked: do not run the call; Decision.Reason says why.
	Blocked
)

// String returns the verdict's name as the trace shows it.
func (v Verdict) String() string {
	switch v {
	case Execute:
		return "execute"
	case Cached:
		return "cached"
	case Blocked:
		return "blocked"
	}
	return "verdict(" + strconv.Itoa(int(v)) + ")"
}

// Decision is the guard's answer for one tool call.
type Decision struct {
	Verdict Verdict
	// Result is the stored result when Verdict is Cached.
	Result []byte
	// Reason explains a Cached or Blocked verdict in words fit for the model
	// and the trace ("not executed: same call ran 12s ago").
	Reason string
	// Age is how long ago the stored result was recorded (Cached).
	Age time.Duration
}

// Guard decides whether a tool call may run, from two rules kept in a Store:
//
//   - a tool_call ID already executed in a conversation with the same
//     signature is not executed again within callIDTTL (an ID that comes
//     back with other arguments is a new call);
//   - a signature executed in a conversation within signatureTTL is not
//     executed again.
//
// A call that is not executed gets the stored result (Cached) when the tool
// is read-only, and is refused (Blocked) otherwise.
//
// Key layout, all under the "chainproxy:" namespace:
//
//	chainproxy:sig:{conv}:{sig}          signature rule, TTL signatureTTL
//	chainproxy:id:{conv}:{callID}:{sig}  call-ID rule, TTL callIDTTL
//	chainproxy:inv:{conv}:{scope}        last write to scope ("*": anything), unix ms
//	chainproxy:inv:{conv}:write          last write, "{unix ms}:{sig}"
//
// {sig} is the signature as 16 lowercase hex digits; in {conv}, {callID}
// and {scope}, '%' and ':' are written %25 and %3A so that keys cannot
// collide, and a call ID or scope too long for a key is hashed. A key
// holds "pending" from the claim until [Guard.Record] stores
// "done:{unix ms}:{result}".
//
// Claims use [Store.Claim] (SET NX semantics), so two replicas that share a
// store and race on the same call execute it once: the loser sees the
// claim and the call is Blocked as running elsewhere until the result is
// recorded.
type Guard struct {
	store        Store
	signatureTTL time.Duration
	callIDTTL    time.Duration
}

// NewGuard returns a guard keeping its state in s. A non-positive TTL
// disables its rule.
func NewGuard(s Store, signatureTTL, callIDTTL time.Duration) *Guard {
	return &Guard{store: s, signatureTTL: signatureTTL, callIDTTL: callIDTTL}
}

const (
	keyPrefix   = "chainproxy:"
	donePrefix  = "done:"
	reasonStale = "not executed: the same call is running elsewhere"
	// scopeAll is the invalidation scope of a write that may have changed
	// anything in the conversation.
	scopeAll = "*"
	// scopeWrite holds "{unix ms}:{sig}" of the conversation's last write.
	scopeWrite = "write"
)

// Admit decides whether the call with signature sig and ID callID (empty:
// no ID, the call-ID rule is skipped) may run in conversation conv. On
// Execute the caller owns the claims and must call [Guard.Record] once the
// call has run, whatever its outcome; until then, the same call elsewhere is
// Blocked as running. A store error is returned as is: the caller decides.
//
// Admit is [Guard.AdmitScoped] for a call whose result depends on nothing
// narrower than the whole conversation.
func (g *Guard) Admit(ctx context.Context, conv, callID string, sig uint64, readOnly bool) (Decision, error) {
	return g.AdmitScoped(ctx, conv, callID, sig, readOnly, "")
}

// AdmitScoped is [Guard.Admit] for a call whose result depends on the state
// named reads ("file:notes.md"; empty: unknown, the conversation as a
// whole). A stored result older than an [Guard.Invalidate] of reads, or of
// the whole conversation, is stale, and so is one with unknown reads older
// than any Invalidate: it is dropped and the call runs again, so that a read
// after a write always returns fresh content.
func (g *Guard) AdmitScoped(ctx context.Context, conv, callID string, sig uint64, readOnly bool, reads string) (Decision, error) {
	return g.AdmitStamped(ctx, conv, callID, sig, readOnly, reads, "")
}

// Unstamped is the stamp of a state that could not be stamped: no stored
// result is served to a call that gives it.
const Unstamped = "-"

// AdmitStamped is [Guard.AdmitScoped] for a read that can tell the present
// state of what it reads (stamp: a file's size and modification time, say,
// as [Guard.RecordStamped] stored it): a stored result is served only if it
// was recorded with the same stamp, so that a file changed by hand, outside
// the proxy's own tools, is read again (issue 25). An empty stamp is no
// stamp (HTTP and MCP reads): only writes made through the tools make
// their results stale. [Unstamped] is never fresh.
func (g *Guard) AdmitStamped(ctx context.Context, conv, callID string, sig uint64, readOnly bool, reads, stamp string) (Decision, error) {
	sc := scope{reads: reads, stamp: cleanStamp(stamp)}
	var idKey string
	if callID != "" && g.callIDTTL > 0 {
		idKey = callIDKey(conv, callID, sig)
		val, ok, err := g.store.Get(ctx, idKey)
		if err != nil {
			return Decision{}, fmt.Errorf("antiloop: look up call id: %w", err)
		}
		if ok {
			stale, err := g.stale(ctx, conv, sc, sig, val, readOnly)
			if err != nil {
				return Decision{}, err
			}
			if !stale {
				return seen(val, readOnly, "call id "+callID+" already executed"), nil
			}
			if err := g.store.Delete(ctx, idKey); err != nil {
				return Decision{}, fmt.Errorf("antiloop: drop stale call id: %w", err)
			}
		}
	}
	if g.signatureTTL > 0 {
		d, ok, err := g.claim(ctx, conv, sc, sig, signatureKey(conv, sig), g.signatureTTL, readOnly, "")
		if err != nil || !ok {
			return d, err
		}
	}
	if idKey != "" {
		d, ok, err := g.claim(ctx, conv, sc, sig, idKey, g.callIDTTL, readOnly, "call id "+callID+" already executed")
		if err != nil || !ok {
			return d, err
		}
	}
	return Decision{Verdict: Execute}, nil
}

// claim claims key; when another caller holds it, it returns the decision
// the stored value implies and ok false. what describes an earlier run;
// empty means "same call ran … ago". A stored result made stale by a write
// is deleted and the claim tried again.
func (g *Guard) claim(ctx context.Context, conv string, sc scope, sig uint64, key string, ttl time.Duration, readOnly bool, what string) (Decision, bool, error) {
	// Three times: the holder's key may expire between Claim and Get, and
	// a stale result is deleted once.
	for range 3 {
		claimed, err := g.store.Claim(ctx, key, ttl)
		if err != nil {
			return Decision{}, false, fmt.Errorf("antiloop: claim: %w", err)
		}
		if claimed {
			return Decision{}, true, nil
		}
		val, ok, err := g.store.Get(ctx, key)
		if err != nil {
			return Decision{}, false, fmt.Errorf("antiloop: look up claim: %w", err)
		}
		if !ok {
			continue
		}
		stale, err := g.stale(ctx, conv, sc, sig, val, readOnly)
		if err != nil {
			return Decision{}, false, err
		}
		if !stale {
			return seen(val, readOnly, what), false, nil
		}
		if err := g.store.Delete(ctx, key); err != nil {
			return Decision{}, false, fmt.Errorf("antiloop: drop stale result: %w", err)
		}
	}
	return Decision{Verdict: Blocked, Reason: reasonStale}, false, nil
}

// maxScopes is the most scopes a write marks one by one: a write naming
// more (a path as deep as the model cares to write it names one a level)
// marks the whole conversation, which makes stale all it would have, at
// the cost of one key rather than one a level.
const maxScopes = 64

// Invalidate records that the write sig in conversation conv made stale
// every stored result that depends on one of scopes, or on anything when
// scopes is empty or longer than maxScopes. The mark is a timestamp kept as
// long as a result can be: a result recorded at or before it is not served
// again (see [Guard.AdmitScoped]), whichever replica stored it. It also
// marks sig as the conversation's last write: another write since makes a
// repeat of sig a new call (A, B, A writes A back), while sig again right
// after itself stays a repeat.
func (g *Guard) Invalidate(ctx context.Context, conv string, sig uint64, scopes []string) error {
	ttl := max(g.signatureTTL, g.callIDTTL)
	if ttl <= 0 {
		return nil
	}
	if len(scopes) == 0 || len(scopes) > maxScopes {
		scopes = []string{scopeAll}
	}
	now := strconv.AppendInt(nil, time.Now().UnixMilli(), 10)
	for _, sc := range scopes {
		if err := g.store.Set(ctx, invalidKey(conv, sc), now, ttl); err != nil {
			return fmt.Errorf("antiloop: invalidate: %w", err)
		}
	}
	last := append(now, ':')
	last = append(last, sigHex(sig)...)
	if err := g.store.Set(ctx, invalidKey(conv, scopeWrite), last, ttl); err != nil {
		return fmt.Errorf("antiloop: invalidate: %w", err)
	}
	return nil
}

// stale reports whether the stored value val, the record of call sig, is
// out of date. A read's result is, when it was recorded no later than the
// last write to reads or to the whole conversation; a write's record is,
// when another write came after it. A claim still pending is never stale:
// it is a call running now.
func (g *Guard) stale(ctx context.Context, conv string, sc scope, sig uint64, val []byte, readOnly bool) (bool, error) {
	at, stamp, _, ok := parseDone(val)
	if !ok {
		return false, nil
	}
	if readOnly && (sc.stamp == Unstamped || stamp != sc.stamp) {
		// What it read changed (or cannot be told): whatever the writes.
		return true, nil
	}
	reads := sc.reads
	if !readOnly {
		v, ok, err := g.store.Get(ctx, invalidKey(conv, scopeWrite))
		if err != nil {
			return false, fmt.Errorf("antiloop: look up last write: %w", err)
		}
		ms, who, found := bytes.Cut(v, []byte{':'})
		if !ok || !found || string(who) == sigHex(sig) {
			return false, nil
		}
		n, err := strconv.ParseInt(string(ms), 10, 64)
		return err == nil && at.UnixMilli() <= n, nil
	}
	if reads == "" {
		// What the result depends on is unknown (an HTTP or MCP read): any
		// write since, however narrow its scope, may have changed it.
		v, ok, err := g.store.Get(ctx, invalidKey(conv, scopeWrite))
		if err != nil {
			return false, fmt.Errorf("antiloop: look up last write: %w", err)
		}
		ms, _, _ := bytes.Cut(v, []byte{':'})
		n, perr := strconv.ParseInt(string(ms), 10, 64)
		return ok && perr == nil && at.UnixMilli() <= n, nil
	}
	for _, sc := range [2]string{scopeAll, reads} {
		v, ok, err := g.store.Get(ctx, invalidKey(conv, sc))
		if err != nil {
			return false, fmt.Errorf("antiloop: look up invalidation: %w", err)
		}
		if !ok {
			continue
		}
		ms, err := strconv.ParseInt(string(v), 10, 64)
		if err == nil && at.UnixMilli() <= ms {
			return true, nil
		}
	}
	return false, nil
}

// Release gives back the claims of a call that Admit let run but that did
// not complete (its request was cancelled while the tool ran): without it
// the claims would stay "pending" for their TTL, and the same call, asked
// again by the client's retry, would be refused as a repeat of a call that
// never finished.
func (g *Guard) Release(ctx context.Context, conv, callID string, sig uint64) error {
	if g.signatureTTL > 0 {
		if err := g.store.Delete(ctx, signatureKey(conv, sig)); err != nil {
			return fmt.Errorf("antiloop: release signature: %w", err)
		}
	}
	if callID != "" && g.callIDTTL > 0 {
		if err := g.store.Delete(ctx, callIDKey(conv, callID, sig)); err != nil {
			return fmt.Errorf("antiloop: release call id: %w", err)
		}
	}
	return nil
}

// Record stores the result of a call that Admit let run, for the call-ID
// and signature rules.
func (g *Guard) Record(ctx context.Context, conv, callID string, sig uint64, result []byte) error {
	return g.RecordStamped(ctx, conv, callID, sig, "", result)
}

// RecordStamped is [Guard.Record] for a read that stamped what it read
// before it ran (see [Guard.AdmitStamped]).
func (g *Guard) RecordStamped(ctx context.Context, conv, callID string, sig uint64, stamp string, result []byte) error {
	stamp = cleanStamp(stamp)
	val := make([]byte, 0, len(donePrefix)+15+len(stamp)+len(result))
	val = append(val, donePrefix...)
	val = strconv.AppendInt(val, time.Now().UnixMilli(), 10)
	if stamp != "" {
		val = append(val, '/')
		val = append(val, stamp...)
	}
	val = append(val, ':')
	val = append(val, result...)
	if g.signatureTTL > 0 {
		if err := g.store.Set(ctx, signatureKey(conv, sig), val, g.signatureTTL); err != nil {
			return fmt.Errorf("antiloop: record signature: %w", err)
		}
	}
	if callID != "" && g.callIDTTL > 0 {
		if err := g.store.Set(ctx, callIDKey(conv, callID, sig), val, g.callIDTTL); err != nil {
			return fmt.Errorf("antiloop: record call id: %w", err)
		}
	}
	return nil
}

// seen turns a stored value into the decision for a call that already ran
// (or is running). what describes the earlier run; empty means "same call
// ran … ago".
func seen(val []byte, readOnly bool, what string) Decision {
	at, _, result, ok := parseDone(val)
	if !ok {
		return Decision{Verdict: Blocked, Reason: reasonStale}
	}
	age := max(time.Since(at), 0)
	if what == "" {
		what = "same call ran " + FormatAge(age) + " ago"
	}
	if readOnly {
		return Decision{Verdict: Cached, Result: result, Reason: "cached: " + what, Age: age}
	}
	return Decision{Verdict: Blocked, Reason: "not executed: " + what}
}

// parseDone reads "done:{unix ms}:{result}" or, stamped,
// "done:{unix ms}/{stamp}:{result}"; anything else ("pending") is a call
// still running.
func parseDone(val []byte) (at time.Time, stamp string, result []byte, ok bool) {
	rest, ok := bytes.CutPrefix(val, []byte(donePrefix))
	if !ok {
		return time.Time{}, "", nil, false
	}
	head, result, ok := bytes.Cut(rest, []byte{':'})
	if !ok {
		return time.Time{}, "", nil, false
	}
	ms, st, _ := bytes.Cut(head, []byte{'/'})
	n, err := strconv.ParseInt(string(ms), 10, 64)
	if err != nil {
		return time.Time{}, "", nil, false
	}
	return time.UnixMilli(n), string(st), result, true
}

// scope is what a read depends on: the state it names (reads), and that
// state's stamp when it was asked.
type scope struct{ reads, stamp string }

// cleanStamp keeps a stamp out of the stored value's separators: one with
// a ':' or a '/' is stored as its hash.
func cleanStamp(stamp string) string {
	if stamp == Unstamped || !strings.ContainsAny(stamp, ":/") {
		return stamp
	}
	return sigHex(xxhash.Sum64String(stamp))
}

// FormatAge writes a result's age as the model is told it: milliseconds
// under a second, whole seconds above.
func FormatAge(d time.Duration) string {
	switch {
	case d < 0:
		d = 0
	case d < time.Second:
		d = d.Round(time.Millisecond)
	default:
		d = d.Round(time.Second)
	}
	return d.String()
}

var keyEscaper = strings.NewReplacer("%", "%25", ":", "%3A")

func signatureKey(conv string, sig uint64) string {
	return keyPrefix + "sig:" + keyEscaper.Replace(conv) + ":" + sigHex(sig)
}

// maxKeyCallID is the longest call ID kept as it is in a store key; a
// longer one is hashed, so that no ID a model or client writes makes keys,
// and the store's memory, grow with it.
const maxKeyCallID = 64

// maxKeyScope is the same for a scope, which holds a path the model wrote:
// high enough that no real path is hashed, so that a replica of an earlier
// version, which keys every scope as it is, finds the same keys during a
// rolling upgrade.
const maxKeyScope = 1024

// keyPart is s as a part of a key: hashed when longer than max. The hashed
// form, "h" and 16 hex digits, is no scope ("file:…", "*", …).
func keyPart(s string, max int) string {
	if len(s) > max {
		return "h" + sigHex(xxhash.Sum64String(s))
	}
	return keyEscaper.Replace(s)
}

func callIDKey(conv, callID string, sig uint64) string {
	return keyPrefix + "id:" + keyEscaper.Replace(conv) + ":" + keyPart(callID, maxKeyCallID) + ":" + sigHex(sig)
}

func invalidKey(conv, scope string) string {
	return keyPrefix + "inv:" + keyEscaper.Replace(conv) + ":" + keyPart(scope, maxKeyScope)
}

func sigHex(sig uint64) string {
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = hexDigits[sig&0xF]
		sig >>= 4
	}
	return string(b[:])
}
