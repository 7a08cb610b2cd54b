package config

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// keyPaths lists every configuration key of t as written in docs/config.md:
// "server.addr", "nodes[].name", "nodes[].mock.turns[].content". A struct
// type met a second time (a mock scenario's turns) is documented once, at
// its first place.
func keyPaths(t reflect.Type, prefix string, seen map[reflect.Type]bool) []string {
	seen[t] = true
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		p := prefix + name
		out = append(out, p)
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct && !seen[ft.Elem()] {
			out = append(out, keyPaths(ft.Elem(), p+"[].", seen)...)
		} else if ft.Kind() == reflect.Struct && !seen[ft] {
			out = append(out, keyPaths(ft, p+".", seen)...)
		}
	}
	return out
}

var docKey = regexp.MustCompile("(?m)^\\| `([a-z_\\[\\].]+)` \\|")

// TestConfigDocComplete keeps docs/config.md in step with Config: every key
// has a row, and every row is a key.
func TestConfigDocComplete(t *testing.T) {
	doc, err := os.ReadFile("../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range docKey.FindAllStringSubmatch(string(doc), -1) {
		documented = append(documented, m[1])
	}
	keys := keyPaths(reflect.TypeFor[Config](), "", map[reflect.Type]bool{})
	for _, k := range keys {
		if !slices.Contains(documented, k) {
			t.Errorf("docs/config.md lacks key %s: add a row \"| `%s` | default | meaning |\"", k, k)
		}
	}
	for _, k := range documented {
		if !slices.Contains(keys, k) {
			t.Errorf("docs/config.md documents %s, which is not a configuration key: remove or rename its row", k)
		}
	}
}
