package config

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// check walks the YAML text along the Config type before it is decoded, so
// that every problem of the file is reported at once, each as
// "config:LINE: key.path: message" in the file's terms: unknown keys (all
// of them, with the known ones), durations that do not parse, and values of
// the wrong kind. The decoder alone stops at the first problem and words
// type errors in Go. It also returns the line of every key path, to place
// the problems Validate finds later.
func check(data []byte) (lines map[string]int, err error) {
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		line := 0
		msg := err.Error()
		var ye yaml.Error
		if errors.As(err, &ye) {
			msg = ye.GetMessage()
			if tk := ye.GetToken(); tk != nil && tk.Position != nil {
				line = tk.Position.Line
			}
		}
		return nil, fmt.Errorf("config:%d: invalid YAML: %s", line, msg)
	}
	c := &checker{lines: map[string]int{}}
	for _, doc := range f.Docs {
		if doc.Body != nil {
			c.walk(doc.Body, reflect.TypeFor[Config](), "")
		}
	}
	if len(c.errs) == 0 {
		return c.lines, nil
	}
	return c.lines, &checkError{err: errors.Join(c.errs...), paths: c.paths}
}

// checkError is what check found, with the key paths at fault, so that the
// rest of the file can still be decoded and validated (withoutPaths) and
// every problem reported at once.
type checkError struct {
	err   error
	paths []string
}

func (e *checkError) Error() string { return e.err.Error() }
func (e *checkError) Unwrap() error { return e.err }

type checker struct {
	errs  []error
	paths []string
	lines map[string]int
}

// withoutPaths is the YAML text less the values at paths ("nodes[0].timeout"),
// for a second decode that reaches the problems the first one stopped
// before. ok is false when the text cannot be rebuilt.
func withoutPaths(data []byte, paths []string) ([]byte, bool) {
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, false
	}
	for _, p := range paths {
		if p == "(top level)" || p == "" {
			return nil, false
		}
		doc = dropPath(doc, splitPath(p))
	}
	out, err := yaml.Marshal(doc)
	return out, err == nil
}

// splitPath splits "nodes[0].timeout" into "nodes", 0, "timeout".
func splitPath(p string) []any {
	var out []any
	for _, part := range strings.Split(p, ".") {
		name, rest, _ := strings.Cut(part, "[")
		if name != "" {
			out = append(out, name)
		}
		for rest != "" {
			idx, after, _ := strings.Cut(rest, "]")
			var i int
			fmt.Sscan(idx, &i)
			out = append(out, i)
			_, rest, _ = strings.Cut(after, "[")
		}
	}
	return out
}

// dropPath removes the value at path from v, a decoded YAML document.
func dropPath(v any, path []any) any {
	if len(path) == 0 {
		return v
	}
	switch k := path[0].(type) {
	case string:
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		if len(path) == 1 {
			delete(m, k)
		} else if child, ok := m[k]; ok {
			m[k] = dropPath(child, path[1:])
		}
	case int:
		l, ok := v.([]any)
		if !ok || k < 0 || k >= len(l) {
			return v
		}
		if len(path) == 1 {
			l[k] = nil
		} else {
			l[k] = dropPath(l[k], path[1:])
		}
	}
	return v
}

var (
	durationType         = reflect.TypeFor[time.Duration]()
	bytesUnmarshaler     = reflect.TypeFor[yaml.BytesUnmarshaler]()
	interfaceUnmarshaler = reflect.TypeFor[yaml.InterfaceUnmarshaler]()
)

func line(n ast.Node) int {
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return tk.Position.Line
	}
	return 0
}

func (c *checker) bad(n ast.Node, path, format string, args ...any) {
	if path == "" {
		path = "(top level)"
	}
	c.errs = append(c.errs, fmt.Errorf("config:%d: %s: %s", line(n), path, fmt.Sprintf(format, args...)))
	c.paths = append(c.paths, path)
}

// describe names a node's value as a user wrote it.
func describe(n ast.Node) string {
	switch n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	}
	if v, ok := n.(*ast.StringNode); ok {
		// Its String() keeps the quotes the user wrote: quote once.
		return fmt.Sprintf("%q", v.Value)
	}
	return fmt.Sprintf("%q", strings.TrimSpace(n.String()))
}

