package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"chainproxy/config"
)

// secret is the content of a file outside the root; it must never show up in
// any result or error.
const secret = "TOP-SECRET-7f3a9c"

// tree builds a workspace root next to an "outside" directory holding a
// secret, with symlinks from the root both inside and out.
func tree(t *testing.T) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "root")
	outside = filepath.Join(base, "outside")
	files := map[string]string{
		"root/a.txt":             "hello\nworld\n",
		"root/sub/b.go":          "package b\n\n// TODO: fix this\nfunc B() {}\n",
		"root/sub/deep/c.md":     "# hello again\n",
		"root/100%25.txt":        "literal percent name\n",
		"root/.git/config":       "hello from git\n",
		"root/empty.txt":         "",
		"outside/secret.txt":     secret + "\n",
		"outside/nested/sec.txt": secret + " nested\n",
	}
	for name, body := range files {
		p := filepath.Join(base, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "bin.dat"), []byte("hello\x00\x01\x02binary"), 0o644); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"leak":     filepath.Join(outside, "secret.txt"), // absolute, out
		"leakrel":  "../outside/secret.txt",              // relative, out
		"leakdir":  outside,                              // a directory out
		"inlink":   "a.txt",                              // inside
		"indir":    "sub",                                // inside
		"sub/up":   "../a.txt",                           // inside, through ..
		"sub/loop": ".",                                  // a cycle
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, filepath.FromSlash(name))); err != nil {
			t.Skipf("symlinks not supported here: %v", err)
		}
	}
	return root, outside
}

