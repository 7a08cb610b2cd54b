package antiloop_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"chainproxy/antiloop"
	"chainproxy/config"
	"chainproxy/store"
	"chainproxy/tools"
)

// TestGuardInvalidateBounded: the scopes of a write come from the path the
// model wrote, up to tools.max_args_bytes (256 KiB by default), and a deep
// path names one scope per directory above it (tools' writeScopes); a
// small model that degenerates repeats a path segment until it runs out of
// tokens. Such a write costs the store a bounded number of keys, each of
// bounded length, not one key per level with the path so far in each
// (quadratic bytes in a Redis shared by every replica, for the TTL, and a
// round trip each), and what it wrote is still read again after it.
func TestGuardInvalidateBounded(t *testing.T) {
	// A writing HTTP tool with a path, as in tools' own identity tests.
	reg, err := tools.New(config.Tools{Root: t.TempDir(), HTTP: []config.HTTPTool{
		{Name: "write_file", URL: "http://127.0.0.1:1/", Parameters: map[string]any{
			"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}},
		}},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, path string }{
		{"deep", strings.Repeat("a/", 5_000) + "f.txt"},
		{"long name", strings.Repeat("n", 10_000) + ".txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args, err := json.Marshal(map[string]string{"path": tc.path, "content": "x"})
			if err != nil {
				t.Fatal(err)
			}
			key, err := reg.Key("write_file", args)
			if err != nil {
				t.Fatal(err)
			}
			readArgs, err := json.Marshal(map[string]string{"path": tc.path})
			if err != nil {
				t.Fatal(err)
			}
			read, err := reg.Key(tools.ReadFile, readArgs)
			if err != nil {
				t.Fatal(err)
			}
			write := mustSig(t, "write_file", string(args))
			readSig := mustSig(t, tools.ReadFile, string(readArgs))

			rec := &recordingStore{}
			if err := antiloop.NewGuard(rec, sigTTL, idTTL).Invalidate(context.Background(), "c", write, key.Writes); err != nil {
				t.Fatal(err)
			}
			if len(rec.keys) > 100 {
				t.Errorf("one write made %d store calls", len(rec.keys))
			}
			for _, k := range rec.keys {
				if len(k) > 1200 {
					t.Fatalf("key of %d bytes: %.80s…", len(k), k)
				}
			}

			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				g := antiloop.NewGuard(store.NewMemory(0, 0), sigTTL, idTTL)
				if d, err := g.AdmitScoped(ctx, "c", "r1", readSig, true, read.Reads); err != nil || d.Verdict != antiloop.Execute {
					t.Fatalf("first read: %+v, %v", d, err)
				}
				if err := g.Record(ctx, "c", "r1", readSig, []byte("old")); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Millisecond)
				if err := g.Invalidate(ctx, "c", write, key.Writes); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Millisecond)
				if d, err := g.AdmitScoped(ctx, "c", "r2", readSig, true, read.Reads); err != nil || d.Verdict != antiloop.Execute {
					t.Errorf("the read again after the write: %v (%s), %v; want Execute", d.Verdict, d.Reason, err)
				}
			})
		})
	}
}
