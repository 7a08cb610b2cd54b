package eval

import "testing"

func TestScore(t *testing.T) {
	tests := []struct {
		name, line, reply string
		want              bool
	}{
		{"exact folded", `{"question":"q","answer":"Paris"}`, "  **paris**.\n", true},
		{"exact is exact", `{"question":"q","answer":"Paris"}`, "It is Paris.", false},
		{"contains", `{"question":"q","answer":"Jane Austen","match":"contains"}`, "It was JANE   Austen, in 1813.", true},
		{"contains missing", `{"question":"q","answer":"Austen","match":"contains"}`, "Charlotte Brontë", false},
		{"number last", `{"question":"q","answer":18}`, "16 - 3 - 4 = 9 eggs, 9 × $2 = $18.", true},
		{"number not last", `{"question":"q","answer":9}`, "16 - 3 - 4 = 9 eggs, 9 × $2 = $18.", false},
		{"number thousands", `{"question":"q","answer":1234.5}`, "The total is 1,234.50 dollars.", true},
		{"number negative", `{"question":"q","answer":-3}`, "x = -3.", true},
		{"number tolerance", `{"question":"q","answer":72.9,"tolerance":0.01}`, "$72.899", true},
		{"number outside tolerance", `{"question":"q","answer":72.9}`, "$72.899", false},
		{"number none", `{"question":"q","answer":1}`, "one", false},
		{"regex", `{"question":"q","answer":"3/8\\D+2/5","match":"regex"}`, "3/8 = 0.375, so 3/8, 2/5", true},
		{"choice answer is", `{"question":"q","answer":"B","match":"choice"}`, "A is tempting, but the answer is (B).", true},
		{"choice opening letter", `{"question":"q","answer":"B","match":"choice"}`, "B) dolphin", true},
		{"choice sole letter", `{"question":"q","answer":"C","match":"choice"}`, "I would pick C here", true},
		{"choice two letters", `{"question":"q","answer":"C","match":"choice"}`, "between C and D", false},
		{"choice lowercase word is no letter", `{"question":"q","answer":"A","match":"choice"}`, "the answer is a mystery", false},
		{"choice article is no letter", `{"question":"q","answer":"B","match":"choice"}`, "A dolphin, so B", true},
		{"choice letter then word", `{"question":"q","answer":"B","match":"choice"}`, "B dolphin", true},
		{"choice wrong", `{"question":"q","answer":"B","match":"choice"}`, "Answer: D", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			it, err := ParseItem([]byte(tc.line), 1)
			if err != nil {
				t.Fatal(err)
			}
			if got := Score(&it, tc.reply); got != tc.want {
				t.Errorf("Score(%s, %q) = %v, want %v", tc.line, tc.reply, got, tc.want)
			}
		})
	}
}

func TestReadVerdict(t *testing.T) {
	tests := []struct {
		in          string
		correct, ok bool
	}{
		{"CORRECT\nIt names Canberra.", true, true},
		{"**Incorrect.** The capital is Canberra.", false, true},
		{"correct: yes", true, true},
		{"The answer is correct.", false, false},
		{"", false, false},
	}
	for _, tc := range tests {
		if c, ok := ReadVerdict(tc.in); c != tc.correct || ok != tc.ok {
			t.Errorf("ReadVerdict(%q) = %v, %v, want %v, %v", tc.in, c, ok, tc.correct, tc.ok)
		}
	}
}
