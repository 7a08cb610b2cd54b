package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/chain/node"
	"chainproxy/config"
	"chainproxy/internal/nodetest"
	"chainproxy/store"
	"chainproxy/tools"
)

// answer is a 66-word answer: the mock streams it as 66 chunks, one per
// word, as a model streams tokens. Its sentences differ, as a real
// answer's do: one sentence said six times over is a repetition loop,
// which the chain cuts.
var answer = func() string {
	var b strings.Builder
	for i := range 6 {
		fmt.Fprintf(&b, "The chain relays what model %d says as it says it. ", i)
	}
	return b.String()
}()

// chainConfig is the default three-stage chain over mock nodes that answer
// at once. With tools, OL1 lists the folder, reads two files, then writes
// its notes (3 turns); M1 and M2 answer in one turn each.
func chainConfig(withTools bool) string {
	ol1 := "        - content: " + strconv.Quote("OL1: "+answer) + "\n"
	if withTools {
		ol1 = `        - tool_calls: [{name: list_dir, args: {path: "."}}]
        - tool_calls: [{name: read_file, args: {path: a.txt}}, {name: read_file, args: {path: b.txt}}]
` + ol1
	}
	return `
nodes:
  - name: OL1
    provider: mock
    mock:
      turns:
` + ol1 + `  - name: M1
    provider: mock
    mock:
      turns:
        - content: ` + strconv.Quote("M1: "+answer) + `
          reasoning: "M1 thinks about it first."
  - name: M2
    provider: mock
    mock:
      turns:
        - content: ` + strconv.Quote("M2: "+answer) + `
chain:
  simple_node: OL1
`
}

// newEngine wires an engine as cmd/proxy does, over mock backends, the
// built-in tools in a small workspace and the in-memory store.
func newEngine(b *testing.B, yamlText string) *chain.Engine {
	b.Helper()
	root := b.TempDir()
	for name, body := range map[string]string{"a.txt": "alpha\n", "b.txt": "bravo\n", "sub/c.txt": "charlie\n"} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	cfg, err := config.Parse([]byte(yamlText))
	if err != nil {
		b.Fatalf("config: %v", err)
	}
	cfg.Tools.Root = root
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		b.Fatal(err)
	}
	mem := store.NewMemory(100_000, 10)
	e, err := chain.New(cfg, chain.Deps{
		Nodes:     nodetest.Build(b, cfg, nodetest.Mocks),
		Tools:     reg,
		Guard:     antiloop.NewGuard(mem, cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL),
		Admission: node.NewAdmission(cfg.Nodes),
	})
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// benchRun runs model over and over, each run a new conversation (so that
// the anti-loop never answers from an earlier run's results), and reports
// the time per model turn.
func benchRun(b *testing.B, yamlText, model string, wantTurns int) {
	e := newEngine(b, yamlText)
	ctx := context.Background()
	events := 0
	emit := func(chain.Event) error { events++; return nil }
	turns := 0
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		res, err := e.Run(ctx, &chain.RunRequest{
			TraceID: "bench", Model: model, Conversation: "c" + strconv.Itoa(i),
			Messages: []chain.Message{{Role: "user", Content: "Compare a.txt and b.txt and explain how they differ, step by step."}},
		}, emit)
		if err != nil {
			b.Fatal(err)
		}
		if res.Trace.Turns != wantTurns {
			b.Fatalf("turns = %d, want %d (trace %+v)", res.Trace.Turns, wantTurns, res.Trace)
		}
		turns += res.Trace.Turns
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(turns), "ns/turn")
	b.ReportMetric(float64(events)/float64(i), "events/run")
}

// BenchmarkChainReflexive is the chain's own cost: three stages answering
// at once, one turn each, 60 content chunks per answer.
func BenchmarkChainReflexive(b *testing.B) {
	benchRun(b, chainConfig(false), chain.ModelReflexive, 3)
}

// BenchmarkChainReflexiveTools adds OL1's three tool calls over two turns:
// anti-loop signatures and claims, schema checks and the sandboxed file
// tools, and the findings handed to the later stages.
func BenchmarkChainReflexiveTools(b *testing.B) {
	benchRun(b, chainConfig(true), chain.ModelReflexive, 5)
}

// BenchmarkChainSimple is one node answering in one turn, as for model "A".
func BenchmarkChainSimple(b *testing.B) {
	benchRun(b, chainConfig(false), "OL1", 1)
}

// BenchmarkTraceEncode encodes the trace of a reflexive run with tools, as
// every response (and the trace store) does.
func BenchmarkTraceEncode(b *testing.B) {
	e := newEngine(b, chainConfig(true))
	res, err := e.Run(context.Background(), &chain.RunRequest{
		TraceID: "bench", Model: chain.ModelReflexive, Conversation: "trace",
		Messages: []chain.Message{{Role: "user", Content: "Compare a.txt and b.txt."}},
	}, nil)
	if err != nil {
		b.Fatal(err)
	}
	tr := res.Trace
	data, err := json.Marshal(&tr)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(&tr); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkChainReflexiveToolsWindowed is BenchmarkChainReflexiveTools on
// nodes with a known window: every call's prompt is measured against it
// (and fits), which must cost next to nothing.
func BenchmarkChainReflexiveToolsWindowed(b *testing.B) {
	benchRun(b, strings.ReplaceAll(chainConfig(true), "    provider: mock\n", "    provider: mock\n    context_window: 32768\n"), chain.ModelReflexive, 5)
}
