package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// yamlBlock is a fenced ```yaml block of a Markdown file.
var yamlBlock = regexp.MustCompile("(?s)\n```yaml\n(.*?)\n```")

// elided is a line that stands for lines left out: "…" or "# …".
var elided = regexp.MustCompile(`(?m)^\s*(#\s*)?…\s*$`)

// topKey is a key at the top level of a YAML block.
var topKey = regexp.MustCompile(`(?m)^([A-Za-z_][\w-]*):`)

// isConfig reports whether a YAML block is a whole configuration file, not
// another program's (a compose file, a collector's) nor an excerpt of one
// (indented, or with a line "…" for what is left out).
func isConfig(block string) bool {
	keys := topKey.FindAllStringSubmatch(block, -1)
	if len(keys) == 0 || elided.MatchString(block) {
		return false
	}
	known := map[string]bool{}
	ct := reflect.TypeFor[Config]()
	for i := range ct.NumField() {
		name, _, _ := strings.Cut(ct.Field(i).Tag.Get("yaml"), ",")
		known[name] = true
	}
	for _, k := range keys {
		if !known[k[1]] {
			return false
		}
	}
	return true
}

// TestDocBlocksLoad: every YAML block of the README and docs/ loads over
// the defaults as written, comments included, with the variables they
// name set: a reader copies them into a file as they are.
func TestDocBlocksLoad(t *testing.T) {
	for _, v := range []string{"M2_API_KEY", "DB_TOKEN", "CHAINPROXY_KEY", "OTLP_TOKEN", "LANGFUSE_AUTH"} {
		t.Setenv(v, "example-"+strings.ToLower(v))
	}
	files, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../README.md")
	n := 0
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range yamlBlock.FindAllSubmatch(text, -1) {
			if !isConfig(string(m[1])) {
				continue
			}
			n++
			t.Run(fmt.Sprintf("%s#%d", filepath.Base(f), i), func(t *testing.T) {
				if _, err := Parse(m[1]); err != nil {
					t.Errorf("%s, YAML block %d:\n%s\ndoes not load: %v", f, i, m[1], err)
				}
			})
		}
	}
	if n < 5 {
		t.Fatalf("found %d YAML blocks in README.md and docs/, want at least 5", n)
	}
}
