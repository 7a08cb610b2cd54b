// Package config holds the proxy's configuration: the YAML file format that is
// the public contract (keys, defaults, validation), loaded once at startup.
//
// It is plain data. No other package reads the environment or the file system
// for settings; they receive the values they need from a loaded Config.
package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
)

// Providers are the node backends the proxy can talk to.
const (
	ProviderOllama = "ollama"
	ProviderOpenAI = "openai"
	ProviderMock   = "mock"
)

// Render modes for chain.render.
const (
	RenderNone    = ""
	RenderDetails = "details"
)

// Config is the whole configuration file.
type Config struct {
	Server   Server   `yaml:"server" json:"server"`
	Nodes    []Node   `yaml:"nodes" json:"nodes"`
	Chain    Chain    `yaml:"chain" json:"chain"`
	Classify Classify `yaml:"classify" json:"classify"`
	Tools    Tools    `yaml:"tools" json:"tools"`
	Antiloop Antiloop `yaml:"antiloop" json:"antiloop"`
	Store    Store    `yaml:"store" json:"store"`
	Memory   Memory   `yaml:"memory" json:"memory"`
	// ModelAliases maps model-name patterns (Go's path.Match globs) to the
	// model they stand for: a chain model, a node or a node's model. Agent
	// clients ask for their own model names (Claude Code's claude-*).
	ModelAliases map[string]string `yaml:"model_aliases" json:"model_aliases,omitempty"`
	// Telemetry exports the chain's spans over OTLP (docs/telemetry.md).
	Telemetry Telemetry `yaml:"telemetry" json:"telemetry"`
	// Admission tunes the admission shared by replicas through Redis.
	Admission Admission `yaml:"admission" json:"admission"`

	// replaceNodes marks the defaults, whose nodes a file replaces whole.
	replaceNodes bool
	// file and lines say where the file set each key, for errors found
	// after loading (see Where).
	file  string
	lines map[string]int
}

// Server configures the HTTP listener.
type Server struct {
	// Addr is the listen address, host:port.
	Addr string `yaml:"addr" json:"addr"`
	// APIKeys are the accepted Bearer keys; empty means no authentication.
	APIKeys []string `yaml:"api_keys" json:"api_keys"`
	// MaxBodyBytes caps a request body; larger bodies get 413.
	MaxBodyBytes int64 `yaml:"max_body_bytes" json:"max_body_bytes"`
	// ShutdownTimeout is how long in-flight requests may finish after SIGTERM.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout" json:"shutdown_timeout"`
	// ReadTimeout bounds reading a request body: a client that sends it
	// slower is cut off, so idle connections cannot hold memory.
	ReadTimeout time.Duration `yaml:"read_timeout" json:"read_timeout"`
	// MaxMessages caps the messages of one request.
	MaxMessages int `yaml:"max_messages" json:"max_messages"`
	// CORSOrigins are the web origins (scheme://host[:port]) allowed to
	// call the API from a browser; "*" allows any.
	CORSOrigins []string `yaml:"cors_origins" json:"cors_origins"`
	// AllowedHosts are Host header values accepted besides loopback names
	// when bound to loopback (DNS rebinding defence).
	AllowedHosts []string `yaml:"allowed_hosts" json:"allowed_hosts"`
	// AllowUnauthenticated lets a non-loopback addr start with no api_keys.
	AllowUnauthenticated bool `yaml:"allow_unauthenticated" json:"allow_unauthenticated"`
	// PublicMetrics serves /metrics and /readyz without a key when
	// api_keys are set.
	PublicMetrics bool `yaml:"public_metrics" json:"public_metrics"`
	// AdminKeys are Bearer keys accepted as api_keys are, that also see
	// every caller's traces (the cockpit's trace list); an api_key sees
	// its own. They need api_keys: without keys, every caller sees all.
	AdminKeys []string `yaml:"admin_keys" json:"admin_keys"`
}

