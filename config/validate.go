package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// problems are what is wrong with one section of the configuration, each
// naming its key: "config: chain.stages[1].node: unknown node". Load
// places each on the line of its key (placeErrors), by that prefix.
type problems []error

// add records a problem of the key at path.
func (ps *problems) add(path, format string, args ...any) {
	*ps = append(*ps, fmt.Errorf("config: %s: %s", path, fmt.Sprintf(format, args...)))
}

// Validate reports every problem of the configuration, each naming its key,
// section by section in the file's order of keys.
func (c *Config) Validate() error {
	nodes := map[string]bool{} // the node names, which other sections name
	for _, n := range c.Nodes {
		nodes[n.Name] = true
	}
	var errs []error
	for _, ps := range []problems{
		c.Server.validate(),
		validateNodes(c.Nodes),
		c.Chain.validate(nodes),
		c.Memory.validate(nodes),
		c.validateAliases(nodes),
		c.Classify.validate(),
		c.Tools.validate(),
		c.Antiloop.validate(),
		c.Telemetry.validate(),
		c.Admission.validate(),
		c.Store.validate(),
	} {
		errs = append(errs, ps...)
	}
	return errors.Join(errs...)
}

func (s Server) validate() (ps problems) {
	if s.Addr == "" {
		ps.add("server.addr", "must not be empty")
	}
	if s.MaxBodyBytes <= 0 {
		ps.add("server.max_body_bytes", "must be positive, got %d", s.MaxBodyBytes)
	}
	if s.ShutdownTimeout < 0 {
		ps.add("server.shutdown_timeout", "must not be negative")
	}
	if s.ReadTimeout <= 0 {
		ps.add("server.read_timeout", "must be positive, got %v", s.ReadTimeout)
	}
	if s.MaxMessages <= 0 {
		ps.add("server.max_messages", "must be positive, got %d", s.MaxMessages)
	}
	for i, k := range s.APIKeys {
		if k == "" {
			ps.add(fmt.Sprintf("server.api_keys[%d]", i), "must not be empty")
		}
	}
	for i, k := range s.AdminKeys {
		if k == "" {
			ps.add(fmt.Sprintf("server.admin_keys[%d]", i), "must not be empty")
		}
	}
	if len(s.AdminKeys) > 0 && len(s.APIKeys) == 0 {
		ps.add("server.admin_keys", "needs server.api_keys: without keys there is no authentication, and every caller sees every trace")
	}
	return ps
}

// validateNodes checks the nodes list: names unique, and each node.
func validateNodes(nodes []Node) (ps problems) {
	if len(nodes) == 0 {
		ps.add("nodes", "at least one node is required")
	}
	seen := map[string]bool{}
	for i, n := range nodes {
		p := fmt.Sprintf("nodes[%d]", i)
		switch {
		case n.Name == "":
			ps.add(p+".name", "must not be empty")
		case seen[n.Name]:
			ps.add(p+".name", "duplicate node name %q", n.Name)
		case strings.HasPrefix(n.Name, "chain/"):
			ps.add(p+".name", "%q is reserved for the chain models", n.Name)
		}
		seen[n.Name] = true
		ps = append(ps, n.validate(p)...)
	}
	return ps
}

