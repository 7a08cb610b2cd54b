package store_test

import (
	"bytes"
	"strconv"
	"testing"

	"chainproxy/store"
)

// TestMemoryBoundedInBytes: a few huge values must not hold gigabytes; the
// store drops the least recently written beyond DefaultMaxBytes, and keeps
// the newest.
func TestMemoryBoundedInBytes(t *testing.T) {
	m := store.NewMemory(0, 0)
	val := bytes.Repeat([]byte("x"), 8<<20)
	for i := range 40 { // 320 MiB written
		if err := m.Set(t.Context(), "k"+strconv.Itoa(i), val, 0); err != nil {
			t.Fatal(err)
		}
		if got := m.Size(); got > store.DefaultMaxBytes {
			t.Fatalf("after %d writes Size() = %d, want at most %d", i+1, got, store.DefaultMaxBytes)
		}
	}
	if _, ok, _ := m.Get(t.Context(), "k39"); !ok {
		t.Errorf("the newest entry was dropped")
	}
	if _, ok, _ := m.Get(t.Context(), "k0"); ok {
		t.Errorf("the oldest entry is still kept past the byte bound")
	}
	for i := range 40 {
		m.Delete(t.Context(), "k"+strconv.Itoa(i))
	}
	if got := m.Size(); got != 0 {
		t.Errorf("Size() after deleting everything = %d, want 0", got)
	}
}
