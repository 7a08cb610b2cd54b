package antiloop_test

import (
	"testing"

	"chainproxy/antiloop"
)

// benchArgs is a ~200-byte arguments object as a model writes it: keys out of
// order, a nested object, an array, spaces.
const benchArgs = `{"path": "src/internal/handlers", "pattern": "func (h *Handler) ServeHTTP", ` +
	`"max_results": 50, "case_sensitive": false, "include": ["*.go", "*.mod"], ` +
	`"options": {"depth": 3, "follow": false}}`

func BenchmarkSignature(b *testing.B) {
	args := []byte(benchArgs)
	b.SetBytes(int64(len(args)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := antiloop.Signature("search_files", args); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCanonical(b *testing.B) {
	args := []byte(benchArgs)
	b.SetBytes(int64(len(args)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := antiloop.Canonical(args); err != nil {
			b.Fatal(err)
		}
	}
}
