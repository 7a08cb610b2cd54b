package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent, plus the
// build events cmd/go writes since Go 1.24).
type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	ImportPath  string // build-output events name the package here
	FailedBuild string
}

// Summary is what a run came to: tests passed, failed and skipped, and the
// skips grouped by the reason the tests gave.
type Summary struct {
	Passed, Failed, Skipped int
	// Reasons counts the skipped tests per reason, in the order each
	// reason was first seen.
	Reasons []Reason
}

// Reason is one distinct skip message and how many tests gave it.
type Reason struct {
	Text  string
	Tests int
}

// key names a test within the run: test names repeat across packages.
type key struct{ pkg, test string }

// reader turns events into go test's plain output and a Summary.
type reader struct {
	out     io.Writer
	verbose bool
	sum     Summary
	tests   map[key][]string // output of the tests that have not ended
	order   []key            // the same tests, in the order they started
	running map[key]bool     // tests that started and have not ended
	pkgOut  map[string][]string
	pkgFail map[string]bool // the package has a failed test
}

// Read copies what go test prints without -v from the `go test -json`
// stream in to out: each package's closing line ("ok", "FAIL", "?"), the
// output of failed tests and build errors; with verbose, every line of
// output instead. A line that is not JSON is copied as it is. The Summary
// counts tests and subtests alike; a package that fails with no failed test
// of its own (a build error, a panic outside a test, a TestMain that exits
// with an error) counts as one failed test, so that a count of 0 failed
// always means nothing failed.
func Read(in io.Reader, out io.Writer, verbose bool) (Summary, error) {
	r := &reader{out: out, verbose: verbose, tests: map[key][]string{}, running: map[key]bool{}, pkgOut: map[string][]string{}, pkgFail: map[string]bool{}}
	br := bufio.NewReader(in)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			r.line(line)
		}
		if err == io.EOF {
			return r.sum, nil
		}
		if err != nil {
			return r.sum, err
		}
	}
}

func (r *reader) line(line string) {
	var e event
	if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil || e.Action == "" {
		r.print(line)
		return
	}
	switch {
	case e.Action == "build-output":
		r.print(e.Output)
	case e.Test != "":
		r.test(e)
	case e.Package != "":
		r.pkg(e)
	}
}

func (r *reader) test(e event) {
	k := key{e.Package, e.Test}
	switch e.Action {
	case "run":
		r.running[k] = true
	case "output":
		if r.verbose {
			r.print(e.Output)
		}
		if _, ok := r.tests[k]; !ok {
			r.order = append(r.order, k)
		}
		r.tests[k] = append(r.tests[k], e.Output)
	case "pass":
		r.sum.Passed++
		r.end(k)
	case "fail":
		r.sum.Failed++
		r.pkgFail[e.Package] = true
		r.printTest(k)
		r.end(k)
	case "skip":
		r.skip(skipReason(r.tests[k]))
		r.end(k)
	}
}

// printTest prints a failed test's output as go test does without -v: its
// "=== RUN" lines left out (with -v it is out already).
func (r *reader) printTest(k key) {
	if r.verbose {
		return
	}
	for _, l := range r.tests[k] {
		if !strings.HasPrefix(l, "=== ") {
			r.print(l)
		}
	}
}

func (r *reader) end(k key) {
	delete(r.running, k)
	delete(r.tests, k)
	r.order = slices.DeleteFunc(r.order, func(o key) bool { return o == k })
}

func (r *reader) skip(reason string) {
	r.sum.Skipped++
	for i := range r.sum.Reasons {
		if r.sum.Reasons[i].Text == reason {
			r.sum.Reasons[i].Tests++
			return
		}
	}
	r.sum.Reasons = append(r.sum.Reasons, Reason{reason, 1})
}

func (r *reader) pkg(e event) {
	switch e.Action {
	case "output":
		if r.verbose {
			r.print(e.Output)
		}
		r.pkgOut[e.Package] = append(r.pkgOut[e.Package], e.Output)
	case "pass", "skip":
		// go test shows a passing package's closing line only.
		if !r.verbose {
			for _, l := range r.pkgOut[e.Package] {
				if strings.HasPrefix(l, "ok  ") || strings.HasPrefix(l, "?   ") {
					r.print(l)
				}
			}
		}
		r.endPkg(e.Package)
	case "fail":
		// Tests still running when the package failed (a panic, a
		// timeout) failed with it: their output says why.
		for _, k := range slices.Clone(r.order) {
			if k.pkg != e.Package {
				continue
			}
			if r.running[k] {
				r.sum.Failed++
				r.pkgFail[e.Package] = true
			}
			r.printTest(k)
			r.end(k)
		}
		if !r.pkgFail[e.Package] {
			r.sum.Failed++
		}
		if !r.verbose {
			r.print(r.pkgOut[e.Package]...)
		}
		r.endPkg(e.Package)
	}
}

// endPkg forgets the package, output of its tests included: a line can
// come after its test ended (a parallel test's "=== NAME").
func (r *reader) endPkg(pkg string) {
	for _, k := range slices.Clone(r.order) {
		if k.pkg == pkg {
			r.end(k)
		}
	}
	delete(r.pkgOut, pkg)
	delete(r.pkgFail, pkg)
}

func (r *reader) print(lines ...string) {
	for _, l := range lines {
		io.WriteString(r.out, l)
	}
}

// logLine is the start of a test's log entry in go test's output:
// indentation, file:line, then the message (t.Skip's included).
var logLine = regexp.MustCompile(`^\s+[\w.\-]+\.go:\d+: (.*)$`)

// skipReason is the message a skipped test gave: its last log entry before
// the "--- SKIP" line, its lines joined into one.
func skipReason(output []string) string {
	var last []string
	for _, l := range output {
		l = strings.TrimRight(l, "\r\n")
		switch t := strings.TrimSpace(l); {
		case t == "", strings.HasPrefix(t, "=== "), strings.HasPrefix(t, "--- "):
		case logLine.MatchString(l):
			last = []string{logLine.FindStringSubmatch(l)[1]}
		case last != nil:
			last = append(last, t) // a continuation line of the entry
		}
	}
	reason := strings.Join(strings.Fields(strings.Join(last, " ")), " ")
	if reason == "" {
		return "no reason given"
	}
	return reason
}

// WriteSummary ends the run's output: one line per distinct skip reason,
// most frequent first, then the counts.
func WriteSummary(w io.Writer, s Summary) {
	reasons := slices.Clone(s.Reasons)
	slices.SortStableFunc(reasons, func(a, b Reason) int { return cmp.Compare(b.Tests, a.Tests) })
	for _, r := range reasons {
		fmt.Fprintf(w, "skipped: %d %s — %s\n", r.Tests, plural(r.Tests, "test"), r.Text)
	}
	fmt.Fprintf(w, "%d passed, %d failed, %d skipped\n", s.Passed, s.Failed, s.Skipped)
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
