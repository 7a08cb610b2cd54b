package tools

import (
	"os"
	"path/filepath"
	"testing"

	"chainproxy/config"
)

// TestStamp: a stamp changes when what the read depends on changes, and
// only then.
func TestStamp(t *testing.T) {
	root := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("notes.md", "first draft")
	write("docs/guide.md", "the guide")
	reg, err := New(config.Tools{Root: root}, nil)
	if err != nil {
		t.Fatal(err)
	}
	stamp := func(reads string) string {
		t.Helper()
		s, ok := reg.Stamp(reads)
		if !ok {
			t.Fatalf("Stamp(%q) not ok", reads)
		}
		return s
	}
	file, dir, tree, other := stamp("file:notes.md"), stamp("dir:docs"), stamp("tree:."), stamp("file:docs/guide.md")
	if got := stamp("file:notes.md"); got != file {
		t.Errorf("unchanged file: stamp %q, then %q", file, got)
	}
	write("notes.md", "second draft, longer")
	if stamp("file:notes.md") == file {
		t.Error("a rewritten file kept its stamp")
	}
	if stamp("file:docs/guide.md") != other {
		t.Error("another file's stamp changed")
	}
	if stamp("tree:.") == tree {
		t.Error("a search's tree kept its stamp after a file under it changed")
	}
	write("docs/new.md", "new")
	if stamp("dir:docs") == dir {
		t.Error("a folder that gained a file kept its stamp")
	}
	if got := stamp("file:missing.md"); got != "absent" {
		t.Errorf("missing file stamp %q, want absent", got)
	}
	for _, bad := range []string{"", "nothing", "http:x", "file:../outside"} {
		if s, ok := reg.Stamp(bad); ok {
			t.Errorf("Stamp(%q) = %q, ok; want not ok", bad, s)
		}
	}
}