// validate checks one node, found at path p, its name aside.
func (n Node) validate(p string) (ps problems) {
	switch n.Provider {
	case ProviderOllama, ProviderOpenAI:
		ps = append(ps, n.validateHosts(p)...)
		if n.Model == "" {
			ps.add(p+".model", "must not be empty")
		}
		if n.Mock != nil {
			ps.add(p+".mock", "only for provider \"mock\"")
		}
	case ProviderMock:
		if n.Mock == nil {
			ps.add(p+".mock", "a mock node needs a script")
		}
	case "":
		ps.add(p+".provider", "provider is required: ollama, openai or mock")
	default:
		ps.add(p+".provider", "unknown provider %q (want ollama, openai or mock)", n.Provider)
	}
	if n.Timeout < 0 {
		ps.add(p+".timeout", "must be positive")
	}
	if n.FirstByteTimeout < 0 {
		ps.add(p+".first_byte_timeout", "must be positive")
	}
	if n.IdleTimeout < 0 {
		ps.add(p+".idle_timeout", "must be positive")
	}
	if n.ConnectTimeout < 0 {
		ps.add(p+".connect_timeout", "must be positive")
	}
	if n.OfflineFor < 0 {
		ps.add(p+".offline_for", "must be positive")
	}
	if n.MaxConcurrency != nil && *n.MaxConcurrency < 0 {
		ps.add(p+".max_concurrency", "must not be negative (0 = unlimited)")
	}
	if n.MaxQueue < 0 {
		ps.add(p+".max_queue", "must not be negative")
	}
	if n.MaxOutputBytes < 0 {
		ps.add(p+".max_output_bytes", "must be positive, got %d", n.MaxOutputBytes)
	}
	if n.KeepAlive != "" {
		if _, err := ParseKeepAlive(n.KeepAlive); err != nil {
			ps.add(p+".keep_alive", "%v", err)
		}
	}
	if n.KeepLoaded {
		switch {
		case n.Provider != ProviderOllama:
			ps.add(p+".keep_loaded", "only an ollama node keeps its model loaded, not provider %q", n.Provider)
		case n.KeepAlive != "":
			ps.add(p+".keep_loaded", "set keep_loaded (keep_alive -1) or keep_alive, not both")
		}
	}
	if n.ContextWindow < 0 || n.ContextWindow > 0 && n.ContextWindow < 512 {
		ps.add(p+".context_window", "want at least 512 tokens (or 0 to learn it from the server), got %d", n.ContextWindow)
	}
	return ps
}

// validateHosts checks the base_url or base_urls of a node served over
// HTTP, found at path p.
func (n Node) validateHosts(p string) (ps problems) {
	switch {
	case n.BaseURL != "" && len(n.BaseURLs) > 0:
		ps.add(p+".base_urls", "set base_url (one host) or base_urls (several), not both")
	case n.BaseURL == "" && len(n.BaseURLs) == 0:
		ps.add(p+".base_url", "required for provider %q (or base_urls for several hosts)", n.Provider)
	case n.BaseURL != "":
		if !httpURL(n.BaseURL) {
			ps.add(p+".base_url", "want an http:// or https:// URL, got %q", redactURL(n.BaseURL))
		}
	default:
		hosts := map[string]bool{}
		for j, u := range n.BaseURLs {
			q := fmt.Sprintf("%s.base_urls[%d]", p, j)
			switch {
			case !httpURL(u):
				ps.add(q, "want an http:// or https:// URL, got %q", redactURL(u))
			case hosts[strings.TrimRight(u, "/")]:
				ps.add(q, "duplicate host %q", redactURL(u))
			}
			hosts[strings.TrimRight(u, "/")] = true
		}
	}
	return ps
}

// httpURL reports whether u is written as an http or https URL.
func httpURL(u string) bool {
	return strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://")
}

