package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// SharedRunnerWarnings names the Ollama nodes that share one model on one
// host but would keep reloading or unloading it for each other. Ollama
// runs one runner per model (v0.17.4 server/sched.go, schedulerModelKey)
// and reloads it whenever a request's runner options, num_ctx among them,
// differ from the loaded ones (runnerRef.needsReload): two such nodes with
// different context_window (or one unset, which runs Ollama's default)
// cost a load, seconds to minutes, at every alternation, typically OL1 and
// the summarizer on one small model. A request's keep_alive becomes the
// runner's (useLoadedRunner), and 0 unloads it once the call ends: the
// other node loads it again. These are warnings, not errors: the
// configuration works, only slowly.
func (c *Config) SharedRunnerWarnings() []string {
	type runner struct{ host, model string }
	var order []runner
	users := map[runner][]Node{}
	for _, n := range c.Nodes {
		if n.Provider != ProviderOllama {
			continue
		}
		for _, h := range n.Hosts() {
			r := runner{strings.ToLower(strings.TrimRight(h, "/")), fullModelName(n.Model)}
			if i := slices.IndexFunc(users[r], func(m Node) bool { return m.Name == n.Name }); i >= 0 {
				continue
			}
			if users[r] == nil {
				order = append(order, r)
			}
			users[r] = append(users[r], n)
		}
	}
	var out []string
	seen := map[string]bool{}
	add := func(msg string) {
		if !seen[msg] {
			seen[msg] = true
			out = append(out, msg)
		}
	}
	for _, r := range order {
		ns := users[r]
		for i, a := range ns {
			for _, b := range ns[i+1:] {
				if a.ContextWindow != b.ContextWindow {
					add(fmt.Sprintf("nodes %s and %s run model %q on %s with context_window %s and %s: Ollama keeps one runner per model and reloads it each time the window asked changes; give them the same context_window",
						a.Name, b.Name, a.Model, redactURL(r.host), window(a.ContextWindow), window(b.ContextWindow)))
				}
			}
		}
		for _, a := range ns {
			if d, err := ParseKeepAlive(a.KeepAlive); a.KeepAlive == "" || err != nil || d != 0 {
				continue
			}
			var others []string
			for _, b := range ns {
				if b.Name != a.Name {
					others = append(others, b.Name)
				}
			}
			if len(others) > 0 {
				add(fmt.Sprintf("node %s's keep_alive 0 unloads model %q on %s after each of its calls, and node %s loads it again",
					a.Name, a.Model, redactURL(r.host), strings.Join(others, ", ")))
			}
		}
	}
	return out
}

// fullModelName is an Ollama model name with its implied ":latest" tag,
// under which Ollama knows a name given without one.
func fullModelName(m string) string {
	m = strings.ToLower(strings.TrimSpace(m))
	if i := strings.LastIndexByte(m, '/'); !strings.Contains(m[i+1:], ":") {
		return m + ":latest"
	}
	return m
}

// window words a context_window for a warning.
func window(w int) string {
	if w == 0 {
		return "unset"
	}
	return strconv.Itoa(w)
}
