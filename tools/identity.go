package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"chainproxy/antiloop"
)

// Key is how the anti-loop sees one call: what it is, and what it reads or
// writes, so that a repeat is recognised however it is spelled and a write
// makes exactly the results it touches stale.
type Key struct {
	// Identity is equal for two calls that do the same thing: the tool's
	// name, a zero byte, and the canonical JSON of the arguments once the
	// schema's defaults are filled in, null optional fields dropped and,
	// for the file tools, the path resolved in the sandbox. Hash it with
	// antiloop.Hash.
	Identity []byte
	// Kind is the tool's kind.
	Kind Kind
	// Reads names the state a read's result depends on: "file:{path}" for
	// read_file, "dir:{path}" for list_dir, "tree:{path}" for search_files
	// (paths root-relative, "." the root); empty for any other tool, whose
	// results depend on the conversation as a whole.
	Reads string
	// Writes names what a writing call makes stale, in the terms of Reads;
	// empty for a write whose reach is unknown: everything.
	Writes []string
}

// identifier keys the calls of one tool from its parameters schema.
type identifier struct {
	name     string
	defaults map[string][]byte // top-level default values, canonical
	// plainKeys: no default's name needs escaping in JSON, so the member
	// walk can write them as they are.
	plainKeys bool
	required  map[string]bool
	// pathArg names the argument that holds a workspace path ("" none).
	pathArg string
}

