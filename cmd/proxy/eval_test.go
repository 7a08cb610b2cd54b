package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"chainproxy/eval"
)

// sampleSet is the sample shipped in examples/eval.
var sampleSet = filepath.Join("..", "..", "examples", "eval", "sample.jsonl")

// runEvalCmd runs "proxy eval args…" as the binary does, through run.
func runEvalCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), append([]string{"eval"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

func readReport(t *testing.T, dir string) (*eval.Report, map[string]any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep eval.Report
	var raw map[string]any
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	return &rep, raw
}

// TestEvalDemoSample is the command end to end: the demo's scripted
// models (eval_demo.yaml) on the shipped sample, through the engine wire
// builds. The script makes each node right on known items, so every
// figure of the report is known exactly.
func TestEvalDemoSample(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runEvalCmd(t, "-demo", "-data", sampleSet, "-out", dir)
	if code != 0 {
		t.Fatalf("eval exit code = %d, want 0; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{"chain/reflexive", "95% CI", "chain/reflexive against M1 (the best single node), on 16 items: 5 wins, 2 losses, 9 ties; exact McNemar p = 0.453",
		"chain/auto routed 9 items to simple mode (88.9% right) and 7 to the reflexive chain (100.0% right)", "report.html"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	rep, raw := readReport(t, dir)

	// Per mode: the script's right answers (eval_demo.yaml's comment).
	want := map[string]struct{ correct, guard int }{"OL1": {5, 0}, "M1": {11, 0}, "M2": {9, 0}, "chain/reflexive": {14, 1}, "chain/auto": {15, 1}}
	if len(rep.Modes) != len(want) {
		t.Fatalf("modes = %d, want %d", len(rep.Modes), len(want))
	}
	for _, m := range rep.Modes {
		w := want[m.Mode]
		lo, hi := eval.Wilson(w.correct, 16)
		if m.Items != 16 || m.Correct != w.correct || m.Failed != 0 || m.Accuracy != float64(w.correct)/16 || m.CILow != lo || m.CIHigh != hi {
			t.Errorf("%s: %d items, %d correct, %d failed, accuracy %v in [%v, %v]; want 16, %d, 0, %v in [%v, %v]",
				m.Mode, m.Items, m.Correct, m.Failed, m.Accuracy, m.CILow, m.CIHigh, w.correct, float64(w.correct)/16, lo, hi)
		}
		if m.GuardStops != w.guard {
			t.Errorf("%s: guard stops = %d, want %d (OL1 loops on the tank problem)", m.Mode, m.GuardStops, w.guard)
		}
		if m.P50MS <= 0 || m.P95MS < m.P50MS || m.TokensIn <= 0 || m.TokensOut <= 0 || m.Calls < 16 {
			t.Errorf("%s: p50 %d, p95 %d ms, tokens %d/%d, calls %d: want measured costs", m.Mode, m.P50MS, m.P95MS, m.TokensIn, m.TokensOut, m.Calls)
		}
	}
	// Chain against the best single node (M1), item by item.
	wantCmp := map[string]eval.Comparison{
		"chain/reflexive": {Chain: "chain/reflexive", Node: "M1", Pairs: 16, Wins: 5, Losses: 2, Ties: 9, PValue: 58.0 / 128},
		"chain/auto":      {Chain: "chain/auto", Node: "M1", Pairs: 16, Wins: 4, Losses: 0, Ties: 12, PValue: 2.0 / 16},
	}
	for _, c := range rep.Comparisons {
		w := wantCmp[c.Chain]
		if c.Node != w.Node || c.Pairs != w.Pairs || c.Wins != w.Wins || c.Losses != w.Losses || c.Ties != w.Ties || math.Abs(c.PValue-w.PValue) > 1e-12 {
			t.Errorf("comparison %+v, want %+v", c, w)
		}
	}
	// auto: the short facts and the ages problem (no keyword, medium
	// length) went simple, the seven problems with "step by step" or
	// "compare" went reflexive.
	if r := rep.Routing; r == nil || r.Simple.Items != 9 || r.Simple.Correct != 8 || r.Reflexive.Items != 7 || r.Reflexive.Correct != 7 ||
		strings.Join(r.Reflexive.IDs, ",") != "apples,train,tank,shirts,phone-plans,savings,fractions" {
		t.Errorf("routing = %+v, want simple 9 (8 right), reflexive 7 (all right)", rep.Routing)
	}

	// The JSON's contract: per mode and per item fields by name.
	for _, m := range raw["modes"].([]any) {
		for _, k := range []string{"accuracy", "ci_low", "ci_high", "p50_ms", "p95_ms", "tokens_in", "tokens_out", "items"} {
			if _, ok := m.(map[string]any)[k]; !ok {
				t.Errorf("report.json mode %v lacks %q", m.(map[string]any)["mode"], k)
			}
		}
	}
	items := raw["items"].([]any)
	if len(items) != 80 {
		t.Fatalf("report.json items = %d, want 16 × 5", len(items))
	}
	ids := map[string]bool{}
	for _, it := range items {
		m := it.(map[string]any)
		for _, k := range []string{"id", "mode", "correct", "trace_id"} {
			if _, ok := m[k]; !ok {
				t.Errorf("report.json item %v lacks %q", m, k)
			}
		}
		ids[m["trace_id"].(string)] = true
	}
	// Every trace id is unique, and its trace is in traces.jsonl.
	f, err := os.Open(filepath.Join(dir, "traces.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 8<<20)
	n := 0
	for sc.Scan() {
		var line struct {
			TraceID string          `json:"trace_id"`
			Chain   json.RawMessage `json:"chain"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil || !ids[line.TraceID] || len(line.Chain) < 10 {
			t.Errorf("traces.jsonl line %d: trace %q (known %v), error %v", n+1, line.TraceID, ids[line.TraceID], err)
		}
		n++
	}
	if len(ids) != 80 || n != 80 {
		t.Errorf("%d distinct trace ids, %d traces, want 80 each", len(ids), n)
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil || !bytes.Contains(html, []byte(`<svg id="accuracy"`)) {
		t.Errorf("report.html: %v, want the accuracy plot", err)
	}
}

// TestEvalResume: a run of one mode, then the same with two under
// -resume, asks only the second mode and keeps the first's answers.
func TestEvalResume(t *testing.T) {
	dir := t.TempDir()
	if code, _, stderr := runEvalCmd(t, "-demo", "-data", sampleSet, "-n", "3", "-modes", "M1", "-out", dir); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, stderr)
	}
	first, _ := readReport(t, dir)
	code, _, stderr := runEvalCmd(t, "-demo", "-data", sampleSet, "-n", "3", "-modes", "M1,M2", "-out", dir, "-resume")
	if code != 0 {
		t.Fatalf("resumed run: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "resuming: 3 answers kept") {
		t.Errorf("stderr = %q, want it to say 3 answers were kept", stderr)
	}
	rep, _ := readReport(t, dir)
	if len(rep.Results) != 6 {
		t.Fatalf("resumed report has %d results, want 6", len(rep.Results))
	}
	kept := map[string]bool{}
	for _, r := range first.Results {
		kept[r.TraceID] = true
	}
	m1 := 0
	for _, r := range rep.Results {
		if r.Mode == "M1" {
			m1++
			if !kept[r.TraceID] {
				t.Errorf("M1 answer %s was asked again (trace %s)", r.ID, r.TraceID)
			}
		}
	}
	if m1 != 3 || !rep.Started.Equal(first.Started) {
		t.Errorf("M1 results = %d, started %v; want 3, the first run's %v", m1, rep.Started, first.Started)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "traces.jsonl"))
	if n := bytes.Count(data, []byte("\n")); n != 6 {
		t.Errorf("traces.jsonl holds %d traces, want 6 (appended)", n)
	}
}

func TestEvalRefusesBadInput(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, []byte(`{"id":"a","question":"q","answer":"x"}`+"\n"+`{"id":"b"`+"\n"+`{"id":"c","question":"poem"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	noAnswer := filepath.Join(t.TempDir(), "judge.jsonl")
	if err := os.WriteFile(noAnswer, []byte(`{"id":"c","question":"write a poem"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no data", []string{"-demo"}, "-data FILE is required"},
		{"bad line", []string{"-demo", "-data", bad}, "line 2: not a JSON object"},
		{"no answer, no judge", []string{"-demo", "-data", noAnswer}, "give -judge NODE"},
		{"judge not a node", []string{"-demo", "-data", noAnswer, "-judge", "chain/auto"}, `-judge "chain/auto" is not a node`},
		{"unknown mode", []string{"-demo", "-data", sampleSet, "-modes", "M9"}, `unknown model "M9"`},
		{"resume without out", []string{"-demo", "-data", sampleSet, "-resume"}, "give -out"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runEvalCmd(t, tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("eval %v = exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
			}
		})
	}
}

// TestEvalJudge grades an item without an answer with -judge M2, and
// warns that M2 also answers under chain/reflexive (a stage) but not
// under M1.
func TestEvalJudge(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "judged.jsonl")
	if err := os.WriteFile(data, []byte(`{"id":"poem","question":"Write two lines about the sea.","rubric":"two lines, about the sea"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runEvalCmd(t, "-demo", "-data", data, "-modes", "M1,chain/reflexive", "-judge", "M2", "-out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	warn := "the judge M2 also answers under chain/reflexive"
	if !strings.Contains(stderr, warn) || !strings.Contains(stdout, warn) || strings.Contains(stderr, "answers under M1") {
		t.Errorf("stderr %q, stdout %q: want the warning for chain/reflexive only, on both", stderr, stdout)
	}
	rep, _ := readReport(t, dir)
	if len(rep.Results) != 2 {
		t.Fatalf("results = %d, want 2", len(rep.Results))
	}
	for _, r := range rep.Results {
		if !r.Correct || r.Judge == nil || !r.Judge.Correct || r.Judge.TraceID == "" || !strings.HasPrefix(r.Judge.Reason, "CORRECT") {
			t.Errorf("%s: correct %v, judge %+v; want judged correct, with the judge's reply and trace", r.Mode, r.Correct, r.Judge)
		}
	}
	if len(rep.Warnings) != 1 {
		t.Errorf("report warnings = %q, want one", rep.Warnings)
	}
}

// TestEvalInterrupted: a run whose context ends (Ctrl-C) still writes its
// report, marked interrupted, and exits 130. (Which answers finish before
// the stop is eval.Run's test; here the signal comes before any does.)
func TestEvalInterrupted(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"eval", "-demo", "-data", sampleSet, "-n", "2", "-out", dir}, &out, &errOut)
	if code != 130 {
		t.Fatalf("exit = %d, want 130; stderr:\n%s", code, errOut.String())
	}
	rep, _ := readReport(t, dir)
	if !rep.Interrupted || len(rep.Results) != 0 || !strings.Contains(out.String(), "run again with -resume") {
		t.Errorf("report interrupted %v with %d answers, stdout %q; want interrupted, none, and the hint", rep.Interrupted, len(rep.Results), out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "report.html")); err != nil {
		t.Error(err)
	}
}
