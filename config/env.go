package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/token"
)

// envRef matches ${VAR} and ${VAR:-default}. Only the braced form is
// expanded, so a literal "$" in a prompt survives.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}`)

// expandEnv replaces ${VAR} with the variable's value and ${VAR:-default}
// with the value or, when unset or empty, the default. An unset ${VAR}
// without a default is an error, one per reference with its line: a key
// that silently became empty (an API key) fails much later and far away.
//
// The text is expanded before it is parsed, so that a variable can give a
// number or a duration and every line keeps its number; but each reference
// is read as YAML reads its place. One in a comment is left as written
// (README's example says "# ${VAR} alone must be set"). A value stays the
// value of its key whatever it holds: it is escaped in a quoted scalar, and
// a plain scalar that it would turn into something else (a generated
// secret starting with "*" reads as an alias, one holding " #" is cut by a
// comment) is written in double quotes. Pasted as it is, such a value
// broke the file, and the parser's error showed the secret.
func expandEnv(data []byte) ([]byte, error) {
	refs := envRef.FindAllSubmatchIndex(data, -1)
	if refs == nil {
		return data, nil
	}
	var errs []error
	var out []byte
	last := 0
	for _, s := range envScalars(data, refs) {
		if s.kind == token.CommentType {
			continue
		}
		// The scalar's text with its references expanded; a plain one
		// without the whitespace around it.
		text := string(data[s.start:s.stop])
		lead, trail := "", ""
		if s.kind == token.StringType {
			core := strings.TrimSpace(text)
			i := strings.Index(text, core)
			lead, trail = text[:i], text[i+len(core):]
		}
		var b strings.Builder
		at := s.start + len(lead)
		for _, m := range s.refs {
			b.Write(data[at:m[0]])
			v, err := lookupEnv(data, m)
			if err != nil {
				errs = append(errs, err)
			}
			switch s.kind {
			case token.DoubleQuoteType:
				q := strconv.Quote(v)
				v = q[1 : len(q)-1]
			case token.SingleQuoteType:
				v = strings.ReplaceAll(v, "'", "''")
			}
			b.WriteString(v)
			at = m[1]
		}
		b.Write(data[at : s.stop-len(trail)])
		text = b.String()
		if s.kind == token.StringType {
			text = plainOrQuoted(lead, text, trail, s.flow)
		}
		out = append(out, data[last:s.start]...)
		out = append(out, text...)
		last = s.stop
	}
	return append(out, data[last:]...), errors.Join(errs...)
}

// lookupEnv is the value of the reference at m, a match of envRef in data.
func lookupEnv(data []byte, m []int) (string, error) {
	name := string(data[m[2]:m[3]])
	v, set := os.LookupEnv(name)
	switch {
	case m[4] >= 0 && v == "":
		return string(data[m[4]+2 : m[5]]), nil // the default, after ":-"
	case m[4] < 0 && !set:
		line := 1 + bytes.Count(data[:m[0]], []byte("\n"))
		return "", fmt.Errorf("config:%d: ${%s} is not set (write ${%s:-} to allow it empty)", line, name, name)
	}
	return v, nil
}

// envScalar is a token of the file that holds references: its text is
// data[start:stop], and kind says how a value is written in it.
type envScalar struct {
	start, stop int
	// kind is token.CommentType (not expanded), DoubleQuoteType,
	// SingleQuoteType, StringType (a plain scalar on one line), or
	// UnknownType (the value goes in as it is: a block scalar's lines).
	kind token.Type
	flow bool    // inside [ ] or { }, where , [ ] { } end a plain scalar
	refs [][]int // the matches of envRef in it
}

// envScalars places each reference in the token of the file that holds it.
// The file is lexed with each reference masked by letters of its length:
// unmasked, "${" in a flow collection would open a mapping. When the tokens
// cannot be placed on the text, every reference is expanded as it stands.
func envScalars(data []byte, refs [][]int) []envScalar {
	masked := bytes.Clone(data)
	for _, m := range refs {
		for i := m[0]; i < m[1]; i++ {
			masked[i] = 'x'
		}
	}
	var out []envScalar
	at, depth, r := 0, 0, 0
	prev := token.UnknownType
	for _, tk := range lexer.Tokenize(string(masked)) {
		start, stop := at, at+len(tk.Origin)
		if stop > len(masked) || string(masked[start:stop]) != tk.Origin {
			break
		}
		at = stop
		switch tk.Type {
		case token.SequenceStartType, token.MappingStartType:
			depth++
		case token.SequenceEndType, token.MappingEndType:
			depth--
		}
		s := envScalar{start: start, stop: stop, kind: tk.Type, flow: depth > 0}
		switch {
		case tk.Type == token.StringType && (prev == token.LiteralType || prev == token.FoldedType):
			s.kind = token.UnknownType // a block scalar's lines
		case tk.Type == token.StringType && strings.Contains(strings.TrimSpace(tk.Origin), "\n"):
			s.kind = token.UnknownType // a plain scalar over several lines
		case tk.Type != token.CommentType && tk.Type != token.DoubleQuoteType && tk.Type != token.SingleQuoteType && tk.Type != token.StringType:
			s.kind = token.UnknownType
		}
		prev = tk.Type
		for r < len(refs) && refs[r][0] < stop {
			if refs[r][0] < start || refs[r][1] > stop {
				break
			}
			s.refs = append(s.refs, refs[r])
			r++
		}
		if len(s.refs) > 0 {
			out = append(out, s)
		}
	}
	if r != len(refs) {
		return []envScalar{{start: 0, stop: len(data), kind: token.UnknownType, refs: refs}}
	}
	return out
}

// plainOrQuoted is a plain scalar of the file, its references expanded in
// core (lead and trail are the whitespace around it as written), as it
// stands when YAML reads core back as it is (a word, a URL, a number, a
// duration); else core in double quotes.
func plainOrQuoted(lead, core, trail string, flow bool) string {
	if core == "" {
		return lead + trail
	}
	var read []string
	if flow {
		// Read in a nested flow collection, followed by another value:
		// how the parser reads "a:" there depends on both.
		var m map[string][]string
		if yaml.Unmarshal([]byte("{k: ["+core+", x]}"), &m) == nil && len(m["k"]) == 2 {
			read = m["k"][:1]
		}
	} else {
		var m map[string]string
		if yaml.Unmarshal([]byte("k: "+core+"\n"), &m) == nil && len(m) == 1 {
			read = []string{m["k"]}
		}
	}
	if len(read) == 1 && read[0] == core {
		return lead + core + trail
	}
	return lead + strconv.Quote(core) + trail
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