// Node is one model endpoint: a provider, a base URL and a model name.
type Node struct {
	Name     string `yaml:"name" json:"name"`
	Provider string `yaml:"provider" json:"provider"`
	BaseURL  string `yaml:"base_url" json:"base_url"`
	// BaseURLs are the hosts of a node served by several (the same model
	// on two Ollama boxes): each call goes to the one with the fewest calls
	// in flight. base_url is the one-host form; a node sets one of them.
	BaseURLs []string `yaml:"base_urls" json:"base_urls,omitempty"`
	Model    string   `yaml:"model" json:"model"`
	APIKey   string   `yaml:"api_key" json:"api_key,omitempty"`
	// TextToolCalls parses tool calls that a small model writes as text
	// (<tool_call>{…}</tool_call>, a bare JSON call, [TOOL:name:{json}])
	// into real calls. Nil means on: see TextCalls.
	TextToolCalls *bool `yaml:"text_tool_calls" json:"text_tool_calls,omitempty"`
	// Timeout bounds one whole upstream call. Zero (unset) is
	// DefaultCallTimeout for a call answered whole and no bound for a
	// streamed one, which a slow model may write for many minutes: see
	// CallTimeout.
	Timeout time.Duration `yaml:"timeout" json:"timeout"`
	// FirstByteTimeout bounds the wait for an upstream call's first byte
	// (a model loading, a long prompt read); default timeout, else
	// DefaultCallTimeout.
	FirstByteTimeout time.Duration `yaml:"first_byte_timeout" json:"first_byte_timeout"`
	// IdleTimeout bounds the longest silence of an upstream call after its
	// first byte; default timeout, else DefaultCallTimeout.
	IdleTimeout time.Duration `yaml:"idle_timeout" json:"idle_timeout"`
	// ConnectTimeout bounds establishing the connection; a node that does
	// not connect in time is treated as offline.
	ConnectTimeout time.Duration `yaml:"connect_timeout" json:"connect_timeout"`
	// OfflineFor is how long a host that failed to connect is skipped
	// before a call tries it again (default 30s).
	OfflineFor time.Duration `yaml:"offline_for" json:"offline_for"`
	// MaxConcurrency limits calls in flight to the node; 0 is unlimited.
	// Nil means the provider default: 1 for ollama, unlimited otherwise.
	MaxConcurrency *int `yaml:"max_concurrency" json:"max_concurrency"`
	// MaxQueue is how many requests may wait for the node before 429.
	MaxQueue int `yaml:"max_queue" json:"max_queue"`
	// RetryBackoff are the waits between retries of batch requests.
	RetryBackoff []time.Duration `yaml:"retry_backoff" json:"retry_backoff"`
	// Mock is the script of a mock node.
	Mock *MockScript `yaml:"mock" json:"mock,omitempty"`
	// KeepAlive is how long an Ollama node keeps the model loaded after a
	// call, in Ollama's syntax: a duration ("5m"), seconds ("300"), "-1"
	// for ever, "0" to unload at once. Empty leaves Ollama's default.
	KeepAlive string `yaml:"keep_alive" json:"keep_alive,omitempty"`
	// KeepLoaded keeps an Ollama node's model loaded for good (its calls
	// and early loads are sent keep_alive -1), and the load scheduling
	// counts it as resident: for a small model every chain calls first,
	// which then never waits for a load.
	KeepLoaded bool `yaml:"keep_loaded" json:"keep_loaded,omitempty"`
	// Capabilities, when set, replace what the node's server reports of its
	// model ("tools", "completion", …), for servers that report nothing.
	Capabilities []string `yaml:"capabilities" json:"capabilities,omitempty"`
	// ContextWindow is the node's context window in tokens; 0 learns it
	// from the server (Ollama's /api/ps, else 4096; an OpenAI-compatible
	// /v1/models' max_model_len, else unknown: no fitting). An Ollama node
	// is sent it as options.num_ctx on every call.
	ContextWindow int `yaml:"context_window" json:"context_window,omitempty"`
	// MaxOutputBytes caps the content and reasoning of one model call: over
	// it the call is cancelled and finishes "length" (default 4 MiB).
	MaxOutputBytes int `yaml:"max_output_bytes" json:"max_output_bytes"`
}

// Hosts are the base URLs of the node's hosts: base_urls, else base_url.
func (n Node) Hosts() []string {
	if len(n.BaseURLs) > 0 {
		return n.BaseURLs
	}
	return []string{n.BaseURL}
}

// TextCalls reports whether the node's text tool calls are parsed: on
// unless text_tool_calls is false, since small models write them whatever
// they are served with.
func (n Node) TextCalls() bool { return n.TextToolCalls == nil || *n.TextToolCalls }

// DefaultCallTimeout bounds an upstream call answered whole, and the wait
// for a call's first byte and its silences, when the node does not say.
const DefaultCallTimeout = 120 * time.Second

// CallTimeout is the bound on one whole upstream call: timeout when set,
// else DefaultCallTimeout for a call answered whole and none (0) for a
// streamed one, whose first byte and silences are bounded on their own.
func (n Node) CallTimeout(streamed bool) time.Duration {
	if n.Timeout > 0 || streamed {
		return n.Timeout
	}
	return DefaultCallTimeout
}

