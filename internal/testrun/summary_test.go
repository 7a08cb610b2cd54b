package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// Lines recorded from go1.26.8's `go test -json`: the store's tests
// without redis-server on PATH (redistest's message, through t.Helper, at
// each test's own line), and the shapes of the scratch module in
// testdata/scratch.jsonl.
const (
	redisSkip1 = `{"Action":"run","Package":"chainproxy/store","Test":"TestSlotsOrder"}
{"Action":"output","Package":"chainproxy/store","Test":"TestSlotsOrder","Output":"=== RUN   TestSlotsOrder\n"}
{"Action":"output","Package":"chainproxy/store","Test":"TestSlotsOrder","Output":"    slots_test.go:24: skipping: redis-server not found on PATH (install it, e.g. apt-get install redis-server): exec: \"redis-server\": executable file not found in $PATH\n"}
{"Action":"output","Package":"chainproxy/store","Test":"TestSlotsOrder","Output":"--- SKIP: TestSlotsOrder (0.00s)\n"}
{"Action":"skip","Package":"chainproxy/store","Test":"TestSlotsOrder","Elapsed":0}
`
	redisSkip2 = `{"Action":"run","Package":"chainproxy/store","Test":"TestSlotsExpire"}
{"Action":"output","Package":"chainproxy/store","Test":"TestSlotsExpire","Output":"=== RUN   TestSlotsExpire\n"}
{"Action":"output","Package":"chainproxy/store","Test":"TestSlotsExpire","Output":"    slots_test.go:82: skipping: redis-server not found on PATH (install it, e.g. apt-get install redis-server): exec: \"redis-server\": executable file not found in $PATH\n"}
{"Action":"output","Package":"chainproxy/store","Test":"TestSlotsExpire","Output":"--- SKIP: TestSlotsExpire (0.00s)\n"}
{"Action":"skip","Package":"chainproxy/store","Test":"TestSlotsExpire","Elapsed":0}
`
	storeOK = `{"Action":"output","Package":"chainproxy/store","Output":"PASS\n"}
{"Action":"output","Package":"chainproxy/store","Output":"ok  \tchainproxy/store\t0.014s\n"}
{"Action":"pass","Package":"chainproxy/store","Elapsed":0.019}
`
	redisMsg = `skipping: redis-server not found on PATH (install it, e.g. apt-get install redis-server): exec: "redis-server": executable file not found in $PATH`
)

