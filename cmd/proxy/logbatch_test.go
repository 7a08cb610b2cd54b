package main

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// countingBuffer is an io.Writer the test reads while the flush timer
// writes to it, counting the writes.
type countingBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (l *countingBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes++
	return l.b.Write(p)
}

func (l *countingBuffer) read() (string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String(), l.writes
}

func TestBatchWriter(t *testing.T) {
	t.Run("lines written together after the interval", func(t *testing.T) {
		var out countingBuffer
		w := newBatchWriter(&out, 20*time.Millisecond)
		for i := range 100 {
			w.Write([]byte("line " + strconv.Itoa(i) + "\n"))
		}
		// How many intervals the loop spans depends on the machine's load,
		// so the count of writes is bounded, not fixed (the full batch
		// below is exact).
		deadline := time.Now().Add(5 * time.Second)
		for {
			got, writes := out.read()
			if strings.Count(got, "\n") == 100 {
				if writes >= 100 {
					t.Errorf("%d writes for 100 lines: not gathered", writes)
				}
				if !strings.HasPrefix(got, "line 0\nline 1\n") || !strings.HasSuffix(got, "line 99\n") {
					t.Errorf("lines out of order: %.40q…", got)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("lines not flushed 5 s after the 20 ms interval: %q", got)
			}
			time.Sleep(5 * time.Millisecond)
		}
		// The timer is armed again by the next line.
		w.Write([]byte("later\n"))
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if got, _ := out.read(); strings.HasSuffix(got, "line 99\nlater\n") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("a line after a flush never went out")
			}
		}
	})
	t.Run("a full batch goes out at once", func(t *testing.T) {
		var out countingBuffer
		w := newBatchWriter(&out, time.Hour)
		line := []byte(strings.Repeat("x", 1023) + "\n")
		for range batchMax / len(line) {
			w.Write(line)
		}
		got, writes := out.read()
		if writes != 1 || len(got) != batchMax {
			t.Fatalf("after %d bytes: %d writes of %d bytes, want 1 of %d", batchMax, writes, len(got), batchMax)
		}
	})
	t.Run("flush writes what waits", func(t *testing.T) {
		var out countingBuffer
		w := newBatchWriter(&out, time.Hour)
		w.Write([]byte("last words\n"))
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if got, _ := out.read(); got != "last words\n" {
			t.Fatalf("after Flush: %q", got)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if _, writes := out.read(); writes != 1 {
			t.Fatalf("an empty flush wrote: %d writes", writes)
		}
	})
}