// Concurrency is the node's effective concurrency limit (0 = unlimited).
func (n Node) Concurrency() int {
	if n.MaxConcurrency != nil {
		return *n.MaxConcurrency
	}
	if n.Provider == ProviderOllama {
		return 1
	}
	return 0
}

// MockScript scripts a mock node. It is data so that the demo, the tests and
// users can describe model behaviour without code.
type MockScript struct {
	// Turns are played in order, one per model call in a conversation
	// (counted as assistant messages after the last user message); the last
	// turn repeats when the conversation goes further.
	Turns []MockTurn `yaml:"turns" json:"turns"`
	// Scenarios replace Turns when the user's words (as the classifier
	// reads them: the last user message with words, blocks set aside)
	// contain When (case-insensitive); the first match wins.
	Scenarios []MockScenario `yaml:"scenarios" json:"scenarios,omitempty"`
	// Delay is waited before the first chunk of every call.
	Delay time.Duration `yaml:"delay" json:"delay,omitempty"`
	// ChunkDelay is waited between streamed content chunks.
	ChunkDelay time.Duration `yaml:"chunk_delay" json:"chunk_delay,omitempty"`
	// Offline makes the node refuse every call as a failed connection.
	Offline bool `yaml:"offline" json:"offline,omitempty"`
	// Final is the answer when the scripted turn asks for tools but the call
	// offers none (the chain's final call without tools); {user} and {tools}
	// (the number of tool results in the conversation) are replaced.
	Final string `yaml:"final" json:"final,omitempty"`
}

// MockScenario is an alternative script chosen by a word of the request.
type MockScenario struct {
	When string `yaml:"when" json:"when"`
	// System, when set, also requires the call's system message to
	// contain it: one node can then answer as a chain stage (whose role
	// prompt says so) and otherwise in simple mode. A scenario with
	// neither When nor System never applies.
	System string     `yaml:"system" json:"system,omitempty"`
	Turns  []MockTurn `yaml:"turns" json:"turns"`
}

// MockTurn is one scripted model response.
type MockTurn struct {
	// Content is the answer text; {user} is replaced by the user's words.
	Content string `yaml:"content" json:"content,omitempty"`
	// Reasoning is hidden thinking the model emits before its content.
	Reasoning string `yaml:"reasoning" json:"reasoning,omitempty"`
	// ToolCalls are the calls the model asks for in this turn.
	ToolCalls []MockToolCall `yaml:"tool_calls" json:"tool_calls,omitempty"`
	// Fail makes this call fail with the given upstream message (HTTP 500).
	Fail string `yaml:"fail" json:"fail,omitempty"`
}

// MockToolCall is a scripted tool call. RawArgs, when set, is sent verbatim
// (to script malformed arguments); otherwise Args is encoded as JSON.
type MockToolCall struct {
	ID      string         `yaml:"id" json:"id,omitempty"`
	Name    string         `yaml:"name" json:"name"`
	Args    map[string]any `yaml:"args" json:"args,omitempty"`
	RawArgs string         `yaml:"raw_args" json:"raw_args,omitempty"`
}

// Chain configures the reflexive chain.
type Chain struct {
	// Stages run in this order in reflexive mode.
	Stages []Stage `yaml:"stages" json:"stages"`
	// MaxTotalTurns is the global budget of model calls for one request.
	MaxTotalTurns int `yaml:"max_total_turns" json:"max_total_turns"`
	// SimpleNode answers simple-mode requests.
	SimpleNode string `yaml:"simple_node" json:"simple_node"`
	// ContextBudget caps, in characters, what a stage receives of earlier stages.
	ContextBudget int `yaml:"context_budget" json:"context_budget"`
	// ToolsShare is the share of a stage's node's window its tool
	// definitions may take (chain.tools_share): beyond it, schemas are
	// compacted, then the tools least relevant to the question are
	// withheld behind find_tools.
	ToolsShare float64 `yaml:"tools_share" json:"tools_share"`
	// Render "details" prefixes replies with one collapsible block per stage.
	Render string `yaml:"render" json:"render"`
	// Traces is how many recent traces are kept for /v1/chain/traces/{id}.
	Traces int `yaml:"traces" json:"traces"`
	// ResumeTTL is how long a chain waiting for a client's tool results
	// can be resumed (chain.resume_ttl).
	ResumeTTL time.Duration `yaml:"resume_ttl" json:"resume_ttl"`
}

