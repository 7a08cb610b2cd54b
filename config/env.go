package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// envRef matches ${VAR} and ${VAR:-default}. Only the braced form is
// expanded, so a literal "$" in a prompt survives.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}`)

// expandEnv replaces ${VAR} with the variable's value and ${VAR:-default}
// with the value or, when unset or empty, the default. An unset ${VAR}
// without a default is an error, one per reference with its line: a key
// that silently became empty (an API key) fails much later and far away.
func expandEnv(data []byte) ([]byte, error) {
	var errs []error
	var out []byte
	last := 0
	for _, m := range envRef.FindAllSubmatchIndex(data, -1) {
		out = append(out, data[last:m[0]]...)
		last = m[1]
		name := string(data[m[2]:m[3]])
		v, set := os.LookupEnv(name)
		switch {
		case m[4] >= 0 && v == "":
			out = append(out, data[m[4]+2:m[5]]...) // the default, after ":-"
		case m[4] < 0 && !set:
			line := 1 + bytes.Count(data[:m[0]], []byte("\n"))
			errs = append(errs, fmt.Errorf("config:%d: ${%s} is not set (write ${%s:-} to allow it empty)", line, name, name))
		default:
			out = append(out, v...)
		}
	}
	if out == nil {
		return data, errors.Join(errs...)
	}
	return append(out, data[last:]...), errors.Join(errs...)
}

// inFile names the file in each line of err: "config: x" and "config:12: x"
// become "FILE: x" and "FILE:12: x".
func inFile(path string, err error) error {
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "config:"):
			lines[i] = path + ":" + strings.TrimPrefix(l, "config:")
		case l != "" && i == 0:
			lines[i] = path + ": " + l
		}
	}
	return &fileError{msg: strings.Join(lines, "\n"), err: err}
}

// fileError is a configuration error reworded with its file name; the
// original stays reachable with errors.Is/As.
type fileError struct {
	msg string
	err error
}

func (e *fileError) Error() string { return e.msg }
func (e *fileError) Unwrap() error { return e.err }
