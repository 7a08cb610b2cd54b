package toolfit

import (
	"encoding/json"
	"os"
	"testing"

	"chainproxy/chain/node"
	"chainproxy/config"
	"chainproxy/memory"
	"chainproxy/tools"
)

// referencePool is the tool list of a stage on a proxy with the built-ins
// and both reference MCP servers (chain/toolfit/testdata, captured from
// their tools/list), in the registry's order: built-ins, then each
// server's tools as <server>__<tool>.
func referencePool(tb testing.TB) []node.Tool {
	tb.Helper()
	reg, err := tools.New(config.Tools{Root: tb.TempDir()}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	var pool []node.Tool
	for _, s := range reg.Specs() {
		pool = append(pool, node.Tool{Name: s.Name, Description: s.Description, Parameters: s.Parameters})
	}
	var ref struct {
		Servers []struct {
			Name  string
			Tools []struct {
				Name        string
				Description string
				InputSchema json.RawMessage
			}
		}
	}
	b, err := os.ReadFile("testdata/reference_tools.json")
	if err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		tb.Fatal(err)
	}
	for _, s := range ref.Servers {
		for _, t := range s.Tools {
			pool = append(pool, node.Tool{Name: s.Name + "__" + t.Name, Description: t.Description, Parameters: t.InputSchema})
		}
	}
	for i := range pool {
		pool[i].Declaration = node.ToolDeclaration(pool[i])
	}
	return pool
}

// question is one of the benchmark's questions and the tool it needs.
type question struct {
	Q    string
	Tool string
}

func referenceQuestions(tb testing.TB) []question {
	tb.Helper()
	b, err := os.ReadFile("testdata/questions.json")
	if err != nil {
		tb.Fatal(err)
	}
	var qs struct{ Questions []question }
	if err := json.Unmarshal(b, &qs); err != nil {
		tb.Fatal(err)
	}
	return qs.Questions
}

// refBudget is the tools' share of a 4,096-token window at the default
// chain.tools_share and 4 characters a token, in characters.
const refBudget = 4096 * 4 / 4

// TestToolChoiceReference: for at least 95 % of the questions, the tool
// each needs is offered on a 4,096-token window, or found by find_tools
// within one turn (the model asking in the question's own words); and the
// tools offered weigh at most their share.
func TestToolChoiceReference(t *testing.T) {
	pool := referencePool(t)
	qs := referenceQuestions(t)
	if len(pool) != 30 || len(qs) < 40 {
		t.Fatalf("%d tools, %d questions; want the 27 reference tools and 3 built-ins, 40 questions at least", len(pool), len(qs))
	}
	ix := New(pool)
	for _, q := range qs {
		if _, ok := ix.names[q.Tool]; !ok {
			t.Fatalf("question %q needs %s, which is not a tool", q.Q, q.Tool)
		}
	}
	for _, window := range []int{4096, 2048} {
		budget := window * 4 / 4 // the default share, 4 characters a token
		offered, found, before, after := choiceRate(t, ix, qs, budget)
		rate := float64(offered+found) / float64(len(qs))
		t.Logf("%d-token window: %d questions, needed tool offered for %d, found through find_tools for %d (%.1f %%); tool tokens per call %d whole, %d chosen",
			window, len(qs), offered, found, 100*rate, memory.Tokens(before, 4), memory.Tokens(after, 4))
		if window == 4096 && rate < 0.95 {
			t.Errorf("needed tool offered or found for %.1f %% of the questions, want 95 %% at least", 100*rate)
		}
	}
}

// choiceRate counts the questions whose tool is offered within budget
// characters, and those whose tool find_tools finds when asked in the
// question's words; before and after are the tools' characters per call,
// whole and as chosen.
func choiceRate(t *testing.T, ix *Index, qs []question, budget int) (offered, found, before, after int) {
	scores := make([]float64, len(ix.Tools))
	for _, q := range qs {
		query := Query(nil, q.Q)
		ix.Score(query, scores)
		c := ix.Choose(scores, budget)
		if w := Chars(c.Offered); w > budget {
			t.Errorf("%q: offered tools weigh %d characters, above the share %d", q.Q, w, budget)
		}
		before += Chars(ix.Tools)
		after += Chars(c.Offered)
		names := map[string]bool{}
		for _, o := range c.Offered {
			names[o.Name] = true
		}
		if names[q.Tool] {
			offered++
			continue
		}
		matches, _ := ix.Find(query, names, FindMatches)
		hit := false
		for _, i := range matches {
			hit = hit || ix.Tools[i].Name == q.Tool
		}
		if hit {
			found++
			continue
		}
		t.Logf("%d characters: missed %q, which needs %s; offered %d tools", budget, q.Q, q.Tool, c.Count)
	}
	return offered, found, before / len(qs), after / len(qs)
}

// BenchmarkToolChoice is the cost of choosing a call's tools among the 30
// of the reference set on a 4,096-token window: the question's words
// hashed, every tool scored, the ones that fit chosen. It runs before each
// call of a stage with tools.
func BenchmarkToolChoice(b *testing.B) {
	pool := referencePool(b)
	qs := referenceQuestions(b)
	ix := New(pool)
	scores := make([]float64, len(pool))
	buf := make([]uint64, 0, 64)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		q := qs[i%len(qs)]
		i++
		query := Query(buf[:0], q.Q)
		ix.Score(query, scores)
		_ = ix.Choose(scores, refBudget)
	}
}
