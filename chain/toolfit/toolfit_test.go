package toolfit

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"chainproxy/chain/node"
)

// compile compiles a tool's parameters as JSON Schema.
func compile(t *testing.T, name string, params []byte) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(params))
	if err != nil {
		t.Fatalf("%s: parameters are not JSON: %v", name, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://"+name, doc); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	sch, err := c.Compile("mem://" + name)
	if err != nil {
		t.Fatalf("%s: compact schema does not compile: %v\n%s", name, err, params)
	}
	return sch
}

// TestCompactToolsStayValid: every reference tool's compact schema is
// valid JSON Schema, carries no annotation, is smaller, and accepts and
// refuses what the full one does; its description is one short sentence.
func TestCompactToolsStayValid(t *testing.T) {
	pool := referencePool(t)
	pool = append(pool, node.Tool{Name: "note", Description: "Takes a note.", Parameters: json.RawMessage(
		`{"type":"object","description":"a note","properties":{"description":{"type":"string","description":"the note's own description","default":"none"},"tags":{"type":"array","items":{"type":"string","examples":["a"]}},"kind":{"anyOf":[{"const":"a","title":"A"},{"const":"b"}]}},"required":["description"]}`)})
	instances := []string{`{}`, `{"path":"a.txt"}`, `{"path":3}`, `{"description":"x","tags":["a"],"kind":"a"}`, `{"description":"x","kind":"c"}`, `{"a":1,"b":2}`, `{"paths":["a","b"]}`}
	for _, tool := range pool {
		c := compactTool(tool)
		if len(c.Parameters) > len(tool.Parameters) || len(c.Description) > compactDescription+len("…") {
			t.Errorf("%s: compact is %d+%d characters, from %d+%d", tool.Name, len(c.Description), len(c.Parameters), len(tool.Description), len(tool.Parameters))
		}
		if strings.Contains(string(c.Parameters), `"default"`) || strings.Contains(string(c.Parameters), `"examples"`) || strings.Contains(string(c.Parameters), `"title"`) {
			t.Errorf("%s: compact schema keeps annotations: %s", tool.Name, c.Parameters)
		}
		if string(c.Declaration) != string(node.ToolDeclaration(c)) {
			t.Errorf("%s: declaration not the compact tool's", tool.Name)
		}
		full, small := compile(t, tool.Name, tool.Parameters), compile(t, tool.Name, c.Parameters)
		for _, in := range instances {
			doc, _ := jsonschema.UnmarshalJSON(strings.NewReader(in))
			if got, want := small.Validate(doc) == nil, full.Validate(doc) == nil; got != want {
				t.Errorf("%s: %s valid by the compact schema = %v, by the full one %v", tool.Name, in, got, want)
			}
		}
	}
	note := compactTool(pool[len(pool)-1])
	if !strings.Contains(string(note.Parameters), `"description":{"type":"string"}`) {
		t.Errorf("a property named description was lost: %s", note.Parameters)
	}
}

// TestChooseIsStable: the same scores give the same tools, in the list's
// own order with find_tools last, whatever the ranking: the prompt's
// prefix does not move with a question's words.
func TestChooseIsStable(t *testing.T) {
	ix := New(referencePool(t))
	scores := make([]float64, len(ix.Tools))
	ix.Score(Query(nil, "write the note then read it back"), scores)
	a, b := ix.Choose(scores, refBudget), ix.Choose(slices.Clone(scores), refBudget)
	names := func(c Choice) []string {
		var out []string
		for _, t := range c.Offered {
			out = append(out, t.Name)
		}
		return out
	}
	if !slices.Equal(names(a), names(b)) {
		t.Fatalf("two choices differ:\n%v\n%v", names(a), names(b))
	}
	got := names(a)
	if got[len(got)-1] != FindTools {
		t.Errorf("offered %v, want find_tools last", got)
	}
	last := -1
	for _, n := range got[:len(got)-1] {
		i := ix.names[n]
		if i <= last {
			t.Errorf("offered %v, want the list's order", got)
		}
		last = i
	}
	for _, want := range []string{"fs__write_file", "fs__read_text_file"} {
		if !slices.Contains(got, want) {
			t.Errorf("offered %v, want %s", got, want)
		}
	}
	if len(a.Withheld)+a.Count != len(ix.Tools) {
		t.Errorf("%d offered and %d withheld of %d tools", a.Count, len(a.Withheld), len(ix.Tools))
	}
}

// TestMeasure: how the reference tools fit a window, as /readyz reports
// it: unknown without a window, some withheld on 4,096 tokens, whole on a
// window large enough.
func TestMeasure(t *testing.T) {
	ix := New(referencePool(t))
	tests := []struct {
		name    string
		window  int
		fit     string
		offered int
	}{
		{"unknown window", 0, "unknown_window", len(ix.Tools)},
		{"4096 tokens", 4096, "some", -1},
		{"large window", 1 << 20, "whole", len(ix.Tools)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := ix.Measure(tt.window, 4, 0.25)
			if st.Fit != tt.fit || st.Window != tt.window || st.Tools != len(ix.Tools) {
				t.Errorf("Measure(%d) = %+v, want fit %s", tt.window, st, tt.fit)
			}
			if tt.offered >= 0 && st.Offered != tt.offered || tt.offered < 0 && (st.Offered <= 0 || st.Offered >= len(ix.Tools)) {
				t.Errorf("Measure(%d).Offered = %d of %d tools", tt.window, st.Offered, len(ix.Tools))
			}
		})
	}
}

// TestAnswer: find_tools' answer names the tools not offered that match
// its query, says so when none does, and how to ask when the arguments
// hold no query.
func TestAnswer(t *testing.T) {
	ix := New(referencePool(t))
	text, found, ok := ix.Answer(`{"query":"write a file"}`, nil)
	if !ok || len(found) == 0 || !strings.Contains(text, found[0]) {
		t.Errorf("Answer(write a file) = %q, %v, %v, want the matches named", text, found, ok)
	}
	if _, found, ok := ix.Answer(`{"query":"write a file"}`, ix.Tools); !ok || len(found) != 0 {
		t.Errorf("Answer with every tool offered found %v, want none", found)
	}
	if text, found, ok := ix.Answer(`{}`, nil); ok || found != nil || !strings.Contains(text, `"query"`) {
		t.Errorf("Answer({}) = %q, %v, %v, want how to ask", text, found, ok)
	}
}
