// Package tools is the server-side tool registry and its sandboxed built-ins.
//
// A Registry holds the tools the proxy offers to chain stages: the read-only
// file built-ins list_dir, read_file and search_files, confined to
// tools.root through os.Root, the HTTP tools declared in config, and the
// tools of the MCP servers in tools.mcp as <server>__<tool> (StartMCP; the
// sessions live in package tools/mcp, which must not import this one). It
// validates a call's arguments against the tool's JSON Schema before anything
// runs (Check), keys each call for the anti-loop by what it does rather than
// how it is spelled (Key), and executes calls under a timeout derived from
// the caller's context (Call).
//
// The chain imports this package, so it must not import chain or web; it
// defines its own Spec and TextCall types, uses antiloop's canonical JSON,
// and any package may import config.
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"chainproxy/config"
	"chainproxy/internal/origin"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Errors a call can wrap; match them with errors.Is.
var (
	// ErrUnknownTool: the model named a tool the registry does not have.
	ErrUnknownTool = errors.New("unknown tool")
	// ErrBadArguments: the arguments are not valid JSON or do not match the
	// tool's schema.
	ErrBadArguments = errors.New("bad arguments")
	// ErrBlocked: the call tried to leave the tool sandbox; nothing was read.
	ErrBlocked = errors.New("blocked")
)

// defaultTimeout bounds a call when the config leaves tools.timeout unset
// (only possible for a Tools value built by hand, config.Load fills it).
const defaultTimeout = 15 * time.Second

// Spec describes a tool offered to models.
type Spec struct {
	Name        string
	Description string
	// Parameters is the tool's JSON Schema, an object schema.
	Parameters json.RawMessage
	// Kind says how the anti-loop treats a repeat of the same call.
	Kind Kind
}

// Kind classifies a tool by what a repeated call means.
type Kind uint8

// Tool kinds.
const (
	// Deterministic tools return the same result for the same arguments as
	// long as nothing is written: a repeat is a loop, and a stored result
	// may answer it. The file built-ins are deterministic, and so are HTTP
	// tools that are read_only and not volatile.
	Deterministic Kind = iota
	// Volatile tools read state that changes by itself (a job's status, the
	// time, a search engine): a repeat is executed, and is a loop only when
	// it returns what it returned last time. HTTP tools with volatile: true
	// and the client's own tools are volatile.
	Volatile
	// Writing tools change state (HTTP tools with read_only: false): a write
	// invalidates the stored results that it may have made stale.
	Writing
)