// Stage is one step of the chain.
type Stage struct {
	Node     string `yaml:"node" json:"node"`
	MaxTurns int    `yaml:"max_turns" json:"max_turns"`
	Tools    bool   `yaml:"tools" json:"tools"`
	// Prompt replaces the default role prompt of the stage's position.
	Prompt string `yaml:"prompt" json:"prompt,omitempty"`
}

// Classify tunes the simple/reflexive classifier.
type Classify struct {
	// ShortChars: the user's words shorter than this are short.
	ShortChars int `yaml:"short_chars" json:"short_chars"`
	// LongChars: the user's words at least this long are reflexive.
	LongChars int `yaml:"long_chars" json:"long_chars"`
	// Keywords replace the default complex keywords when set.
	Keywords []string `yaml:"keywords" json:"keywords,omitempty"`
	// Categories replace the default reflexive route categories when set.
	Categories []string `yaml:"categories" json:"categories,omitempty"`
	// IgnoreBlocks are tag names (as "my-context" for <my-context>…
	// </my-context>) whose blocks are set aside in user messages before
	// judging, in addition to those agent clients are known to inject.
	IgnoreBlocks []string `yaml:"ignore_blocks" json:"ignore_blocks,omitempty"`
}

// Tools configures server-side tool execution.
type Tools struct {
	// Root confines the built-in file tools; empty turns them off. A
	// relative root is relative to the proxy's working directory.
	Root string `yaml:"root" json:"root"`
	// Timeout bounds one tool call.
	Timeout time.Duration `yaml:"timeout" json:"timeout"`
	// MaxCallsPerTurn is how many calls of one model response are executed.
	MaxCallsPerTurn int `yaml:"max_calls_per_turn" json:"max_calls_per_turn"`
	// MaxResultBytes caps what a model receives of one tool result.
	MaxResultBytes int `yaml:"max_result_bytes" json:"max_result_bytes"`
	// TraceResultBytes caps what the trace keeps of one tool result.
	TraceResultBytes int `yaml:"trace_result_bytes" json:"trace_result_bytes"`
	// MaxArgsBytes caps the arguments of one tool call: a longer call is
	// refused with an error the model sees (default 256 KiB).
	MaxArgsBytes int `yaml:"max_args_bytes" json:"max_args_bytes"`
	// FileToolsWithClientTools offers the built-in file tools to the chain
	// beside a client's own file tools; by default a client that brings
	// tools working on files (a path or a shell command argument) gets
	// the chain's stages offered its tools and not the built-ins, which
	// work on another filesystem (tools.root).
	FileToolsWithClientTools bool `yaml:"file_tools_with_client_tools" json:"file_tools_with_client_tools"`
	// HTTP declares tools served by HTTP endpoints.
	HTTP []HTTPTool `yaml:"http" json:"http,omitempty"`
	// MCP declares MCP servers whose tools are offered as <name>__<tool>.
	MCP []MCPServer `yaml:"mcp" json:"mcp,omitempty"`
}

// MCPServer is an MCP server the proxy connects to: a command run over
// stdio, or a streamable HTTP url (exactly one of the two).
type MCPServer struct {
	// Name prefixes the server's tools: <name>__<tool>.
	Name string `yaml:"name" json:"name"`
	// Command is the program and its arguments, run with stdio transport.
	Command []string `yaml:"command" json:"command,omitempty"`
	// Env is added to the child's minimal base environment (PATH, HOME,
	// LANG, TMPDIR); nothing else of the proxy's environment is passed.
	Env map[string]string `yaml:"env" json:"env,omitempty"`
	// URL is a streamable HTTP endpoint.
	URL string `yaml:"url" json:"url,omitempty"`
	// Headers are sent with every HTTP request to URL.
	Headers map[string]string `yaml:"headers" json:"headers,omitempty"`
	// ReadOnlyTools names server tools (without prefix) treated as read-only
	// whatever their annotations say.
	ReadOnlyTools []string `yaml:"read_only_tools" json:"read_only_tools,omitempty"`
	// VolatileTools names server tools (without prefix) treated as volatile
	// whatever their annotations say.
	VolatileTools []string `yaml:"volatile_tools" json:"volatile_tools,omitempty"`
	// FollowRedirects "same_origin" follows redirects that stay on URL's
	// scheme, host and port; empty follows none. Another origin never.
	FollowRedirects string `yaml:"follow_redirects" json:"follow_redirects,omitempty"`
}

