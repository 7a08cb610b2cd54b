// Package mcp keeps sessions with MCP servers, using the official Go SDK
// for both the stdio (command) and the streamable HTTP transports.
//
// A Manager runs one supervisor goroutine per configured server: it
// connects, lists the server's tools, follows notifications/tools/list_changed
// and reconnects with backoff when the session ends (a child that exits, an
// HTTP server that stops answering keepalive pings). While a server is down
// its tools are simply absent from Tools, and Status says why.
//
// This package must not import chainproxy/tools, chain or web: tools wraps
// it, turning each Tool into a registry entry.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"chainproxy/config"
	"chainproxy/internal/origin"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ErrUnavailable: the server has no live session right now.
var ErrUnavailable = errors.New("mcp server unavailable")

// ErrToolError: the server answered the call with isError.
var ErrToolError = errors.New("mcp tool error")

// Tool is one tool offered by a connected server.
type Tool struct {
	// Server is the configured server name.
	Server string
	// Name is the tool's name on the server.
	Name string
	// Exposed is the name offered to models: <server>__<name>, sanitised to
	// OpenAI's ^[a-zA-Z0-9_-]{1,64}$ (see ExposedName).
	Exposed     string
	Description string
	// InputSchema is the server's JSON Schema for the arguments.
	InputSchema json.RawMessage
	// ReadOnly and OpenWorld are the server's annotations (readOnlyHint,
	// openWorldHint); OpenWorld is false when the server leaves it unset,
	// since the spec's default of true would make every tool volatile.
	ReadOnly, OpenWorld bool
}

// Status is one server's health.
type Status struct {
	Name string
	// Err is nil while the server is connected.
	Err error
}

// Options tune a Manager; zero values take the defaults.
type Options struct {
	Logger *slog.Logger
	// OnChange is called (from a supervisor goroutine) after a server's tool
	// set changed: connected, listed again, or gone down.
	OnChange func()
	// KeepAlive is the ping interval that detects a dead server (default 10s).
	KeepAlive time.Duration
	// MinBackoff and MaxBackoff bound the wait between reconnects
	// (defaults 250ms and 30s).
	MinBackoff, MaxBackoff time.Duration
	// StartTimeout bounds how long Start waits for the first connection of
	// every server (default 10s); servers not up by then keep trying.
	StartTimeout time.Duration
	// ConnectTimeout bounds one connection attempt, the handshake and the
	// tools/list after it (default 2m). It is not StartTimeout: a cold
	// `npx -y` or `uvx` start installs first and takes tens of seconds, and
	// an attempt cut short kills the child with its install unfinished, so
	// the next attempt starts over and the server never comes up.
	ConnectTimeout time.Duration
	// HTTPClient is used for url servers (default: a plain client that reads at most
	// origin.MaxResponseHeaderBytes of headers; the call's context bounds each request).
	HTTPClient *http.Client
	// MaxBody caps one HTTP response body of a url server, read as it
	// arrives (default 4 MiB): a server answering more fails the call.
	MaxBody int64
}

