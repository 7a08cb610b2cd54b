package main

import (
	"io"
	"sync"
	"time"
)

// batchWriter gathers log lines and writes them out together, as nginx's
// access_log does with buffer= and flush=: the proxy logs one line per
// request, and under load one write(2) per line was about a tenth of the
// relay's own CPU (PERFORMANCE.md). A line goes out at most every (the
// -log-batch flag, 50 ms by default; 0 writes each line at once) after it
// was written, or at once when batchMax bytes wait. Flush writes what
// waits; run calls it before the process exits, so only a crash (SIGKILL)
// can lose the last lines.
//
// The flush timer is a time.AfterFunc: its goroutine exists only while a
// flush runs, and returns when the lines are written.
type batchWriter struct {
	out   io.Writer
	every time.Duration

	mu    sync.Mutex
	buf   []byte
	armed bool // the timer will flush buf
	timer *time.Timer
}

// batchMax is how many bytes of lines may wait: past it, the line that
// crosses it writes them all at once.
const batchMax = 32 << 10

func newBatchWriter(out io.Writer, every time.Duration) *batchWriter {
	b := &batchWriter{out: out, every: every}
	b.timer = time.AfterFunc(time.Hour, func() { _ = b.Flush() })
	b.timer.Stop()
	return b
}

// Write takes one line (slog's handlers write each record whole, under
// their own lock, so lines never interleave).
func (b *batchWriter) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) >= batchMax {
		return len(p), b.flushLocked()
	}
	if !b.armed {
		b.armed = true
		b.timer.Reset(b.every)
	}
	return len(p), nil
}

// Flush writes the lines that wait.
func (b *batchWriter) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flushLocked()
}

func (b *batchWriter) flushLocked() error {
	if b.armed {
		b.armed = false
		b.timer.Stop()
	}
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.out.Write(b.buf)
	if cap(b.buf) > 4*batchMax {
		b.buf = nil // a burst grew it: do not keep it
	} else {
		b.buf = b.buf[:0]
	}
	return err
}
