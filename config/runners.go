package config

import (
	"fmt"
	"slices"
	"strings"
)

// runner is one Ollama model on one host: Ollama runs one runner for it
// (v0.17.4 server/sched.go, schedulerModelKey), whichever node asks.
type runner struct{ host, model string }

// runners groups the Ollama nodes by the runners they use, in
// configuration order; a node with several base_urls is in each of its
// hosts' groups.
func (c *Config) runners() (order []runner, users map[runner][]Node) {
	users = map[runner][]Node{}
	for _, n := range c.Nodes {
		if n.Provider != ProviderOllama {
			continue
		}
		for _, h := range n.Hosts() {
			r := runner{strings.ToLower(strings.TrimRight(h, "/")), FullModelName(n.Model)}
			if slices.ContainsFunc(users[r], func(m Node) bool { return m.Name == n.Name }) {
				continue
			}
			if users[r] == nil {
				order = append(order, r)
			}
			users[r] = append(users[r], n)
		}
	}
	return order, users
}

// RunnerWindows is the num_ctx each Ollama node is to send: the largest
// context_window among the nodes that share a runner with it (its own when
// none does; 0, none sent, when none of them sets one). Ollama reloads a
// runner whenever a request's runner options differ from the loaded ones,
// num_ctx among them (runnerRef.needsReload): two nodes on one small model
// (OL1 and the summarizer, typically) sending their own windows would
// reload it, seconds to minutes, at every alternation. Each node still
// fits its prompts to its own window, which the larger one holds.
func (c *Config) RunnerWindows() map[string]int {
	out := map[string]int{}
	order, users := c.runners()
	for _, r := range order {
		w := 0
		for _, n := range users[r] {
			w = max(w, n.ContextWindow)
		}
		for _, n := range users[r] {
			out[n.Name] = max(out[n.Name], w)
		}
	}
	return out
}

// RunnersKeptLoaded names the Ollama nodes whose model is kept loaded for
// good: keep_loaded ones and those that share a runner with one. Ollama
// takes each request's keep_alive for the runner (v0.17.4 server/sched.go,
// useLoadedRunner), so a node on the kept model sending its own would
// have it unloaded once that keep_alive ends.
func (c *Config) RunnersKeptLoaded() map[string]bool {
	out := map[string]bool{}
	order, users := c.runners()
	for _, r := range order {
		if slices.ContainsFunc(users[r], func(n Node) bool { return n.KeepLoaded }) {
			for _, n := range users[r] {
				out[n.Name] = true
			}
		}
	}
	return out
}

// SharedRunnerWarnings names the Ollama nodes that would unload a model
// another node uses: a request's keep_alive becomes the runner's (v0.17.4
// server/sched.go, useLoadedRunner), and 0 unloads it once the call ends,
// so the other node loads it again, seconds to minutes each time. These
// are warnings, not errors: the configuration works, only slowly.
func (c *Config) SharedRunnerWarnings() []string {
	var out []string
	order, users := c.runners()
	for _, r := range order {
		ns := users[r]
		if slices.ContainsFunc(ns, func(n Node) bool { return n.KeepLoaded }) {
			continue // every node of it sends -1 (RunnersKeptLoaded)
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
			if msg := fmt.Sprintf("node %s's keep_alive 0 unloads model %q on %s after each of its calls, and node %s loads it again",
				a.Name, a.Model, redactURL(r.host), strings.Join(others, ", ")); len(others) > 0 && !slices.Contains(out, msg) {
				out = append(out, msg)
			}
		}
	}
	return out
}

// FullModelName is an Ollama model name with its implied ":latest" tag,
// under which Ollama knows a name given without one.
func FullModelName(m string) string {
	m = strings.ToLower(strings.TrimSpace(m))
	if i := strings.LastIndexByte(m, '/'); !strings.Contains(m[i+1:], ":") {
		return m + ":latest"
	}
	return m
}