// Manager holds the sessions with the configured MCP servers.
type Manager struct {
	opts    Options
	log     *slog.Logger
	servers []*server
	byName  map[string]*server
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// server is one configured server and its current session.
type server struct {
	cfg config.MCPServer
	// changed is signalled (buffer 1) by the list_changed handler.
	changed chan struct{}
	// check is signalled (buffer 1) when a call failed in transport: the
	// supervisor pings and drops a dead session at once instead of waiting
	// for the next keepalive.
	check chan struct{}

	mu      sync.Mutex
	session *sdk.ClientSession
	tools   []Tool
	err     error
}

// Start connects to every server and returns once each has connected or
// failed its first attempt (bounded by opts.StartTimeout), so tools are
// there for the first request. Servers keep reconnecting in the background
// until Close. ctx bounds nothing after Start returns: Close ends the
// supervisors.
func Start(ctx context.Context, servers []config.MCPServer, opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = 10 * time.Second
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 250 * time.Millisecond
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(30*time.Second, opts.MinBackoff)
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 10 * time.Second
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 2 * time.Minute
	}
	if opts.HTTPClient == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxResponseHeaderBytes = origin.MaxResponseHeaderBytes
		opts.HTTPClient = &http.Client{Transport: t}
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	m := &Manager{opts: opts, log: opts.Logger, byName: map[string]*server{}}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.cancel = cancel
	first := make(chan struct{}, len(servers))
	for _, c := range servers {
		s := &server{cfg: c, changed: make(chan struct{}, 1), check: make(chan struct{}, 1), err: errors.New("connecting")}
		m.servers = append(m.servers, s)
		m.byName[c.Name] = s
		m.wg.Go(func() { m.supervise(runCtx, s, first) }) // exits when Close cancels runCtx
	}
	timer := time.NewTimer(opts.StartTimeout)
	defer timer.Stop()
	for range servers {
		select {
		case <-first:
		case <-timer.C:
			return m
		case <-ctx.Done():
			return m
		}
	}
	return m
}

// Close ends every session (a stdio child gets its stdin closed, then
// SIGTERM, then SIGKILL) and waits for the supervisors to exit.
func (m *Manager) Close() {
	m.cancel()
	m.wg.Wait()
}

// Tools returns the tools of the connected servers, in config order.
func (m *Manager) Tools() []Tool {
	var out []Tool
	for _, s := range m.servers {
		s.mu.Lock()
		out = append(out, s.tools...)
		s.mu.Unlock()
	}
	return out
}

// Status returns each server's health, in config order.
func (m *Manager) Status() []Status {
	out := make([]Status, len(m.servers))
	for i, s := range m.servers {
		s.mu.Lock()
		out[i] = Status{Name: s.cfg.Name, Err: s.err}
		s.mu.Unlock()
	}
	return out
}

// Call calls tool (its name on the server) on server. The SDK sends
// notifications/cancelled when ctx ends first. Text content becomes the
// result; other content is summarised by type and size. An isError answer
// returns its text wrapped in ErrToolError.
func (m *Manager) Call(ctx context.Context, server, tool string, args json.RawMessage) (string, error) {
	s, ok := m.byName[server]
	if !ok {
		return "", fmt.Errorf("%w: %q is not configured", ErrUnavailable, server)
	}
	s.mu.Lock()
	sess := s.session
	s.mu.Unlock()
	if sess == nil {
		return "", fmt.Errorf("%w: %s", ErrUnavailable, server)
	}
	res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args, Meta: traceMeta(ctx)})
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		// Maybe the server is gone: have the supervisor ping it now rather
		// than at the next keepalive. A server that merely said no answers
		// the ping and keeps its session.
		select {
		case s.check <- struct{}{}:
		default:
		}
		return "", fmt.Errorf("mcp %s: %w", server, err)
	}
	text := render(res)
	if res.IsError {
		return "", fmt.Errorf("%w: %s", ErrToolError, text)
	}
	return text, nil
}

// traceMeta is the W3C trace context of a traced call (the chain's
// execute_tool span is in ctx) as params._meta keys, traceparent and
// tracestate, where the OpenTelemetry MCP conventions put it (semantic
// conventions docs/gen-ai/mcp.md, "Context propagation"; MCP SEP-414): a
// traced server's span is then the tool call's child, whatever the
// transport, stdio included. nil when the call is not traced.
func traceMeta(ctx context.Context) sdk.Meta {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	meta := make(sdk.Meta, len(carrier))
	for k, v := range carrier {
		meta[k] = v
	}
	return meta
}