// validate checks the chain section; nodes are the configured node names.
func (ch Chain) validate(nodes map[string]bool) (ps problems) {
	if len(ch.Stages) == 0 {
		ps.add("chain.stages", "at least one stage is required")
	}
	for i, s := range ch.Stages {
		p := fmt.Sprintf("chain.stages[%d]", i)
		if !nodes[s.Node] {
			ps.add(p+".node", "unknown node %q", s.Node)
		}
		if s.MaxTurns <= 0 {
			ps.add(p+".max_turns", "must be positive, got %d", s.MaxTurns)
		}
	}
	if ch.MaxTotalTurns <= 0 {
		ps.add("chain.max_total_turns", "must be positive, got %d", ch.MaxTotalTurns)
	} else if n := len(ch.Stages); n > 0 && ch.MaxTotalTurns < n {
		ps.add("chain.max_total_turns", "%d cannot give each of the %d stages a turn", ch.MaxTotalTurns, n)
	}
	if !nodes[ch.SimpleNode] {
		ps.add("chain.simple_node", "unknown node %q", ch.SimpleNode)
	}
	if ch.ContextBudget <= 0 {
		ps.add("chain.context_budget", "must be positive, got %d", ch.ContextBudget)
	}
	if ch.ToolsShare <= 0 || ch.ToolsShare > 0.5 {
		ps.add("chain.tools_share", "want a fraction of the window above 0 and at most 0.5, got %v", ch.ToolsShare)
	}
	if ch.Render != RenderNone && ch.Render != RenderDetails {
		ps.add("chain.render", "unknown render %q (want \"details\" or empty)", ch.Render)
	}
	if ch.ResumeTTL <= 0 {
		ps.add("chain.resume_ttl", "must be positive, got %s", ch.ResumeTTL)
	}
	if ch.Traces <= 0 {
		ps.add("chain.traces", "must be positive, got %d", ch.Traces)
	}
	return ps
}

// validate checks the memory section; nodes are the configured node names.
func (m Memory) validate(nodes map[string]bool) (ps problems) {
	if m.Summarizer != "" && !nodes[m.Summarizer] {
		ps.add("memory.summarizer", "unknown node %q", m.Summarizer)
	}
	if m.SummaryTTL <= 0 {
		ps.add("memory.summary_ttl", "must be positive, got %s", m.SummaryTTL)
	}
	if m.SummaryTimeout <= 0 {
		ps.add("memory.summary_timeout", "must be positive, got %s", m.SummaryTimeout)
	}
	if m.AnswerReserve <= 0 {
		ps.add("memory.answer_reserve", "must be positive, got %d", m.AnswerReserve)
	}
	for _, sh := range []struct {
		key string
		v   float64
	}{{"memory.questions_share", m.QuestionsShare}, {"memory.recent_share", m.RecentShare}, {"memory.summaries_share", m.SummariesShare}} {
		if sh.v <= 0 || sh.v >= 0.5 {
			ps.add(sh.key, "want a fraction of the window between 0 and 0.5, got %v", sh.v)
		}
	}
	return ps
}

func (cl Classify) validate() (ps problems) {
	if cl.ShortChars <= 0 {
		ps.add("classify.short_chars", "must be positive, got %d", cl.ShortChars)
	}
	if cl.LongChars <= cl.ShortChars {
		ps.add("classify.long_chars", "must be greater than classify.short_chars (%d), got %d", cl.ShortChars, cl.LongChars)
	}
	for i, name := range cl.IgnoreBlocks {
		if !validTagName(name) {
			ps.add(fmt.Sprintf("classify.ignore_blocks[%d]", i), "want a tag name such as \"my-context\" (letters, digits, - _ . :), got %q", name)
		}
	}
	return ps
}

// validate checks the tools section: its bounds, then each HTTP tool and
// MCP server.
func (t Tools) validate() (ps problems) {
	if t.Timeout <= 0 {
		ps.add("tools.timeout", "must be positive")
	}
	if t.MaxCallsPerTurn <= 0 {
		ps.add("tools.max_calls_per_turn", "must be positive, got %d", t.MaxCallsPerTurn)
	}
	if t.MaxResultBytes <= 0 {
		ps.add("tools.max_result_bytes", "must be positive, got %d", t.MaxResultBytes)
	}
	if t.TraceResultBytes < t.MaxResultBytes {
		ps.add("tools.trace_result_bytes", "must be at least tools.max_result_bytes (%d)", t.MaxResultBytes)
	}
	if t.MaxArgsBytes <= 0 {
		ps.add("tools.max_args_bytes", "must be positive, got %d", t.MaxArgsBytes)
	}
	for i := range t.HTTP {
		ps = append(ps, t.validateHTTP(i)...)
	}
	for i := range t.MCP {
		ps = append(ps, t.validateMCP(i)...)
	}
	return ps
}

