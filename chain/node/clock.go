package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync/atomic"
	"time"

	"chainproxy/config"
)

// CallClock bounds one upstream call by its node's three timeouts: the
// wait for the first byte (nodes[].first_byte_timeout), the longest
// silence after it (nodes[].idle_timeout) and the whole call
// (nodes[].timeout, none for a streamed call unless set). They are apart
// because they guard against different things: a slow CPU model writing a
// long answer is healthy however long it takes, while a server that stalls
// is not, however early.
//
// One timer and one context serve all three, and a read only notes the
// time: the timer, when it fires, works out which bound is next (or which
// ran out). Every model call starts a clock, so its cost is the relay
// path's (three timers and two contexts cost 8,000 instructions a call).
type CallClock struct {
	node      string
	parent    context.Context // the caller's: its end is never the node's fault
	ctx       context.Context // the call's
	cancel    context.CancelCauseFunc
	start     time.Time
	firstByte time.Duration // 0: no bound
	idle      time.Duration // 0: no bound
	total     time.Duration // 0: no bound
	timer     *time.Timer   // nil when no bound is set

	// last is when the latest byte came, as time since start plus one:
	// 0 until the first byte.
	last  atomic.Int64
	ended atomic.Bool // Stop was called
}

// timeoutCause is what a CallClock cancels its call with: the key whose
// bound ran out, so that the error (and the trace) names it.
type timeoutCause struct {
	key  string
	d    time.Duration
	what string
}

func (c *timeoutCause) Error() string {
	return fmt.Sprintf("%s %s (nodes[].%s)", c.what, c.d, c.key)
}

// StartClock starts the clock of one call to node, streamed or answered
// whole, and returns the call's context. The caller reads the response
// body through Body, turns the call's error with Err, and calls Stop when
// the call is over.
func StartClock(ctx context.Context, node config.Node, streamed bool) (context.Context, *CallClock) {
	c := &CallClock{node: node.Name, parent: ctx, start: time.Now(), firstByte: node.FirstByteTimeout, idle: node.IdleTimeout, total: node.CallTimeout(streamed)}
	c.ctx, c.cancel = context.WithCancelCause(ctx)
	if next, ok := c.next(0); ok {
		// Set, then armed: the Reset orders the write of c.timer before
		// fire, which reads it.
		c.timer = time.AfterFunc(math.MaxInt64, c.fire)
		c.timer.Reset(next)
	}
	return c.ctx, c
}

// next returns how long from now (time since start) until the nearest
// bound, and false when none is set.
func (c *CallClock) next(now time.Duration) (time.Duration, bool) {
	due, ok := time.Duration(0), false
	bound := func(at time.Duration) {
		if !ok || at < due {
			due, ok = at, true
		}
	}
	if c.total > 0 {
		bound(c.total)
	}
	if last := c.last.Load(); last == 0 {
		if c.firstByte > 0 {
			bound(c.firstByte)
		}
	} else if c.idle > 0 {
		bound(time.Duration(last-1) + c.idle)
	}
	return max(due-now, 0), ok
}

// fire runs when the timer does: it ends the call if a bound ran out, or
// sets the timer for the next one (a byte came since it was set).
func (c *CallClock) fire() {
	if c.ended.Load() {
		return
	}
	now := time.Since(c.start)
	last := c.last.Load()
	switch {
	case c.total > 0 && now >= c.total:
		c.cancel(&timeoutCause{key: "timeout", d: c.total, what: "call longer than"})
	case last == 0 && c.firstByte > 0 && now >= c.firstByte:
		c.cancel(&timeoutCause{key: "first_byte_timeout", d: c.firstByte, what: "no first byte within"})
	case last != 0 && c.idle > 0 && now >= time.Duration(last-1)+c.idle:
		c.cancel(&timeoutCause{key: "idle_timeout", d: c.idle, what: "silent for"})
	default:
		if next, ok := c.next(now); ok {
			c.timer.Reset(next)
		}
	}
}

// Body returns r, each byte read from it counting as a sign of life: the
// first ends the first byte's bound, and each later read that brings
// something starts the silence's bound again.
func (c *CallClock) Body(r io.Reader) io.Reader { return &clockReader{r: r, c: c} }

type clockReader struct {
	r io.Reader
	c *CallClock
}

func (r *clockReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 && r.c.timer != nil {
		r.c.last.Store(int64(time.Since(r.c.start)) + 1)
	}
	return n, err
}

// Stop ends the clock and releases its context.
func (c *CallClock) Stop() {
	c.ended.Store(true)
	if c.timer != nil {
		c.timer.Stop()
	}
	c.cancel(nil)
}

// Err returns err, or, when the clock ended the call, an upstream timeout
// error naming the bound that ran out, whatever the backend made of the
// cut (a cancelled read, a broken stream). A caller that went away is
// never blamed on the node.
func (c *CallClock) Err(err error) error {
	if err == nil || c.parent.Err() != nil {
		return err
	}
	var tc *timeoutCause
	if !errors.As(context.Cause(c.ctx), &tc) {
		return err
	}
	return &UpstreamError{Node: c.node, Kind: KindTimeout, Message: tc.Error(), Err: context.DeadlineExceeded}
}
