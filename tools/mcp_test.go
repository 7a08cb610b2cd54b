package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"chainproxy/config"
	"chainproxy/tools/mcp"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveEnv, when set, makes the test binary an MCP server on stdio: the
// stdio transport is tested against a real child process built from the
// same SDK.
const serveEnv = "CHAINPROXY_MCP_TEST_SERVE"

// delayEnv, when set to a duration, makes that server wait before it
// answers initialize, as a server that installs or indexes first does.
const delayEnv = "CHAINPROXY_MCP_TEST_DELAY"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) == "1" {
		if d, err := time.ParseDuration(os.Getenv(delayEnv)); err == nil {
			time.Sleep(d)
		}
		srv := newTestServer(nil)
		if err := srv.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var objectSchema = json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)

// newTestServer has one tool per behaviour under test. cancelled, when not
// nil, receives a value when a "block" call's context ends.
func newTestServer(cancelled chan<- struct{}) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	yes := true
	s.AddTool(&sdk.Tool{Name: "echo", Description: "Echo text.", InputSchema: objectSchema, Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var a struct{ Text string }
			if err := json.Unmarshal(req.Params.Arguments, &a); err != nil {
				return nil, err
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "echo: " + a.Text}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "search.web", Description: "Open world.", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &yes}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{
				&sdk.TextContent{Text: "found"},
				&sdk.ImageContent{MIMEType: "image/png", Data: make([]byte, 1234)},
			}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "fail", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "no such row"}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "block", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			<-ctx.Done()
			if cancelled != nil {
				cancelled <- struct{}{}
			}
			return nil, ctx.Err()
		})
	s.AddTool(&sdk.Tool{Name: "env", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Join(os.Environ(), "\n")}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "pid", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strconv.Itoa(os.Getpid())}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "grow", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			s.AddTool(&sdk.Tool{Name: "grown", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "grown"}}}, nil
			})
			return &sdk.CallToolResult{}, nil
		})
	// The schema zod 4 emits for z.object({host: z.hostname()}) (regexes.js
	// hostname): JSON Schema patterns are ECMA-262, and this one opens
	// with a lookahead, which Go's RE2 syntax lacks.
	s.AddTool(&sdk.Tool{Name: "resolve", InputSchema: json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"host":{"type":"string","format":"hostname","pattern":"^(?=.{1,253}\\.?$)[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\\.[a-zA-Z0-9](?:[-0-9a-zA-Z]{0,61}[0-9a-zA-Z])?)*\\.?$"}},"required":["host"],"additionalProperties":false}`), Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var a struct{ Host string }
			if err := json.Unmarshal(req.Params.Arguments, &a); err != nil {
				return nil, err
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: a.Host + " is 192.0.2.1"}}}, nil
		})
	// Answers in structuredContent alone, with "content": [], as servers
	// do (Airtable's list_tables_for_base, dust-tt/dust#26388): legal, the
	// spec only says a text copy SHOULD be there.
	s.AddTool(&sdk.Tool{Name: "structured", InputSchema: json.RawMessage(`{"type":"object","properties":{"fail":{"type":"boolean"}}}`), Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var a struct{ Fail bool }
			if err := json.Unmarshal(req.Params.Arguments, &a); err != nil {
				return nil, err
			}
			if a.Fail {
				return &sdk.CallToolResult{Content: []sdk.Content{}, StructuredContent: map[string]any{"error": "base not found"}, IsError: true}, nil
			}
			return &sdk.CallToolResult{Content: []sdk.Content{}, StructuredContent: map[string]any{"tables": []string{"Tasks", "People"}}}, nil
		})
	// Answers the W3C trace context it was sent in params._meta, one key
	// a line, as a traced server would extract it.
	s.AddTool(&sdk.Tool{Name: "tracecontext", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			text := fmt.Sprintf("traceparent=%v\ntracestate=%v", req.Params.Meta["traceparent"], req.Params.Meta["tracestate"])
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "die", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			os.Exit(3)
			return nil, nil
		})
	return s
}

// fastOpts detect a dead server and reconnect quickly, so the tests wait
// little; they poll for the state they expect rather than sleeping. Start
// returns once the servers are up: a minute is room for a -race child
// starting on a loaded machine, not a wait.
func fastOpts() mcp.Options {
	return mcp.Options{KeepAlive: 300 * time.Millisecond, MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, StartTimeout: time.Minute}
}

// eventually polls cond until it holds or a minute passes: a server
// restarted with backoff, or one that answers after a second, takes a few
// seconds on a loaded machine, and the limit must hold at ten times that.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// httpServer serves newTestServer over streamable HTTP; down makes every
// request fail with 503, as a crashed server behind a proxy would.
func httpServer(t *testing.T, cancelled chan<- struct{}) (*httptest.Server, *atomic.Bool, *sdk.Server) {
	srv := newTestServer(cancelled)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	var down atomic.Bool
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		if r.Header.Get("X-Test") != "yes" {
			t.Errorf("request without the configured header: %v", r.Header)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts, &down, srv
}

func stdioServer(name string, env map[string]string) config.MCPServer {
	exe, _ := os.Executable()
	e := map[string]string{serveEnv: "1"}
	for k, v := range env {
		e[k] = v
	}
	return config.MCPServer{Name: name, Command: []string{exe}, Env: e, ReadOnlyTools: []string{"pid"}}
}

func newMCPRegistry(t *testing.T, timeout time.Duration, servers ...config.MCPServer) *Registry {
	t.Helper()
	r, err := New(config.Tools{Root: t.TempDir(), Timeout: timeout}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.StartMCP(t.Context(), servers, fastOpts())
	t.Cleanup(r.Close)
	return r
}

func TestMCPListAndCall(t *testing.T) {
	ts, _, _ := httpServer(t, nil)
	for _, tc := range []struct {
		name   string
		server config.MCPServer
	}{
		{"stdio", stdioServer("loc", nil)},
		{"http", config.MCPServer{Name: "web", URL: ts.URL, Headers: map[string]string{"X-Test": "yes"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newMCPRegistry(t, 5*time.Second, tc.server)
			p := tc.server.Name + "__"
			kinds := map[string]Kind{}
			for _, s := range r.Specs() {
				kinds[s.Name] = s.Kind
			}
			for name, want := range map[string]Kind{
				p + "echo": Deterministic, p + "search_web": Volatile, p + "fail": Writing, p + "die": Writing,
			} {
				if got, ok := kinds[name]; !ok || got != want {
					t.Errorf("kind of %s = %v (offered %v), want %v; specs %v", name, got, ok, want, r.Names())
				}
			}
			if tc.name == "stdio" && kinds[p+"pid"] != Deterministic {
				t.Errorf("read_only_tools override: kind of %spid = %v, want deterministic", p, kinds[p+"pid"])
			}
			ctx := t.Context()
			got, err := r.Call(ctx, p+"echo", []byte(`{"text":"hi"}`))
			if err != nil || got != "echo: hi" {
				t.Errorf("Call(echo) = %q, %v; want %q", got, err, "echo: hi")
			}
			if err := r.Check(p+"echo", []byte(`{}`)); !errors.Is(err, ErrBadArguments) {
				t.Errorf("Check(echo, {}) = %v, want ErrBadArguments (server schema)", err)
			}
			got, err = r.Call(ctx, p+"search_web", nil)
			if want := "found\n[image image/png, 1234 bytes]"; err != nil || got != want {
				t.Errorf("Call(search_web) = %q, %v; want %q", got, err, want)
			}
			_, err = r.Call(ctx, p+"fail", nil)
			if !errors.Is(err, mcp.ErrToolError) || !strings.Contains(err.Error(), "no such row") {
				t.Errorf("Call(fail) error = %v, want ErrToolError with the server's text", err)
			}
			st := r.MCPStatus()
			if len(st) != 1 || st[0].Status != "ok" {
				t.Errorf("MCPStatus() = %+v, want one ok", st)
			}
		})
	}
}

func TestMCPTimeoutAndCancel(t *testing.T) {
	cancelled := make(chan struct{}, 4)
	ts, _, _ := httpServer(t, cancelled)
	r := newMCPRegistry(t, 200*time.Millisecond, config.MCPServer{Name: "web", URL: ts.URL, Headers: map[string]string{"X-Test": "yes"}}, stdioServer("loc", nil))

	t.Run("timeout", func(t *testing.T) {
		for _, name := range []string{"web__block", "loc__block"} {
			_, err := r.Call(t.Context(), name, nil)
			if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out") {
				t.Errorf("Call(%s) = %v, want a tools.timeout error", name, err)
			}
		}
		select { // the HTTP server saw notifications/cancelled for web__block
		case <-cancelled:
		case <-time.After(10 * time.Second):
			t.Error("the server's handler was not cancelled after the timeout")
		}
	})
	t.Run("request cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { _, err := r.Call(ctx, "web__block", nil); errc <- err }() // exits when Call returns
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("Call after cancel = %v, want context.Canceled", err)
		}
	})
}

func TestMCPListChanged(t *testing.T) {
	ts, _, srv := httpServer(t, nil)
	r := newMCPRegistry(t, 5*time.Second, config.MCPServer{Name: "web", URL: ts.URL, Headers: map[string]string{"X-Test": "yes"}})
	v := r.ToolsVersion()
	srv.AddTool(&sdk.Tool{Name: "added", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "new"}}}, nil
	})
	eventually(t, "web__added offered", func() bool { _, ok := r.Lookup("web__added"); return ok })
	if r.ToolsVersion() == v {
		t.Errorf("ToolsVersion did not change with the tool set")
	}
	if got, err := r.Call(t.Context(), "web__added", nil); got != "new" || err != nil {
		t.Errorf("Call(web__added) = %q, %v; want new", got, err)
	}
	srv.RemoveTools("added")
	eventually(t, "web__added withdrawn", func() bool { _, ok := r.Lookup("web__added"); return !ok })
}

// TestMCPListChangedStdio: a stdio server that adds a tool (here, when
// asked) sends notifications/tools/list_changed and the tool is offered.
func TestMCPListChangedStdio(t *testing.T) {
	r := newMCPRegistry(t, 5*time.Second, stdioServer("loc", nil))
	if _, err := r.Call(t.Context(), "loc__grow", nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "loc__grown offered", func() bool { _, ok := r.Lookup("loc__grown"); return ok })
	if got, err := r.Call(t.Context(), "loc__grown", nil); got != "grown" || err != nil {
		t.Errorf("Call(loc__grown) = %q, %v; want grown", got, err)
	}
}

func TestMCPServerDiesAndComesBack(t *testing.T) {
	t.Run("stdio", func(t *testing.T) {
		r := newMCPRegistry(t, 5*time.Second, stdioServer("loc", nil))
		pid1, err := r.Call(t.Context(), "loc__pid", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Call(t.Context(), "loc__die", nil); err == nil {
			t.Errorf("Call(die) succeeded, want the connection error")
		}
		var pid2 string
		eventually(t, "a restarted server", func() bool {
			pid2, err = r.Call(t.Context(), "loc__pid", nil)
			return err == nil && pid2 != pid1
		})
	})
	t.Run("http", func(t *testing.T) {
		ts, down, _ := httpServer(t, nil)
		r := newMCPRegistry(t, 5*time.Second, config.MCPServer{Name: "web", URL: ts.URL, Headers: map[string]string{"X-Test": "yes"}})
		down.Store(true)
		eventually(t, "web tools withdrawn", func() bool { _, ok := r.Lookup("web__echo"); return !ok })
		if u := r.Unavailable(); len(u) != 1 || u[0] != "web" {
			t.Errorf("Unavailable() = %v, want [web]", u)
		}
		if st := r.MCPStatus(); st[0].Status == "ok" {
			t.Errorf("MCPStatus() = %+v while down, want an error", st)
		}
		if _, err := r.Call(t.Context(), "web__echo", []byte(`{"text":"x"}`)); !errors.Is(err, ErrUnknownTool) {
			t.Errorf("Call while down = %v, want ErrUnknownTool (not offered)", err)
		}
		down.Store(false)
		eventually(t, "web tools back", func() bool { _, ok := r.Lookup("web__echo"); return ok })
		if got, err := r.Call(t.Context(), "web__echo", []byte(`{"text":"x"}`)); got != "echo: x" || err != nil {
			t.Errorf("Call after recovery = %q, %v", got, err)
		}
	})
}

func TestMCPChildEnvAndShutdown(t *testing.T) {
	t.Setenv("CHAINPROXY_TEST_SECRET", "s3cret")
	r, err := New(config.Tools{Root: t.TempDir(), Timeout: 5 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.StartMCP(t.Context(), []config.MCPServer{stdioServer("loc", map[string]string{"LOG_LEVEL": "warn"})}, fastOpts())
	env, err := r.Call(t.Context(), "loc__env", nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(env, "s3cret") {
		t.Errorf("the child saw the proxy's secret: %q", env)
	}
	if !strings.Contains(env, "LOG_LEVEL=warn") || !strings.Contains(env, "PATH=") {
		t.Errorf("child env = %q, want PATH and the configured LOG_LEVEL", env)
	}
	pidText, err := r.Call(t.Context(), "loc__pid", nil)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(pidText)
	r.Close()
	// The SDK waits for the child, so after Close it is reaped: no process
	// with that pid is left, not even a zombie.
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("child %d still exists after Close (kill 0: %v)", pid, err)
	}
	if st := r.MCPStatus(); st[0].Status == "ok" {
		t.Errorf("MCPStatus after Close = %+v, want not ok", st)
	}
}

// TestMCPToolSchemaECMAPattern: a tool whose schema has a pattern RE2
// cannot compile (a lookahead, as zod's hostname, duration and emoji
// patterns have) is offered all the same; its server checks the pattern.
func TestMCPToolSchemaECMAPattern(t *testing.T) {
	r := newMCPRegistry(t, 5*time.Second, stdioServer("loc", nil))
	if _, ok := r.Lookup("loc__resolve"); !ok {
		t.Fatalf("loc__resolve not offered; tools: %v", r.Names())
	}
	if got, err := r.Call(t.Context(), "loc__resolve", []byte(`{"host":"example.com"}`)); err != nil || got != "example.com is 192.0.2.1" {
		t.Errorf("Call(resolve) = %q, %v", got, err)
	}
	// The rest of the schema is still checked here.
	if err := r.Check("loc__resolve", []byte(`{"host":42}`)); !errors.Is(err, ErrBadArguments) {
		t.Errorf("Check(resolve, host 42) = %v, want ErrBadArguments", err)
	}
}

// TestMCPStructuredContentOnly: a result with no content blocks but a
// structuredContent reaches the model as that JSON, not as nothing.
func TestMCPStructuredContentOnly(t *testing.T) {
	r := newMCPRegistry(t, 5*time.Second, stdioServer("loc", nil))
	got, err := r.Call(t.Context(), "loc__structured", nil)
	if want := `{"tables":["Tasks","People"]}`; err != nil || got != want {
		t.Errorf("Call(structured) = %q, %v; want %q", got, err, want)
	}
	_, err = r.Call(t.Context(), "loc__structured", []byte(`{"fail":true}`))
	if !errors.Is(err, mcp.ErrToolError) || !strings.Contains(err.Error(), "base not found") {
		t.Errorf("Call(structured, fail) = %v, want ErrToolError with the structured error", err)
	}
}

// TestMCPSlowServerConnects: a server slower to answer initialize than
// StartTimeout (npx -y or uvx installing on first run takes tens of
// seconds) is not ready when Start returns, but connects in the background
// instead of being killed and restarted at every attempt.
func TestMCPSlowServerConnects(t *testing.T) {
	r, err := New(config.Tools{Root: t.TempDir(), Timeout: 5 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := fastOpts()
	opts.StartTimeout = 200 * time.Millisecond
	r.StartMCP(t.Context(), []config.MCPServer{stdioServer("slow", map[string]string{delayEnv: "1s"})}, opts)
	t.Cleanup(r.Close)
	if _, ok := r.Lookup("slow__echo"); ok {
		t.Fatalf("slow__echo offered before the server answered")
	}
	eventually(t, "the slow server's tools", func() bool { _, ok := r.Lookup("slow__echo"); return ok })
}
