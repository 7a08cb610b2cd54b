package web

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"chainproxy/chain"
)

// TestMetricsToolLabels: a server tool is labelled by its name; a client's
// tool and a name a model made up are not labels of their own, so that
// clients' tool sets and a hallucinating model cannot grow the series
// without bound.
func TestMetricsToolLabels(t *testing.T) {
	m := NewMetrics([]string{"OL1"}, nil, nil)
	s := newTestServer(t, testConfig)
	New(Options{Config: s.cfg, Engine: mustEngine(t, s.cfg), Traces: s.store, Metrics: m})
	tr := &chain.Trace{Mode: chain.ModeSimple, Stages: []chain.StageTrace{{Node: "OL1", Status: chain.StageOK}}}
	uses := []chain.ToolUse{{Name: "list_dir", Status: chain.ToolOK}, {Name: "get_weather", Status: chain.ToolOK, Client: true}}
	for i := range 50 {
		uses = append(uses, chain.ToolUse{Name: fmt.Sprintf("made_up_%d", i), Status: chain.ToolError})
	}
	tr.Stages[0].ToolsUsed = uses
	m.observeRequest("/v1/chat/completions", chain.ModeSimple, 200, time.Millisecond, 0, tr, 0, time.Time{})

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`chainproxy_tool_calls_total{status="ok",tool="list_dir"} 1`,
		`chainproxy_tool_calls_total{status="ok",tool="(client)"} 1`,
		`chainproxy_tool_calls_total{status="error",tool="(unknown)"} 50`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(body, "made_up_") || strings.Contains(body, "get_weather") {
		t.Error("a name that is no server tool is a label")
	}
}