func TestRead(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		verbose bool
		out     string
		want    Summary
	}{
		{
			name: "one reason for the same message at two lines",
			in:   redisSkip1 + redisSkip2 + storeOK,
			out:  "ok  \tchainproxy/store\t0.014s\n",
			want: Summary{Skipped: 2, Reasons: []Reason{{redisMsg, 2}}},
		},
		{
			name: "the last log entry is the reason, its lines joined",
			in: `{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:4: before\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:5: chromium not in PATH\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"        second line\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"--- SKIP: TestA (0.00s)\n"}
{"Action":"skip","Package":"p","Test":"TestA","Elapsed":0}
`,
			want: Summary{Skipped: 1, Reasons: []Reason{{"chromium not in PATH second line", 1}}},
		},
		{
			name: "t.SkipNow gives no reason",
			in: `{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"--- SKIP: TestA (0.00s)\n"}
{"Action":"skip","Package":"p","Test":"TestA","Elapsed":0}
`,
			want: Summary{Skipped: 1, Reasons: []Reason{{"no reason given", 1}}},
		},
		{
			name: "subtests count, a passing test's output is not shown",
			in: `{"Action":"output","Package":"p","Test":"TestS","Output":"=== RUN   TestS\n"}
{"Action":"output","Package":"p","Test":"TestS/x","Output":"=== RUN   TestS/x\n"}
{"Action":"output","Package":"p","Test":"TestS/x","Output":"    s_test.go:6: hello\n"}
{"Action":"output","Package":"p","Test":"TestS/x","Output":"--- PASS: TestS/x (0.00s)\n"}
{"Action":"pass","Package":"p","Test":"TestS/x","Elapsed":0}
{"Action":"output","Package":"p","Test":"TestS","Output":"--- PASS: TestS (0.00s)\n"}
{"Action":"pass","Package":"p","Test":"TestS","Elapsed":0}
{"Action":"output","Package":"p","Output":"PASS\n"}
{"Action":"output","Package":"p","Output":"ok  \tp\t0.1s\n"}
{"Action":"pass","Package":"p","Elapsed":0.1}
`,
			out:  "ok  \tp\t0.1s\n",
			want: Summary{Passed: 2},
		},
		{
			name: "a failed test's output, without its RUN lines",
			in: `{"Action":"output","Package":"p","Test":"TestF","Output":"=== RUN   TestF\n"}
{"Action":"output","Package":"p","Test":"TestF/s","Output":"=== RUN   TestF/s\n"}
{"Action":"output","Package":"p","Test":"TestF/s","Output":"    a_test.go:7: boom\n"}
{"Action":"output","Package":"p","Test":"TestF/s","Output":"--- FAIL: TestF/s (0.00s)\n"}
{"Action":"fail","Package":"p","Test":"TestF/s","Elapsed":0}
{"Action":"output","Package":"p","Test":"TestF","Output":"--- FAIL: TestF (0.00s)\n"}
{"Action":"fail","Package":"p","Test":"TestF","Elapsed":0}
{"Action":"output","Package":"p","Output":"FAIL\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t0.007s\n"}
{"Action":"fail","Package":"p","Elapsed":0.044}
`,
			out:  "    a_test.go:7: boom\n--- FAIL: TestF/s (0.00s)\n--- FAIL: TestF (0.00s)\nFAIL\nFAIL\tp\t0.007s\n",
			want: Summary{Failed: 2},
		},
		{
			name: "a test still running when its package fails failed",
			in: `{"Action":"run","Package":"p","Test":"TestOK"}
{"Action":"output","Package":"p","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"run","Package":"p","Test":"TestHang"}
{"Action":"output","Package":"p","Test":"TestHang","Output":"=== RUN   TestHang\n"}
{"Action":"output","Package":"p","Test":"TestHang","Output":"panic: test timed out after 10m0s\n"}
{"Action":"pass","Package":"p","Test":"TestOK","Elapsed":0}
{"Action":"output","Package":"p","Output":"FAIL\tp\t600.1s\n"}
{"Action":"fail","Package":"p","Elapsed":600.1}
`,
			out:  "panic: test timed out after 10m0s\nFAIL\tp\t600.1s\n",
			want: Summary{Passed: 1, Failed: 1},
		},
		{
			name: "a line after its test ended fails nothing",
			in: `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"--- PASS: TestA (0.00s)\n"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":0}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== NAME  TestA\n"}
{"Action":"output","Package":"p","Output":"goleak: found unexpected goroutines\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t0.1s\n"}
{"Action":"fail","Package":"p","Elapsed":0.1}
`,
			out:  "goleak: found unexpected goroutines\nFAIL\tp\t0.1s\n",
			want: Summary{Passed: 1, Failed: 1},
		},
		{
			name: "a build failure is one failure",
			in: `{"ImportPath":"gj/c [gj/c.test]","Action":"build-output","Output":"# gj/c [gj/c.test]\n"}
{"ImportPath":"gj/c [gj/c.test]","Action":"build-output","Output":"c/c_test.go:3:27: undefined: undefined\n"}
{"ImportPath":"gj/c [gj/c.test]","Action":"build-fail"}
{"Action":"start","Package":"gj/c"}
{"Action":"output","Package":"gj/c","Output":"FAIL\tgj/c [build failed]\n"}
{"Action":"fail","Package":"gj/c","Elapsed":0,"FailedBuild":"gj/c [gj/c.test]"}
`,
			out:  "# gj/c [gj/c.test]\nc/c_test.go:3:27: undefined: undefined\nFAIL\tgj/c [build failed]\n",
			want: Summary{Failed: 1},
		},
		{
			name: "a package without tests, and lines that are not JSON",
			in: `go: warning: not JSON
{"Action":"output","Package":"d","Output":"?   \td\t[no test files]\n"}
{"Action":"skip","Package":"d","Elapsed":0}
{broken
`,
			out:  "go: warning: not JSON\n?   \td\t[no test files]\n{broken\n",
			want: Summary{},
		},
		{
			name:    "-v shows every line as it comes",
			in:      redisSkip1 + storeOK,
			verbose: true,
			out: "=== RUN   TestSlotsOrder\n    slots_test.go:24: " + redisMsg + "\n--- SKIP: TestSlotsOrder (0.00s)\n" +
				"PASS\nok  \tchainproxy/store\t0.014s\n",
			want: Summary{Skipped: 1, Reasons: []Reason{{redisMsg, 1}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			got, err := Read(strings.NewReader(tt.in), &out, tt.verbose)
			if err != nil {
				t.Fatal(err)
			}
			if got.Passed != tt.want.Passed || got.Failed != tt.want.Failed || got.Skipped != tt.want.Skipped || !slices.Equal(got.Reasons, tt.want.Reasons) {
				t.Errorf("Read() = %+v, want %+v", got, tt.want)
			}
			if out.String() != tt.out {
				t.Errorf("Read() wrote:\n%s\nwant:\n%s", out.String(), tt.out)
			}
		})
	}
}

