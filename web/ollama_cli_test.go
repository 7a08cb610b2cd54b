package web

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"chainproxy/internal/realollama"
)

var ansiRE = regexp.MustCompile(`\x1b\[[0-9;?]*[a-zA-Z]`)

// TestOllamaCLIRun runs the real ollama CLI against the proxy, as a user
// pointing OLLAMA_HOST at it would: `ollama run chain/reflexive "…"` checks
// the server (HEAD /), shows the model (/api/show), and prints the chain's
// answer from the /api/generate stream. The binary is the one
// scripts/build-ollama.sh builds; without it the test skips (fails under CI).
func TestOllamaCLIRun(t *testing.T) {
	bin := realollama.Binary(t)
	s := newTestServer(t, strings.Replace(testConfig, "    model: big-1\n", "    model: big-1\n    context_window: 8192\n", 1))
	for _, tc := range []struct {
		name  string
		args  []string
		want  string
		never string // what the output must not hold
	}{
		{"run", []string{"run", "chain/reflexive", "compare the two"}, "Final answer from M2.", ""},
		{"list", []string{"list"}, "chain/reflexive", ""},
		{"show", []string{"show", "chain/simple"}, "tools", ""},
		{"show node", []string{"show", "M1"}, "context length    8192", ""},
		// Nothing the proxy serves unloads: the CLI must not say it stops.
		{"ps", []string{"ps"}, "Forever", "Stopping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, tc.args...)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "OLLAMA_HOST=" + s.URL, "TERM=dumb"}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("ollama %s: %v\n%s", strings.Join(tc.args, " "), err, out)
			}
			// The CLI draws a spinner with terminal escapes even on a pipe.
			out = ansiRE.ReplaceAll(out, nil)
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("ollama %s printed:\n%s\nwant it to contain %q", strings.Join(tc.args, " "), out, tc.want)
			}
			if tc.never != "" && strings.Contains(string(out), tc.never) {
				t.Errorf("ollama %s printed:\n%s\nwant no %q", strings.Join(tc.args, " "), out, tc.never)
			}
		})
	}
}