func newTestRegistry(t *testing.T, root string) *Registry {
	t.Helper()
	r, err := New(config.Tools{Root: root, Timeout: config.Default().Tools.Timeout}, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

func TestBuiltinsHappyPath(t *testing.T) {
	root, _ := tree(t)
	r := newTestRegistry(t, root)
	tests := []struct {
		name string
		tool string
		args string
		want string
	}{
		{"list root", ListDir, `{"path":"."}`, ".git/\n100%25.txt\na.txt\nbin.dat\nempty.txt\nindir/\ninlink\nleak\nleakdir\nleakrel\nsub/"},
		{"list empty path is root", ListDir, `{"path":""}`, ".git/\n100%25.txt\na.txt\nbin.dat\nempty.txt\nindir/\ninlink\nleak\nleakdir\nleakrel\nsub/"},
		{"list sub", ListDir, `{"path":"sub"}`, "b.go\ndeep/\nloop/\nup"},
		{"list trailing slash", ListDir, `{"path":"sub/"}`, "b.go\ndeep/\nloop/\nup"},
		{"list through inside symlink", ListDir, `{"path":"indir/deep"}`, "c.md"},
		{"list absolute inside root", ListDir, fmt.Sprintf(`{"path":%q}`, filepath.Join(root, "sub", "deep")), "c.md"},
		{"list dot-dot staying inside", ListDir, `{"path":"sub/deep/../deep"}`, "c.md"},
		{"read", ReadFile, `{"path":"a.txt"}`, "hello\nworld\n"},
		{"read nested", ReadFile, `{"path":"./sub/deep/c.md"}`, "# hello again\n"},
		{"read inside symlink", ReadFile, `{"path":"inlink"}`, "hello\nworld\n"},
		{"read symlink through dot-dot inside", ReadFile, `{"path":"sub/up"}`, "hello\nworld\n"},
		{"read absolute inside root", ReadFile, fmt.Sprintf(`{"path":%q}`, filepath.Join(root, "a.txt")), "hello\nworld\n"},
		{"read percent name literally", ReadFile, `{"path":"100%25.txt"}`, "literal percent name\n"},
		{"read empty", ReadFile, `{"path":"empty.txt"}`, "(empty file)"},
		{"search substring", SearchFiles, `{"pattern":"hello"}`, "a.txt:1: hello\nsub/deep/c.md:1: # hello again"},
		{"search under path", SearchFiles, `{"pattern":"hello","path":"sub"}`, "sub/deep/c.md:1: # hello again"},
		{"search one file", SearchFiles, `{"pattern":"TODO","path":"sub/b.go"}`, "sub/b.go:3: // TODO: fix this"},
		{"search regex", SearchFiles, `{"pattern":"^func \\w+\\(","regex":true}`, "sub/b.go:4: func B() {}"},
		{"search regex chars as substring", SearchFiles, `{"pattern":"B()"}`, "sub/b.go:4: func B() {}"},
		{"search no match", SearchFiles, `{"pattern":"absent"}`, `no matches for "absent" under "."`},
		{"search through inside symlink start", SearchFiles, `{"pattern":"hello","path":"indir"}`, "indir/deep/c.md:1: # hello again"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.Call(t.Context(), tt.tool, []byte(tt.args))
			if err != nil {
				t.Fatalf("Call(%s, %s) error: %v", tt.tool, tt.args, err)
			}
			if got != tt.want {
				t.Errorf("Call(%s, %s) = %q, want %q", tt.tool, tt.args, got, tt.want)
			}
		})
	}
}

func TestBuiltinsErrors(t *testing.T) {
	root, _ := tree(t)
	r := newTestRegistry(t, root)
	tests := []struct {
		name    string
		tool    string
		args    string
		wantIs  error // nil: an ordinary error
		wantMsg string
	}{
		{"list a file", ListDir, `{"path":"a.txt"}`, nil, `list_dir: "a.txt" is a file, not a directory; use read_file to read it`},
		{"list missing", ListDir, `{"path":"nope"}`, nil, `list_dir: "nope" does not exist`},
		{"read a dir", ReadFile, `{"path":"sub"}`, nil, `read_file: "sub" is a directory; use list_dir to see its entries`},
		{"read missing", ReadFile, `{"path":"nope.txt"}`, nil, `read_file: "nope.txt" does not exist`},
		{"read binary", ReadFile, `{"path":"bin.dat"}`, nil, `read_file: "bin.dat" looks like a binary file; only text files can be read`},
		{"search bad regex", SearchFiles, `{"pattern":"(","regex":true}`, ErrBadArguments, "search_files: invalid regular expression \"(\": error parsing regexp: missing closing ): `(`"},
		{"search missing path", SearchFiles, `{"pattern":"x","path":"nope"}`, nil, `search_files: "nope" does not exist`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.Call(t.Context(), tt.tool, []byte(tt.args))
			if err == nil {
				t.Fatalf("Call(%s, %s) = %q, want an error", tt.tool, tt.args, got)
			}
			if err.Error() != tt.wantMsg {
				t.Errorf("Call(%s, %s) error = %q, want %q", tt.tool, tt.args, err, tt.wantMsg)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("Call(%s, %s) error = %v, want one wrapping %v", tt.tool, tt.args, err, tt.wantIs)
			}
			if errors.Is(err, ErrBlocked) {
				t.Errorf("Call(%s, %s) error = %v, want it not blocked", tt.tool, tt.args, err)
			}
		})
	}
}