// HTTPTool is a tool executed by sending its arguments as JSON to a URL.
type HTTPTool struct {
	Name        string            `yaml:"name" json:"name"`
	Description string            `yaml:"description" json:"description"`
	Parameters  map[string]any    `yaml:"parameters" json:"parameters"`
	URL         string            `yaml:"url" json:"url"`
	Method      string            `yaml:"method" json:"method"`
	Headers     map[string]string `yaml:"headers" json:"headers,omitempty"`
	Timeout     time.Duration     `yaml:"timeout" json:"timeout"`
	// ReadOnly tools have no side effects; a tool that is not read-only
	// writes, and its calls invalidate stored results.
	ReadOnly bool `yaml:"read_only" json:"read_only"`
	// Volatile read-only tools read state that changes by itself (a job's
	// status): a repeated call runs again instead of being a loop.
	Volatile bool `yaml:"volatile" json:"volatile"`
	// FollowRedirects "same_origin" follows redirects that stay on URL's
	// scheme, host and port; empty follows none. Another origin never.
	FollowRedirects string `yaml:"follow_redirects" json:"follow_redirects,omitempty"`
}

// Antiloop configures the repeat guards.
type Antiloop struct {
	// SignatureTTL: a call signature executed within this window in the same
	// conversation is not executed again.
	SignatureTTL time.Duration `yaml:"signature_ttl" json:"signature_ttl"`
	// CallIDTTL: a tool_call ID executed with the same signature is not
	// executed again within this window.
	CallIDTTL time.Duration `yaml:"call_id_ttl" json:"call_id_ttl"`
	// MaxFormatErrors consecutive malformed calls stop a stage.
	MaxFormatErrors int `yaml:"max_format_errors" json:"max_format_errors"`
	// MaxPolls is how many times one volatile call (same tool, same
	// arguments) may run in a stage while its result keeps changing.
	MaxPolls int `yaml:"max_polls" json:"max_polls"`
}

// Memory configures context fitting: how prompts are made to fit each
// node's window (docs/context.md).
type Memory struct {
	// Summarizer is the node that folds older turns into summaries; empty
	// means the simple node.
	Summarizer string `yaml:"summarizer" json:"summarizer"`
	// SummaryTTL is how long a summary stays cached for the next request
	// of the same conversation.
	SummaryTTL time.Duration `yaml:"summary_ttl" json:"summary_ttl"`
	// SummaryTimeout bounds the one summarizer call a request may make;
	// past it, the older turns are dropped instead.
	SummaryTimeout time.Duration `yaml:"summary_timeout" json:"summary_timeout"`
	// AnswerReserve is the tokens kept for the answer when the request
	// sets no max_tokens.
	AnswerReserve int `yaml:"answer_reserve" json:"answer_reserve"`
	// The shares of the window, as fractions: the list of earlier
	// questions, the least kept for recent raw turns, the summary.
	QuestionsShare float64 `yaml:"questions_share" json:"questions_share"`
	RecentShare    float64 `yaml:"recent_share" json:"recent_share"`
	SummariesShare float64 `yaml:"summaries_share" json:"summaries_share"`
}

// Store selects where anti-loop state and traces live.
type Store struct {
	// RedisURL, when set, shares state between replicas through Redis.
	RedisURL string `yaml:"redis_url" json:"redis_url"`
}

// Telemetry configures the OpenTelemetry trace export. Every key left
// empty falls back to the standard OTEL_EXPORTER_OTLP_* variables; with no
// endpoint in either, nothing is exported and tracing costs nothing.
type Telemetry struct {
	// Endpoint is the collector's base URL, as OTEL_EXPORTER_OTLP_ENDPOINT:
	// http://host:4318 for http/protobuf (/v1/traces is appended to its
	// path), http://host:4317 for grpc. https means TLS.
	Endpoint string `yaml:"endpoint" json:"endpoint"`
	// TracesEndpoint, as OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, is the full
	// URL spans go to, used as it is; it wins over Endpoint.
	TracesEndpoint string `yaml:"traces_endpoint" json:"traces_endpoint"`
	// Protocol is "http/protobuf" or "grpc" (OTEL_EXPORTER_OTLP_PROTOCOL's
	// values); empty: the variables', else http/protobuf.
	Protocol string `yaml:"protocol" json:"protocol"`
	// Headers go with every export (an Authorization for a hosted
	// backend): they are secrets, masked in logs and answers.
	Headers map[string]string `yaml:"headers" json:"headers"`
	// Timeout bounds one export; zero: the variables', else 10s.
	Timeout time.Duration `yaml:"timeout" json:"timeout"`
	// ServiceName is the resource's service.name; empty: OTEL_SERVICE_NAME,
	// else "chainproxy".
	ServiceName string `yaml:"service_name" json:"service_name"`
	// CaptureContent exports prompts, answers, tool arguments and results
	// (gen_ai.input.messages, gen_ai.output.messages, …), redacted; off,
	// spans carry only names, sizes, tokens and statuses.
	CaptureContent bool `yaml:"capture_content" json:"capture_content"`
}