func (c *checker) walk(n ast.Node, t reflect.Type, path string) {
	for {
		switch v := n.(type) {
		case *ast.TagNode:
			n = v.Value
			continue
		case *ast.AnchorNode:
			n = v.Value
			continue
		}
		break
	}
	switch n.(type) {
	case nil, *ast.NullNode, *ast.AliasNode, *ast.CommentGroupNode:
		return
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(bytesUnmarshaler) || reflect.PointerTo(t).Implements(interfaceUnmarshaler) {
		return // the type reads its own YAML, and says what is wrong itself
	}
	if t == durationType {
		s, ok := n.(*ast.StringNode)
		switch v := n.(type) {
		case *ast.IntegerNode, *ast.FloatNode:
			// The decoder refuses a number here, in Go's words.
			num := strings.TrimSpace(v.String())
			c.bad(n, path, "%s is a number; write a duration such as %ss", num, num)
			return
		}
		if !ok {
			c.bad(n, path, "want a duration such as 15s, 2m or 1h30m, got %s", describe(n))
		} else if _, err := time.ParseDuration(s.Value); err != nil {
			c.bad(n, path, "%q is not a duration (write 15s, 2m or 1h30m)", s.Value)
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		pairs, ok := mappingPairs(n)
		if !ok {
			c.bad(n, path, "want a mapping of keys, got %s", describe(n))
			return
		}
		fields := map[string]reflect.StructField{}
		var known []string
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			fields[name] = f
			known = append(known, name)
		}
		for _, mv := range pairs {
			if mv.Key.IsMergeKey() {
				continue
			}
			key := strings.TrimSpace(mv.Key.String())
			p := join(path, key)
			c.lines[p] = line(mv.Key)
			f, ok := fields[key]
			if !ok {
				c.bad(mv.Key, p, "unknown key %q (known here: %s)", key, strings.Join(known, ", "))
				continue
			}
			c.walk(mv.Value, f.Type, p)
		}
	case reflect.Slice:
		seq, ok := n.(*ast.SequenceNode)
		if !ok {
			c.bad(n, path, "want a list, got %s", describe(n))
			return
		}
		for i, e := range seq.Values {
			p := fmt.Sprintf("%s[%d]", path, i)
			if e != nil {
				c.lines[p] = line(e)
			}
			c.walk(e, t.Elem(), p)
		}
	case reflect.Map:
		pairs, ok := mappingPairs(n)
		if !ok {
			c.bad(n, path, "want a mapping, got %s", describe(n))
			return
		}
		if t.Elem().Kind() == reflect.Interface {
			return // free-form (a JSON schema, tool arguments)
		}
		for _, mv := range pairs {
			c.walk(mv.Value, t.Elem(), join(path, strings.TrimSpace(mv.Key.String())))
		}
	case reflect.Int, reflect.Int64, reflect.Int32:
		if _, ok := n.(*ast.IntegerNode); !ok {
			c.bad(n, path, "want a whole number, got %s", describe(n))
		}
	case reflect.Bool:
		if _, ok := n.(*ast.BoolNode); !ok {
			c.bad(n, path, "want true or false, got %s", describe(n))
		}
	case reflect.String:
		if _, ok := n.(ast.ScalarNode); !ok {
			c.bad(n, path, "want a text value, got %s", describe(n))
		}
	}
}

// mappingPairs is a mapping's key/value pairs; the parser gives a mapping
// of one pair as the pair itself.
func mappingPairs(n ast.Node) ([]*ast.MappingValueNode, bool) {
	switch v := n.(type) {
	case *ast.MappingNode:
		return v.Values, true
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{v}, true
	}
	return nil, false
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

var validateLine = regexp.MustCompile(`^config: ([A-Za-z0-9_.\[\]]+): `)

// placeErrors gives each "config: key.path: message" line of err the line
// of its key (or of its nearest parent written in the file).
func placeErrors(err error, lines map[string]int) error {
	if err == nil || len(lines) == 0 {
		return err
	}
	msgs := strings.Split(err.Error(), "\n")
	for i, m := range msgs {
		sub := validateLine.FindStringSubmatch(m)
		if sub == nil {
			continue
		}
		placed := false
		for p := sub[1]; p != "" && !placed; p = parent(p) {
			if l, ok := lines[p]; ok {
				msgs[i] = fmt.Sprintf("config:%d: %s", l, strings.TrimPrefix(m, "config: "))
				placed = true
			}
		}
		if !placed {
			// Typically a default stage naming a default node that the
			// file's nodes list replaced.
			msgs[i] = m + " (a default value: the file does not set this key)"
		}
	}
	return &fileError{msg: strings.Join(msgs, "\n"), err: err}
}

// parent is the key path one level up: a.b[2].c → a.b[2] → a.b → a.
func parent(p string) string {
	i := max(strings.LastIndexByte(p, '.'), strings.LastIndexByte(p, '['))
	if i < 0 {
		return ""
	}
	return p[:i]
}

// validateAliases checks model_aliases at startup: each pattern is a
// well-formed glob and each target a model the proxy serves (a chain
// model, a node by name or by model), never another alias: one lookup
// resolves any name. nodes are the configured node names.
func (c *Config) validateAliases(nodes map[string]bool) (ps problems) {
	models := map[string]bool{"chain/auto": true, "chain/simple": true, "chain/reflexive": true}
	for _, n := range c.Nodes {
		models[n.Model] = true
	}
	for pattern, target := range c.ModelAliases {
		if pattern == "" {
			ps.add("model_aliases", "a pattern must not be empty")
			continue
		}
		if _, err := path.Match(pattern, ""); err != nil {
			ps.add("model_aliases", "%q is not a valid pattern (write globs such as claude-* or claude-*haiku*)", pattern)
		}
		if !models[target] && !nodes[target] {
			ps.add("model_aliases", "%q: unknown model %q (want chain/auto, chain/simple, chain/reflexive, a node's name or its model)", pattern, target)
		}
	}
	return ps
}

// validate checks the telemetry section: the endpoints are http or
// https URLs and the protocol one the exporters speak. Empty keys are
// left to the OTEL_EXPORTER_OTLP_* variables.
func (t Telemetry) validate() (ps problems) {
	for _, e := range []struct{ path, url string }{{"telemetry.endpoint", t.Endpoint}, {"telemetry.traces_endpoint", t.TracesEndpoint}} {
		if e.url == "" {
			continue
		}
		if u, err := url.Parse(e.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			ps.add(e.path, "want an http:// or https:// URL, got %q", redactURL(e.url))
		}
	}
	if p := t.Protocol; p != "" && p != ProtocolHTTP && p != ProtocolGRPC {
		ps.add("telemetry.protocol", "want %q or %q, got %q", ProtocolHTTP, ProtocolGRPC, p)
	}
	if t.Timeout < 0 {
		ps.add("telemetry.timeout", "must not be negative, got %s", t.Timeout)
	}
	for k := range t.Headers {
		if k == "" || strings.ContainsAny(k, " :\r\n") {
			ps.add("telemetry.headers", "%q is not a header name", k)
		}
	}
	return ps
}