func TestSandboxEscapes(t *testing.T) {
	root, outside := tree(t)
	r := newTestRegistry(t, root)
	paths := []struct {
		name string
		path string
	}{
		{"dot-dot", "../../etc/passwd"},
		{"dot-dot to sibling", "../outside/secret.txt"},
		{"dot-dot after a dir", "sub/../../outside/secret.txt"},
		{"dot-dot alone", ".."},
		{"absolute outside", "/etc/passwd"},
		{"absolute secret", filepath.Join(outside, "secret.txt")},
		{"absolute through root and out", root + "/../outside/secret.txt"},
		{"absolute prefix sibling", root + "x/secret.txt"},
		{"symlink file out (absolute target)", "leak"},
		{"symlink file out (relative target)", "leakrel"},
		{"symlink dir out", "leakdir"},
		{"file under symlink dir out", "leakdir/secret.txt"},
		{"nested file under symlink dir out", "leakdir/nested/sec.txt"},
		{"url-encoded slashes", "..%2f..%2fetc%2fpasswd"},
		{"url-encoded dots", "%2e%2e/%2e%2e/etc/passwd"},
		{"url-encoded all", "%2e%2e%2f%2e%2e%2foutside%2fsecret.txt"},
		{"url-encoded absolute", "%2fetc%2fpasswd"},
		{"url-encoded NUL", "a.txt%00.png"},
		{"fullwidth", "．．／．．／etc／passwd"},
		{"fullwidth dots ascii slash", "．．/outside/secret.txt"},
		{"division slash", "..\u2215..\u2215etc\u2215passwd"},
		{"fraction slash", "..\u2044outside\u2044secret.txt"},
		{"backslashes", `..\..\etc\passwd`},
		{"two dot leader", "\u2025/outside/secret.txt"},
		{"NUL byte", "a.txt\x00../../etc/passwd"},
	}
	type call struct {
		tool string
		args func(p string) string
	}
	calls := []call{
		{ListDir, func(p string) string { return fmt.Sprintf(`{"path":%s}`, jsonString(p)) }},
		{ReadFile, func(p string) string { return fmt.Sprintf(`{"path":%s}`, jsonString(p)) }},
		{SearchFiles, func(p string) string { return fmt.Sprintf(`{"pattern":"SECRET","path":%s}`, jsonString(p)) }},
	}
	for _, p := range paths {
		for _, c := range calls {
			t.Run(p.name+"/"+c.tool, func(t *testing.T) {
				args := c.args(p.path)
				got, err := r.Call(t.Context(), c.tool, []byte(args))
				if !errors.Is(err, ErrBlocked) {
					t.Errorf("Call(%s, %s) = %q, %v; want an error wrapping ErrBlocked", c.tool, args, got, err)
				}
				if strings.Contains(got, "SECRET") || (err != nil && strings.Contains(err.Error(), "SECRET")) {
					t.Errorf("Call(%s, %s) leaked the secret: result %q, error %v", c.tool, args, got, err)
				}
			})
		}
	}
}

// TestSearchNeverLeaves: a search of the whole root for the secret finds
// nothing, although links inside the root lead to it.
func TestSearchNeverLeaves(t *testing.T) {
	root, _ := tree(t)
	r := newTestRegistry(t, root)
	for _, args := range []string{`{"pattern":"SECRET"}`, `{"pattern":"SECRET","path":"sub"}`, `{"pattern":"(?i)secret","regex":true}`} {
		got, err := r.Call(t.Context(), SearchFiles, []byte(args))
		if err != nil {
			t.Fatalf("Call(search_files, %s) error: %v", args, err)
		}
		if strings.Contains(got, secret) {
			t.Errorf("Call(search_files, %s) = %q, leaked the secret", args, got)
		}
		if !strings.HasPrefix(got, "no matches") {
			t.Errorf("Call(search_files, %s) = %q, want no matches", args, got)
		}
	}
}

func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func TestMissingRoot(t *testing.T) {
	root := filepath.Join(t.TempDir(), "does-not-exist")
	r := newTestRegistry(t, root)
	for _, tool := range []string{ListDir, ReadFile, SearchFiles} {
		_, err := r.Call(t.Context(), tool, []byte(argsFor(tool)))
		want := fmt.Sprintf("%s: the tool root %q does not exist on the server", tool, root)
		if err == nil || err.Error() != want {
			t.Errorf("Call(%s) error = %v, want %q", tool, err, want)
		}
	}
	if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("root was created: stat error = %v, want not exist", err)
	}
}

func argsFor(tool string) string {
	if tool == SearchFiles {
		return `{"pattern":"x"}`
	}
	return `{"path":"."}`
}