// Telemetry protocols, as OTEL_EXPORTER_OTLP_PROTOCOL names them.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Admission tunes how replicas share the nodes' max_concurrency when
// store.redis_url is set, and the scheduling of calls around model loads
// on Ollama servers that several nodes share.
type Admission struct {
	// Lease is how long a slot taken in Redis lasts unless renewed: a
	// replica that dies holding slots frees them within it (default 15s).
	Lease time.Duration `yaml:"lease" json:"lease"`
	// MaxReorderWait is how much longer than in arrival order a call to an
	// Ollama server several nodes share may wait so that the calls for the
	// models it holds go first (default 30s). 0 turns the load scheduling
	// off: calls go in arrival order and no model is loaded early.
	MaxReorderWait time.Duration `yaml:"max_reorder_wait" json:"max_reorder_wait"`
}

// DefaultMaxReorderWait is admission.max_reorder_wait's default: longer
// than a large model's load, so that grouping can save one.
const DefaultMaxReorderWait = 30 * time.Second

// Default returns the configuration used for every key a file leaves out:
// a local Ollama serving OL1 and M1, an OpenAI-compatible M2.
func Default() *Config {
	return &Config{
		replaceNodes: true,
		Admission:    Admission{Lease: 15 * time.Second, MaxReorderWait: DefaultMaxReorderWait},
		Server: Server{
			Addr:            "127.0.0.1:8080",
			APIKeys:         []string{},
			MaxBodyBytes:    10 << 20,
			ShutdownTimeout: 10 * time.Second,
			ReadTimeout:     30 * time.Second,
			MaxMessages:     4096,
		},
		Nodes: []Node{
			{Name: "OL1", Provider: ProviderOllama, BaseURL: "http://127.0.0.1:11434", Model: "qwen3:1.7b"},
			{Name: "M1", Provider: ProviderOllama, BaseURL: "http://127.0.0.1:11434", Model: "qwen3:30b"},
			{Name: "M2", Provider: ProviderOpenAI, BaseURL: "http://127.0.0.1:8000/v1", Model: "deepseek-coder-v2", APIKey: "${M2_API_KEY:-}"},
		},
		Chain: Chain{
			Stages: []Stage{
				{Node: "OL1", MaxTurns: 4, Tools: true},
				{Node: "M1", MaxTurns: 3},
				{Node: "M2", MaxTurns: 2},
			},
			MaxTotalTurns: 8,
			SimpleNode:    "OL1",
			ContextBudget: 24000,
			ToolsShare:    0.25,
			Traces:        500,
			ResumeTTL:     30 * time.Minute,
		},
		Classify: Classify{ShortChars: 50, LongChars: 280},
		Memory: Memory{
			SummaryTTL:     24 * time.Hour,
			SummaryTimeout: 30 * time.Second,
			AnswerReserve:  1024,
			QuestionsShare: 0.05,
			RecentShare:    0.05,
			SummariesShare: 0.10,
		},
		Tools: Tools{
			Root:             "./workspace",
			Timeout:          15 * time.Second,
			MaxCallsPerTurn:  10,
			MaxResultBytes:   8 << 10,
			TraceResultBytes: 64 << 10,
			MaxArgsBytes:     256 << 10,
		},
		Antiloop: Antiloop{
			SignatureTTL:    30 * time.Second,
			CallIDTTL:       5 * time.Minute,
			MaxFormatErrors: 3,
			MaxPolls:        5,
		},
	}
}

