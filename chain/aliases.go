package chain

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// An alias pattern, from model_aliases: clients that ask for a model by a
// name of their own (Claude Code's claude-sonnet-…, its claude-*haiku*
// background model) reach a model the proxy serves. Resolve is the one
// place every front resolves a model name, so every front honours them.
type alias struct {
	pattern, target string
	literal         int // characters that are not wildcards: the more, the more specific
}

// aliases orders the configured patterns most specific first, so that a
// lookup takes the first match and the configuration's map order never
// matters: claude-*haiku* wins over claude-* for claude-haiku-4-5.
func aliases(m map[string]string) []alias {
	out := make([]alias, 0, len(m))
	for p, t := range m {
		out = append(out, alias{pattern: p, target: t, literal: len(p) - strings.Count(p, "*") - strings.Count(p, "?")})
	}
	slices.SortFunc(out, func(a, b alias) int {
		if a.literal != b.literal {
			return b.literal - a.literal
		}
		return strings.Compare(a.pattern, b.pattern)
	})
	return out
}

// Alias returns the model a name stands for under model_aliases (the
// most specific pattern that matches), whether or not the name is served.
func (e *Engine) Alias(model string) (string, bool) {
	for _, a := range e.aliases {
		if ok, _ := path.Match(a.pattern, model); ok {
			return a.target, true
		}
	}
	return "", false
}

// Aliases returns the configured patterns and their targets, most
// specific first: the order Resolve tries them in.
func (e *Engine) Aliases() [][2]string {
	out := make([][2]string, len(e.aliases))
	for i, a := range e.aliases {
		out[i] = [2]string{a.pattern, a.target}
	}
	return out
}

// Models returns the names the proxy serves without an alias: the chain's
// models, then every node by name and by model.
func (e *Engine) Models() []string {
	names := []string{ModelAuto, ModelSimple, ModelReflexive}
	for _, n := range e.order {
		if !slices.Contains(names, n.Name) {
			names = append(names, n.Name)
		}
	}
	for _, n := range e.order {
		if !slices.Contains(names, n.Model) {
			names = append(names, n.Model)
		}
	}
	return names
}

// UnknownModelError is a model name that is neither served nor aliased. Its
// message names what exists, so that a client's user can fix the name
// without another request.
type UnknownModelError struct {
	Model   string
	Known   []string
	Aliases [][2]string
}

func (e *UnknownModelError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v %q: this proxy serves %s", ErrUnknownModel, e.Model, strings.Join(e.Known, ", "))
	if len(e.Aliases) > 0 {
		b.WriteString("; aliases (model_aliases): ")
		for i, a := range e.Aliases {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(a[0] + " → " + a[1])
		}
	} else {
		b.WriteString(" (set model_aliases to accept other names)")
	}
	return b.String()
}

func (e *UnknownModelError) Unwrap() error { return ErrUnknownModel }
