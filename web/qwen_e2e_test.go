package web

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"chainproxy/chain"
	"chainproxy/config"
)

// qwenBin returns the Qwen Code CLI pinned in testdata/agents/npm, or skips
// (fails under CI) when node or the package is missing.
func qwenBin(t *testing.T) string {
	t.Helper()
	miss := func(why string) {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s (CI is set, so this fails instead of skipping)", why)
		}
		t.Skipf("%s: run `npm ci` in web/testdata/agents/npm to test with Qwen Code", why)
	}
	if _, err := exec.LookPath("node"); err != nil {
		miss("node is not installed")
	}
	bin, _ := filepath.Abs(filepath.Join("testdata", "agents", "npm", "node_modules", ".bin", "qwen"))
	if _, err := os.Stat(bin); err != nil {
		miss("Qwen Code missing: " + bin)
	}
	return bin
}

// traceRecorder keeps the trace of every chat completion the proxy answers,
// read from the last data frame of its stream (or its JSON answer), in the
// order the answers end.
type traceRecorder struct {
	next   http.Handler
	mu     sync.Mutex
	traces []chain.Trace
}

// teeWriter copies what the handler writes; Flush and Unwrap let the
// handler stream through it.
type teeWriter struct {
	http.ResponseWriter
	buf bytes.Buffer
}

func (w *teeWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	return w.ResponseWriter.Write(p)
}

func (w *teeWriter) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

func (w *teeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (rec *traceRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		rec.next.ServeHTTP(w, r)
		return
	}
	tw := &teeWriter{ResponseWriter: w}
	rec.next.ServeHTTP(tw, r)
	var doc struct {
		Chain *chain.Trace `json:"chain"`
	}
	for _, frame := range bytes.Split(tw.buf.Bytes(), []byte("\n\n")) {
		frame = bytes.TrimPrefix(bytes.TrimSpace(frame), []byte("data: "))
		if json.Unmarshal(frame, &doc) == nil && doc.Chain != nil {
			rec.mu.Lock()
			rec.traces = append(rec.traces, *doc.Chain)
			rec.mu.Unlock()
			return
		}
	}
}

func (rec *traceRecorder) judged(quote string) []chain.Trace {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []chain.Trace
	for _, tr := range rec.traces {
		for _, r := range tr.Reasons {
			if r == quote {
				out = append(out, tr)
				break
			}
		}
	}
	return out
}

// TestQwenCodeEndToEnd points Qwen Code, as a user would, at chain/auto on
// the proxy over scripted mock nodes, once with a trivial question and once
// with an analytical one: every request of the first turn is simple, every
// request of the second reflexive, and the trace quotes the question.
func TestQwenCodeEndToEnd(t *testing.T) {
	bin := qwenBin(t)
	cfg, err := config.Parse([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Server.MaxBodyBytes = 4 << 20
	cfg.Tools.Root = t.TempDir()
	rec := &traceRecorder{next: New(Options{Config: cfg, Engine: mustEngine(t, cfg), Keepalive: 20 * time.Millisecond})}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)

	tests := []struct {
		question, mode string
	}{
		{trivialQuestion, chain.ModeSimple},
		{analyticalQuestion, chain.ModeReflexive},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			home, work := t.TempDir(), t.TempDir()
			if err := os.WriteFile(filepath.Join(work, "README.md"), []byte("# Demo\n\nA small service.\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "--auth-type", "openai", "--openai-api-key", "sk-test",
				"--openai-base-url", srv.URL+"/v1", "-m", "chain/auto", tt.question)
			cmd.Dir = work
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "NO_COLOR=1", "TERM=dumb"}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("qwen: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), "M2") {
				t.Errorf("qwen printed %q, want the simple or review node's answer", out)
			}
			quote := `text judged: "` + tt.question + `"`
			if len(tt.question) > 80 {
				quote = `text judged: "` + strings.TrimRight(string([]rune(tt.question)[:80]), " ") + `…"`
			}
			traces := rec.judged(quote)
			if len(traces) == 0 {
				t.Fatalf("no request judged %q; traces: %+v", tt.question, rec.traces)
			}
			for _, tr := range traces {
				if tr.Mode != tt.mode {
					t.Errorf("request judged %q: mode %q, want %q (reasons %q)", tt.question, tr.Mode, tt.mode, tr.Reasons)
				}
			}
		})
	}
}