// validateHTTP checks tools.http[i], its name against the built-in tools
// and the HTTP tools before it.
func (t Tools) validateHTTP(i int) (ps problems) {
	builtin := []string{"list_dir", "read_file", "search_files"}
	h := t.HTTP[i]
	p := fmt.Sprintf("tools.http[%d]", i)
	if h.Name == "" {
		ps.add(p+".name", "must not be empty")
	} else if slices.Contains(builtin, h.Name) {
		ps.add(p+".name", "%q is a built-in tool", h.Name)
	}
	for j := range i {
		if t.HTTP[j].Name == h.Name && h.Name != "" {
			ps.add(p+".name", "duplicate tool name %q", h.Name)
		}
	}
	if !httpURL(h.URL) {
		ps.add(p+".url", "want an http:// or https:// URL, got %q", redactURL(h.URL))
	}
	if h.Timeout <= 0 {
		ps.add(p+".timeout", "must be positive")
	}
	checkFollow(ps.add, p, h.FollowRedirects)
	return ps
}

// validateMCP checks tools.mcp[i], its name against the servers before it.
func (t Tools) validateMCP(i int) (ps problems) {
	m := t.MCP[i]
	p := fmt.Sprintf("tools.mcp[%d]", i)
	if !mcpServerName.MatchString(m.Name) || len(m.Name) > 20 {
		ps.add(p+".name", "want letters, digits, '-' or '_' (at most 20, no \"__\"), got %q", m.Name)
	}
	for j := range i {
		if t.MCP[j].Name == m.Name && m.Name != "" {
			ps.add(p+".name", "duplicate server name %q", m.Name)
		}
	}
	switch {
	case len(m.Command) > 0 && m.URL != "":
		ps.add(p, "set command or url, not both")
	case len(m.Command) == 0 && m.URL == "":
		ps.add(p, "set command (stdio) or url (streamable HTTP)")
	case m.URL != "" && !httpURL(m.URL):
		ps.add(p+".url", "want an http:// or https:// URL, got %q", redactURL(m.URL))
	case len(m.Command) > 0 && m.Command[0] == "":
		ps.add(p+".command", "the program must not be empty")
	}
	if len(m.Headers) > 0 && m.URL == "" {
		ps.add(p+".headers", "only apply to a url server")
	}
	checkFollow(ps.add, p, m.FollowRedirects)
	if m.FollowRedirects != "" && m.URL == "" {
		ps.add(p+".follow_redirects", "only applies to a url server")
	}
	return ps
}

func (a Antiloop) validate() (ps problems) {
	if a.SignatureTTL <= 0 {
		ps.add("antiloop.signature_ttl", "must be positive")
	}
	if a.CallIDTTL <= 0 {
		ps.add("antiloop.call_id_ttl", "must be positive")
	}
	if a.MaxFormatErrors <= 0 {
		ps.add("antiloop.max_format_errors", "must be positive, got %d", a.MaxFormatErrors)
	}
	if a.MaxPolls <= 0 {
		ps.add("antiloop.max_polls", "must be positive, got %d", a.MaxPolls)
	}
	return ps
}

func (a Admission) validate() (ps problems) {
	if a.Lease <= 0 {
		ps.add("admission.lease", "must be positive, got %s", a.Lease)
	}
	if a.MaxReorderWait < 0 {
		ps.add("admission.max_reorder_wait", "must not be negative (0 turns the load scheduling off), got %s", a.MaxReorderWait)
	}
	return ps
}

func (s Store) validate() (ps problems) {
	if u := s.RedisURL; u != "" && !strings.HasPrefix(u, "redis://") && !strings.HasPrefix(u, "rediss://") && !strings.HasPrefix(u, "unix://") {
		ps.add("store.redis_url", "want a redis:// URL, got %q", redactURL(u))
	}
	return ps
}