func TestWriteSummary(t *testing.T) {
	var b strings.Builder
	WriteSummary(&b, Summary{Passed: 10, Failed: 0, Skipped: 4, Reasons: []Reason{{"needs /proc", 1}, {"no redis-server", 3}}})
	want := "skipped: 3 tests — no redis-server\nskipped: 1 test — needs /proc\n10 passed, 0 failed, 4 skipped\n"
	if b.String() != want {
		t.Errorf("WriteSummary wrote:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestReadGolden: a whole recorded run (go1.26.8, `go test -json ./...` in
// testdata/scratch, a module with passing, skipped, failed and panicking
// tests, a build error, a package without tests and a TestMain that prints;
// recorded in /tmp/gj, hence the paths) reads as go test prints it without
// -json, then the summary.
func TestReadGolden(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("testdata", "scratch.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sum, err := Read(bytes.NewReader(in), &out, false)
	if err != nil {
		t.Fatal(err)
	}
	WriteSummary(&out, sum)
	golden := filepath.Join("testdata", "scratch.golden")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("output:\n%s\nwant (%s):\n%s", out.Bytes(), golden, want)
	}
}

// FuzzRead: any input reads without panicking, every skip has its reason
// counted, and nothing is invented: the counts cannot exceed the lines.
func FuzzRead(f *testing.F) {
	f.Add(redisSkip1 + redisSkip2 + storeOK)
	f.Add(`{"Action":"fail","Package":"p"}` + "\n" + `{"Action":"output","Package":"p","Test":"T","Output":"    x.go:1: \n"}`)
	f.Add("{\"Action\":\"skip\",\"Package\":\"p\",\"Test\":\"T\"}\nnot json")
	f.Fuzz(func(t *testing.T, in string) {
		var out bytes.Buffer
		sum, err := Read(strings.NewReader(in), &out, false)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range sum.Reasons {
			n += r.Tests
			if r.Text == "" || strings.ContainsAny(r.Text, "\n\r") {
				t.Errorf("reason %q: want one non-empty line", r.Text)
			}
		}
		if n != sum.Skipped {
			t.Errorf("reasons count %d skips, Skipped = %d", n, sum.Skipped)
		}
		if lines := strings.Count(in, "\n") + 1; sum.Passed+sum.Failed+sum.Skipped > lines {
			t.Errorf("%d tests counted from %d lines", sum.Passed+sum.Failed+sum.Skipped, lines)
		}
		if utf8.ValidString(in) && !utf8.Valid(out.Bytes()) {
			t.Errorf("valid input gave invalid output %q", out.Bytes())
		}
	})
}

// TestRunExitCode: the command leaves with go test's exit code, after the
// summary, over testdata/scratch (its own module, outside ./...).
func TestRunExitCode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test on testdata/scratch")
	}
	t.Chdir(filepath.Join("testdata", "scratch"))
	for _, tt := range []struct {
		args []string
		code int
		last string
	}{
		{[]string{"-count=1", "./e", "./d"}, 0, "0 passed, 0 failed, 0 skipped\n"},
		{[]string{"-count=1", "-run", "TestSub|TestPass", "./a"}, 0, "2 passed, 0 failed, 2 skipped\n"},
		{[]string{"-count=1", "./a"}, 1, "2 passed, 2 failed, 4 skipped\n"},
		{[]string{"-count=1", "./c"}, 1, "0 passed, 1 failed, 0 skipped\n"},
		{[]string{"-count=x", "./a"}, 2, "0 passed, 0 failed, 0 skipped\n"}, // go test's usage error
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out, errs strings.Builder
			code := run(tt.args, &out, &errs)
			if code != tt.code || !strings.HasSuffix(out.String(), tt.last) {
				t.Errorf("run(%q) = %d, output ending %q; want %d, ending %q\nstdout:\n%s\nstderr:\n%s", tt.args, code, lastLine(out.String()), tt.code, tt.last, out.String(), errs.String())
			}
		})
	}
}

func lastLine(s string) string {
	s = strings.TrimSuffix(s, "\n")
	return s[strings.LastIndex(s, "\n")+1:] + "\n"
}
