package tools

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"chainproxy/config"
	"chainproxy/tools/mcp"
)

// mcpState links a Registry to its MCP sessions.
type mcpState struct {
	m       atomic.Pointer[mcp.Manager]
	servers map[string]config.MCPServer
	log     *slog.Logger
	// mu serialises rebuilds, so a slow rebuild never overwrites a newer one.
	mu sync.Mutex
}

// MCPStatus is one MCP server's health, for /readyz.
type MCPStatus struct {
	Name string `json:"name"`
	// Status is "ok" or why the server is unavailable.
	Status string `json:"status"`
}

// StartMCP connects to the MCP servers and adds their tools as
// <server>__<tool>. It returns once every server connected or failed its
// first attempt; servers keep reconnecting until Close, and the tool set
// follows them. opts.OnChange is the registry's own and is overwritten.
func (r *Registry) StartMCP(ctx context.Context, servers []config.MCPServer, opts mcp.Options) {
	if len(servers) == 0 {
		return
	}
	st := &mcpState{servers: map[string]config.MCPServer{}, log: opts.Logger}
	if st.log == nil {
		st.log = slog.New(slog.DiscardHandler)
	}
	for _, s := range servers {
		st.servers[s.Name] = s
	}
	r.mcp = st
	// Start calls OnChange from the supervisors before it returns, when
	// st.m is not set yet: those rebuilds are skipped, and the one after
	// Start catches up.
	opts.OnChange = r.rebuild
	st.m.Store(mcp.Start(ctx, servers, opts))
	r.rebuild()
}

// Close ends the MCP sessions and their child processes.
func (r *Registry) Close() {
	if r.mcp != nil {
		r.mcp.m.Load().Close()
	}
}

// MCPStatus lists each configured MCP server, in config order.
func (r *Registry) MCPStatus() []MCPStatus {
	if r.mcp == nil {
		return nil
	}
	var out []MCPStatus
	for _, s := range r.mcp.m.Load().Status() {
		st := MCPStatus{Name: s.Name, Status: "ok"}
		if s.Err != nil {
			st.Status = s.Err.Error()
		}
		out = append(out, st)
	}
	return out
}

// Unavailable names the MCP servers that are down right now, whose tools
// are not offered.
func (r *Registry) Unavailable() []string {
	if r.mcp == nil {
		return nil
	}
	var out []string
	for _, s := range r.mcp.m.Load().Status() {
		if s.Err != nil {
			out = append(out, s.Name)
		}
	}
	return out
}

// ToolsVersion changes whenever the tool set does, so a caller can keep
// what it derives from Specs until then.
func (r *Registry) ToolsVersion() uint64 { return r.set.Load().version }

// rebuild publishes a new tool set: the fixed tools, then the MCP tools of
// the servers that are up.
func (r *Registry) rebuild() {
	st := r.mcp
	m := st.m.Load()
	if m == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	old := r.set.Load()
	ts := &toolSet{tools: slices.Clone(r.tools), byName: maps.Clone(r.byName), names: slices.Clone(r.names), version: old.version + 1}
	for _, mt := range m.Tools() {
		if _, dup := ts.byName[mt.Exposed]; dup {
			st.log.Warn("mcp tool name taken, tool skipped", "server", mt.Server, "tool", mt.Exposed)
			continue
		}
		t := &tool{
			spec:    Spec{Name: mt.Exposed, Description: mt.Description, Parameters: mt.InputSchema, Kind: mcpKind(st.servers[mt.Server], mt)},
			timeout: r.timeout,
			// No path argument is resolved in the sandbox: an MCP server's
			// paths are its own, so its writes make every stored result of
			// the conversation stale, never one of our files alone.
			ident: newIdentifier(mt.Exposed, mt.InputSchema),
			run: func(ctx context.Context, args []byte) (string, error) {
				return m.Call(ctx, mt.Server, mt.Name, args)
			},
		}
		if prev, ok := old.byName[mt.Exposed]; ok && string(prev.spec.Parameters) == string(mt.InputSchema) {
			t.schema, t.props = prev.schema, prev.props // unchanged: skip compiling again
		} else {
			sch, err := compileSchema(mt.Exposed, mt.InputSchema, serverPatterns)
			if err != nil {
				st.log.Warn("mcp tool schema invalid, tool skipped", "server", mt.Server, "tool", mt.Exposed, "err", err)
				continue
			}
			t.schema, t.props = sch, topLevelProperties(mt.InputSchema)
		}
		ts.tools = append(ts.tools, t)
		ts.byName[mt.Exposed] = t
		ts.names = append(ts.names, mt.Exposed)
	}
	r.set.Store(ts)
}

// mcpKind maps a tool's annotations to a Kind, the server's config lists
// overriding them: readOnlyHint is deterministic, unless openWorldHint makes
// it volatile; no readOnlyHint is writing, so its calls invalidate stored
// results (the safe reading of an unannotated tool).
func mcpKind(cfg config.MCPServer, t mcp.Tool) Kind {
	switch {
	case slices.Contains(cfg.VolatileTools, t.Name):
		return Volatile
	case slices.Contains(cfg.ReadOnlyTools, t.Name):
		return Deterministic
	case !t.ReadOnly:
		return Writing
	case t.OpenWorld:
		return Volatile
	}
	return Deterministic
}
