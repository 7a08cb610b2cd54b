package tools

import (
	"bytes"
	"errors"
	"os"
	"regexp"
	"regexp/syntax"
	"syscall"
)

// Bounds on one search_files call's work, so that it ends by its timeout
// whatever pattern a model (or a prompt injection) sends. Go's regexps run
// in time linear in the input, but the factor is the program's size: a
// counted repetition such as (?:a|b|ab|ba){1,1000} compiles to thousands of
// instructions, which made one 1 MiB line take over a minute.
const (
	maxPatternBytes = 1000
	maxRegexInsts   = 2000
	maxScanLine     = 64 << 10
	maxSearchBytes  = 64 << 20
	// regexLineWork bounds one line's match: the bytes of a line a regexp
	// reads times its program's size. A line's match cannot be interrupted,
	// so this is what a call may run past its timeout: at the largest
	// program allowed (maxRegexInsts) a line is read up to 1 KiB, about
	// 12 ms, where 64 KiB took a second (16 under the race detector); a
	// pattern of a hundred instructions still reads the whole 64 KiB.
	regexLineWork = 2 << 20
)

// errScanBudget stops a search after maxSearchBytes of text.
var errScanBudget = errors.New("scan budget spent")

// errNotRegular is returned by openRegular for anything but a regular file.
var errNotRegular = errors.New("not a regular file")

// compileMatch returns the line matcher for a pattern, refusing patterns
// whose size could make a line's match outlast the call.
func compileMatch(pattern string, isRegex bool) (func([]byte) bool, error) {
	if len(pattern) > maxPatternBytes {
		return nil, newCallError(ErrBadArguments, "%s: pattern is %d bytes, at most %d", SearchFiles, len(pattern), maxPatternBytes)
	}
	if !isRegex {
		p := []byte(pattern)
		return func(line []byte) bool { return bytes.Contains(line, p) }, nil
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, newCallError(ErrBadArguments, "%s: invalid regular expression %q: %v", SearchFiles, pattern, err)
	}
	// regexp does not expose its program; compile the same syntax tree to
	// measure it.
	tree, _ := syntax.Parse(pattern, syntax.Perl)
	prog, err := syntax.Compile(tree.Simplify())
	if err != nil || len(prog.Inst) > maxRegexInsts {
		return nil, newCallError(ErrBadArguments, "%s: regular expression %q is too complex (large counted repetitions such as {1,1000}); simplify it", SearchFiles, pattern)
	}
	lineCap := min(maxScanLine, regexLineWork/max(len(prog.Inst), 1))
	return func(line []byte) bool { return re.Match(line[:min(len(line), lineCap)]) }, nil
}

// openRegular opens name under root without blocking and checks its type on
// the opened handle, so a file swapped for a FIFO or a device between a
// check and the open is refused rather than blocking the call. On
// errNotRegular, fi is the opened file's info.
func openRegular(root *os.Root, name string) (*os.File, os.FileInfo, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fi, errNotRegular
	}
	return f, fi, nil
}
