package antiloop

import "strings"

// ResultHash identifies a client tool's result for the volatile rule: a
// call whose result comes back the same has stopped making progress. It is
// the FNV-1a hash of the result without the lines in which agent clients
// say how that run went rather than what it found, which are new on every
// run: without this, a model running `ls` fifteen times through Codex gets
// fifteen different results and is never stopped. Those lines are
//
//   - Codex CLI's exec_command and write_stdin: "Chunk ID: <hex>", a random
//     ID per result, and "Wall time: <s> seconds", in the header above the
//     line "Output:" (ExecCommandToolOutput::response_text in openai/codex
//     codex-rs/core/src/tools/context.rs; generate_chunk_id in
//     codex-rs/core/src/unified_exec);
//   - Qwen Code's and Gemini CLI's run_shell_command: "Process Group PGID:
//     <pid>" and "Background PIDs: <pids>" (packages/core/src/tools/shell.ts),
//     a new process every run.
//
// What a run found (the output, the exit code, a running process's session)
// is kept. A result without such lines hashes as FNV-1a of its bytes.
func ResultHash(res string) uint64 {
	h := uint64(fnvOffset)
	if i := outputHeader(res); i > 0 {
		for head := res[:i]; head != ""; {
			line, rest, _ := strings.Cut(head, "\n")
			if !codexRunLine(line) {
				h = fnvAdd(h, head[:len(head)-len(rest)])
			}
			head = rest
		}
		res = res[i:]
	}
	for res != "" {
		line, rest, found := strings.Cut(res, "\n")
		if !qwenRunLine(line) {
			h = fnvAdd(h, line)
			if found {
				h = fnvAdd(h, "\n")
			}
		}
		res = rest
	}
	return h
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvAdd(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// outputHeader is where the line "Output:" of a Codex exec result starts,
// the end of its header; 0 when there is none.
func outputHeader(res string) int {
	if i := strings.Index(res, "\nOutput:\n"); i >= 0 {
		return i + 1
	}
	if strings.HasSuffix(res, "\nOutput:") {
		return len(res) - len("Output:")
	}
	return 0
}

// codexRunLine reports a line of a Codex exec header that names the run:
// its chunk ID or its wall time.
func codexRunLine(line string) bool {
	if v, ok := strings.CutPrefix(line, "Chunk ID: "); ok {
		return v != "" && strings.Trim(v, "0123456789abcdef") == ""
	}
	if v, ok := strings.CutPrefix(line, "Wall time: "); ok {
		v, ok = strings.CutSuffix(v, " seconds")
		return ok && v != "" && strings.Trim(v, "0123456789.") == ""
	}
	return false
}

// qwenRunLine reports a line of a Qwen Code or Gemini CLI shell result that
// names the run's processes.
func qwenRunLine(line string) bool {
	if v, ok := strings.CutPrefix(line, "Process Group PGID: "); ok {
		return v != "" && strings.Trim(v, "0123456789") == ""
	}
	if v, ok := strings.CutPrefix(line, "Background PIDs: "); ok {
		return v != "" && strings.Trim(v, "0123456789, ") == ""
	}
	return false
}
