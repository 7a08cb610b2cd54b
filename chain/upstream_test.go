package chain_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/chain/node"
	"chainproxy/config"
	"chainproxy/internal/nodetest"
	"chainproxy/store"
	"chainproxy/tools"
)

// upstream is a backend that answers every call with one chunk carrying
// finish, and, when caps is set, describes its model like Ollama's
// /api/show.
type upstream struct {
	finish string
	caps   []string // nil: Describe reports nothing
	err    error    // Describe's error
	// maxWindow is the longest window Describe reports for the model.
	maxWindow int

	mu        sync.Mutex
	reqs      []node.Request
	described int // Describe calls
}

func (u *upstream) Chat(_ context.Context, req *node.Request, fn func(node.Chunk) error) error {
	u.mu.Lock()
	u.reqs = append(u.reqs, *req)
	u.mu.Unlock()
	return fn(node.Chunk{Content: "words", FinishReason: u.finish, Usage: &chain.Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}})
}

func (u *upstream) Probe(context.Context) error { return nil }

func (u *upstream) Describe(context.Context) (node.ModelInfo, error) {
	u.mu.Lock()
	u.described++
	u.mu.Unlock()
	return node.ModelInfo{Capabilities: u.caps, MaxWindow: u.maxWindow}, u.err
}

func (u *upstream) requests() []node.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.reqs)
}

const upstreamConfig = `
nodes:
  - {name: OL1, provider: mock, mock: {turns: [{content: x}]}}
  - {name: M1, provider: mock, mock: {turns: [{content: x}]}, keep_alive: "-1"}
  - {name: M2, provider: mock, mock: {turns: [{content: x}]}, keep_alive: "0"}
chain:
  simple_node: OL1
`