// render joins text content and summarises the rest, so a model always
// gets text and a large binary never floods the context. A result without
// content blocks is its structuredContent as JSON: the spec only says a
// text copy SHOULD be in content, and servers that leave content empty
// exist (dust-tt/dust#26388: Airtable's tools).
func render(res *sdk.CallToolResult) string {
	if len(res.Content) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			return string(b)
		}
	}
	parts := make([]string, 0, len(res.Content))
	for _, c := range res.Content {
		switch v := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, v.Text)
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", v.MIMEType, len(v.Data)))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", v.MIMEType, len(v.Data)))
		case *sdk.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource link %s %s]", v.URI, v.MIMEType))
		case *sdk.EmbeddedResource:
			if r := v.Resource; r != nil {
				if r.Text != "" {
					parts = append(parts, r.Text)
				} else {
					parts = append(parts, fmt.Sprintf("[resource %s %s, %d bytes]", r.URI, r.MIMEType, len(r.Blob)))
				}
			}
		default:
			b, _ := json.Marshal(c)
			parts = append(parts, fmt.Sprintf("[%T content, %d bytes]", c, len(b)))
		}
	}
	return strings.Join(parts, "\n")
}

// supervise keeps one server connected until ctx ends. It signals first
// once, after the first attempt.
func (m *Manager) supervise(ctx context.Context, s *server, first chan<- struct{}) {
	signalled := false
	signal := func() {
		if !signalled {
			signalled = true
			first <- struct{}{} // buffered for every server
		}
	}
	defer signal()
	backoff := m.opts.MinBackoff
	for ctx.Err() == nil {
		sess, err := m.connect(ctx, s)
		if err == nil {
			if err = m.list(ctx, s, sess); err != nil {
				sess.Close()
			}
		}
		if err != nil {
			m.setDown(s, err)
			signal()
			m.log.Warn("mcp server unavailable", "server", s.cfg.Name, "err", err, "retry_in", backoff.String())
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, m.opts.MaxBackoff)
			continue
		}
		backoff = m.opts.MinBackoff
		m.log.Info("mcp server connected", "server", s.cfg.Name, "tools", len(s.snapshot()))
		signal()
		err = m.serve(ctx, s, sess)
		if ctx.Err() != nil {
			m.setDown(s, errors.New("closed"))
			return
		}
		m.setDown(s, err)
		m.log.Warn("mcp session ended", "server", s.cfg.Name, "err", err, "retry_in", backoff.String())
		if !sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, m.opts.MaxBackoff)
	}
}

// serve waits on a live session: relists on list_changed, pings on a
// failed call, and returns why the session ended. It closes the session
// before returning.
func (m *Manager) serve(ctx context.Context, s *server, sess *sdk.ClientSession) error {
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }() // exits when the session closes; every return path below closes it
	for {
		select {
		case <-ctx.Done():
			sess.Close()
			<-done
			return ctx.Err()
		case err := <-done:
			if err == nil {
				err = errors.New("session closed by the server")
			}
			return fmt.Errorf("session ended: %w", err)
		case <-s.changed:
			if err := m.list(ctx, s, sess); err != nil {
				sess.Close()
				<-done
				return fmt.Errorf("relisting tools: %w", err)
			}
		case <-s.check:
			pctx, cancel := context.WithTimeout(ctx, m.opts.KeepAlive)
			err := sess.Ping(pctx, nil)
			cancel()
			if err != nil && ctx.Err() == nil {
				sess.Close()
				<-done
				return fmt.Errorf("ping after a failed call: %w", err)
			}
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (s *server) snapshot() []Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools
}

func (m *Manager) setDown(s *server, err error) {
	s.mu.Lock()
	had := len(s.tools) > 0 || s.session != nil
	s.session, s.tools, s.err = nil, nil, err
	s.mu.Unlock()
	if had && m.opts.OnChange != nil {
		m.opts.OnChange()
	}
}

// connect opens a session over the server's transport.
func (m *Manager) connect(ctx context.Context, s *server) (*sdk.ClientSession, error) {
	client := sdk.NewClient(&sdk.Implementation{Name: "chainproxy", Version: "1"}, &sdk.ClientOptions{
		KeepAlive: m.opts.KeepAlive,
		// A ping waits KeepAlive/2; one slow answer on a busy machine must
		// not drop a healthy session, two in a row do.
		KeepAliveFailureThreshold: 2,
		// Runs on the session's reader: it must not block, so it only
		// signals the supervisor, which relists.
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			select {
			case s.changed <- struct{}{}:
			default:
			}
		},
	})
	var t sdk.Transport
	if len(s.cfg.Command) > 0 {
		cmd := exec.Command(s.cfg.Command[0], s.cfg.Command[1:]...)
		cmd.Env = childEnv(s.cfg.Env)
		cmd.Stderr = &logWriter{log: m.log, server: s.cfg.Name}
		setParentDeathSignal(cmd)
		t = &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	} else {
		// The SDK caps each SSE event itself; capTransport caps the JSON
		// answers, which it reads whole.
		t = &sdk.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: m.httpClient(s.cfg), MaxRetries: 2, MaxEventSize: int(m.opts.MaxBody)}
	}
	cctx, cancel := context.WithTimeout(ctx, m.opts.ConnectTimeout)
	defer cancel()
	sess, err := client.Connect(cctx, t, nil)
	if err != nil {
		if re := origin.Cause(err); re != nil {
			// Only the status and host: the SDK's and Go's wrappings
			// name the target's whole URL, which its server chose.
			err = re
		}
		return nil, fmt.Errorf("connect: %w", err)
	}
	return sess, nil
}

