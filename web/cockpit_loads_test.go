package web_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"
	openai "github.com/sashabaranov/go-openai"

	"chainproxy/internal/fakeollama"
)

// TestCockpitTimelineShowsModelLoads: the demo's OL1 and M2 run on a fake
// Ollama that holds one of their models at a time, so each of their calls
// loads its model (300 ms); M1 stays the demo's scripted model, which
// reports no load. The trace's timeline draws each call as its queue, its
// model's load and its generation, in turn; M1's call has no load.
func TestCockpitTimelineShowsModelLoads(t *testing.T) {
	chromium := findChromium(t)
	bin := proxyBinary(t)
	ol := fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply {
		return fakeollama.Reply{Content: []string{"what " + req.Model + " found"}, PromptEvalCount: 40, EvalCount: 5}
	})
	// 6 GB at 20 GB/s: a load takes 300 ms.
	ol.SetMemory(fakeollama.Memory{Budget: 10e9, Bandwidth: 20e9, Sizes: map[string]int64{"small": 6e9, "big": 6e9}})
	cfgPath := filepath.Join(t.TempDir(), "loads.yaml")
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, `
nodes:
  - {name: OL1, provider: ollama, base_url: %[1]q, model: small}
  - {name: M2, provider: ollama, base_url: %[1]q, model: big}
`, ol.URL), 0o644); err != nil {
		t.Fatal(err)
	}
	demo := startProxy(t, bin, "-config", cfgPath)
	resp, err := newClient(demo.url, "").CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model: "chain/reflexive", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: reflexiveQuestion}},
	})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Header().Get("X-Chain-Trace-Id")
	// small, then big; then small again may have begun, the chain's end
	// loading what the next request calls first (OL1's, simple_node).
	var loads []string
	for _, l := range ol.Loads() {
		loads = append(loads, l.Model)
	}
	if got := strings.Join(loads, " "); got != "small big" && got != "small big small" {
		t.Fatalf("fake Ollama loaded %q, want small, big (and small again after the chain)", loads)
	}

	p := openPage(t, newBrowser(t, chromium), demo.url)
	openTrace(t, p, id)
	type bar struct {
		Start, MS float64
		Title     string
	}
	type callRow struct {
		Node             string
		Queue, Load, Gen *bar
	}
	rows := eval[[]callRow](t, p, `[...document.querySelectorAll("#trace-detail .tl-call")].map(r => {
		const b = (cls) => { const e = r.querySelector(cls); return e ? {start: +e.dataset.start, ms: +e.dataset.ms, title: e.title} : null; };
		return {node: r.dataset.node, queue: b(".tl-queue"), load: b(".tl-load"), gen: b(".tl-gen")};
	})`)
	seen := map[string]bool{}
	for _, r := range rows {
		seen[r.Node] = true
		if r.Gen == nil {
			t.Errorf("%s's call has no generation bar", r.Node)
			continue
		}
		if r.Node == "M1" {
			if r.Load != nil {
				t.Errorf("M1's call has a load bar %+v, want none: its node reports no load", *r.Load)
			}
			continue
		}
		if r.Load == nil {
			t.Errorf("%s's call has no load bar, want its 300 ms load", r.Node)
			continue
		}
		if r.Load.MS < 250 || r.Load.Start+r.Load.MS != r.Gen.Start {
			t.Errorf("%s's load bar starts at %v ms and lasts %v, generation starts at %v; want a 300 ms load right before generation", r.Node, r.Load.Start, r.Load.MS, r.Gen.Start)
		}
		if r.Queue != nil && r.Queue.Start+r.Queue.MS != r.Load.Start {
			t.Errorf("%s's queue ends at %v ms, its load starts at %v; want the load right after the queue", r.Node, r.Queue.Start+r.Queue.MS, r.Load.Start)
		}
	}
	if !seen["OL1"] || !seen["M1"] || !seen["M2"] {
		t.Errorf("timeline call rows are of %v, want OL1, M1 and M2", seen)
	}
	if legend := p.text(t, "#trace-detail .tl-legend"); !containsAll(legend, "queue", "model load", "generation") {
		t.Errorf("legend = %q, want queue, model load and generation", legend)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