// String names the kind as config and docs spell it.
func (k Kind) String() string {
	switch k {
	case Deterministic:
		return "deterministic"
	case Volatile:
		return "volatile"
	case Writing:
		return "writing"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Registry holds the tools offered to models. It is safe for concurrent use:
// the built-in and HTTP tools are fixed at New; MCP servers' tools come and
// go, so readers take the current set from an atomic pointer that a change
// replaces whole (see mcp_tools.go).
type Registry struct {
	tools  []*tool
	byName map[string]*tool
	names  []string
	// sb resolves the paths of the file tools, and keys them (Key).
	sb *sandbox
	// set is the current tool set: the fixed tools, then MCP tools.
	set atomic.Pointer[toolSet]
	mcp *mcpState
	// timeout is tools.timeout, for MCP tools added later.
	timeout time.Duration
}

// toolSet is an immutable snapshot of the offered tools.
type toolSet struct {
	tools  []*tool
	byName map[string]*tool
	names  []string
	// version changes with every new set, so callers can cache what they
	// derive from Specs.
	version uint64
}

// tool is one registered tool with its compiled schema and its executor.
type tool struct {
	spec    Spec
	schema  *jsonschema.Schema
	props   []string // top-level argument names, for messages
	timeout time.Duration
	// run executes the call; args are validated, normalised JSON text.
	run func(ctx context.Context, args []byte) (string, error)
	// builtin marks the sandboxed file tools.
	builtin bool
	// ident keys its calls for the anti-loop (Key).
	ident *identifier
}

// New builds the registry: the built-ins sandboxed under cfg.Root (none when
// it is empty), then
// cfg.HTTP tools in config order. Every schema is compiled once here. The
// root need not exist: New still succeeds and the built-ins report it on each
// call. A nil client gets a default one; timeouts come from the call context.
func New(cfg config.Tools, client *http.Client) (*Registry, error) {
	if client == nil {
		client = defaultClient()
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	r := &Registry{byName: map[string]*tool{}, timeout: timeout}

	// An empty root turns the built-in file tools off.
	if cfg.Root != "" {
		sb, err := newSandbox(cfg.Root)
		if err != nil {
			return nil, fmt.Errorf("tools: %w", err)
		}
		r.sb = sb
		for _, b := range builtins(sb) {
			b.timeout = timeout
			if err := r.add(b); err != nil {
				return nil, err
			}
		}
	}
	for i, h := range cfg.HTTP {
		t, err := newHTTPTool(h, client, timeout)
		if err != nil {
			return nil, fmt.Errorf("tools: tools.http[%d] (%s): %w", i, h.Name, err)
		}
		if err := r.add(t); err != nil {
			return nil, fmt.Errorf("tools: tools.http[%d]: %w", i, err)
		}
	}
	r.set.Store(&toolSet{tools: r.tools, byName: r.byName, names: r.names, version: 1})
	return r, nil
}

func (r *Registry) add(t *tool) error {
	if t.spec.Name == "" {
		return errors.New("tool name must not be empty")
	}
	if _, dup := r.byName[t.spec.Name]; dup {
		return fmt.Errorf("duplicate tool name %q", t.spec.Name)
	}
	sch, err := compileSchema(t.spec.Name, t.spec.Parameters, nil)
	if err != nil {
		return fmt.Errorf("invalid parameters schema: %w", err)
	}
	t.schema = sch
	t.props = topLevelProperties(t.spec.Parameters)
	t.ident = newIdentifier(t.spec.Name, t.spec.Parameters)
	// The file tools, and writes that name a path, key the path resolved
	// in the sandbox: "notes.md", "./notes.md" and "docs/../notes.md" are
	// one file.
	if (t.builtin || t.spec.Kind == Writing) && slices.Contains(t.props, "path") {
		t.ident.pathArg = "path"
	}
	r.tools = append(r.tools, t)
	r.byName[t.spec.Name] = t
	r.names = append(r.names, t.spec.Name)
	return nil
}

// defaultClient has no overall timeout: each call's context bounds it, so a
// per-tool timeout and the request's cancellation both apply.
func defaultClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                  http.ProxyFromEnvironment,
		DialContext:            (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    10,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    5 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: origin.MaxResponseHeaderBytes,
	}}
}

// Specs returns the current tools in a stable order: built-ins, HTTP tools
// in config order, then the tools of the MCP servers that are up. The slice
// is a copy.
func (r *Registry) Specs() []Spec {
	ts := r.set.Load()
	out := make([]Spec, len(ts.tools))
	for i, t := range ts.tools {
		out[i] = t.spec
	}
	return out
}

// Lookup returns the spec of the tool called name.
func (r *Registry) Lookup(name string) (Spec, bool) {
	t, ok := r.set.Load().byName[name]
	if !ok {
		return Spec{}, false
	}
	return t.spec, true
}

// Names returns the tool names in Specs order.
func (r *Registry) Names() []string {
	return append([]string(nil), r.set.Load().names...)
}

// callError is an error whose message reads naturally for a model (it is fed
// back as the tool result) while still matching a sentinel with errors.Is.
type callError struct {
	kind error
	msg  string
}

func (e *callError) Error() string { return e.msg }
func (e *callError) Unwrap() error { return e.kind }

func newCallError(kind error, format string, args ...any) error {
	return &callError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// Check validates a call before execution. An unknown tool wraps
// ErrUnknownTool and lists the available tools; arguments that are not JSON or
// do not match the schema wrap ErrBadArguments and name the failing field,
// e.g. `read_file: missing required argument "path"`. Empty arguments (or
// JSON null, which some models send for "no arguments") count as {}.
func (r *Registry) Check(name string, args []byte) error {
	_, _, err := r.check(name, args)
	return err
}

func (r *Registry) check(name string, args []byte) (*tool, []byte, error) {
	ts := r.set.Load()
	t, ok := ts.byName[name]
	if !ok {
		return nil, nil, newCallError(ErrUnknownTool, "unknown tool %q; available tools: %s", name, strings.Join(ts.names, ", "))
	}
	args = bytes.TrimSpace(args)
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return nil, nil, newCallError(ErrBadArguments, "%s: arguments are not valid JSON: %v", name, err)
	}
	if obj, ok := doc.(map[string]any); ok && dropNulls(obj, t.ident.required) {
		// Small models write "field": null for an optional field they
		// mean to leave out: read it so, rather than as a format error.
		if args, err = json.Marshal(obj); err != nil {
			return nil, nil, newCallError(ErrBadArguments, "%s: %v", name, err)
		}
	}
	if err := t.schema.Validate(doc); err != nil {
		return nil, nil, newCallError(ErrBadArguments, "%s: %s", name, describeValidation(err, t.props))
	}
	return t, args, nil
}

// Call executes the tool after checking its arguments. It runs under the
// tool's timeout (tools.timeout, or the HTTP tool's own) derived from ctx, so
// cancelling ctx cancels the call. A sandbox escape wraps ErrBlocked and reads
// nothing; a timeout wraps context.DeadlineExceeded. Each tool caps its own
// result (read_file 256 KiB, an HTTP body 1 MiB); capping what a model
// receives is the caller's job, with Truncate.
func (r *Registry) Call(ctx context.Context, name string, args []byte) (string, error) {
	t, norm, err := r.check(name, args)
	if err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	cctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	out, err := t.run(cctx, norm)
	if err != nil {
		// Say which limit fired: the tool's own timeout reads better to a
		// model than a bare "context deadline exceeded".
		if ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
			return "", fmt.Errorf("%s: timed out after %s: %w", name, t.timeout, context.DeadlineExceeded)
		}
		return "", err
	}
	return out, nil
}

// dropNulls deletes the null members of obj that are not required, and
// reports whether it deleted any.
func dropNulls(obj map[string]any, required map[string]bool) bool {
	dropped := false
	for k, v := range obj {
		if v == nil && !required[k] {
			delete(obj, k)
			dropped = true
		}
	}
	return dropped
}

// rootAbs is the absolute form of a configured root, used to map absolute
// paths that point inside it.
func rootAbs(root string) (string, error) {
	if root == "" {
		return "", errors.New("tools.root must not be empty")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", fmt.Errorf("tools.root %q: %w", root, err)
	}
	return abs, nil
}
