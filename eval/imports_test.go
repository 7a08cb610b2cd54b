package eval

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports keeps the seam: eval drives the engine, never the HTTP
// layer, and draws its page without html/template (see WriteHTML).
func TestImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == "chainproxy/web" || strings.HasPrefix(p, "chainproxy/web/") || p == "html/template" || p == "text/template" {
				t.Errorf("%s imports %s", f, p)
			}
		}
	}
}
