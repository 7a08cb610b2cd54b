package redact

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"chainproxy/config"
)

func TestURL(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain", "http://127.0.0.1:11434", "http://127.0.0.1:11434"},
		{"password", "http://user:PASSWORD@host:8000/v1", "http://user:***@host:8000/v1"},
		{"query key", "https://api.example/v1?api_key=SECRET&x=1", "https://api.example/v1?api_key=***&x=***"},
		{"not a url", "no url here", "no url here"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := URL(tt.in); got != tt.want {
				t.Errorf("URL(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestText(t *testing.T) {
	tests := []struct {
		name, in string
		keys     []string
		want     string
	}{
		{"bearer", `{"error":"invalid token Bearer sk-abcdef123456"}`, nil, `{"error":"invalid token Bearer ***"}`},
		{"lower bearer", "authorization: bearer abc.def", nil, "authorization: bearer ***"},
		{"sk key", "key sk-proj-ABCDEFGH is wrong", nil, "key sk-*** is wrong"},
		{"configured key", "got key hunter2-secret back", []string{"hunter2-secret"}, "got key *** back"},
		{"url in error", `Post "http://u:p@h/v1/chat?key=K": dial tcp`, nil, `Post "http://u:***@h/v1/chat?key=***": dial tcp`},
		{"nothing", "connection refused", nil, "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Text(tt.in, tt.keys...); got != tt.want {
				t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// hostileConfig holds one secret of each kind FromConfig gathers.
func hostileConfig() *config.Config {
	cfg := config.Default()
	cfg.Server.APIKeys = []string{"server-key-AAAA"}
	cfg.Server.AdminKeys = []string{"admin-key-LLLL"}
	cfg.Nodes = []config.Node{
		{Name: "G", Provider: config.ProviderOpenAI, BaseURL: "https://api.groq.example/v1", APIKey: "gsk_groqkeyBBBB"},
		{Name: "V", Provider: config.ProviderOpenAI, BaseURL: "http://vllm:8000/v1", APIKey: "vllm-token-CCCC"},
		{Name: "U", Provider: config.ProviderOllama, BaseURL: "http://ollama-user:pass-DDDD@ollama:11434/?key=AIzaquerykeyEEEE"},
		{Name: "H", Provider: config.ProviderOllama, BaseURLs: []string{"http://h1:11434", "http://gpu:hosts-pass-NNNN@h2:11434"}},
	}
	cfg.Tools.HTTP = []config.HTTPTool{{Name: "t", URL: "http://tool/?token=tool-query-FFFF",
		Headers: map[string]string{"Authorization": "Bearer tool-bearer-GGGG", "X-Api-Key": "hf_toolkeyHHHH", "Accept": "application/json"}}}
	cfg.Tools.MCP = []config.MCPServer{
		{Name: "m", URL: "http://mcp/", Headers: map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("mcp-user:mcp-pass-IIII"))}},
		{Name: "s", Command: []string{"srv"}, Env: map[string]string{"API_TOKEN": "env-token-JJJJ", "PATH": "/usr/bin"}},
	}
	cfg.Store.RedisURL = "redis://:redis-pass-KKKK@redis:6379/0"
	cfg.Telemetry.Headers = map[string]string{"Authorization": "Basic otel-auth-MMMM"}
	return cfg
}

// hostileSecrets are hostileConfig's secrets, and the forms a server may
// echo them in.
var hostileSecrets = []string{
	"server-key-AAAA", "gsk_groqkeyBBBB", "vllm-token-CCCC", "pass-DDDD",
	base64.StdEncoding.EncodeToString([]byte("ollama-user:pass-DDDD")), "AIzaquerykeyEEEE",
	"tool-query-FFFF", "tool-bearer-GGGG", "hf_toolkeyHHHH", "mcp-pass-IIII",
	base64.StdEncoding.EncodeToString([]byte("mcp-user:mcp-pass-IIII")), "env-token-JJJJ", "redis-pass-KKKK", "admin-key-LLLL",
	"otel-auth-MMMM", "hosts-pass-NNNN",
}

func TestFromConfig(t *testing.T) {
	r := FromConfig(hostileConfig())
	for _, s := range hostileSecrets {
		in := `{"error":{"message":"invalid credentials ` + s + `, check ` + s + `"}}`
		got := r.String(in)
		if strings.Contains(got, s) || !strings.Contains(got, Mask) {
			t.Errorf("String(%q) = %q: secret not masked", in, got)
		}
	}
	for _, plain := range []string{"application/json", "/usr/bin", "the answer is 42"} {
		if got := r.String(plain); got != plain {
			t.Errorf("String(%q) = %q, want it unchanged", plain, got)
		}
	}
}

func TestRedactorZero(t *testing.T) {
	var r Redactor
	if got, want := r.String("key sk-proj-ABCDEFGH and AIzaSyABCDEFGHIJKLMNOPQRSTUV"), "key sk-*** and AIza***"; got != want {
		t.Errorf("zero Redactor String = %q, want %q", got, want)
	}
}

func TestNewLongestFirst(t *testing.T) {
	r := New("abcdef", "abcdefghij")
	if got, want := r.String("x abcdefghij y abcdef"), "x *** y ***"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if r := New("short", ""); !r.Empty() {
		t.Errorf("New of values under MinSecret = %d secrets, want none", len(r.secrets))
	}
}

type leaky struct{ Token string }

// TestHandler: every place a log line can carry text is masked, at debug
// level, for the text and JSON handlers alike.
func TestHandler(t *testing.T) {
	r := FromConfig(hostileConfig())
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			opts := &slog.HandlerOptions{Level: slog.LevelDebug}
			var h slog.Handler = slog.NewTextHandler(&buf, opts)
			if format == "json" {
				h = slog.NewJSONHandler(&buf, opts)
			}
			log := slog.New(r.Handler(h))
			for _, s := range hostileSecrets {
				log.Debug("upstream said "+s, "err", errors.New("401: "+s), "body", s, "raw", []byte(s), "list", []string{s},
					slog.Group("g", "inner", s), "struct", leaky{s})
				log.With("fixed", s).WithGroup("grp").Info("x", "v", s)
			}
			// Lines with nothing to mask pass whole, whatever their values.
			log.Info("plain line", "list", []string{"a"}, slog.Group("g", "x", 1), "err", errors.New("plain error"), "struct", leaky{"none"}, "raw", []byte("b"))
			out := buf.String()
			if !strings.Contains(out, "plain error") || !strings.Contains(out, "none") {
				t.Errorf("a line with nothing to mask lost its values:\n%s", out)
			}
			for _, s := range hostileSecrets {
				if strings.Contains(out, s) {
					t.Errorf("log output holds secret %q:\n%s", s, out)
				}
			}
			if !strings.Contains(out, "upstream said") {
				t.Errorf("log output lost its messages:\n%s", out)
			}
		})
	}
}

func BenchmarkRedactLogLine(b *testing.B) {
	r := FromConfig(hostileConfig())
	log := slog.New(r.Handler(slog.NewJSONHandler(io.Discard, nil)))
	b.ReportAllocs()
	for b.Loop() {
		log.Info("upstream call done", "req_id", "abc123", "node", "M1", "dur_ms", 1234, "err", errors.New("node M1: upstream status error (HTTP 401): bad key"))
	}
}

func BenchmarkPlainLogLine(b *testing.B) {
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	b.ReportAllocs()
	for b.Loop() {
		log.Info("upstream call done", "req_id", "abc123", "node", "M1", "dur_ms", 1234, "err", errors.New("node M1: upstream status error (HTTP 401): bad key"))
	}
}

func BenchmarkRedactTrace(b *testing.B) {
	r := FromConfig(hostileConfig())
	trace := strings.Repeat(`{"node":"M1","status":"ok","output":"Some answer text with code, lists and numbers 12345.","tools_used":[{"name":"read_file","args":{"path":"a/b.go"},"result":"package main\n"}]}`, 64)
	b.SetBytes(int64(len(trace)))
	b.ReportAllocs()
	for b.Loop() {
		r.String(trace)
	}
}

// FuzzMayMatch: the one-pass test is false exactly when every substring
// search patterns makes would be, so that skipping them changes nothing.
func FuzzMayMatch(f *testing.F) {
	for _, s := range []string{"", "a9534e31c73281f698e8a76352d60b46", "chat.completions", "A:ok", "key sk-proj-ABCDEFGH", "http://x", "Bearer x", "BASIC", "xoxb-1", "AKIA", "github_pat_", "gsk", "s", ":/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := false
		for _, n := range needles {
			want = want || strings.Contains(s, n)
		}
		if got := mayMatch(s); got != want {
			t.Fatalf("mayMatch(%q) = %v, want %v", s, got, want)
		}
		if len(s) <= shortText && patterns(s) != s && !want {
			t.Fatalf("patterns changed %q with no needle in it", s)
		}
	})
}

