package trace

import (
	"strings"
	"testing"
)

func TestCapped(t *testing.T) {
	long := strings.Repeat("é", 10) // 20 bytes
	tr := Trace{Stages: []StageTrace{{Output: "short"}, {Output: long, Reasoning: "think"}}}
	got, cut := tr.Capped(7)
	if !cut {
		t.Fatal("Capped(7) cut = false, want true")
	}
	if got.Stages[0].Output != "short" || got.Stages[0].Cut != "" {
		t.Errorf("stage 0 = %+v, want untouched", got.Stages[0])
	}
	if o := got.Stages[1].Output; o != strings.Repeat("é", 3) {
		t.Errorf("stage 1 output = %q, want 3 runes (no split rune)", o)
	}
	if c := got.Stages[1].Cut; !strings.HasPrefix(c, "output: 14 of 20 bytes cut") {
		t.Errorf("stage 1 cut = %q", c)
	}
	if tr.Stages[1].Output != long {
		t.Error("Capped modified its receiver")
	}
	if _, cut := tr.Capped(100); cut {
		t.Error("Capped(100) cut = true, want false")
	}
}
