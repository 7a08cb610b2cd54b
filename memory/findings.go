package memory

import (
	"fmt"
	"strings"
)

// Work is what one stage of the chain found, for the stages after it.
type Work struct {
	// Node and Model name the stage's node; Notes are its output.
	Node, Model string
	Calls       []Evidence
	Notes       string
}

// Evidence is one tool call of a stage, as the next stages read it.
type Evidence struct {
	Name, Args, Status, Result string
}

// Findings renders the earlier stages' work (done) for the next stage:
// every tool call with its arguments and result, and each stage's notes.
// When it exceeds budget characters, the oldest tool results are shortened
// first to their head lines, then emptied; the tool names and arguments
// are always kept.
func Findings(done []Work, budget int) string {
	type item struct {
		stage       string
		name, args  string
		status      string
		result      string
		lines, kept int // lines of the result, lines kept (-1 = all)
	}
	var items []*item
	for _, s := range done {
		for _, ev := range s.Calls {
			items = append(items, &item{stage: s.Node, name: ev.Name, args: ev.Args, status: ev.Status, result: ev.Result, lines: strings.Count(ev.Result, "\n") + 1, kept: -1})
		}
	}
	if len(done) == 0 {
		return ""
	}
	render := func() string {
		var b strings.Builder
		b.WriteString("## What the earlier stages found\n")
		for _, s := range done {
			fmt.Fprintf(&b, "\n### Stage %s (%s)\n", s.Node, s.Model)
			for _, it := range items {
				if it.stage != s.Node {
					continue
				}
				fmt.Fprintf(&b, "- tool %s %s → %s\n", it.name, it.args, it.status)
				res := it.result
				if it.kept >= 0 {
					res = headLines(it.result, it.kept)
				}
				if res != "" {
					b.WriteString("```\n")
					b.WriteString(res)
					b.WriteString("\n```\n")
				}
			}
			if a := s.Notes; a != "" {
				fmt.Fprintf(&b, "Notes of %s:\n%s\n", s.Node, a)
			}
		}
		return b.String()
	}
	out := render()
	for _, keep := range []int{5, 0} {
		for _, it := range items {
			if len(out) <= budget {
				return out
			}
			if it.kept == -1 || it.kept > keep {
				it.kept = keep
				out = render()
			}
		}
	}
	if len(out) > budget {
		// Only the notes are left to cut: keep the head, say what was cut.
		cut := len(out) - budget
		out = truncateUTF8(out, budget) + fmt.Sprintf("\n… [%d more characters cut to fit the context budget]", cut)
	}
	return out
}

// headLines keeps the first n lines of s and says how many more there were.
func headLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) <= n {
		return s
	}
	more := fmt.Sprintf("… %d more lines", len(lines)-n)
	if n == 0 {
		return more
	}
	return strings.Join(lines[:n], "\n") + "\n" + more
}

// truncateUTF8 cuts s to at most n bytes without splitting a rune.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
