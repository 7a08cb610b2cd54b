package antiloop

import (
	"hash/fnv"
	"testing"
)

// codexExec is the text Codex CLI sends back for its exec_command tool
// (ExecCommandToolOutput::response_text in openai/codex
// codex-rs/core/src/tools/context.rs): a random 6-hex chunk ID and the
// wall time head every result, above "Output:". Codex CLI 0.169.0, run by
// web's TestLoopAgents, sends it so.
func codexExec(chunk, wall, out string) string {
	return "Chunk ID: " + chunk + "\nWall time: " + wall + " seconds\nProcess exited with code 0\nOriginal token count: 2\nOutput:\n" + out
}

// qwenShell is Qwen Code's run_shell_command result (packages/core/src/
// tools/shell.ts of QwenLM/qwen-code, 0.24.4 in web/testdata/agents/npm):
// its last line is the process group of the run, a new PID every time
// when the command runs in a pty (node-pty, the default on Linux and
// macOS).
func qwenShell(out, pgid string) string {
	return "Command: ls\nDirectory: (root)\nOutput: " + out + "\nError: (none)\nExit Code: 0\nSignal: (none)\nProcess Group PGID: " + pgid
}

// TestResultHash: two runs of a client tool that found the same thing have
// the same result hash although the client's envelope names the run (a
// chunk ID, a wall time, a PID); a run that found something else, in the
// output or in the exit status, has another. A text without such an
// envelope hashes as FNV-1a of its bytes, as before.
func TestResultHash(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b string
		same bool
	}{
		{"codex: chunk ID and wall time differ", codexExec("56a6ec", "0.0000", "a.txt\n"), codexExec("9f9b8d", "0.0123", "a.txt\n"), true},
		{"codex: the output differs", codexExec("56a6ec", "0.0000", "a.txt\n"), codexExec("9f9b8d", "0.0000", "a.txt\nb.txt\n"), false},
		{"codex: the exit code differs", codexExec("56a6ec", "0.0000", "x"), "Chunk ID: 9f9b8d\nWall time: 0.0000 seconds\nProcess exited with code 1\nOriginal token count: 2\nOutput:\nx", false},
		{"codex: a still running process polled, nothing new", "Chunk ID: 07acea\nWall time: 5.0019 seconds\nProcess running with session ID 55249\nOriginal token count: 2\nOutput:\n", "Chunk ID: 1b2c3d\nWall time: 5.0007 seconds\nProcess running with session ID 55249\nOriginal token count: 2\nOutput:\n", true},
		{"codex: write_stdin's command line kept", "Command: make\nChunk ID: 07acea\nWall time: 1.0000 seconds\nOutput:\nok", "Command: make test\nChunk ID: 07acea\nWall time: 1.0000 seconds\nOutput:\nok", false},
		{"a wall time in the output is output", "Output:\nWall time: 1.0000 seconds", "Output:\nWall time: 2.0000 seconds", false},
		{"a wall time without an output header is output", "bench\nWall time: 1.0000 seconds", "bench\nWall time: 2.0000 seconds", false},
		{"qwen: PGID differs", qwenShell("a.txt", "41234"), qwenShell("a.txt", "41302"), true},
		{"qwen: the output differs", qwenShell("a.txt", "41234"), qwenShell("a.txt b.txt", "41302"), false},
		{"qwen: no pty, no PGID", qwenShell("a.txt", "(none)"), qwenShell("a.txt", "(none)"), true},
		{"plain results", "sunny, 24°C", "sunny, 25°C", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ResultHash(tc.a) == ResultHash(tc.b); got != tc.same {
				t.Errorf("same hash = %v, want %v\n%q\n%q", got, tc.same, tc.a, tc.b)
			}
		})
	}
	for _, s := range []string{"", "sunny, 24°C", "a.txt\nb.txt\n", "Output:\nx", qwenShell("a.txt", "(none)")} {
		h := fnv.New64a()
		h.Write([]byte(s))
		if got, want := ResultHash(s), h.Sum64(); got != want {
			t.Errorf("ResultHash(%q) = %x, want FNV-1a %x", s, got, want)
		}
	}
}