// list fetches the tool list and publishes it with the session.
func (m *Manager) list(ctx context.Context, s *server, sess *sdk.ClientSession) error {
	lctx, cancel := context.WithTimeout(ctx, m.opts.ConnectTimeout)
	defer cancel()
	var tools []Tool
	used := map[string]bool{}
	for t, err := range m.allTools(lctx, s, sess) {
		if err != nil {
			return fmt.Errorf("list tools: %w", err)
		}
		schema, err := json.Marshal(t.InputSchema)
		if err != nil || string(schema) == "null" {
			schema = []byte(`{"type":"object"}`)
		}
		tt := Tool{Server: s.cfg.Name, Name: t.Name, Exposed: ExposedName(s.cfg.Name, t.Name), Description: t.Description, InputSchema: schema}
		if used[tt.Exposed] { // two names sanitised alike: the hash tells them apart
			tt.Exposed = withHash(tt.Exposed, t.Name)
		}
		used[tt.Exposed] = true
		if a := t.Annotations; a != nil {
			tt.ReadOnly = a.ReadOnlyHint
			tt.OpenWorld = a.OpenWorldHint != nil && *a.OpenWorldHint
		}
		tools = append(tools, tt)
	}
	sort.SliceStable(tools, func(i, j int) bool { return tools[i].Exposed < tools[j].Exposed })
	s.mu.Lock()
	s.session, s.tools, s.err = sess, tools, nil
	s.mu.Unlock()
	if m.opts.OnChange != nil {
		m.opts.OnChange()
	}
	return nil
}

// allTools pages through tools/list, each tool once. Unlike the SDK's
// Tools iterator it stops at a cursor it has already followed: servers
// exist whose nextCursor never advances (DeusData/codebase-memory-mcp#1247
// returns the same page and cursor forever), and following it would repeat
// the page until the attempt timed out and the server never came up.
func (m *Manager) allTools(ctx context.Context, s *server, sess *sdk.ClientSession) iter.Seq2[*sdk.Tool, error] {
	return func(yield func(*sdk.Tool, error) bool) {
		params := &sdk.ListToolsParams{}
		followed := map[string]bool{}
		seen := map[string]bool{}
		for {
			res, err := sess.ListTools(ctx, params)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, t := range res.Tools {
				if seen[t.Name] { // a repeated page
					continue
				}
				seen[t.Name] = true
				if !yield(t, nil) {
					return
				}
			}
			if res.NextCursor == "" {
				return
			}
			if followed[res.NextCursor] {
				m.log.Warn("mcp server repeats a tools/list cursor, list ends there", "server", s.cfg.Name)
				return
			}
			followed[res.NextCursor] = true
			params.Cursor = res.NextCursor
		}
	}
}