// newUpstreamEngine builds an engine whose nodes are the given backends,
// with the built-in tools over an empty workspace.
func newUpstreamEngine(t *testing.T, nodes map[string]*upstream, edit func(*config.Config)) *chain.Engine {
	t.Helper()
	cfg, err := config.Parse([]byte(upstreamConfig))
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(cfg)
	}
	cfg.Tools.Root = t.TempDir()
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The fakes stand for nodes of any provider: an edit may make one an
	// Ollama node, to see what the engine makes of an Ollama server's words.
	up := byName(t, nodes)
	providers := map[string]node.Provider{config.ProviderMock: up, config.ProviderOllama: up, config.ProviderOpenAI: up}
	mem := store.NewMemory(100, 10)
	e, err := chain.New(cfg, chain.Deps{Nodes: nodetest.Build(t, cfg, providers), Tools: reg, Guard: antiloop.NewGuard(mem, time.Minute, time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func runModel(t *testing.T, e *chain.Engine, req *chain.RunRequest) (*chain.Result, error) {
	t.Helper()
	req.TraceID = "t"
	req.Conversation = t.Name()
	if req.Messages == nil {
		req.Messages = []chain.Message{{Role: "user", Content: "hi"}}
	}
	return e.Run(context.Background(), req, func(chain.Event) error { return nil })
}

func TestFinishReasonReachesTheClient(t *testing.T) {
	tests := []struct {
		name       string
		model      string
		finish     map[string]string // node → upstream finish reason
		want       string
		wantStages []string
	}{
		{"relay length", "OL1", map[string]string{"OL1": "length"}, "length", []string{"length"}},
		{"relay stop", "OL1", map[string]string{"OL1": "stop"}, "stop", []string{"stop"}},
		{"relay content_filter", "OL1", map[string]string{"OL1": "content_filter"}, "content_filter", []string{"content_filter"}},
		{"simple length", chain.ModelSimple, map[string]string{"OL1": "length"}, "length", []string{"length"}},
		{"reflexive: the answering stage's reason", chain.ModelReflexive, map[string]string{"OL1": "stop", "M1": "stop", "M2": "length"}, "length", []string{"stop", "stop", "length"}},
		{"reflexive: an earlier stage cut stays in the trace", chain.ModelReflexive, map[string]string{"OL1": "length", "M1": "stop", "M2": "stop"}, "stop", []string{"length", "stop", "stop"}},
		{"a tool_calls reason without calls is a stop", "OL1", map[string]string{"OL1": "tool_calls"}, "stop", []string{"tool_calls"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := map[string]*upstream{}
			for _, n := range []string{"OL1", "M1", "M2"} {
				nodes[n] = &upstream{finish: tt.finish[n]}
			}
			res, err := runModel(t, newUpstreamEngine(t, nodes, nil), &chain.RunRequest{Model: tt.model})
			if err != nil {
				t.Fatal(err)
			}
			if res.FinishReason != tt.want {
				t.Errorf("FinishReason = %q, want %q", res.FinishReason, tt.want)
			}
			var got []string
			for _, s := range res.Trace.Stages {
				got = append(got, s.FinishReason)
			}
			if !slices.Equal(got, tt.wantStages) {
				t.Errorf("stage finish reasons = %q, want %q", got, tt.wantStages)
			}
		})
	}
}

func TestToolsFollowCapabilities(t *testing.T) {
	clientTool := []chain.Tool{{Name: "lookup", Parameters: []byte(`{"type":"object"}`)}}
	tests := []struct {
		name      string
		caps      []string // what the server reports
		override  []string // config capabilities
		client    bool
		wantTools int
		wantErr   error
		wantNote  bool
	}{
		{"tools reported", []string{"completion", "tools"}, nil, false, 3, nil, false},
		{"nothing reported: assumed", nil, nil, false, 3, nil, false},
		{"no tools: runs without", []string{"completion"}, nil, false, 0, nil, true},
		{"config overrides the server", []string{"completion"}, []string{"tools"}, false, 3, nil, false},
		{"client tools to a no-tools node", []string{"completion"}, nil, true, 0, node.ErrToolsUnsupported, false},
		{"client tools to a tools node", []string{"completion", "tools"}, nil, true, 1, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ol1 := &upstream{caps: tt.caps}
			nodes := map[string]*upstream{"OL1": ol1, "M1": {}, "M2": {}}
			e := newUpstreamEngine(t, nodes, func(c *config.Config) { c.Nodes[0].Capabilities = tt.override })
			if err := e.Probe(context.Background(), "OL1"); err != nil {
				t.Fatal(err)
			}
			req := &chain.RunRequest{Model: chain.ModelSimple}
			if tt.client {
				req.ClientTools = clientTool
			}
			res, err := runModel(t, e, req)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Run error = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				if !strings.Contains(err.Error(), "node OL1") {
					t.Errorf("error %q does not name the node", err)
				}
				if len(ol1.requests()) != 0 {
					t.Error("the request went upstream anyway")
				}
				return
			}
			if got := len(ol1.requests()[0].Tools); got != tt.wantTools {
				t.Errorf("offered %d tools, want %d", got, tt.wantTools)
			}
			note := slices.ContainsFunc(res.Trace.Reasons, func(r string) bool { return strings.Contains(r, "cannot take tools") })
			if note != tt.wantNote {
				t.Errorf("reasons %q: note about tools = %v, want %v", res.Trace.Reasons, note, tt.wantNote)
			}
		})
	}
}

// TestCapabilitiesReadWhenUnknown: a node not probed yet (down at startup)
// is described at its first request.
func TestCapabilitiesReadWhenUnknown(t *testing.T) {
	ol1 := &upstream{caps: []string{"completion"}}
	e := newUpstreamEngine(t, map[string]*upstream{"OL1": ol1, "M1": {}, "M2": {}}, nil)
	if _, known := e.Capabilities("OL1"); known {
		t.Fatal("capabilities known before any probe or request")
	}
	if _, err := runModel(t, e, &chain.RunRequest{Model: chain.ModelSimple}); err != nil {
		t.Fatal(err)
	}
	if n := len(ol1.requests()[0].Tools); n != 0 {
		t.Errorf("offered %d tools to a node that reports none", n)
	}
	if caps, known := e.Capabilities("OL1"); !known || !slices.Equal(caps, []string{"completion"}) {
		t.Errorf("Capabilities = %q, %v; want [completion], true", caps, known)
	}
}

// TestCapabilitiesAskedOnce: a server that reports no capabilities (an
// OpenAI-compatible /v1/models), or cannot be asked, is asked at the first
// request, not at every one; the readiness probe asks again.
func TestCapabilitiesAskedOnce(t *testing.T) {
	for name, ol1 := range map[string]*upstream{
		"reports nothing": {},
		"fails":           {err: errors.New("GET /models: 404")},
	} {
		t.Run(name, func(t *testing.T) {
			e := newUpstreamEngine(t, map[string]*upstream{"OL1": ol1, "M1": {}, "M2": {}}, nil)
			for range 3 {
				if _, err := runModel(t, e, &chain.RunRequest{Model: chain.ModelSimple}); err != nil {
					t.Fatal(err)
				}
			}
			if n := len(ol1.requests()[2].Tools); n == 0 {
				t.Error("no tools offered to a node nobody can tell about")
			}
			_ = e.Probe(context.Background(), "OL1")
			ol1.mu.Lock()
			defer ol1.mu.Unlock()
			if ol1.described != 2 {
				t.Errorf("Describe called %d times for 3 requests and a probe, want 2", ol1.described)
			}
		})
	}
}

// TestCapabilitiesAfterModelAppears: a node whose model was missing (pulled
// or created while the proxy runs) is asked again at its next request, not
// taken for a model with tools for good (Ollama refuses tools to one
// without).
func TestCapabilitiesAfterModelAppears(t *testing.T) {
	ol1 := &upstream{err: &node.ModelNotFoundError{Node: "OL1", Model: "qwen3:1.7b", BaseURL: "http://h:11434", Hint: "ollama pull qwen3:1.7b"}}
	e := newUpstreamEngine(t, map[string]*upstream{"OL1": ol1, "M1": {}, "M2": {}}, nil)
	if err := e.Probe(context.Background(), "OL1"); !errors.Is(err, node.ErrModelNotFound) {
		t.Fatalf("Probe = %v, want ErrModelNotFound", err)
	}
	ol1.mu.Lock()
	ol1.err, ol1.caps = nil, []string{"completion"} // ollama pull, done
	ol1.mu.Unlock()
	if _, err := runModel(t, e, &chain.RunRequest{Model: chain.ModelSimple}); err != nil {
		t.Fatal(err)
	}
	if n := len(ol1.requests()[0].Tools); n != 0 {
		t.Errorf("offered %d tools to a model that takes none", n)
	}
}

// TestWindowModelShorterThanDefault: an Ollama node without a configured
// window runs at Ollama's default, or at its model's trained length when
// that is shorter (Ollama caps num_ctx there): prompts are fitted to that,
// not refused once at 4,096 first.
func TestWindowModelShorterThanDefault(t *testing.T) {
	for _, tc := range []struct{ max, want int }{{0, 4096}, {2048, 2048}, {32768, 4096}} {
		ol1 := &upstream{caps: []string{"completion"}, maxWindow: tc.max}
		e := newUpstreamEngine(t, map[string]*upstream{"OL1": ol1, "M1": {}, "M2": {}}, func(c *config.Config) {
			c.Nodes[0].Provider, c.Nodes[0].BaseURL, c.Nodes[0].Model = config.ProviderOllama, "http://127.0.0.1:1", "tiny"
		})
		if err := e.Probe(context.Background(), "OL1"); err != nil {
			t.Fatal(err)
		}
		if got := e.Window(e.Nodes()[0]); got != tc.want {
			t.Errorf("trained for %d: window %d, want %d", tc.max, got, tc.want)
		}
	}
}

func TestProbeReportsMissingModel(t *testing.T) {
	missing := &node.ModelNotFoundError{Node: "OL1", Model: "qwen3:1.7b", BaseURL: "http://h:11434", Hint: "ollama pull qwen3:1.7b"}
	e := newUpstreamEngine(t, map[string]*upstream{"OL1": {err: missing}, "M1": {}, "M2": {}}, nil)
	err := e.Probe(context.Background(), "OL1")
	if !errors.Is(err, node.ErrModelNotFound) {
		t.Fatalf("Probe = %v, want ErrModelNotFound", err)
	}
	if want := `model "qwen3:1.7b" not found on http://h:11434: ollama pull qwen3:1.7b`; err.Error() != want {
		t.Errorf("Probe = %q, want %q", err, want)
	}
}

func TestKeepAlive(t *testing.T) {
	minute := time.Minute
	tests := []struct {
		name   string
		model  string
		client *time.Duration
		want   map[string]*time.Duration // node → keep_alive sent
	}{
		{"relay: the client's", "M2", &minute, map[string]*time.Duration{"M2": &minute}},
		{"relay: the node's when the client sets none", "M2", nil, map[string]*time.Duration{"M2": new(time.Duration)}},
		{"simple: the client's", chain.ModelSimple, &minute, map[string]*time.Duration{"OL1": &minute}},
		{"chain: each node's own", chain.ModelReflexive, &minute, map[string]*time.Duration{"OL1": nil, "M1": ptr(time.Duration(-1)), "M2": new(time.Duration)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := map[string]*upstream{"OL1": {}, "M1": {}, "M2": {}}
			if _, err := runModel(t, newUpstreamEngine(t, nodes, nil), &chain.RunRequest{Model: tt.model, KeepAlive: tt.client}); err != nil {
				t.Fatal(err)
			}
			for node, want := range tt.want {
				got := nodes[node].requests()[0].KeepAlive
				if (got == nil) != (want == nil) || got != nil && *got != *want {
					t.Errorf("%s keep_alive = %v, want %v", node, deref(got), deref(want))
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func deref(d *time.Duration) any {
	if d == nil {
		return nil
	}
	return *d
}
