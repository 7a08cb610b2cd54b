package memory

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
)

// flightKey is one summarizer call: the summarizer node and the prompt,
// which the turns to fold, the summary they extend and the words asked
// determine.
type flightKey struct {
	node   string
	prompt uint64
}

// promptHash hashes a prompt's roles and texts (a summarizer's prompt has
// no parts or tool calls).
func promptHash(msgs []Message) uint64 {
	d := xxhash.New()
	for _, m := range msgs {
		d.WriteString(m.Role)
		d.Write([]byte{0})
		d.WriteString(m.Content)
		d.Write([]byte{1})
	}
	return d.Sum64()
}

// Flights runs one summarizer call per summarizer node and prompt for
// the callers that ask for it at the same time. Two requests of one
// conversation that arrive together (a client that retries while its first
// request runs, a chat UI's side requests beside the answer) need the same
// summary of the same turns at the moment the summarizer, a small local
// model, is busiest: the second waits for the first one's call. Across replicas there is no such
// wait: a summary made by one is found in the shared store by the next
// request. The zero value is ready to use.
type Flights struct {
	mu sync.Mutex
	m  map[flightKey]*flight
}

// flight is a call in progress and the callers that still wait for it.
type flight struct {
	done    chan struct{}
	text    string
	err     error
	waiting int // callers still waiting, the one making the call included
	cancel  context.CancelFunc
}

// Do returns call's result for the summary node makes of prompt, making
// the call unless the same one is in progress, in which case it waits for
// that one (shared). The call runs
// in the first caller's goroutine, under a context of its own bounded by
// timeout and cancelled only when every caller has gone: the first
// caller's client leaving does not fail the others, who would each make
// the call again. A caller whose ctx ends stops waiting at once; the first
// one returns when the call does.
func (g *Flights) Do(ctx context.Context, node string, prompt []Message, timeout time.Duration, call func(context.Context) (string, error)) (string, bool, error) {
	key := flightKey{node: node, prompt: promptHash(prompt)}
	g.mu.Lock()
	if fl, ok := g.m[key]; ok {
		fl.waiting++
		g.mu.Unlock()
		select {
		case <-fl.done:
			return fl.text, true, fl.err
		case <-ctx.Done():
			g.leave(key, fl)
			return "", true, fmt.Errorf("waiting for a summary: %w", context.Cause(ctx))
		}
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	fl := &flight{done: make(chan struct{}), waiting: 1, cancel: cancel}
	if g.m == nil {
		g.m = map[flightKey]*flight{}
	}
	g.m[key] = fl
	g.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { g.leave(key, fl) })
	// Deferred, so that a call that panics does not leave the others
	// waiting for ever.
	defer func() {
		stop()
		cancel()
		g.mu.Lock()
		if g.m[key] == fl {
			delete(g.m, key)
		}
		g.mu.Unlock()
		close(fl.done)
	}()
	fl.text, fl.err = call(cctx)
	return fl.text, false, fl.err
}

// leave is a caller of fl that stopped waiting; the last one cancels the
// call, which no newcomer may then join.
func (g *Flights) leave(key flightKey, fl *flight) {
	g.mu.Lock()
	defer g.mu.Unlock()
	fl.waiting--
	if fl.waiting == 0 {
		fl.cancel()
		if g.m[key] == fl {
			delete(g.m, key)
		}
	}
}

// Waiting is how many callers wait for calls in progress, the one making
// each call included: what a test waits on rather than sleeping until a
// second request has joined a call.
func (g *Flights) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, fl := range g.m {
		n += fl.waiting
	}
	return n
}
