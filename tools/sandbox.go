package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// sandbox confines the built-ins to one directory. Two layers refuse an
// escape: resolve rejects, before anything is opened, every path that leaves
// the root lexically under any reading a later layer might give it; then
// every open goes through os.Root, whose openat-based walk refuses symlinks
// that lead out, so the OS itself never opens anything outside.
type sandbox struct {
	root string // as configured, for messages
	abs  string // absolute form, to map absolute paths that point inside
}

func newSandbox(root string) (*sandbox, error) {
	abs, err := rootAbs(root)
	if err != nil {
		return nil, err
	}
	return &sandbox{root: root, abs: abs}, nil
}

// open opens the root for one call. It is opened per call rather than once so
// that a root created, replaced or removed after startup is seen as it is now.
func (s *sandbox) open(tool string) (*os.Root, error) {
	r, err := os.OpenRoot(s.abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: the tool root %q does not exist on the server", tool, s.root)
		}
		return nil, fmt.Errorf("%s: cannot open the tool root %q: %w", tool, s.root, err)
	}
	return r, nil
}

// blocked is the error for a path that would leave the root. It names the
// path the model sent and never anything read.
func blocked(tool, p string) error {
	return newCallError(ErrBlocked, "%s: path %q is outside the tool root; use paths relative to the root, such as \".\"", tool, p)
}

// resolve maps a path given by a model to a clean, slash-separated path
// relative to the root ("." for the root itself), or refuses it with
// ErrBlocked.
//
// The path is used literally: "%2e%2e" names a file called "%2e%2e". But a
// path is refused when any of these readings escapes the root, so that no
// later decoding layer can be tricked: the literal text, the text after one
// url.PathUnescape, each of those after NFKC normalisation (fullwidth "．．／"
// becomes "../") and after mapping look-alike slashes, backslashes and dots
// (U+2215 division slash, U+2044 fraction slash, "\" …) to ASCII. A NUL byte
// in any reading is refused too. An absolute path inside the root is allowed.
func (s *sandbox) resolve(tool, p string) (string, error) {
	forms := []string{p}
	if u, err := url.PathUnescape(p); err == nil && u != p {
		forms = append(forms, u)
	}
	for _, f := range forms {
		n := norm.NFKC.String(f)
		for _, v := range []string{f, n, unconfuse(f), unconfuse(n)} {
			if strings.IndexByte(v, 0) >= 0 {
				return "", newCallError(ErrBlocked, "%s: path contains a NUL byte", tool)
			}
			if _, ok := s.relative(v); !ok {
				return "", blocked(tool, p)
			}
		}
	}
	rel, _ := s.relative(p)
	return rel, nil
}

// relative is the lexical confinement check of one reading of a path.
func (s *sandbox) relative(p string) (string, bool) {
	if p == "" {
		return ".", true
	}
	c := filepath.Clean(p)
	if filepath.IsAbs(c) {
		for _, base := range s.bases() {
			if rel, ok := within(base, c); ok {
				return rel, true
			}
		}
		return "", false
	}
	if c == ".." || strings.HasPrefix(c, ".."+string(filepath.Separator)) {
		return "", false
	}
	return filepath.ToSlash(c), true
}

// bases are the absolute spellings of the root: as configured and with its
// own symlinks resolved (a model may have seen either, e.g. /tmp vs
// /private/tmp), so an absolute path inside the root is accepted.
func (s *sandbox) bases() []string {
	out := []string{s.abs}
	if real, err := filepath.EvalSymlinks(s.abs); err == nil && real != s.abs {
		out = append(out, real)
	}
	return out
}

// within returns c relative to base when c is base or below it.
func within(base, c string) (string, bool) {
	if c == base {
		return ".", true
	}
	prefix := base
	if !strings.HasSuffix(prefix, string(filepath.Separator)) {
		prefix += string(filepath.Separator)
	}
	if rest, ok := strings.CutPrefix(c, prefix); ok {
		return filepath.ToSlash(rest), true
	}
	return "", false
}

// unconfuse maps characters that look like, or some layer may treat as, path
// separators and dots to their ASCII forms. NFKC already folds the fullwidth
// and small forms; these are the ones it leaves alone.
var unconfuse = strings.NewReplacer(
	`\`, "/",
	"\u2215", "/", // division slash
	"\u2044", "/", // fraction slash
	"\u29F8", "/", // big solidus
	"\u2571", "/", // box drawings light diagonal
	"\uFF0F", "/", // fullwidth solidus
	"\u2216", "/", // set minus, a backslash look-alike
	"\u29F9", "/", // big reverse solidus
	"\uFF3C", "/", // fullwidth reverse solidus
	"\uFE68", "/", // small reverse solidus
	"\uFF0E", ".", // fullwidth full stop
	"\uFE52", ".", // small full stop
	"\u2024", ".", // one dot leader
	"\u3002", ".", // ideographic full stop
	"\uFF61", ".", // halfwidth ideographic full stop
).Replace

// isEscape reports whether an os.Root operation refused a path because it
// leads out of the root (through a symlink, since resolve has already refused
// lexical escapes). os does not export the sentinel, so match its text.
func isEscape(err error) bool {
	var pe *os.PathError
	if errors.As(err, &pe) && pe.Err != nil {
		return pe.Err.Error() == "path escapes from parent"
	}
	return false
}

// openError turns an os.Root error into a message for the model: escapes are
// ErrBlocked, a missing path says so plainly.
func openError(tool, p string, err error) error {
	switch {
	case isEscape(err):
		return newCallError(ErrBlocked, "%s: path %q leads outside the tool root through a symbolic link", tool, p)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: %q does not exist", tool, p)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s: %q: permission denied", tool, p)
	}
	return fmt.Errorf("%s: %w", tool, err)
}
