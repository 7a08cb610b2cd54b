package memory

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestEditedBranchFoldsItsOwnTurns: Open WebUI's "edit" of an earlier
// user message (Save & Submit) adds a sibling of that message under the
// same parent and sends the conversation from the root to it
// (open-webui/open-webui src/lib/components/chat/Messages.svelte
// editMessage, commit 007b2ba; createMessagesList walks parentId up from
// the new message); "regenerate" and LibreChat's branches do the same. The
// new branch shares the first turns with the old one, so it finds the
// summary the old branch made under the key of the turns that summary
// covers; the old branch's longer history says nothing about the new
// one's turns after it, which must be folded with a summarizer call, not
// dropped.
func TestEditedBranchFoldsItsOwnTurns(t *testing.T) {
	folder := &scripted{}
	fit := func(msgs []Message) *Result {
		t.Helper()
		in := &Input{Msgs: msgs, Current: len(msgs) - 1, Window: 2048, Reserve: 512, Ratio: 4, Shares: DefaultShares}
		r, err := Fit(context.Background(), in, folder)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// The old branch: 20 answered turns, folded once.
	old := growing(21, 480)
	r := fit(old)
	if folder.calls != 1 || r.Actions[0].Action != ActSummarized {
		t.Fatalf("old branch: calls %d, actions %+v: want one summary", folder.calls, r.Actions)
	}
	covered := r.Actions[0].ToTurn
	// The user edits the question of the turn after the summary and
	// carries on along the new branch, whose answers are longer: a
	// history no longer than the old one, whose turns after the summary
	// do not fit raw.
	branch := old[: 1+2*covered : 1+2*covered]
	for i := covered + 1; i <= covered+3; i++ {
		branch = append(branch,
			Message{Role: "user", Content: fmt.Sprintf("Edited question %d: explain topic-%d in depth.", i, i)},
			Message{Role: "assistant", Content: fmt.Sprintf("Long answer %d: ", i) + strings.Repeat("dolor sit amet ", 100)})
	}
	branch = append(branch, Message{Role: "user", Content: "And then?"})
	if n := (len(branch) - 2) / 2; n > 20 {
		t.Fatalf("the branch has %d turns, want no more than the old branch's 20", n)
	}
	r = fit(branch)
	for _, a := range r.Actions {
		if a.Action == ActDropped {
			t.Errorf("edited branch: turns %d–%d dropped, actions %+v: want them folded into a new summary", a.FromTurn, a.ToTurn, r.Actions)
		}
	}
	// The summary of the turns both branches share is still good: the
	// new one is made from it and the branch's own turns.
	if folder.calls != 2 || r.Actions[0].Action != ActSummarized || !strings.Contains(r.Actions[0].Detail, "consolidated") {
		t.Errorf("edited branch: %d summarizer calls in all, actions %+v: want a second one, consolidating the first", folder.calls, r.Actions)
	}
}

// TestSameHistorySmallerWindowNoCall: a later stage of the same request
// (M2 after M1) on a node with a smaller window folds further than the
// summary the first stage made; with the history unchanged, the summary is
// taken as it is, the turns it does not cover left out, rather than
// calling the summarizer a second time for one request.
func TestSameHistorySmallerWindowNoCall(t *testing.T) {
	folder := &scripted{}
	msgs := growing(21, 480)
	for i, window := range []int{2048, 1100} {
		in := &Input{Msgs: msgs, Current: len(msgs) - 1, Window: window, Reserve: 512, Ratio: 4, Shares: DefaultShares}
		r, err := Fit(context.Background(), in, folder)
		if err != nil {
			t.Fatal(err)
		}
		if folder.calls != 1 {
			t.Fatalf("fit %d (window %d): %d summarizer calls in all, want 1; actions %+v", i+1, window, folder.calls, r.Actions)
		}
		if i == 1 && (len(r.Actions) != 2 || r.Actions[0].Action != ActReused || r.Actions[1].Action != ActDropped || r.Chars > in.Budget()) {
			t.Errorf("smaller window: actions %+v, %d of %d characters: want the summary reused, the turns after it that do not fit left out", r.Actions, r.Chars, in.Budget())
		}
	}
}