// Load reads and validates the configuration file at path. An empty path
// yields the defaults. When the file decodes but has problems, the
// configuration as far as it was built comes with the error (see ParseOver).
func Load(path string) (*Config, error) {
	if path == "" {
		return Parse(nil)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cfg, err := Parse(data)
	if cfg != nil {
		cfg.file = path
	}
	if err != nil {
		return cfg, inFile(path, err)
	}
	return cfg, nil
}

// Where says where the configuration file set key (a dotted path such as
// "tools.root") as "FILE:LINE", for problems found after loading; "" when
// the file does not set it (the value is a default).
func (c *Config) Where(key string) string {
	l, ok := c.lines[key]
	if !ok {
		return ""
	}
	file := c.file
	if file == "" {
		file = "config"
	}
	return fmt.Sprintf("%s:%d", file, l)
}

// Parse builds a Config from YAML text: it expands ${VAR} from the
// environment, decodes strictly over the defaults (unknown keys are errors),
// fills per-node defaults and validates.
func Parse(data []byte) (*Config, error) {
	cfg := Default()
	for i := range cfg.Nodes {
		// The defaults carry ${M2_API_KEY}; expand it as a file would be.
		key, err := expandEnv([]byte(cfg.Nodes[i].APIKey))
		if err != nil {
			return nil, err
		}
		cfg.Nodes[i].APIKey = string(key)
	}
	return ParseOver(cfg, data)
}

// ParseOver is Parse with base in place of the defaults. A file whose
// values decode but do not validate yields its configuration with the
// error, for callers that add checks of their own to the report; otherwise
// the configuration is nil on error. ParseOver is for a file that
// adjusts another configuration (the demo's): nodes the file lists replace
// base nodes of the same name, and other nodes are added. base is not
// modified.
func ParseOver(base *Config, data []byte) (*Config, error) {
	cfg := base.clone()
	baseNodes := cfg.Nodes
	cfg.Nodes = nil
	data, envErr := expandEnv(data)
	var lines map[string]int
	var checkErr error
	if len(bytes.TrimSpace(data)) > 0 {
		var err error
		if lines, err = check(data); err != nil || envErr != nil {
			// Decode and validate what is left without the values at
			// fault, so that the file's every problem is said at once.
			var ce *checkError
			rest, ok := data, envErr == nil || err == nil
			if errors.As(err, &ce) {
				rest, ok = withoutPaths(data, ce.paths)
			} else if err != nil {
				ok = false // YAML that does not parse
			}
			if !ok {
				return nil, errors.Join(envErr, err)
			}
			checkErr, data = errors.Join(envErr, err), rest
		}
		dec := yaml.NewDecoder(bytes.NewReader(data), yaml.Strict())
		if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
			if checkErr != nil {
				return nil, checkErr
			}
			return nil, fmt.Errorf("config: %s", yaml.FormatError(err, false, true))
		}
	} else if envErr != nil {
		return nil, envErr
	}
	cfg.lines = lines
	cfg.Nodes = mergeNodes(baseNodes, cfg.Nodes, base != nil && base.replaceNodes)
	cfg.replaceNodes = false
	cfg.fillNodeDefaults()
	if err := errors.Join(checkErr, placeErrors(cfg.Validate(), lines)); err != nil {
		// The configuration as far as it was built goes with the error,
		// so that a caller's own checks (the tools root, the bind) join
		// the report rather than wait for the next run.
		return cfg, err
	}
	return cfg, nil
}

// mergeNodes applies the file's nodes over the base ones. Over the defaults
// a file's node list replaces them all (the defaults are an example, not a
// base to extend).
func mergeNodes(base, file []Node, replace bool) []Node {
	if file == nil {
		return base
	}
	if replace {
		return file
	}
	out := slices.Clone(base)
	for _, n := range file {
		i := slices.IndexFunc(out, func(b Node) bool { return b.Name == n.Name })
		if i >= 0 {
			out[i] = n
		} else {
			out = append(out, n)
		}
	}
	return out
}

func (c *Config) clone() *Config {
	r := *c
	r.Server.APIKeys = slices.Clone(c.Server.APIKeys)
	r.Server.AdminKeys = slices.Clone(c.Server.AdminKeys)
	r.Server.CORSOrigins = slices.Clone(c.Server.CORSOrigins)
	r.Server.AllowedHosts = slices.Clone(c.Server.AllowedHosts)
	r.Nodes = slices.Clone(c.Nodes)
	r.Chain.Stages = slices.Clone(c.Chain.Stages)
	r.Tools.HTTP = slices.Clone(c.Tools.HTTP)
	r.Tools.MCP = slices.Clone(c.Tools.MCP)
	r.Classify.Keywords = slices.Clone(c.Classify.Keywords)
	r.Classify.Categories = slices.Clone(c.Classify.Categories)
	return &r
}

