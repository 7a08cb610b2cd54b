package config

import (
	"maps"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDefaultsEqualTheExample(t *testing.T) {
	t.Setenv("M2_API_KEY", "sk-m2")
	cfg, err := Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"server.addr", cfg.Server.Addr, "127.0.0.1:8080"},
		{"nodes", len(cfg.Nodes), 3},
		{"nodes[0]", cfg.Nodes[0].Name + " " + cfg.Nodes[0].Provider + " " + cfg.Nodes[0].BaseURL + " " + cfg.Nodes[0].Model, "OL1 ollama http://127.0.0.1:11434 qwen3:1.7b"},
		{"nodes[1].model", cfg.Nodes[1].Model, "qwen3:30b"},
		{"nodes[2]", cfg.Nodes[2].Provider + " " + cfg.Nodes[2].BaseURL + " " + cfg.Nodes[2].Model, "openai http://127.0.0.1:8000/v1 deepseek-coder-v2"},
		{"nodes[2].api_key", cfg.Nodes[2].APIKey, "sk-m2"},
		{"stages", len(cfg.Chain.Stages), 3},
		{"stages[0]", cfg.Chain.Stages[0], Stage{Node: "OL1", MaxTurns: 4, Tools: true}},
		{"stages[1]", cfg.Chain.Stages[1], Stage{Node: "M1", MaxTurns: 3}},
		{"stages[2]", cfg.Chain.Stages[2], Stage{Node: "M2", MaxTurns: 2}},
		{"max_total_turns", cfg.Chain.MaxTotalTurns, 8},
		{"admission.max_reorder_wait", cfg.Admission.MaxReorderWait, 30 * time.Second},
		{"nodes[0].keep_loaded", cfg.Nodes[0].KeepLoaded, false},
		{"simple_node", cfg.Chain.SimpleNode, "OL1"},
		{"chain.resume_ttl", cfg.Chain.ResumeTTL, 30 * time.Minute},
		{"chain.tools_share", cfg.Chain.ToolsShare, 0.25},
		{"tools.root", cfg.Tools.Root, "./workspace"},
		{"tools.timeout", cfg.Tools.Timeout, 15 * time.Second},
		{"tools.max_calls_per_turn", cfg.Tools.MaxCallsPerTurn, 10},
		{"antiloop.signature_ttl", cfg.Antiloop.SignatureTTL, 30 * time.Second},
		{"antiloop.max_polls", cfg.Antiloop.MaxPolls, 5},
		{"antiloop.call_id_ttl", cfg.Antiloop.CallIDTTL, 5 * time.Minute},
		{"store.redis_url", cfg.Store.RedisURL, ""},
		{"ollama concurrency", cfg.Nodes[0].Concurrency(), 1},
		{"openai concurrency", cfg.Nodes[2].Concurrency(), 0},
		{"node timeout", cfg.Nodes[0].Timeout, time.Duration(0)},
		{"node whole-call timeout", cfg.Nodes[0].CallTimeout(false), 120 * time.Second},
		{"node streamed-call timeout", cfg.Nodes[0].CallTimeout(true), time.Duration(0)},
		{"node first_byte_timeout", cfg.Nodes[0].FirstByteTimeout, 120 * time.Second},
		{"node idle_timeout", cfg.Nodes[0].IdleTimeout, 120 * time.Second},
		{"connect timeout", cfg.Nodes[0].ConnectTimeout, 2 * time.Second},
		{"max_queue", cfg.Nodes[0].MaxQueue, 64},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestTheIssueExampleParses(t *testing.T) {
	example := `
server:
  addr: 127.0.0.1:8080
  api_keys: []
nodes:
  - name: OL1
    provider: ollama
    base_url: http://127.0.0.1:11434
    model: qwen3:1.7b
  - name: M1
    provider: ollama
    base_url: http://127.0.0.1:11434
    model: qwen3:30b
  - name: M2
    provider: openai
    base_url: http://127.0.0.1:8000/v1
    model: deepseek-coder-v2
    api_key: ${M2_API_KEY}
chain:
  stages:
    - {node: OL1, max_turns: 4, tools: true}
    - {node: M1,  max_turns: 3}
    - {node: M2,  max_turns: 2}
  max_total_turns: 8
  simple_node: OL1
tools:
  root: ./workspace
  timeout: 15s
  max_calls_per_turn: 10
antiloop:
  signature_ttl: 30s
  call_id_ttl: 5m
store:
  redis_url: ""
`
	t.Setenv("M2_API_KEY", "secret")
	got, err := Parse([]byte(example))
	if err != nil {
		t.Fatal(err)
	}
	def, _ := Parse(nil)
	if got.Nodes[2].APIKey != "secret" || got.Chain.MaxTotalTurns != def.Chain.MaxTotalTurns || got.Tools.Timeout != def.Tools.Timeout {
		t.Errorf("example = %+v", got)
	}
}

func TestPartialFileKeepsOtherDefaults(t *testing.T) {
	cfg, err := Parse([]byte("tools:\n  timeout: 3s\nchain:\n  max_total_turns: 6\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Tools.Timeout != 3*time.Second || cfg.Tools.MaxCallsPerTurn != 10 || cfg.Chain.MaxTotalTurns != 6 || len(cfg.Chain.Stages) != 3 {
		t.Errorf("partial merge wrong: tools %+v chain %+v", cfg.Tools, cfg.Chain)
	}
}

func TestValidationErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown provider", "nodes:\n  - {name: OL1, provider: ollama, base_url: http://x, model: m}\n  - {name: M1, provider: olama, base_url: http://x, model: m}\n  - {name: M2, provider: mock, mock: {}}\n",
			`config: nodes[1].provider: unknown provider "olama" (want ollama, openai or mock)`},
		{"unknown key", "chain:\n  max_turns_total: 3\n", `config:2: chain.max_turns_total: unknown key "max_turns_total"`},
		{"duplicate node", "nodes:\n  - {name: OL1, provider: mock, mock: {}}\n  - {name: OL1, provider: mock, mock: {}}\nchain:\n  stages: [{node: OL1, max_turns: 1}]\n",
			`config: nodes[1].name: duplicate node name "OL1"`},
		{"stage names a missing node", "chain:\n  stages: [{node: M9, max_turns: 2}]\n", `config: chain.stages[0].node: unknown node "M9"`},
		{"non-positive stage budget", "chain:\n  stages: [{node: OL1, max_turns: 0}]\n", `config: chain.stages[0].max_turns: must be positive, got 0`},
		{"non-positive total", "chain:\n  max_total_turns: -1\n", `config: chain.max_total_turns: must be positive, got -1`},
		{"non-positive resume ttl", "chain:\n  resume_ttl: 0s\n", `config: chain.resume_ttl: must be positive, got 0s`},
		{"tools share above half", "chain:\n  tools_share: 0.6\n", `config: chain.tools_share: want a fraction of the window above 0 and at most 0.5, got 0.6`},
		{"no tools share", "chain:\n  tools_share: 0\n", `config: chain.tools_share: want a fraction of the window above 0 and at most 0.5, got 0`},
		{"total below stage count", "chain:\n  max_total_turns: 2\n", `config: chain.max_total_turns: 2 cannot give each of the 3 stages a turn`},
		{"bad duration", "tools:\n  timeout: soon\n", `config:2: tools.timeout: "soon" is not a duration`},
		{"negative tools budget", "tools:\n  max_calls_per_turn: 0\n", `config: tools.max_calls_per_turn: must be positive, got 0`},
		{"no polls", "antiloop:\n  max_polls: 0\n", `config: antiloop.max_polls: must be positive, got 0`},
		{"missing simple node", "chain:\n  simple_node: X\n", `config: chain.simple_node: unknown node "X"`},
		{"bad telemetry endpoint", "telemetry:\n  endpoint: localhost:4317\n", `config: telemetry.endpoint: want an http:// or https:// URL`},
		{"bad telemetry protocol", "telemetry:\n  protocol: http/json\n", `config: telemetry.protocol: want "http/protobuf" or "grpc", got "http/json"`},
		{"negative telemetry timeout", "telemetry:\n  timeout: -1s\n", `config: telemetry.timeout: must not be negative`},
		{"bad redis url", "store:\n  redis_url: localhost:6379\n", `config: store.redis_url: want a redis:// URL`},
		{"bad keep_alive", "nodes:\n  - {name: OL1, provider: ollama, base_url: http://x, model: m, keep_alive: soon}\n  - {name: M1, provider: mock, mock: {}}\n  - {name: M2, provider: mock, mock: {}}\n",
			`config: nodes[0].keep_alive: keep_alive "soon": want a duration (5m), seconds (300), -1 (for ever) or 0 (unload after use)`},
		{"mcp server without transport", "tools:\n  mcp:\n    - {name: fs}\n", `config: tools.mcp[0]: set command (stdio) or url (streamable HTTP)`},
		{"mcp server with both", "tools:\n  mcp:\n    - {name: fs, command: [x], url: http://x}\n", `config: tools.mcp[0]: set command or url, not both`},
		{"mcp name with double underscore", "tools:\n  mcp:\n    - {name: a__b, command: [x]}\n", `config: tools.mcp[0].name: want letters`},
		{"mcp duplicate name", "tools:\n  mcp:\n    - {name: fs, command: [x]}\n    - {name: fs, url: http://x}\n", `config: tools.mcp[1].name: duplicate server name "fs"`},
		{"mcp bad url", "tools:\n  mcp:\n    - {name: web, url: ftp://x}\n", `config: tools.mcp[0].url: want an http:// or https:// URL`},
		{"mcp headers on stdio", "tools:\n  mcp:\n    - {name: fs, command: [x], headers: {A: b}}\n", `config: tools.mcp[0].headers: only apply to a url server`},
		{"empty admin key", "server:\n  api_keys: [k]\n  admin_keys: [\"\"]\n", `config: server.admin_keys[0]: must not be empty`},
		{"admin keys without api keys", "server:\n  admin_keys: [boss]\n", `config: server.admin_keys: needs server.api_keys`},
		{"ignore_blocks with brackets", "classify:\n  ignore_blocks: [ok-name, \"<my-context>\"]\n", `config: classify.ignore_blocks[1]: want a tag name such as "my-context" (letters, digits, - _ . :), got "<my-context>"`},
		{"empty ignore_blocks name", "classify:\n  ignore_blocks: [\"\"]\n", `config: classify.ignore_blocks[0]: want a tag name`},
		{"mcp follow_redirects on stdio", "tools:\n  mcp:\n    - {name: fs, command: [x], follow_redirects: same_origin}\n", `config: tools.mcp[0].follow_redirects: only applies to a url server`},
		{"mcp follow_redirects unknown", "tools:\n  mcp:\n    - {name: web, url: http://x, follow_redirects: always}\n", `config: tools.mcp[0].follow_redirects: want "same_origin" or empty (no redirects), got "always"`},
		{"http follow_redirects unknown", "tools:\n  http:\n    - {name: t, url: http://x, follow_redirects: all}\n", `config: tools.http[0].follow_redirects: want "same_origin"`},
		{"max_args_bytes zero", "tools:\n  max_args_bytes: 0\n", `config: tools.max_args_bytes: must be positive, got 0`},
		{"max_output_bytes negative", "nodes:\n  - {name: OL1, provider: ollama, base_url: http://x, model: m, max_output_bytes: -1}\nchain:\n  stages: [{node: OL1, max_turns: 1}]\n", `config: nodes[0].max_output_bytes: must be positive, got -1`},
		{"alias to an unknown model", "model_aliases:\n  \"claude-*\": gpt-9\n", `config: model_aliases: "claude-*": unknown model "gpt-9"`},
		{"alias with a bad pattern", "model_aliases:\n  \"claude-[\": chain/auto\n", `config: model_aliases: "claude-[" is not a valid pattern`},
		{"base_url and base_urls", "nodes:\n  - {name: OL1, provider: ollama, base_url: http://x, base_urls: [http://y], model: m}\nchain:\n  stages: [{node: OL1, max_turns: 1}]\n", `config: nodes[0].base_urls: set base_url (one host) or base_urls (several), not both`},
		{"base_urls duplicate", "nodes:\n  - {name: OL1, provider: ollama, base_urls: [\"http://x:1\", \"http://x:1/\"], model: m}\nchain:\n  stages: [{node: OL1, max_turns: 1}]\n", `config: nodes[0].base_urls[1]: duplicate host "http://x:1/"`},
		{"base_urls bad url", "nodes:\n  - {name: OL1, provider: ollama, base_urls: [\"http://x:1\", \"x:2\"], model: m}\nchain:\n  stages: [{node: OL1, max_turns: 1}]\n", `config: nodes[0].base_urls[1]: want an http:// or https:// URL, got "x:2"`},
		{"admission lease zero", "admission:\n  lease: 0s\n", `config: admission.lease: must be positive, got 0s`},
		{"negative reorder wait", "admission:\n  max_reorder_wait: -1s\n", `config: admission.max_reorder_wait: must not be negative (0 turns the load scheduling off), got -1s`},
		{"keep_loaded on openai", "nodes:\n  - {name: OL1, provider: openai, base_url: http://x/v1, model: m, keep_loaded: true}\nchain:\n  stages: [{node: OL1, max_turns: 1}]\n", `config: nodes[0].keep_loaded: only an ollama node keeps its model loaded, not provider "openai"`},
		{"keep_loaded and keep_alive", "nodes:\n  - {name: OL1, provider: ollama, base_url: http://x, model: m, keep_loaded: true, keep_alive: 5m}\nchain:\n  stages: [{node: OL1, max_turns: 1}]\n", `config: nodes[0].keep_loaded: set keep_loaded (keep_alive -1) or keep_alive, not both`},
		{"mock without script", "nodes:\n  - {name: OL1, provider: mock}\nchain:\n  stages: [{node: OL1, max_turns: 1}]\n", `config: nodes[0].mock: a mock node needs a script`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			// Validation problems are placed on their key's line:
			// "config: key: msg" reads "config:N: key: msg".
			got := ""
			if err != nil {
				got = regexp.MustCompile(`(?m)^config:\d+: `).ReplaceAllString(err.Error(), "config: ")
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) && !strings.Contains(got, tt.want) {
				t.Errorf("Parse = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestModelAliasesParse: aliases map globs to chain models, nodes and
// node models.
func TestModelAliasesParse(t *testing.T) {
	cfg, err := Parse([]byte("model_aliases:\n  \"claude-*haiku*\": chain/simple\n  \"claude-*\": chain/auto\n  big: M1\n  small: qwen3:1.7b\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"claude-*haiku*": "chain/simple", "claude-*": "chain/auto", "big": "M1", "small": "qwen3:1.7b"}
	if !maps.Equal(cfg.ModelAliases, want) {
		t.Errorf("model_aliases = %v, want %v", cfg.ModelAliases, want)
	}
}

func TestAllProblemsReported(t *testing.T) {
	_, err := Parse([]byte("chain:\n  max_total_turns: 0\n  simple_node: X\ntools:\n  max_calls_per_turn: -2\n"))
	if err == nil {
		t.Fatal("want errors")
	}
	for _, key := range []string{"chain.max_total_turns", "chain.simple_node", "tools.max_calls_per_turn"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("error lacks %s:\n%v", key, err)
		}
	}
}

func TestParseOverMergesNodesByName(t *testing.T) {
	base, err := Parse([]byte("nodes:\n  - {name: OL1, provider: mock, mock: {}}\n  - {name: M1, provider: mock, mock: {}}\n  - {name: M2, provider: mock, mock: {}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseOver(base, []byte("nodes:\n  - {name: M1, provider: ollama, base_url: http://127.0.0.1:1, model: x}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Nodes) != 3 || cfg.Nodes[1].Provider != "ollama" || cfg.Nodes[0].Provider != "mock" {
		t.Errorf("nodes = %+v", cfg.Nodes)
	}
	if base.Nodes[1].Provider != "mock" {
		t.Error("ParseOver modified its base")
	}
}

func TestRedacted(t *testing.T) {
	cfg, _ := Parse([]byte("server:\n  api_keys: [k1]\n  admin_keys: [boss]\nstore:\n  redis_url: redis://user:pw@host:6379/0\ntools:\n  http: [{name: t, url: http://x, headers: {X-Api-Key: tool-key}}]\n"))
	r := cfg.Redacted()
	if r.Server.APIKeys[0] != "***" || r.Server.AdminKeys[0] != "***" || strings.Contains(r.Store.RedisURL, "pw") || cfg.Server.APIKeys[0] != "k1" || cfg.Server.AdminKeys[0] != "boss" {
		t.Errorf("redacted = %+v %+v %q", r.Server.APIKeys, r.Server.AdminKeys, r.Store.RedisURL)
	}
	tel, _ := Parse([]byte("telemetry:\n  endpoint: https://u:otel-pw@collector:4318\n  headers: {Authorization: Basic abc}\n"))
	if rt := tel.Redacted().Telemetry; rt.Headers["Authorization"] != "***" || strings.Contains(rt.Endpoint, "otel-pw") || tel.Telemetry.Headers["Authorization"] != "Basic abc" {
		t.Errorf("redacted telemetry = %+v", rt)
	}
	if got := r.Tools.HTTP[0].Headers["X-Api-Key"]; got != "***" || cfg.Tools.HTTP[0].Headers["X-Api-Key"] != "tool-key" {
		t.Errorf("redacted tools.http[0].headers = %q (original %q), want *** (tool-key)", got, cfg.Tools.HTTP[0].Headers["X-Api-Key"])
	}
}

func TestTheMCPExampleParses(t *testing.T) {
	t.Setenv("TOKEN", "t0k")
	cfg, err := Parse([]byte(`
tools:
  mcp:
    - name: fs
      command: [node, ./mcp/server-filesystem/dist/index.js, ./workspace]
      env: {LOG_LEVEL: warn}
      read_only_tools: [read_file]
    - name: web
      url: http://127.0.0.1:3001/mcp
      headers: {Authorization: "Bearer ${TOKEN}"}
      volatile_tools: [search]
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []MCPServer{
		{Name: "fs", Command: []string{"node", "./mcp/server-filesystem/dist/index.js", "./workspace"}, Env: map[string]string{"LOG_LEVEL": "warn"}, ReadOnlyTools: []string{"read_file"}},
		{Name: "web", URL: "http://127.0.0.1:3001/mcp", Headers: map[string]string{"Authorization": "Bearer t0k"}, VolatileTools: []string{"search"}},
	}
	if diff := cmp.Diff(want, cfg.Tools.MCP); diff != "" {
		t.Errorf("tools.mcp (-want +got):\n%s", diff)
	}
	r := cfg.Redacted()
	if r.Tools.MCP[1].Headers["Authorization"] != "***" || r.Tools.MCP[0].Env["LOG_LEVEL"] != "***" || cfg.Tools.MCP[1].Headers["Authorization"] != "Bearer t0k" {
		t.Errorf("Redacted mcp = %+v, want masked values and the original untouched", r.Tools.MCP)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("chain:\n  max_total_turns: 8\n"))
	f.Add([]byte("nodes:\n  - {name: A, provider: mock, mock: {turns: [{content: hi}]}}\nchain:\n  stages: [{node: A, max_turns: 1}]\n  simple_node: A\n"))
	f.Add([]byte("tools:\n  timeout: 1s\n  http:\n    - {name: q, url: http://x}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			return
		}
		// Whatever parses is valid.
		if err := cfg.Validate(); err != nil {
			t.Errorf("Parse accepted an invalid config: %v", err)
		}
	})
}

// TestEveryProblemAtOnce: a file with type errors, an unset variable and
// validation problems gets all of them in one report, each at its line, in
// plain words.
func TestEveryProblemAtOnce(t *testing.T) {
	t.Setenv("CHAINPROXY_TEST_UNSET", "")
	os.Unsetenv("CHAINPROXY_TEST_UNSET")
	file := `nodes:
  - {name: OL1, provider: ollama, base_url: "http://127.0.0.1:11434", model: m, timeout: 30}
  - {name: M1, base_url: "http://x", model: m}
  - {name: M2, provider: openai, base_url: "${CHAINPROXY_TEST_UNSET}", model: m, max_concurrency: "two"}
`
	_, err := Parse([]byte(file))
	if err == nil {
		t.Fatal("no error")
	}
	got := err.Error()
	for _, want := range []string{
		"config:4: ${CHAINPROXY_TEST_UNSET} is not set",
		"config:2: nodes[0].timeout: 30 is a number; write a duration such as 30s",
		`config:4: nodes[2].max_concurrency: want a whole number, got "two"`,
		"config:3: nodes[1].provider: provider is required: ollama, openai or mock",
		`config:4: nodes[2].base_url: required for provider "openai"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, `\"`) || strings.Contains(got, "Go struct") {
		t.Errorf("report quotes twice or speaks Go:\n%s", got)
	}
}
