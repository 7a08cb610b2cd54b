package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
)

// Limits of the built-ins. They keep one call's result small enough for a
// model's context and one call's work small enough for its timeout.
const (
	maxListEntries  = 1000
	maxReadBytes    = 256 << 10
	maxMatches      = 100
	maxSearchFile   = 1 << 20
	maxMatchLine    = 300
	binarySniffSize = 8 << 10
)

// Names of the built-in tools.
const (
	ListDir     = "list_dir"
	ReadFile    = "read_file"
	SearchFiles = "search_files"
)

const listDirSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "Directory to list, relative to the workspace root; \".\" is the root."}
  },
  "required": ["path"],
  "additionalProperties": false
}`

const readFileSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File to read, relative to the workspace root."}
  },
  "required": ["path"],
  "additionalProperties": false
}`

const searchFilesSchema = `{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "minLength": 1, "description": "Text to find. Matched as a plain, case-sensitive substring of each line unless regex is true."},
    "path": {"type": "string", "description": "File or directory to search, relative to the workspace root. Default \".\".", "default": "."},
    "regex": {"type": "boolean", "description": "When true, pattern is a Go (RE2) regular expression, e.g. \"(?i)todo|fixme\". Default false.", "default": false}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`

// builtins returns the file tools bound to sb, in their stable order.
func builtins(sb *sandbox) []*tool {
	return []*tool{
		{
			spec: Spec{
				Name:        ListDir,
				Description: "List the entries of a directory in the workspace, sorted by name; directories end with \"/\".",
				Parameters:  json.RawMessage(listDirSchema),
				Kind:        Deterministic,
			},
			run:     sb.listDir,
			builtin: true,
		},
		{
			spec: Spec{
				Name:        ReadFile,
				Description: "Read a text file in the workspace (at most 256 KiB are returned).",
				Parameters:  json.RawMessage(readFileSchema),
				Kind:        Deterministic,
			},
			run:     sb.readFile,
			builtin: true,
		},
		{
			spec: Spec{
				Name: SearchFiles,
				Description: "Search the text files under a workspace path, line by line, for a substring (or a regular expression with \"regex\": true). " +
					"Returns \"path:line: text\" for each match, at most 100 matches. Binary files and files over 1 MiB are skipped.",
				Parameters: json.RawMessage(searchFilesSchema),
				Kind:       Deterministic,
			},
			run:     sb.searchFiles,
			builtin: true,
		},
	}
}

func (s *sandbox) listDir(ctx context.Context, raw []byte) (string, error) {
	var a struct {
		Path string `json:"path"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return "", newCallError(ErrBadArguments, "%s: %v", ListDir, err)
	}
	rel, err := s.resolve(ListDir, a.Path)
	if err != nil {
		return "", err
	}
	root, err := s.open(ListDir)
	if err != nil {
		return "", err
	}
	defer root.Close()

	f, err := root.Open(rel)
	if err != nil {
		return "", openError(ListDir, a.Path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", openError(ListDir, a.Path, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s: %q is a file, not a directory; use %s to read it", ListDir, a.Path, ReadFile)
	}
	entries, err := f.ReadDir(-1)
	if err != nil {
		return "", openError(ListDir, a.Path, err)
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("%s: %w", ListDir, err)
	}
	if len(entries) == 0 {
		return "(empty directory)", nil
	}
	slices.SortFunc(entries, func(x, y fs.DirEntry) int { return strings.Compare(x.Name(), y.Name()) })

	var b strings.Builder
	for i, e := range entries {
		if i == maxListEntries {
			fmt.Fprintf(&b, "… [%d more entries not shown]\n", len(entries)-i)
			break
		}
		b.WriteString(e.Name())
		if e.IsDir() || (e.Type()&fs.ModeSymlink != 0 && s.symlinkIsDir(root, path.Join(rel, e.Name()))) {
			b.WriteByte('/')
		}
		b.WriteByte('\n')
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// symlinkIsDir reports whether a symlink leads to a directory inside the
// root. os.Root refuses to follow one that leads out, so nothing outside is
// even stat'ed; such a link is listed as a plain name.
func (s *sandbox) symlinkIsDir(root *os.Root, name string) bool {
	fi, err := root.Stat(name)
	return err == nil && fi.IsDir()
}

func (s *sandbox) readFile(ctx context.Context, raw []byte) (string, error) {
	var a struct {
		Path string `json:"path"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return "", newCallError(ErrBadArguments, "%s: %v", ReadFile, err)
	}
	rel, err := s.resolve(ReadFile, a.Path)
	if err != nil {
		return "", err
	}
	root, err := s.open(ReadFile)
	if err != nil {
		return "", err
	}
	defer root.Close()

	// Open without blocking, then check the type on the opened handle: a
	// FIFO swapped in after a check by path would block the open or the
	// read past the call's timeout.
	f, fi, err := openRegular(root, rel)
	if err != nil {
		if errors.Is(err, errNotRegular) && fi != nil && fi.IsDir() {
			return "", fmt.Errorf("%s: %q is a directory; use %s to see its entries", ReadFile, a.Path, ListDir)
		}
		if errors.Is(err, errNotRegular) {
			return "", fmt.Errorf("%s: %q is not a regular file", ReadFile, a.Path)
		}
		return "", openError(ReadFile, a.Path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxReadBytes+1))
	if err != nil {
		return "", fmt.Errorf("%s: %q: %w", ReadFile, a.Path, err)
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("%s: %w", ReadFile, err)
	}
	if isBinary(data) {
		return "", fmt.Errorf("%s: %q looks like a binary file; only text files can be read", ReadFile, a.Path)
	}
	if len(data) == 0 {
		return "(empty file)", nil
	}
	if len(data) > maxReadBytes {
		total := max(fi.Size(), int64(len(data)))
		return truncate(string(data), maxReadBytes, total), nil
	}
	return string(data), nil
}