// newIdentifier reads the top-level defaults and required names of a
// parameters schema. A schema it cannot read keys calls by their
// canonical arguments alone.
func newIdentifier(name string, params []byte) *identifier {
	id := &identifier{name: name, plainKeys: true}
	var s struct {
		Properties map[string]struct {
			Default json.RawMessage `json:"default"`
			Type    any             `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if json.Unmarshal(params, &s) != nil {
		return id
	}
	for _, r := range s.Required {
		if id.required == nil {
			id.required = map[string]bool{}
		}
		id.required[r] = true
	}
	for k, p := range s.Properties {
		if len(p.Default) == 0 {
			continue
		}
		c, err := antiloop.Canonical(p.Default)
		if err != nil {
			continue
		}
		if id.defaults == nil {
			id.defaults = map[string][]byte{}
		}
		id.defaults[k] = c
		id.plainKeys = id.plainKeys && plainString(k)
	}
	return id
}

// NewClientIdentity returns a function keying the calls of a tool that the
// client executes, from the parameters schema the client sent: defaults
// filled in and null optional fields dropped, like a server tool.
func NewClientIdentity(name string, params []byte) func(args []byte) ([]byte, error) {
	id := newIdentifier(name, params)
	return func(args []byte) ([]byte, error) {
		b, _, err := id.identity(args, nil)
		return b, err
	}
}

// identity returns the call's identity bytes and, when the tool has a path
// argument and resolve maps it, the resolved path.
func (id *identifier) identity(args []byte, resolve func(string) (string, bool)) ([]byte, string, error) {
	args = bytes.TrimSpace(args)
	if string(args) == "null" {
		args = nil
	}
	out := make([]byte, 0, len(id.name)+1+len(args)+2)
	out = append(out, id.name...)
	out = append(out, 0)
	out, err := antiloop.AppendCanonical(out, args)
	if err != nil {
		return nil, "", err
	}
	canon := out[len(id.name)+1:]
	fast := len(id.defaults) == 0 && id.pathArg == "" && !bytes.Contains(canon, []byte("null"))
	if fast || canon[0] != '{' {
		return out, "", nil
	}
	if ms, ok := members(canon); ok && id.plainKeys {
		return id.rebuild(ms, resolve)
	}
	return id.slow(canon, resolve)
}

// slow normalises through a map: for the rare object whose keys hold
// escapes, which the member walk does not decode.
func (id *identifier) slow(canon []byte, resolve func(string) (string, bool)) ([]byte, string, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(canon, &obj); err != nil {
		return nil, "", fmt.Errorf("%w: %v", antiloop.ErrInvalidJSON, err)
	}
	for k, v := range obj {
		if string(v) == "null" && !id.required[k] {
			delete(obj, k)
		}
	}
	for k, v := range id.defaults {
		if _, ok := obj[k]; !ok {
			obj[k] = v
		}
	}
	var resolved string
	if id.pathArg != "" && resolve != nil {
		var p string
		if raw, ok := obj[id.pathArg]; ok && json.Unmarshal(raw, &p) == nil {
			if rel, ok := resolve(p); ok {
				resolved = rel
				obj[id.pathArg], _ = json.Marshal(rel)
			}
		}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", antiloop.ErrInvalidJSON, err)
	}
	// Marshal escapes <, > and & in the raw values: canonicalise again so
	// that this path and the fast one agree byte for byte.
	if canon, err = antiloop.Canonical(b); err != nil {
		return nil, "", err
	}
	return id.join(canon), resolved, nil
}

func (id *identifier) join(canon []byte) []byte {
	out := make([]byte, 0, len(id.name)+1+len(canon))
	out = append(out, id.name...)
	out = append(out, 0)
	return append(out, canon...)
}

// Key returns how the anti-loop sees the call name(args). The arguments
// must have passed Check; the trace keeps them as the model wrote them,
// this is only what the anti-loop compares and hashes.
func (r *Registry) Key(name string, args []byte) (Key, error) {
	t, ok := r.set.Load().byName[name]
	if !ok {
		return Key{}, newCallError(ErrUnknownTool, "unknown tool %q", name)
	}
	var resolve func(string) (string, bool)
	if r.sb != nil {
		resolve = r.sb.resolvePath
	}
	b, p, err := t.ident.identity(args, resolve)
	if err != nil {
		return Key{}, fmt.Errorf("%s: %w", name, err)
	}
	k := Key{Identity: b, Kind: t.spec.Kind}
	switch {
	case t.spec.Kind == Writing:
		if p != "" {
			k.Writes = writeScopes(p)
		}
	case p == "":
	case name == ReadFile:
		k.Reads = "file:" + p
	case name == ListDir:
		k.Reads = "dir:" + p
	case name == SearchFiles:
		k.Reads = "tree:" + p
	}
	return k, nil
}

// maxWriteDepth is the deepest path writeScopes names scope by scope. A
// scope per level, each holding the path so far, costs the square of the
// depth: a model repeating a segment up to the argument cap would make
// gigabytes of them. Deeper, the write's reach is everything, which makes
// stale at least what the scopes would have (the guard does the same past
// its own bound).
const maxWriteDepth = 60

// writeScopes is what writing to the root-relative path p makes stale: the
// file itself, the listing of its parent (and its own, if it is a
// directory), and every search over a directory that contains it; nil,
// everything, for a path deeper than maxWriteDepth.
func writeScopes(p string) []string {
	if strings.Count(p, "/") > maxWriteDepth {
		return nil
	}
	out := []string{"file:" + p, "dir:" + p, "dir:" + path.Dir(p), "tree:" + p}
	for d := p; d != "."; {
		d = path.Dir(d)
		out = append(out, "tree:"+d)
	}
	return out
}

// resolvePath is the path's clean root-relative form for keying, or false
// when it leaves the root lexically. Only the lexical reading: the other
// readings resolve weighs exist to refuse escapes, and Call refuses them
// whatever the key says.
func (s *sandbox) resolvePath(p string) (string, bool) {
	return s.relative(p)
}

// member is one top-level member of a canonical object: its key as written
// (free of escapes) and its canonical value.
type member struct {
	key string
	val []byte
}

// members splits the canonical object canon into its members, in order;
// false when a key holds an escape.
func members(canon []byte) ([]member, bool) {
	var out []member
	i := 1
	if canon[i] == '}' {
		return out, true
	}
	for {
		j := i + 1
		for canon[j] != '"' {
			if canon[j] == '\\' {
				return nil, false
			}
			j++
		}
		key := string(canon[i+1 : j])
		start := j + 2 // past the quote and the colon
		end := skipValue(canon, start)
		out = append(out, member{key: key, val: canon[start:end]})
		if canon[end] == '}' {
			return out, true
		}
		i = end + 1
	}
}

// skipValue returns the index just past the compact JSON value at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		for i++; ; {
			switch b[i] {
			case '\\':
				i += 2
			case '"':
				return i + 1
			default:
				i++
			}
		}
	case '{', '[':
		depth := 0
		for {
			switch b[i] {
			case '"':
				i = skipValue(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
	}
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' {
		i++
	}
	return i
}

// rebuild applies the normalisation to the members of a canonical object
// and writes the identity: nulls dropped, defaults added, the path
// resolved, members in key order.
func (id *identifier) rebuild(ms []member, resolve func(string) (string, bool)) ([]byte, string, error) {
	kept := ms[:0]
	for _, m := range ms {
		if string(m.val) == "null" && !id.required[m.key] {
			continue
		}
		kept = append(kept, m)
	}
	added := false
	for k, v := range id.defaults {
		if !slices.ContainsFunc(kept, func(m member) bool { return m.key == k }) {
			kept = append(kept, member{key: k, val: v})
			added = true
		}
	}
	if added {
		slices.SortFunc(kept, func(a, b member) int { return strings.Compare(a.key, b.key) })
	}
	var resolved string
	if id.pathArg != "" && resolve != nil {
		for i, m := range kept {
			if m.key != id.pathArg || len(m.val) == 0 || m.val[0] != '"' {
				continue
			}
			var p string
			if json.Unmarshal(m.val, &p) != nil {
				break
			}
			if rel, ok := resolve(p); ok {
				resolved = rel
				kept[i].val = canonString(rel)
			}
			break
		}
	}
	n := len(id.name) + 3
	for _, m := range kept {
		n += len(m.key) + len(m.val) + 4
	}
	out := make([]byte, 0, n)
	out = append(out, id.name...)
	out = append(out, 0, '{')
	for i, m := range kept {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, '"')
		out = append(out, m.key...)
		out = append(out, '"', ':')
		out = append(out, m.val...)
	}
	return append(out, '}'), resolved, nil
}

// plainString reports a string that JSON, in canonical form, writes as it
// is between quotes.
func plainString(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == '"' || r == '\\' || r == '\u2028' || r == '\u2029' || r == utf8.RuneError {
			return false
		}
	}
	return true
}

// canonString is the canonical JSON form of s.
func canonString(s string) []byte {
	if plainString(s) {
		return []byte(`"` + s + `"`)
	}
	b, _ := json.Marshal(s)
	c, err := antiloop.Canonical(b)
	if err != nil {
		return b
	}
	return c
}
