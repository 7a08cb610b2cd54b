// Package realollama runs a real Ollama for the proxy's real-upstream test
// tier: it finds the binary scripts/build-ollama.sh built, starts
// `ollama serve` on a free loopback port with its own model store, creates
// models from a tiny random-weight GGUF it writes (WriteTinyGGUF), and stops
// the server when the tests end.
//
// It is for tests only. Without the binary, Require skips the test with a
// message, and fails it when the environment variable CI is set, so that CI
// never passes by skipping.
package realollama

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Version is the Ollama version scripts/build-ollama.sh builds.
const Version = "0.17.4"

// ToolsTemplate is a qwen2.5-shaped chat template: it renders .Tools, so
// Ollama reports the "tools" capability for a model created with it, and
// parses <tool_call> blocks out of the answer.
const ToolsTemplate = `{{- if .Messages }}
{{- if or .System .Tools }}<|im_start|>system
{{- if .System }}
{{ .System }}
{{- end }}
{{- if .Tools }}

# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{{- range .Tools }}
{"type": "function", "function": {{ .Function }}}
{{- end }}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call>
{{- end }}<|im_end|>
{{ end }}
{{- range $i, $_ := .Messages }}
{{- $last := eq (len (slice $.Messages $i)) 1 -}}
{{- if eq .Role "user" }}<|im_start|>user
{{ .Content }}<|im_end|>
{{ else if eq .Role "assistant" }}<|im_start|>assistant
{{ if .Content }}{{ .Content }}
{{- else if .ToolCalls }}<tool_call>
{{ range .ToolCalls }}{"name": "{{ .Function.Name }}", "arguments": {{ .Function.Arguments }}}
{{ end }}</tool_call>
{{- end }}{{ if not $last }}<|im_end|>
{{ end }}
{{- else if eq .Role "tool" }}<|im_start|>user
<tool_response>
{{ .Content }}
</tool_response><|im_end|>
{{ end }}
{{- if and (ne .Role "assistant") $last }}<|im_start|>assistant
{{ end }}
{{- end }}
{{- else }}
{{- if .System }}<|im_start|>system
{{ .System }}<|im_end|>
{{ end }}{{ if .Prompt }}<|im_start|>user
{{ .Prompt }}<|im_end|>
{{ end }}<|im_start|>assistant
{{ end }}{{ .Response }}{{ if .Response }}<|im_end|>{{ end }}`

// PlainTemplate is a ChatML template without tools: Ollama reports only
// "completion" for a model created with it, and refuses tools sent to it.
const PlainTemplate = `{{- range .Messages }}<|im_start|>{{ .Role }}
{{ .Content }}<|im_end|>
{{ end }}<|im_start|>assistant
`