// isBinary reports a NUL byte in the first 8 KiB, the test git and grep use.
func isBinary(data []byte) bool {
	return bytes.IndexByte(data[:min(len(data), binarySniffSize)], 0) >= 0
}

// errEnoughMatches stops the walk once the match cap is reached.
var errEnoughMatches = errors.New("enough matches")

func (s *sandbox) searchFiles(ctx context.Context, raw []byte) (string, error) {
	var a struct {
		Pattern string `json:"pattern"`
		Path    string `json:"path"`
		Regex   bool   `json:"regex"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return "", newCallError(ErrBadArguments, "%s: %v", SearchFiles, err)
	}
	if a.Path == "" {
		a.Path = "."
	}
	match, err := compileMatch(a.Pattern, a.Regex)
	if err != nil {
		return "", err
	}
	rel, err := s.resolve(SearchFiles, a.Path)
	if err != nil {
		return "", err
	}
	root, err := s.open(SearchFiles)
	if err != nil {
		return "", err
	}
	defer root.Close()
	// The start may itself be a symlink; os.Root follows it only inside.
	if _, err := root.Stat(rel); err != nil {
		return "", openError(SearchFiles, a.Path, err)
	}

	var (
		out     strings.Builder
		matches int
		skipped int
		scanned int64
		fsys    = root.FS()
	)
	searchFile := func(name string) error {
		f, _, err := openRegular(root, name)
		if err != nil {
			return nil // unreadable or not regular (swapped): skipped
		}
		defer f.Close()
		data, err := io.ReadAll(io.LimitReader(f, maxSearchFile+1))
		if err != nil || len(data) > maxSearchFile {
			skipped++
			return nil
		}
		if isBinary(data) {
			return nil
		}
		if scanned += int64(len(data)); scanned > maxSearchBytes {
			return errScanBudget
		}
		n := 0
		for line := range bytes.Lines(data) {
			// Checked per line, not only per file: one file's lines may take
			// the whole timeout.
			if err := ctx.Err(); err != nil {
				return err
			}
			n++
			line = bytes.TrimRight(line, "\r\n")
			if !match(line[:min(len(line), maxScanLine)]) {
				continue
			}
			fmt.Fprintf(&out, "%s:%d: %s\n", name, n, clipLine(line))
			matches++
			if matches == maxMatches {
				return errEnoughMatches
			}
		}
		return nil
	}

	// WalkDir reports symlinks as such and does not follow them: a link is
	// never searched, whether it leads inside or out, so a link cycle or a
	// link out of the root cannot widen the search.
	err = fs.WalkDir(fsys, rel, func(name string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if err != nil {
			if name == rel {
				return err
			}
			return nil // an unreadable directory below the start is skipped
		}
		switch {
		case d.IsDir():
			if d.Name() == ".git" && name != rel {
				return fs.SkipDir
			}
			return nil
		case !d.Type().IsRegular():
			return nil
		}
		if info, err := d.Info(); err == nil && info.Size() > maxSearchFile {
			skipped++
			return nil
		}
		return searchFile(name)
	})
	switch {
	case errors.Is(err, errEnoughMatches):
		fmt.Fprintf(&out, "… [results capped at %d matches; narrow the pattern or the path]\n", maxMatches)
	case errors.Is(err, errScanBudget):
		fmt.Fprintf(&out, "… [search stopped after %d MiB of text; narrow the path]\n", maxSearchBytes>>20)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "", fmt.Errorf("%s: %w", SearchFiles, err)
	case err != nil:
		return "", openError(SearchFiles, a.Path, err)
	}
	if skipped > 0 {
		fmt.Fprintf(&out, "(skipped %d files over 1 MiB)\n", skipped)
	}
	if matches == 0 {
		return strings.TrimSuffix(fmt.Sprintf("no matches for %q under %q\n", a.Pattern, a.Path)+out.String(), "\n"), nil
	}
	return strings.TrimSuffix(out.String(), "\n"), nil
}

// clipLine keeps a matched line readable when it is very long (minified
// code): the head, cut on a UTF-8 boundary.
func clipLine(line []byte) string {
	if len(line) <= maxMatchLine {
		return string(line)
	}
	return string(line[:runeCut(string(line), maxMatchLine)]) + " …"
}
