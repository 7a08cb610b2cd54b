package tools

import (
	"bytes"
	"testing"

	"chainproxy/antiloop"
)

// FuzzIdentityWalk checks, on any JSON a model may send, that the member
// walk keys a call exactly as the map-based normalisation does.
func FuzzIdentityWalk(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"path":"x"}`, `{"path":"a/../b/","n":null}`, `{"q":{"k":[1,"}",{"a":"]"}]},"path":"."}`,
		`{"é":"\u2028","a b":null}`, `{"b":"\ud83d\ude00","a":[[],{}]}`, `[1,2]`, `"s"`, `{"path":"<&>"}`,
	} {
		f.Add([]byte(s))
	}
	id := newIdentifier("t", []byte(`{"type":"object","properties":{"path":{"type":"string"},"n":{"default":1.0},"z":{"default":"<&>"}},"required":["req"]}`))
	id.pathArg = "path"
	resolve := func(p string) (string, bool) { return p + "/x", p != "" }
	f.Fuzz(func(t *testing.T, args []byte) {
		canon, err := antiloop.Canonical(args)
		if err != nil || len(canon) == 0 || canon[0] != '{' {
			return
		}
		ms, ok := members(canon)
		if !ok {
			return
		}
		fast, fp, err1 := id.rebuild(ms, resolve)
		slow, sp, err2 := id.slow(canon, resolve)
		if err1 != nil || err2 != nil || !bytes.Equal(fast, slow) || fp != sp {
			t.Errorf("identity of %s: walk %q %q %v, map %q %q %v", canon, fast, fp, err1, slow, sp, err2)
		}
	})
}
