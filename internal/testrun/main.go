// Command testrun runs the tests as the README says: `go test -json` with
// the arguments given (`-race -timeout 30m ./...` when there are none),
// printing what go test prints without -v (each package's ok/FAIL line,
// the output of failed tests, build errors), then one line per distinct
// reason tests were skipped, and a closing `N passed, N failed, N skipped`
// line. Without it a tier whose every test skipped shows as a plain "ok".
// It exits with go test's own exit code. scripts/test builds and runs it.
//
// A test's skip reason is its last log line before "--- SKIP", which is
// t.Skip's message.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"syscall"
)

func main() {
	// Ctrl-C reaches go test too (one process group): stay to read what it
	// writes as it stops and print the summary of what ran. A handled signal
	// is reset at exec, so go test still gets the default behaviour.
	signal.Notify(make(chan os.Signal, 1), os.Interrupt)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs go test with args and returns the exit code to leave with.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		// go test's default -timeout, 10 minutes a package, is a time limit
		// too: the suite takes about a minute idle, and a package must
		// still finish at ten times that on a loaded 2-core machine.
		args = []string{"-race", "-timeout", "30m", "./..."}
	}
	verbose := slices.Contains(args, "-v") || slices.Contains(args, "-v=true")
	cmd := exec.Command("go", append([]string{"test", "-json"}, args...)...)
	cmd.Stdin, cmd.Stderr = os.Stdin, stderr
	events, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(stderr, "testrun:", err)
		return 2
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "testrun:", err)
		return 2
	}
	sum, readErr := Read(events, stdout, verbose)
	err = cmd.Wait()
	if readErr != nil {
		fmt.Fprintln(stderr, "testrun: reading go test's output:", readErr)
	}
	WriteSummary(stdout, sum)
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()) // as a shell reports it
		}
		return exit.ExitCode()
	case err != nil:
		fmt.Fprintln(stderr, "testrun:", err)
		return 2
	case readErr != nil:
		return 2
	}
	return 0
}
