package tools

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"chainproxy/antiloop"
	"chainproxy/config"
)

func identityRegistry(t *testing.T) *Registry {
	t.Helper()
	r, err := New(config.Tools{Root: t.TempDir(), HTTP: []config.HTTPTool{
		{Name: "lookup", URL: "http://127.0.0.1:1/", ReadOnly: true, Parameters: map[string]any{
			"type":       "object",
			"properties": map[string]any{"id": map[string]any{"type": "number"}, "verbose": map[string]any{"type": "boolean", "default": false}},
			"required":   []any{"id"},
		}},
		{Name: "write_file", URL: "http://127.0.0.1:1/", Parameters: map[string]any{
			"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}},
		}},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestKeySameCall lists spellings that must key as one call.
func TestKeySameCall(t *testing.T) {
	r := identityRegistry(t)
	tests := []struct {
		name string
		tool string
		args []string
	}{
		{"path forms", ReadFile, []string{`{"path":"notes.md"}`, `{"path":"./notes.md"}`, `{"path":"docs/../notes.md"}`, `{"path":"notes.md/"}`, `{ "path" : "not\u0065s.md" }`}},
		{"root forms", ListDir, []string{`{"path":"."}`, `{"path":"./"}`, `{"path":""}`, `{"path":"a/.."}`}},
		{"defaults", SearchFiles, []string{`{"pattern":"x"}`, `{"pattern":"x","path":"."}`, `{"pattern":"x","regex":false,"path":"./"}`, `{"pattern":"x","regex":null}`}},
		{"number and default", "lookup", []string{`{"id":7}`, `{"id":7.0}`, `{"id":70e-1,"verbose":false}`, `{"verbose":null,"id":7}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var first []byte
			for i, a := range tt.args {
				k, err := r.Key(tt.tool, []byte(a))
				if err != nil {
					t.Fatalf("Key(%s, %s): %v", tt.tool, a, err)
				}
				if i == 0 {
					first = k.Identity
				} else if !bytes.Equal(k.Identity, first) {
					t.Errorf("Key(%s, %s).Identity = %q, want %q (as %s)", tt.tool, a, k.Identity, first, tt.args[0])
				}
			}
		})
	}
}

// TestKeyDifferentCalls lists calls that must not be confused.
func TestKeyDifferentCalls(t *testing.T) {
	r := identityRegistry(t)
	pairs := [][2][2]string{
		{{ReadFile, `{"path":"notes.md"}`}, {ReadFile, `{"path":"Notes.md"}`}},
		{{ReadFile, `{"path":"a"}`}, {ListDir, `{"path":"a"}`}},
		{{"lookup", `{"id":7}`}, {"lookup", `{"id":7,"verbose":true}`}},
		{{SearchFiles, `{"pattern":"x"}`}, {SearchFiles, `{"pattern":"x","path":"docs"}`}},
	}
	for _, p := range pairs {
		a, errA := r.Key(p[0][0], []byte(p[0][1]))
		b, errB := r.Key(p[1][0], []byte(p[1][1]))
		if errA != nil || errB != nil {
			t.Fatalf("Key: %v, %v", errA, errB)
		}
		if bytes.Equal(a.Identity, b.Identity) {
			t.Errorf("%s %s and %s %s have the same identity %q", p[0][0], p[0][1], p[1][0], p[1][1], a.Identity)
		}
	}
}

func TestKeyScopes(t *testing.T) {
	r := identityRegistry(t)
	tests := []struct {
		tool, args string
		kind       Kind
		reads      string
		writes     []string
	}{
		{ReadFile, `{"path":"./docs/a.md"}`, Deterministic, "file:docs/a.md", nil},
		{ListDir, `{"path":"docs/"}`, Deterministic, "dir:docs", nil},
		{SearchFiles, `{"pattern":"x"}`, Deterministic, "tree:.", nil},
		{"lookup", `{"id":1}`, Deterministic, "", nil},
		{"write_file", `{"path":"./docs/a.md","content":"x"}`, Writing, "", []string{"file:docs/a.md", "dir:docs/a.md", "dir:docs", "tree:docs/a.md", "tree:docs", "tree:."}},
		{"write_file", `{"content":"x"}`, Writing, "", nil},
		// A path as deep as a degenerate model writes it: its reach is
		// everything, not a scope per level (quadratic in the depth).
		{"write_file", `{"path":"` + strings.Repeat("a/", 5000) + `f","content":"x"}`, Writing, "", nil},
	}
	for _, tt := range tests {
		k, err := r.Key(tt.tool, []byte(tt.args))
		if err != nil {
			t.Fatalf("Key(%s, %s): %v", tt.tool, tt.args, err)
		}
		if k.Kind != tt.kind || k.Reads != tt.reads || !slices.Equal(k.Writes, tt.writes) {
			t.Errorf("Key(%s, %s) = kind %v reads %q writes %q, want %v %q %q", tt.tool, tt.args, k.Kind, k.Reads, k.Writes, tt.kind, tt.reads, tt.writes)
		}
	}
}

func TestClientIdentity(t *testing.T) {
	id := NewClientIdentity("get", []byte(`{"type":"object","properties":{"unit":{"type":"string","default":"C"},"city":{"type":"string"}}}`))
	a, errA := id([]byte(`{"city":"Paris"}`))
	b, errB := id([]byte(`{"unit":"C","city":"Paris","x":null}`))
	if errA != nil || errB != nil || !bytes.Equal(a, b) {
		t.Errorf("client identities %q, %v and %q, %v; want equal", a, errA, b, errB)
	}
}

// TestIdentityWalkMatchesMap checks the member walk against the map-based
// normalisation it stands in for, on objects with nesting, escapes in
// values, nulls and defaults.
func TestIdentityWalkMatchesMap(t *testing.T) {
	id := newIdentifier("t", []byte(`{"type":"object","properties":{"path":{"type":"string"},"n":{"default":1.0},"z":{"default":"<&>"},"a b":{"default":[1,{"y":null}]}},"required":["req"]}`))
	id.pathArg = "path"
	resolve := func(p string) (string, bool) { return "./" + p + "/", true }
	inputs := []string{
		`{}`,
		`{"path":"x"}`,
		`{"path":"a\"b\\c\u2028<>"}`,
		`{"req":null,"opt":null,"path":null}`,
		`{"q":{"k":[1,"}",{"a":"]"}],"s":"\\\""},"n":2,"m":true,"path":"p","zz":-0.0}`,
		`{"é":1,"a b":null,"path":7}`,
		`{"b":"\ud83d\ude00","a":[[],{}]}`,
	}
	for _, in := range inputs {
		canon, err := antiloop.Canonical([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		ms, ok := members(canon)
		if !ok {
			t.Fatalf("members(%s) refused", canon)
		}
		fast, fp, err1 := id.rebuild(ms, resolve)
		slow, sp, err2 := id.slow(canon, resolve)
		if err1 != nil || err2 != nil || !bytes.Equal(fast, slow) || fp != sp {
			t.Errorf("identity of %s: walk %q %q %v, map %q %q %v", in, fast, fp, err1, slow, sp, err2)
		}
	}
}
