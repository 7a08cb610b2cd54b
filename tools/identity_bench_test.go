package tools

import (
	"testing"

	"chainproxy/config"
)

// benchKeyArgs is a ~200-byte arguments object as a model writes it, as in
// antiloop's BenchmarkSignature.
const benchKeyArgs = `{"path": "src/internal/handlers", "pattern": "func (h *Handler) ServeHTTP", ` +
	`"max_results": 50, "case_sensitive": false, "include": ["*.go", "*.mod"], ` +
	`"options": {"depth": 3, "follow": false}}`

// BenchmarkKey is the identity of a call to a tool with a plain schema: the
// fast path, canonical JSON and nothing more.
func BenchmarkKey(b *testing.B) {
	r, err := New(config.Tools{Root: b.TempDir(), HTTP: []config.HTTPTool{
		{Name: "search", URL: "http://127.0.0.1:1/", ReadOnly: true, Parameters: map[string]any{"type": "object"}},
	}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	benchKey(b, r, "search", benchKeyArgs)
}

// BenchmarkKeyPath is the identity of a file tool's call: defaults filled
// in and the path resolved in the sandbox.
func BenchmarkKeyPath(b *testing.B) {
	r, err := New(config.Tools{Root: b.TempDir()}, nil)
	if err != nil {
		b.Fatal(err)
	}
	benchKey(b, r, SearchFiles, `{"pattern": "func (h *Handler) ServeHTTP", "path": "./src/internal/../internal/handlers/"}`)
}

func benchKey(b *testing.B, r *Registry, name, args string) {
	in := []byte(args)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Key(name, in); err != nil {
			b.Fatal(err)
		}
	}
}