func (c *Config) fillNodeDefaults() {
	for i := range c.Nodes {
		n := &c.Nodes[i]
		// Unset, they keep what timeout bounded before they were keys of
		// their own: a file that set timeout: 10m for a slow box waits as
		// long for a first byte as it did.
		for _, d := range []*time.Duration{&n.FirstByteTimeout, &n.IdleTimeout} {
			if *d == 0 {
				*d = cmp.Or(n.Timeout, DefaultCallTimeout)
			}
		}
		if n.ConnectTimeout == 0 {
			n.ConnectTimeout = 2 * time.Second
		}
		if n.OfflineFor == 0 {
			n.OfflineFor = 30 * time.Second
		}
		if n.MaxQueue == 0 {
			n.MaxQueue = 64
		}
		if n.RetryBackoff == nil {
			n.RetryBackoff = []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}
		}
		if n.MaxOutputBytes == 0 {
			n.MaxOutputBytes = DefaultMaxOutputBytes
		}
		if n.Provider == ProviderMock && n.Model == "" {
			n.Model = "mock-" + strings.ToLower(n.Name)
		}
	}
	for i := range c.Tools.HTTP {
		h := &c.Tools.HTTP[i]
		if h.Method == "" {
			h.Method = "POST"
		}
		if h.Timeout == 0 {
			h.Timeout = c.Tools.Timeout
		}
	}
}

// Node returns the node called name.
func (c *Config) Node(name string) (Node, bool) {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Node{}, false
}

// Redacted returns a copy safe to log: keys and secrets are masked.
func (c *Config) Redacted() *Config {
	r := *c
	r.Server.APIKeys = make([]string, len(c.Server.APIKeys))
	for i := range r.Server.APIKeys {
		r.Server.APIKeys[i] = "***"
	}
	r.Server.AdminKeys = make([]string, len(c.Server.AdminKeys))
	for i := range r.Server.AdminKeys {
		r.Server.AdminKeys[i] = "***"
	}
	r.Nodes = slices.Clone(c.Nodes)
	for i := range r.Nodes {
		if r.Nodes[i].APIKey != "" {
			r.Nodes[i].APIKey = "***"
		}
	}
	if c.Store.RedisURL != "" {
		r.Store.RedisURL = redactURL(c.Store.RedisURL)
	}
	r.Telemetry.Headers = maskValues(c.Telemetry.Headers)
	r.Telemetry.Endpoint, r.Telemetry.TracesEndpoint = redactURL(c.Telemetry.Endpoint), redactURL(c.Telemetry.TracesEndpoint)
	r.Tools.HTTP = slices.Clone(c.Tools.HTTP)
	for i := range r.Tools.HTTP {
		r.Tools.HTTP[i].Headers = maskValues(r.Tools.HTTP[i].Headers)
	}
	r.Tools.MCP = slices.Clone(c.Tools.MCP)
	for i := range r.Tools.MCP {
		m := &r.Tools.MCP[i]
		m.Env = maskValues(m.Env)
		m.Headers = maskValues(m.Headers)
	}
	return &r
}

// DefaultMaxOutputBytes is nodes[].max_output_bytes when unset: far more
// than any answer a client waits for, far less than what would hurt.
const DefaultMaxOutputBytes = 4 << 20

// FollowSameOrigin is the follow_redirects value that follows redirects on
// the configured origin.
const FollowSameOrigin = "same_origin"

// checkFollow validates a follow_redirects value.
func checkFollow(bad func(path, format string, args ...any), p, v string) {
	if v != "" && v != FollowSameOrigin {
		bad(p+".follow_redirects", "want %q or empty (no redirects), got %q", FollowSameOrigin, v)
	}
}

// mcpServerName keeps a server's prefix short and unambiguous: tool names
// are <server>__<tool>, at most 64 characters for OpenAI.
var mcpServerName = regexp.MustCompile(`^[a-zA-Z0-9-]+(_[a-zA-Z0-9-]+)*$`)

// urlPassword and urlQueryValue find the secrets of a URL: the password of
// its user-info, also when the URL does not validate (a mistyped or missing
// scheme, the likely mistake), and its query values (?api_key=…).
var (
	urlPassword   = regexp.MustCompile(`^((?:[A-Za-z][A-Za-z0-9+.-]*:)?/*[^:@/?#]*):[^@/?#]*@`)
	urlQueryValue = regexp.MustCompile(`([?&][^=&#]*)=[^&#]*`)
)

// maskValues hides env and header values, which carry tokens.
func maskValues(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k := range m {
		out[k] = "***"
	}
	return out
}

// redactURL is u with its password and query values masked, to be shown.
func redactURL(u string) string {
	return urlQueryValue.ReplaceAllString(urlPassword.ReplaceAllString(u, "$1:***@"), "$1=***")
}

// validTagName reports whether name can name the blocks of
// classify.ignore_blocks: a tag name, without its brackets.
func validTagName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}
