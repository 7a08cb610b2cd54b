package memory

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A refused prompt's estimate, with the answer's reserve, is above the
// window: the client reads "the prompt does not fit node X's context window
// of 2048 tokens: … need about N tokens with the answer's reserve", and an
// N below 2048 contradicts the refusal it explains. That happens when the
// kept parts are within the safety margin of the window, and after a refit
// (the node refused a prompt estimated to fit: the budget is tightened).
func TestTooLongEstimateAboveWindow(t *testing.T) {
	for _, tc := range []struct {
		name    string
		chars   int
		tighten float64
	}{
		{"within the safety margin", 6800, 1},
		{"after a refit", 4000, 0.5},
		{"far too long", 20000, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs := []Message{
				{Role: "system", Content: "You are a helpful assistant."},
				{Role: "user", Content: strings.Repeat("word ", tc.chars/5)},
			}
			in := input(msgs, 2048)
			in.Tighten = tc.tighten
			_, err := Fit(context.Background(), in, nil)
			var tl *TooLongError
			if !errors.As(err, &tl) {
				t.Fatalf("err %v, want a TooLongError", err)
			}
			if tl.Estimate+tl.Reserve <= tl.Window {
				t.Errorf("refused, yet %d tokens and %d of reserve fit a window of %d", tl.Estimate, tl.Reserve, tl.Window)
			}
		})
	}
}
