package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBadConfigExits2(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(path, []byte("nodes:\n  - {name: OL1, provider: olama, base_url: http://x, model: m}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad provider", []string{"-config", path}, path + `:2: nodes[0].provider: unknown provider "olama" (want ollama, openai or mock)`},
		{"missing file", []string{"-config", filepath.Join(dir, "nope.yaml")}, "no such file"},
		{"bad flag", []string{"-nope"}, "flag provided but not defined"},
		{"bad log format", []string{"-log-format", "xml"}, "-log-format"},
		// Go's flag package stops at the first argument that is not a
		// flag: the file and every flag after it were silently dropped,
		// and the proxy served the built-in defaults on the default port.
		{"file without -config", []string{path}, `unexpected argument "` + path + `": give a configuration file as -config ` + path},
		{"flags after a file", []string{"-demo", path, "-addr", "127.0.0.1:0"}, `unexpected argument "` + path + `"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Bounded: a run that starts serving instead fails the test.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			var stderr strings.Builder
			if code := run(ctx, tt.args, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("run(%v) = %d, stderr %q; want 2 and %q", tt.args, code, stderr.String(), tt.want)
			}
		})
	}
}

// TestDemoServesAndShutsDownGracefully runs the real wiring in -demo mode,
// asks a reflexive question, and checks that SIGTERM (ctx) lets an
// in-flight request finish.
func TestDemoServesAndShutsDownGracefully(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pr, pw := io.Pipe()
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"-demo", "-addr", "127.0.0.1:0", "-log-level", "warn"}, pw, io.Discard)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var base string
	for sc.Scan() {
		if after, ok := strings.CutPrefix(sc.Text(), "chainproxy listening on "); ok {
			base = after
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if base == "" {
		t.Fatal("no listening line")
	}
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(
		`{"model":"chain/auto","messages":[{"role":"user","content":"Compare notes.md and plan.md"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Chain struct {
			Mode   string `json:"mode"`
			Stages []struct {
				Node      string `json:"node"`
				ToolsUsed []any  `json:"tools_used"`
			} `json:"stages"`
		} `json:"chain"`
	}
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if out.Chain.Mode != "reflexive" || len(out.Chain.Stages) != 3 || len(out.Chain.Stages[0].ToolsUsed) == 0 || !strings.Contains(out.Choices[0].Message.Content, "reviewed by M2") {
		t.Errorf("demo answer = %+v", out)
	}

	// A request in flight when the signal comes still completes: once its
	// first event is in, the process is told to stop.
	resp, err = http.Post(base+"/chat", "application/json", strings.NewReader(`{"message":"Compare the plans step by step","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "event: classified") {
		t.Fatalf("first line %q, %v", line, err)
	}
	cancel()
	rest, err := io.ReadAll(br)
	if err != nil || !strings.Contains(string(rest), "event: done") {
		t.Errorf("in-flight stream during shutdown: %v, ends %q", err, tail(string(rest)))
	}
	if c := <-code; c != 0 {
		t.Errorf("exit code %d, want 0", c)
	}
}

func tail(s string) string {
	if len(s) > 200 {
		return s[len(s)-200:]
	}
	return s
}
