package chain

import (
	"slices"
	"strings"

	"chainproxy/chain/node"
	"chainproxy/chain/toolfit"
	"chainproxy/tools"
)

// toolView is what the engine derives from the runner's specs: the tools
// offered to models and their names for prompts and error messages. It is
// immutable. (How the guard treats a call comes from the runner's Key.)
type toolView struct {
	version uint64
	specs   []Tool
	names   []string
	// index is specs ready for choosing the tools that fit a window.
	index *toolfit.Index
	// list is names joined for a stage's limits, which every simple and
	// chain request states in its system prompt.
	list string
}

// versionedTools is implemented by a runner whose tool set changes at run
// time (tools.Registry, with MCP servers): ToolsVersion changes with it.
type versionedTools interface {
	ToolsVersion() uint64
}

// unavailableTools is implemented by a runner that can say which tool
// servers are down, so the trace explains tools that are missing.
type unavailableTools interface {
	Unavailable() []string
}

// tools returns the current view: one atomic load and, with a versioned
// runner, one version compare per request; it is rebuilt only after a
// change. Two requests racing a rebuild may both build; either result is
// correct.
func (e *Engine) tools() *toolView {
	tv := e.toolSet.Load()
	v, ok := e.runner.(versionedTools)
	if !ok || v.ToolsVersion() == tv.version {
		return tv
	}
	tv = e.newToolView()
	e.toolSet.Store(tv)
	e.warnToolFit(tv)
	return tv
}

func (e *Engine) newToolView() *toolView {
	tv := &toolView{index: toolfit.New(nil)}
	if e.runner == nil {
		return tv
	}
	if v, ok := e.runner.(versionedTools); ok {
		tv.version = v.ToolsVersion() // before Specs: a change between them triggers another rebuild
	}
	for _, s := range e.runner.Specs() {
		t := Tool{Name: s.Name, Description: s.Description, Parameters: s.Parameters}
		t.Declaration = node.ToolDeclaration(t)
		tv.specs = append(tv.specs, t)
		tv.names = append(tv.names, s.Name)
	}
	tv.list = strings.Join(tv.names, ", ")
	tv.index = toolfit.New(tv.specs)
	return tv
}

// ServerTool reports whether name is one of the tools the server offers
// now: a built-in, an HTTP tool or an MCP server's.
func (e *Engine) ServerTool(name string) bool {
	return slices.Contains(e.tools().names, name)
}

// unavailableReasons says, for the trace, which tool servers are down.
func (e *Engine) unavailableReasons() []string {
	u, ok := e.runner.(unavailableTools)
	if !ok {
		return nil
	}
	var out []string
	for _, name := range u.Unavailable() {
		out = append(out, "mcp server "+name+" unavailable: its tools are not offered")
	}
	return out
}

// mcpStatuser is implemented by a runner with MCP servers.
type mcpStatuser interface {
	MCPStatus() []tools.MCPStatus
}

// MCPServers lists each configured MCP server with "ok" or why it is
// unavailable, for /readyz; nil without MCP servers.
func (e *Engine) MCPServers() []tools.MCPStatus {
	if m, ok := e.runner.(mcpStatuser); ok {
		return m.MCPStatus()
	}
	return nil
}
