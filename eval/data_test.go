package eval

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseItem(t *testing.T) {
	tests := []struct {
		name, line string
		wantID     string
		wantMatch  string
		wantAnswer string
		wantErr    string // "" for none; else a part of the message
	}{
		{"question and answer", `{"id":"a","question":"2+2?","answer":"4","match":"number"}`, "a", MatchNumber, "4", ""},
		{"numeric answer, match implied", `{"id":"a","question":"2+2?","answer":4}`, "a", MatchNumber, "4", ""},
		{"text answer, exact implied", `{"id":"a","question":"capital?","answer":"Paris"}`, "a", MatchExact, "Paris", ""},
		{"no answer: the judge", `{"id":"a","question":"write a haiku","rubric":"three lines"}`, "a", MatchJudge, "", ""},
		{"numeric id", `{"id":7,"question":"q","answer":"x"}`, "7", MatchExact, "x", ""},
		{"no id: named by its line", `{"question":"q","answer":"x"}`, "line-3", MatchExact, "x", ""},
		{"messages", `{"id":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi?"}],"answer":"hi","match":"contains"}`, "m", MatchContains, "hi", ""},
		{"choice", `{"id":"c","question":"A) x B) y","answer":"b","match":"choice"}`, "c", MatchChoice, "b", ""},
		{"not JSON", `{"id":"a",`, "", "", "", "not a JSON object"},
		{"two values", `{"id":"a","question":"q","answer":"x"} {}`, "", "", "", "more than one JSON value"},
		{"no question", `{"id":"a","answer":"x"}`, "", "", "", `neither "question" nor "messages"`},
		{"both", `{"id":"a","question":"q","messages":[{"role":"user","content":"q"}],"answer":"x"}`, "", "", "", `both "question" and "messages"`},
		{"bad role", `{"id":"a","messages":[{"role":"tool","content":"q"}],"answer":"x"}`, "", "", "", "messages[0].role"},
		{"ends with the assistant", `{"id":"a","messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a"}],"answer":"x"}`, "", "", "", "must end with the user's message"},
		{"unknown match", `{"id":"a","question":"q","answer":"x","match":"fuzzy"}`, "", "", "", `match "fuzzy" is not`},
		{"number not a number", `{"id":"a","question":"q","answer":"ten","match":"number"}`, "", "", "", `answer "ten" is not a number`},
		{"bad regex", `{"id":"a","question":"q","answer":"(","match":"regex"}`, "", "", "", "match regex"},
		{"choice not a letter", `{"id":"a","question":"q","answer":"F","match":"choice"}`, "", "", "", "not one letter A–E"},
		{"match without answer", `{"id":"a","question":"q","match":"contains"}`, "", "", "", "needs an answer"},
		{"answer an object", `{"id":"a","question":"q","answer":{"x":1}}`, "", "", "", "want a string or a number"},
		{"negative tolerance", `{"id":"a","question":"q","answer":1,"tolerance":-1}`, "", "", "", "tolerance -1 is negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			it, err := ParseItem([]byte(tc.line), 3)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseItem(%s) error = %v, want one saying %q", tc.line, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseItem(%s) error = %v", tc.line, err)
			}
			if it.ID != tc.wantID || it.Match != tc.wantMatch || it.Answer != tc.wantAnswer {
				t.Errorf("ParseItem(%s) = id %q match %q answer %q, want %q %q %q", tc.line, it.ID, it.Match, it.Answer, tc.wantID, tc.wantMatch, tc.wantAnswer)
			}
		})
	}
}

func TestReadItemsNamesEveryBadLine(t *testing.T) {
	in := `{"id":"a","question":"q","answer":"x"}

{"id":"b","question":"q"
{"id":"a","question":"q2","answer":"y"}
{"id":"c","question":"q","answer":"z","match":"choice"}
`
	_, err := ReadItems(strings.NewReader(in))
	if err == nil {
		t.Fatal("ReadItems of three bad lines: no error")
	}
	for _, want := range []string{"line 3: not a JSON object", `line 4: id "a" is already on line 1`, `line 5: item "c": match choice`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("ReadItems error = %q, want it to say %q", err, want)
		}
	}
}

func TestReadItemsEmpty(t *testing.T) {
	if _, err := ReadItems(strings.NewReader("\n\n")); err == nil || !strings.Contains(err.Error(), "no items") {
		t.Errorf("ReadItems(blank lines) error = %v, want no items", err)
	}
}

// TestSampleSetReads keeps the shipped sample valid, and mixed: short
// factual questions and multi-step problems, with every match kind but
// the judge.
func TestSampleSetReads(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "examples", "eval", "sample.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	items, err := ReadItems(f)
	if err != nil {
		t.Fatalf("examples/eval/sample.jsonl: %v", err)
	}
	kinds := map[string]int{}
	for _, it := range items {
		kinds[it.Match]++
	}
	for _, k := range []string{MatchExact, MatchNumber, MatchContains, MatchRegex, MatchChoice} {
		if kinds[k] == 0 && k != MatchExact {
			t.Errorf("sample set has no %s item (kinds %v)", k, kinds)
		}
	}
	if len(items) < 12 {
		t.Errorf("sample set has %d items, want a dozen or more", len(items))
	}
}

// FuzzParseItem: any line either parses into an item that can be asked
// and scored, or fails with an error; never a panic.
func FuzzParseItem(f *testing.F) {
	for _, s := range []string{
		`{"id":"a","question":"2+2?","answer":4}`,
		`{"id":"b","messages":[{"role":"user","content":"hi"}],"answer":"h.","match":"regex"}`,
		`{"question":"A) x","answer":"A","match":"choice"}`,
		`{"id":null,"question":"q","answer":"-1,5","match":"number","tolerance":0.5}`,
		`{"id":"j","question":"poem","rubric":"rhymes"}`,
		`[1,2]`, `"x"`, `{"answer":1e400}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		it, err := ParseItem(line, 1)
		if err != nil {
			return
		}
		if it.ID == "" || len(it.Prompt()) == 0 || it.Prompt()[len(it.Prompt())-1].Role != "user" {
			t.Fatalf("ParseItem(%q) = %+v: no id or no user question", line, it)
		}
		if it.Match != MatchJudge {
			Score(&it, it.Answer) // must not panic
			Score(&it, "")
		}
	})
}