// TB is the part of testing.TB the package uses.
type TB interface {
	Helper()
	Skip(args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

// Binary returns the path of the Ollama binary: $CHAINPROXY_OLLAMA, else
// what scripts/build-ollama.sh caches under the repository's .cache/.
// Without it the test skips, or fails under CI.
func Binary(t TB) string {
	t.Helper()
	path := os.Getenv("CHAINPROXY_OLLAMA")
	if path == "" {
		root, err := repoRoot()
		if err != nil {
			t.Fatal(err)
		}
		path = filepath.Join(root, ".cache", "ollama-"+Version, "ollama")
	}
	if _, err := os.Stat(path); err != nil {
		msg := fmt.Sprintf("real Ollama not built (%v): run scripts/build-ollama.sh", err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return path
}

// RepoRoot is the directory of the repository's go.mod.
func RepoRoot() (string, error) { return repoRoot() }

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("realollama: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Server is a running `ollama serve`.
type Server struct {
	// URL is its base URL, http://127.0.0.1:port.
	URL string
	bin string
	env []string
	cmd *exec.Cmd
	log *syncBuffer
	// done is closed once the process has exited.
	done chan struct{}
}

// Start runs `ollama serve` on a free loopback port, with its models and
// home in dir, one request at a time per model (as the proxy's default
// max_concurrency of 1 expects), and waits until it answers. env are more
// of its variables ("OLLAMA_MAX_LOADED_MODELS=1"), which win over these.
func Start(bin, dir string, env ...string) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	s := &Server{URL: "http://" + addr, bin: bin, log: &syncBuffer{}, done: make(chan struct{})}
	s.env = append(os.Environ(),
		"OLLAMA_HOST="+addr,
		"OLLAMA_MODELS="+filepath.Join(dir, "models"),
		"HOME="+dir, // the server's key pair goes under ~/.ollama
		"OLLAMA_NUM_PARALLEL=1",
		"OLLAMA_NOPRUNE=1",
		"OLLAMA_NO_CLOUD=1",
		// Debug lines include "truncating input messages which exceed
		// context length": a silent cut the context tests look for.
		"OLLAMA_DEBUG=1",
	)
	s.env = append(s.env, env...)
	s.cmd = exec.Command(bin, "serve")
	s.cmd.Env = s.env
	s.cmd.Stdout = s.log
	s.cmd.Stderr = s.log
	// Its own process group: Stop ends the runners it started too.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { // exits when the server process does
		s.cmd.Wait()
		close(s.done)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		resp, err := http.Get(s.URL + "/api/version")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("ollama serve exited: %s", s.Log())
		case <-ctx.Done():
			s.Stop()
			return nil, fmt.Errorf("ollama serve did not answer within a minute: %s", s.Log())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Create runs `ollama create name` with a Modelfile FROM the GGUF at gguf and
// the given template; the model stops at <|im_end|>. Each of params is
// one more PARAMETER line ("num_predict 8"): the model's default for
// requests that do not set it, as the CLI's never do.
func (s *Server) Create(name, gguf, template string, params ...string) error {
	dir := filepath.Dir(gguf)
	mf := fmt.Sprintf("FROM ./%s\nTEMPLATE \"\"\"%s\"\"\"\nPARAMETER stop <|im_end|>\n", filepath.Base(gguf), template)
	for _, p := range params {
		mf += "PARAMETER " + p + "\n"
	}
	path := filepath.Join(dir, name+".Modelfile")
	if err := os.WriteFile(path, []byte(mf), 0o644); err != nil {
		return err
	}
	cmd := exec.Command(s.bin, "create", name, "-f", path)
	cmd.Dir = dir
	cmd.Env = s.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("ollama create %s: %w: %s", name, err, out)
	}
	return nil
}

// Log returns what the server and its runners logged so far.
func (s *Server) Log() string { return s.log.String() }

// Stop ends the server and its runners and waits for it.
func (s *Server) Stop() {
	if s.cmd.Process == nil {
		return
	}
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
}

// syncBuffer is a bytes.Buffer safe for the process's writers and readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

var _ io.Writer = (*syncBuffer)(nil)

// RunnerCPU returns the CPU time used so far by the server's runners, the
// processes it started to generate (they share its process group): a
// runner still generating keeps using it, an idle one does not.
func (s *Server) RunnerCPU() (time.Duration, error) {
	pgid := s.cmd.Process.Pid
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var ticks int64
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // not a process, or gone
		}
		// Fields after the command, which is in parentheses and may hold
		// spaces: state ppid pgrp … utime (14th field) stime (15th).
		rest := string(data[bytes.LastIndexByte(data, ')')+2:])
		f := strings.Fields(rest)
		if len(f) < 13 || f[2] != fmt.Sprint(pgid) || e.Name() == fmt.Sprint(pgid) {
			continue
		}
		var ut, st int64
		fmt.Sscan(f[11], &ut)
		fmt.Sscan(f[12], &st)
		ticks += ut + st
	}
	// USER_HZ is 100 on every Linux the tests run on.
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}