func TestReadFileCap(t *testing.T) {
	root := t.TempDir()
	// "é" is two bytes and the cap is even, so shift by one ASCII byte to
	// make the cap fall inside a rune.
	body := "x" + strings.Repeat("é", 200<<10)
	if err := os.WriteFile(filepath.Join(root, "big.txt"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	r := newTestRegistry(t, root)
	got, err := r.Call(t.Context(), ReadFile, []byte(`{"path":"big.txt"}`))
	if err != nil {
		t.Fatal(err)
	}
	head, note, ok := strings.Cut(got, "\n… [truncated: ")
	if !ok {
		t.Fatalf("read_file of %d bytes has no truncation note: tail %q", len(body), got[len(got)-80:])
	}
	if len(head) > maxReadBytes || len(head) < maxReadBytes-3 {
		t.Errorf("read_file kept %d bytes, want about %d", len(head), maxReadBytes)
	}
	if !utf8.ValidString(head) {
		t.Errorf("read_file cut inside a rune")
	}
	if want := fmt.Sprintf("%d more bytes]", len(body)-len(head)); note != want {
		t.Errorf("read_file note = %q, want %q", note, want)
	}
}

func TestListDirCap(t *testing.T) {
	root := t.TempDir()
	const n = maxListEntries + 5
	for i := range n {
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("f%04d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := newTestRegistry(t, root)
	got, err := r.Call(t.Context(), ListDir, []byte(`{"path":"."}`))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(got, "\n")
	if len(lines) != maxListEntries+1 {
		t.Fatalf("list_dir gave %d lines, want %d entries and a note", len(lines), maxListEntries)
	}
	if lines[0] != "f0000" || lines[maxListEntries-1] != fmt.Sprintf("f%04d", maxListEntries-1) {
		t.Errorf("list_dir first/last = %q/%q, want sorted f0000/f%04d", lines[0], lines[maxListEntries-1], maxListEntries-1)
	}
	if want := "… [5 more entries not shown]"; lines[maxListEntries] != want {
		t.Errorf("list_dir note = %q, want %q", lines[maxListEntries], want)
	}
}

func TestSearchCaps(t *testing.T) {
	root := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("many.txt", strings.Repeat("needle\n", maxMatches+50))
	write("huge.txt", "needle\n"+strings.Repeat("x", maxSearchFile))
	write("long.txt", "needle"+strings.Repeat("y", 1000)+"\n")
	r := newTestRegistry(t, root)

	got, err := r.Call(t.Context(), SearchFiles, []byte(`{"pattern":"needle"}`))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(got, "\n")
	// long.txt sorts before many.txt: 1 + 99 matches, the cap note, the
	// skipped note.
	if len(lines) != maxMatches+2 {
		t.Fatalf("search_files gave %d lines, want %d matches and two notes:\n%s", len(lines), maxMatches, got)
	}
	if want := "long.txt:1: needle" + strings.Repeat("y", maxMatchLine-len("needle")) + " …"; lines[0] != want {
		t.Errorf("long line = %q, want it clipped to %q", lines[0], want)
	}
	if want := fmt.Sprintf("… [results capped at %d matches; narrow the pattern or the path]", maxMatches); lines[maxMatches] != want {
		t.Errorf("cap note = %q, want %q", lines[maxMatches], want)
	}
	if want := "(skipped 1 files over 1 MiB)"; lines[maxMatches+1] != want {
		t.Errorf("skip note = %q, want %q", lines[maxMatches+1], want)
	}
	if strings.Contains(got, "huge.txt") {
		t.Errorf("search_files searched a file over 1 MiB")
	}
}

func TestBuiltinCanceled(t *testing.T) {
	root, _ := tree(t)
	r := newTestRegistry(t, root)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tool := range []string{ListDir, ReadFile, SearchFiles} {
		args := map[string]string{ListDir: `{"path":"."}`, ReadFile: `{"path":"a.txt"}`, SearchFiles: `{"pattern":"x"}`}[tool]
		if got, err := r.Call(ctx, tool, []byte(args)); !errors.Is(err, context.Canceled) {
			t.Errorf("Call(%s) with a canceled context = %q, %v; want context.Canceled", tool, got, err)
		}
	}
}

func BenchmarkCallReadFile(b *testing.B) {
	root := b.TempDir()
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte(strings.Repeat("line of text\n", 300)), 0o644); err != nil {
		b.Fatal(err)
	}
	r, err := New(config.Tools{Root: root}, nil)
	if err != nil {
		b.Fatal(err)
	}
	args := []byte(`{"path":"a.txt"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Call(b.Context(), ReadFile, args); err != nil {
			b.Fatal(err)
		}
	}
}
