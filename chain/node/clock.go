package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
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
type CallClock struct {
	node      string
	parent    context.Context // the caller's: its end is never the node's fault
	ctx       context.Context // the call's
	cancel    context.CancelCauseFunc
	stopTotal context.CancelFunc
	idle      time.Duration

	mu    sync.Mutex
	timer *time.Timer // first byte, then each silence
	first bool        // a byte has come
	ended bool        // Stop was called
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
	c := &CallClock{node: node.Name, parent: ctx, idle: node.IdleTimeout, stopTotal: func() {}}
	if total := node.CallTimeout(streamed); total > 0 {
		ctx, c.stopTotal = context.WithTimeoutCause(ctx, total, &timeoutCause{key: "timeout", d: total, what: "call longer than"})
	}
	ctx, c.cancel = context.WithCancelCause(ctx)
	c.ctx = ctx
	if d := node.FirstByteTimeout; d > 0 {
		c.timer = time.AfterFunc(d, func() {
			c.cancel(&timeoutCause{key: "first_byte_timeout", d: d, what: "no first byte within"})
		})
	}
	return ctx, c
}

// Body returns r, each byte read from it counting as a sign of life: the
// first stops the first byte's bound, and each later read that brings
// something starts the silence's bound again.
func (c *CallClock) Body(r io.Reader) io.Reader { return &clockReader{r: r, c: c} }

type clockReader struct {
	r io.Reader
	c *CallClock
}

func (r *clockReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.c.alive()
	}
	return n, err
}

// alive starts the silence's bound again.
func (c *CallClock) alive() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return
	}
	if !c.first {
		c.first = true
		if c.timer != nil {
			c.timer.Stop()
			c.timer = nil
		}
		if c.idle > 0 {
			d := c.idle
			c.timer = time.AfterFunc(d, func() {
				c.cancel(&timeoutCause{key: "idle_timeout", d: d, what: "silent for"})
			})
		}
		return
	}
	if c.timer != nil {
		c.timer.Reset(c.idle)
	}
}

// Stop ends the clock and releases its context.
func (c *CallClock) Stop() {
	c.mu.Lock()
	c.ended = true
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
	c.cancel(nil)
	c.stopTotal()
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