// BenchmarkRequestLogLine is the proxy's per-request log line through the
// masking handler and, for comparison, without it.
func BenchmarkRequestLogLine(b *testing.B) {
	line := func(b *testing.B, h slog.Handler) {
		b.ReportAllocs()
		for b.Loop() {
			rec := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
			rec.AddAttrs(slog.String("req_id", "a9534e31c73281f698e8a76352d60b46"), slog.String("route", "chat.completions"), slog.Int("status", 200), slog.Int64("dur_ms", 3))
			rec.AddAttrs(slog.String("mode", "relay"), slog.Int("turns", 1), slog.String("stages", "A:ok"))
			_ = h.Handle(context.Background(), rec)
		}
	}
	b.Run("plain", func(b *testing.B) { line(b, slog.NewTextHandler(io.Discard, nil)) })
	b.Run("patterns", func(b *testing.B) { line(b, Redactor{}.Handler(slog.NewTextHandler(io.Discard, nil))) })
	b.Run("secrets", func(b *testing.B) { line(b, FromConfig(hostileConfig()).Handler(slog.NewTextHandler(io.Discard, nil))) })
}

// TestTextKeyShapes: keys in the shapes providers issue them are masked
// with no configuration. The shapes are those of gitleaks' rules
// (github.com/gitleaks/gitleaks, cmd/generate/config/rules: openai.go,
// anthropic.go, github.go, aws.go, huggingface.go, groq.go) and RFC 7617
// (Basic is the base64 of "user:password").
func TestTextKeyShapes(t *testing.T) {
	alnum := func(n int) string { return strings.Repeat("aB3dE7", n)[:n] }
	tests := []struct{ name, in, want string }{
		{"openai project", "key sk-proj-" + alnum(74) + "T3BlbkFJ" + alnum(74) + " refused", "key sk-*** refused"},
		{"openai legacy", "OPENAI_API_KEY=sk-" + alnum(48), "OPENAI_API_KEY=sk-***"},
		{"anthropic", `{"key":"sk-ant-api03-` + alnum(93) + `AA"}`, `{"key":"sk-***"}`},
		{"github classic", "token ghp_" + alnum(36), "token ghp_***"},
		{"github actions", "GITHUB_TOKEN=ghs_" + alnum(36), "GITHUB_TOKEN=ghs_***"},
		{"github user-to-server", "ghu_" + alnum(36) + " expired", "ghu_*** expired"},
		{"github fine-grained", "github_pat_" + alnum(22) + "_" + alnum(59), "github_pat_***"},
		{"hugging face", "HF_TOKEN=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", "HF_TOKEN=hf_***"},
		{"groq", "gsk_" + alnum(48), "gsk_***"},
		{"aws access key", "AccessKeyId: AKIAIOSFODNN7EXAMPLE", "AccessKeyId: AKIA***"},
		{"aws temporary key", `"AccessKeyId" : "ASIAIOSFODNN7EXAMPLE"`, `"AccessKeyId" : "ASIA***"`},
		{"google", "key=AIza" + alnum(35), "key=AIza***"},
		{"bearer jwt", "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl", "Authorization: Bearer ***"},
		{"basic", "Authorization: Basic dXNlcjpodW50ZXIy", "Authorization: Basic ***"},
		{"basic, end of a sentence", "it sent Basic dXNlcjpodW50ZXIy.", "it sent Basic ***."},
		{"basic in clear", "basic admin:hunter2", "basic ***"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Text(tt.in); got != tt.want {
				t.Errorf("Text(%q)\n = %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestTextOrdinary: prose and code that only look like the start of a
// credential pass unchanged. The patterns mask tool results before the
// model sees them: a README's "## Basic usage" read as "## Basic ***", or
// huggingface_hub's hf_hub_download read as "hf_***", is what the model
// would then write back.
func TestTextOrdinary(t *testing.T) {
	for _, in := range []string{
		"## Basic usage\n",
		"Basic authentication is described below.",
		"BASIC PROGRAMMING",
		"the bearer of bad news",
		"The client sends a Bearer token.",
		"Authorization: Bearer <token>",
		"from huggingface_hub import hf_hub_download",
		"pip install hf_transfer",
		".sk-fading-circle .sk-circle { margin: 0 }",
		"request 550e8400-e29b-41d4-a716-446655440000 done",
		"sha256:a9534e31c73281f698e8a76352d60b46a9534e31c73281f698e8a76352d60b46",
		"a risk-averse task-manager",
	} {
		if got := Text(in); got != in {
			t.Errorf("Text(%q) = %q, want it unchanged", in, got)
		}
	}
}

// TestJSONEscapedSlash: PHP's json_encode writes "/" as "\/" unless told
// not to (JSON_UNESCAPED_SLASHES, https://www.php.net/manual/en/json.constants.php),
// so an endpoint in PHP echoing the headers it got sends a base64
// credential (or any secret with a "/") in that form: it is masked too.
func TestJSONEscapedSlash(t *testing.T) {
	token := base64.StdEncoding.EncodeToString([]byte("svc:s3cr?t>>")) // c3ZjOnMzY3I/dD4+
	cfg := config.Default()
	cfg.Tools.HTTP = []config.HTTPTool{{Name: "t", URL: "http://tool/", Headers: map[string]string{"Authorization": "Basic " + token}}}
	r := FromConfig(cfg)
	escaped := strings.ReplaceAll(token, "/", `\/`)
	for _, in := range []string{
		`{"headers":{"Authorization":"Basic ` + escaped + `"}}`,
		`{"error":"bad credentials ` + escaped + `"}`,
	} {
		if got := r.String(in); strings.Contains(got, "dD4") || !strings.Contains(got, Mask) {
			t.Errorf("String(%s) = %s, want the credential masked", in, got)
		}
	}
}
