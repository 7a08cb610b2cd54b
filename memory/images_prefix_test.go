package memory

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// photos is an image conversation as Open WebUI sends it on its n-th
// request: every earlier user message keeps its image_url parts
// (open-webui/open-webui src/lib/components/chat/Chat.svelte,
// sendPromptOpenAI maps each message's image files to content parts), one
// picture a turn, short answers about each.
func photos(n int) []Message {
	img := func(i int) []Part {
		return []Part{{Kind: PartImage, Data: fmt.Sprintf("iVBORw0KGgo%04d", i), MediaType: "image/png"}}
	}
	msgs := []Message{{Role: "system", Content: "You describe photos."}}
	for i := 1; i < n; i++ {
		msgs = append(msgs,
			Message{Role: "user", Content: fmt.Sprintf("What is in photo %d?", i), Parts: img(i)},
			Message{Role: "assistant", Content: fmt.Sprintf("Photo %d: ", i) + strings.Repeat("a street, ", 30)})
	}
	return append(msgs, Message{Role: "user", Content: fmt.Sprintf("What is in photo %d?", n), Parts: img(n)})
}

// TestImagesDroppedPrefixStable: Ollama's runner reuses the previous
// prompt's cache up to the first input that differs, an image's included
// (ollama runner/ollamarunner/cache.go countCommonPrefix compares each
// input's token and MultimodalHash), and evaluates the rest again, every
// later picture through the vision encoder. A conversation with a picture
// in every turn, past the window, resent a turn longer at each request,
// must keep its prompt (but for the question it ended with) the head of
// the next one between two steps that leave images out, several requests
// apart: leaving out the fewest each time put the "[1 image … not shown
// …]" line on a new turn at every request, right before the oldest
// picture kept, and the model read every picture after it again.
func TestImagesDroppedPrefixStable(t *testing.T) {
	for _, tc := range []struct {
		name     string
		window   int
		requests int
		// maxMoves: requests whose prompt changed before the previous
		// one's history ended, without a fold. Images go in stretches
		// of 2, 5 and 21 here: a move every 2, 5 or 21 requests while
		// pictures are left to leave out, where leaving out the fewest
		// moved at 14, 32 and 47 of them.
		maxMoves int
	}{
		{"4k window", 4096, 30, 8},
		{"8k window", 8192, 40, 8},
		{"32k window", 32768, 80, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			folder := &scripted{}
			var prev string
			moves, dropping := 0, 0
			for n := 1; n <= tc.requests; n++ {
				msgs := photos(n)
				in := &Input{Msgs: msgs, Current: len(msgs) - 1, Window: tc.window, Reserve: 512, Ratio: 4, Shares: DefaultShares}
				before := folder.calls
				r, err := Fit(context.Background(), in, folder)
				if err != nil {
					t.Fatal(err)
				}
				cur := renderedParts(r.Msgs)
				common := commonPrefix(prev, cur)
				dropped := 0
				for _, a := range r.Actions {
					if a.Action == ActImagesDropped {
						dropped++
					}
				}
				if dropped > 0 {
					dropping++
				}
				if testing.Verbose() && dropped > 0 {
					t.Logf("request %3d: %d turns without their images, common prefix %5d of the previous history's %5d, actions %d", n, dropped, common, len(prev), len(r.Actions))
				}
				if folder.calls == before && common < len(prev) {
					moves++
				}
				// The question this prompt ends with comes back as history
				// in the next: its image goes when the window has no room
				// for it, the least a request can change.
				prev = renderedParts(r.Msgs[:len(r.Msgs)-1])
			}
			if dropping < 10 {
				t.Fatalf("images left out in only %d requests: the test proves nothing", dropping)
			}
			if moves > tc.maxMoves {
				t.Errorf("%d of %d requests changed the prompt before the previous one's history ended, without a fold, want at most %d: the images left out move at every request", moves, dropping, tc.maxMoves)
			}
		})
	}
}

// renderedParts is rendered with each message's images, by their bytes,
// as the runner's cache tells them apart.
func renderedParts(msgs []Message) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(rendered([]Message{m}))
		for _, p := range m.Parts {
			b.WriteString("<img " + p.Data + ">\x00")
		}
	}
	return b.String()
}
