package tools

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"chainproxy/config"
)

// TestSearchRegexBounded: a model-chosen regexp must not outlast the tool's
// timeout. A huge counted repetition is refused up front; a pattern under the
// size cap that is still slow on long lines is stopped by the timeout,
// checked inside the scan, with an error rather than "no matches".
func TestSearchRegexBounded(t *testing.T) {
	root := t.TempDir()
	line := strings.Repeat("ab", 512<<10) // one 1 MiB line, no "c"
	if err := os.WriteFile(filepath.Join(root, "one.txt"), []byte(line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	many := strings.Repeat(strings.Repeat("ab", 8<<10)+"\n", 60) // 60 lines of 16 KiB
	if err := os.WriteFile(filepath.Join(root, "many.txt"), []byte(many), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := New(config.Tools{Root: root, Timeout: 300 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    string
		wantErr error
	}{
		{"huge repetition refused", `{"pattern":"(?:a|b|ab|ba){1,1000}c","regex":true}`, ErrBadArguments},
		{"oversized pattern refused", `{"pattern":"` + strings.Repeat("x", maxPatternBytes+1) + `"}`, ErrBadArguments},
		{"slow pattern ends by the timeout", `{"pattern":"(?:a|b|ab|ba){1,240}c","regex":true,"path":"many.txt"}`, context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan struct{})
			var (
				got  string
				gerr error
			)
			go func() { // exits when Call returns
				defer close(done)
				got, gerr = r.Call(t.Context(), SearchFiles, []byte(tt.args))
			}()
			select {
			case <-done:
			case <-time.After(20 * time.Second): // a hang detector, not a timing target
				t.Fatal("search_files still running 20s after a 300ms timeout")
			}
			if !errors.Is(gerr, tt.wantErr) {
				t.Errorf("search_files(%.60s) = %.80q, %v; want an error wrapping %v", tt.args, got, gerr, tt.wantErr)
			}
		})
	}
}

// TestFIFOSwap: a file swapped for a FIFO between a check by path and the
// open must not block read_file or search_files: both open non-blocking and
// check the type of what they opened.
func TestFIFOSwap(t *testing.T) {
	root := t.TempDir()
	target := filepath.Join(root, "swap.txt")
	reg := filepath.Join(root, ".reg")
	fifo := filepath.Join(root, ".fifo")
	if err := os.WriteFile(reg, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo not supported here: %v", err)
	}
	r, err := New(config.Tools{Root: root, Timeout: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	swapped := make(chan struct{})
	go func() { // exits when stop is called
		defer close(swapped)
		for ctx.Err() == nil {
			os.Rename(reg, target)
			os.Rename(target, reg)
			os.Rename(fifo, target)
			os.Rename(target, fifo)
		}
	}()
	defer func() { stop(); <-swapped }()
	calls := []struct{ tool, args string }{
		{ReadFile, `{"path":"swap.txt"}`},
		{SearchFiles, `{"pattern":"hello"}`},
	}
	for _, c := range calls {
		done := make(chan struct{})
		go func() { // exits when the calls return
			defer close(done)
			for range 3000 {
				r.Call(t.Context(), c.tool, []byte(c.args))
			}
		}()
		select {
		case <-done:
		case <-time.After(60 * time.Second): // a hang detector, not a timing target
			// An open blocked on a FIFO ignores the context: unblock it so
			// the test can end, then fail.
			stop()
			if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
			t.Fatalf("%s blocked on a FIFO swapped in for a regular file", c.tool)
		}
	}
}
