package web

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"chainproxy/config"
	"chainproxy/store"
)

// slowConfig has three mock nodes that each wait before their first chunk,
// as a cold or busy model does: a stream is silent for that long unless the
// proxy fills the gap with keepalives.
const slowConfig = `
nodes:
  - {name: OL1, provider: mock, model: small-1, mock: {delay: 1500ms, turns: [{content: "Raw findings."}]}}
  - {name: M1, provider: mock, model: mid-1, mock: {delay: 1500ms, turns: [{content: "Synthesis."}]}}
  - {name: M2, provider: mock, model: big-1, mock: {delay: 1500ms, turns: [{content: "Final answer."}]}}
chain:
  simple_node: M2
`

// TestKeepaliveGaps measures the largest silence between two lines of a
// stream whose stages are slow to start, on every front that streams and in
// every mode. A keepalive is due a full interval after the last line, so no
// gap may reach two intervals (the bug: the keepalive counted as "written",
// the next tick was skipped, and gaps were twice the interval).
func TestKeepaliveGaps(t *testing.T) {
	const interval = 300 * time.Millisecond
	// Slack for timer and scheduling jitter under -race on a loaded
	// machine; well under the interval the bug added.
	const slack = 150 * time.Millisecond
	cfg, err := config.Parse([]byte(slowConfig))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Root = t.TempDir()
	srv := newServerWith(t, cfg, interval)
	tests := []struct {
		name, path, body string
	}{
		{"chat completions relay", "/v1/chat/completions", `{"model":"OL1","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"chat completions chain/simple", "/v1/chat/completions", `{"model":"chain/simple","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"chat completions chain/reflexive", "/v1/chat/completions", `{"model":"chain/reflexive","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"cockpit simple", "/chat", `{"message":"hi","mode":"simple","stream":true}`},
		{"cockpit reflexive", "/chat", `{"message":"hi","mode":"reflexive","stream":true}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req, _ := http.NewRequest("POST", srv+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			sent := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			// The headers came with the first line: the first gap is from
			// the request.
			last, maxGap, lines := sent, time.Duration(0), 0
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
			for sc.Scan() {
				if sc.Text() == "" {
					continue
				}
				now := time.Now()
				maxGap = max(maxGap, now.Sub(last))
				last = now
				lines++
			}
			if err := sc.Err(); err != nil {
				t.Fatal(err)
			}
			if lines == 0 {
				t.Fatal("empty stream")
			}
			if maxGap > interval+slack {
				t.Errorf("largest gap between stream lines %v, want at most the keepalive interval %v (+%v slack)", maxGap, interval, slack)
			}
		})
	}
}

// newServerWith serves cfg over mock backends with the given keepalive.
func newServerWith(t *testing.T, cfg *config.Config, keepalive time.Duration) string {
	t.Helper()
	s := httptest.NewServer(New(Options{Config: cfg, Engine: mustEngine(t, cfg), Traces: store.NewMemory(100, 10), Keepalive: keepalive}))
	t.Cleanup(s.Close)
	return s.URL
}
