package eval

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"chainproxy/internal/browsertest"
)

var update = flag.Bool("update", false, "rewrite testdata/report.golden.html")

// fixedReport is a report of known results: three modes, two items
// failed or wrong, auto routing both ways.
func fixedReport(t *testing.T) *Report {
	t.Helper()
	its := items(t,
		`{"id":"capital","question":"capital of Australia?","answer":"Canberra","match":"contains"}`,
		`{"id":"train","question":"how many minutes?","answer":290}`,
		`{"id":"tank","question":"how many minutes?","answer":15}`,
		`{"id":"ocean","question":"largest ocean?","answer":"Pacific","match":"contains"}`)
	modes := []string{"M1", "M2", "chain/reflexive", "chain/auto"}
	right := map[string]string{"M1": "1001", "M2": "1100", "chain/reflexive": "1110", "chain/auto": "1101"}
	var rs []Result
	for i, it := range its {
		for j, m := range modes {
			r := Result{ID: it.ID, Mode: m, Correct: right[m][i] == '1', TraceID: fmt.Sprintf("%02d%02d%028d", i, j, 0),
				LatencyMS: int64(100*(j+1) + 10*i), TTFTMS: int64(50 * (j + 1)), TokensIn: 100 * (j + 1), TokensOut: 20, Calls: j + 1, Loads: j, Routed: "simple", Answer: "answer <b>" + it.ID + "</b>"}
			if m == "chain/reflexive" || (m == "chain/auto" && i%2 == 1) {
				r.Routed = "reflexive"
			}
			if m == "M2" && it.ID == "ocean" {
				r.Failed, r.Error = true, "upstream 502"
			}
			rs = append(rs, r)
		}
	}
	rep := Summarize(its, modes, []string{"M1", "M2"}, rs)
	rep.Data = "questions.jsonl"
	rep.Started = time.Date(2026, 11, 28, 18, 0, 0, 0, time.UTC)
	rep.Finished = rep.Started.Add(time.Minute)
	rep.Warnings = []string{"the judge M1 also answers under M1"}
	return rep
}

// TestReportHTMLGolden keeps the page's markup in review: any change to
// it shows as a diff of testdata/report.golden.html (-update rewrites it).
func TestReportHTMLGolden(t *testing.T) {
	var b bytes.Buffer
	if err := fixedReport(t).WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "report.golden.html")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("WriteHTML differs from %s (run with -update and review the diff)", golden)
	}
	for _, bad := range []string{"http://", "https://", "<script", "answer <b>"} {
		if bytes.Contains(b.Bytes(), []byte(bad)) {
			t.Errorf("report.html holds %q: want a self-contained page with model text escaped", bad)
		}
	}
}

// TestReportHTMLInChromium opens the page in a real browser and checks
// that the plots render: a bar and an interval per mode, a point per mode,
// auto's two parts, and nothing fetched from anywhere.
func TestReportHTMLInChromium(t *testing.T) {
	chromium := browsertest.Chromium(t, "the report's browser test")
	dir := t.TempDir()
	rep := fixedReport(t)
	if err := rep.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	ctx := browsertest.New(t, chromium, 1000, 800)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Navigate("file://"+filepath.Join(dir, "report.html"))); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name, expr string
		want       any
	}{
		{"nothing fetched", `performance.getEntriesByType("resource").length`, 0.0},
		{"accuracy bars", `[...document.querySelectorAll("#accuracy rect.bar")].length`, 4.0},
		{"bars drawn with width", `[...document.querySelectorAll("#accuracy rect.bar")].filter(r => r.getBoundingClientRect().width > 1).length`, 4.0},
		{"interval whiskers", `[...document.querySelectorAll("#accuracy line.ci")].filter(l => l.getBoundingClientRect().width > 1).length`, 4.0},
		{"latency points", `[...document.querySelectorAll("#latency circle.point")].filter(c => c.getBoundingClientRect().width > 4).length`, 4.0},
		{"points inside the plot", `(() => { const s = document.querySelector("#latency").getBoundingClientRect(); return [...document.querySelectorAll("#latency circle.point")].every(c => { const b = c.getBoundingClientRect(); return b.left >= s.left && b.right <= s.right && b.top >= s.top && b.bottom <= s.bottom; }) })()`, true},
		{"routing parts", `[...document.querySelectorAll("#routing rect")].filter(r => r.getBoundingClientRect().width > 1).length`, 3.0}, // simple right and wrong, reflexive all right
		{"modes table", `document.querySelectorAll("#modes tr").length`, 5.0},
		{"items matrix", `document.querySelectorAll("#items td.failed").length`, 1.0},
	}
	for _, c := range checks {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[any](c.expr))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got != c.want {
			t.Errorf("%s: %s = %v, want %v", c.name, c.expr, got, c.want)
		}
	}
}