var notNameChar = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// maxName is OpenAI's limit on a function name.
const maxName = 64

// ExposedName is the name models see for a server's tool:
// server + "__" + tool, where every character outside [a-zA-Z0-9_-] becomes
// '_'. A name longer than 64 characters is cut and ends with '-' and 8 hex
// digits of the FNV-1a hash of the server's tool name, so that it stays
// unique and stable across restarts.
func ExposedName(server, tool string) string {
	n := server + "__" + notNameChar.ReplaceAllString(tool, "_")
	if len(n) > maxName {
		return withHash(n, tool)
	}
	return n
}

func withHash(n, tool string) string {
	h := fnv.New32a()
	h.Write([]byte(tool))
	suffix := fmt.Sprintf("-%08x", h.Sum32())
	if len(n) > maxName-len(suffix) {
		n = n[:maxName-len(suffix)]
	}
	return n + suffix
}

// baseEnvKeys are the only variables of the proxy's environment a child
// inherits: enough to find programs (PATH), a home and temp directory, and
// the locale. API keys, tokens and the proxy's own settings stay out unless
// the server's env lists them.
var baseEnvKeys = []string{"PATH", "HOME", "LANG", "TMPDIR"}

// childEnv builds a stdio child's environment. Reading the process
// environment here is the exception to "only config reads it": these keys
// are not configuration, they describe the machine the child runs on.
func childEnv(extra map[string]string) []string {
	env := make([]string, 0, len(baseEnvKeys)+len(extra))
	for _, k := range baseEnvKeys {
		if _, over := extra[k]; over {
			continue
		}
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// httpClient is the client of a url server: redirects stay on the
// configured origin (followed only with follow_redirects: same_origin), the
// configured headers go to that origin alone, and no answer is read past
// maxBody.
func (m *Manager) httpClient(cfg config.MCPServer) *http.Client {
	hc := origin.Client(m.opts.HTTPClient, cfg.FollowRedirects == config.FollowSameOrigin)
	base := hc.Transport
	if len(cfg.Headers) > 0 {
		u, _ := url.Parse(cfg.URL) // validated by config
		base = &origin.Headers{Base: base, Origin: u, Values: cfg.Headers}
	}
	hc.Transport = &capTransport{base: base, limit: m.opts.MaxBody}
	return hc
}

// DefaultMaxBody is Options.MaxBody when unset.
const DefaultMaxBody = 4 << 20

// ErrBodyTooLarge: a url server answered more than Options.MaxBody.
var ErrBodyTooLarge = errors.New("mcp server answer too large")

// capTransport stops reading a response body past limit bytes, so that a
// server answering without end costs the proxy limit bytes, not what it
// sent. Event streams are left whole: they are long-lived, and the SDK
// caps each of their events (StreamableClientTransport.MaxEventSize).
type capTransport struct {
	base  http.RoundTripper
	limit int64
}

func (c *capTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	base := c.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(r)
	if err != nil || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, err
	}
	resp.Body = &capBody{ReadCloser: resp.Body, limit: c.limit}
	return resp, nil
}

// capBody fails with ErrBodyTooLarge once more than limit bytes came.
type capBody struct {
	io.ReadCloser
	limit, read int64
}

func (b *capBody) Read(p []byte) (int, error) {
	if b.read > b.limit {
		return 0, fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, b.limit)
	}
	if room := b.limit + 1 - b.read; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	if b.read > b.limit {
		return 0, fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, b.limit)
	}
	return n, err
}

// logWriter turns a child's stderr into debug log lines: servers log
// there, and it may contain paths or arguments.
type logWriter struct {
	log    *slog.Logger
	server string
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.log.Debug("mcp server stderr", "server", w.server, "line", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
