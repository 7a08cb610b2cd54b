package memory

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// SummaryKey is the KV key of the summary of the turns whose messages hash
// to h: the same conversation resent, as OpenAI clients do on every
// request, finds it again, on any replica sharing the store.
func SummaryKey(h uint64) string { return summaryPrefix + strconv.FormatUint(h, 16) }

// SummaryID is the short id of a summary shown in traces.
func SummaryID(h uint64) string { return "sum_" + strconv.FormatUint(h, 16) }

// prefixHashes returns, for k = 1..m, the hash of turns 1..k: one pass over
// the messages, each hashed with its role, text, name, tool calls, images
// and files.
func (f *fitting) prefixHashes(m int) []uint64 {
	d := xxhash.New()
	sep := []byte{0}
	out := make([]uint64, m+1)
	for k, t := range f.turns[:m] {
		for _, msg := range t {
			d.WriteString(msg.Role)
			d.Write(sep)
			d.WriteString(msg.Content)
			d.Write(sep)
			d.WriteString(msg.Name)
			d.Write(sep)
			d.WriteString(msg.ToolCallID)
			d.Write(sep)
			for _, c := range msg.ToolCalls {
				d.WriteString(c.Name)
				d.Write(sep)
				d.WriteString(c.Arguments)
				d.Write(sep)
			}
			for _, p := range msg.Parts {
				// An image or a file is the same one by its bytes, its
				// URL or its id.
				d.WriteString(p.Kind)
				d.Write(sep)
				d.WriteString(p.Data)
				d.WriteString(p.URL)
				d.WriteString(p.FileID)
				d.Write(sep)
			}
			d.Write([]byte{1})
		}
		out[k+1] = d.Sum64()
	}
	return out
}

// lookback bounds how many shorter prefixes are looked up for a summary to
// build on: each is a store read.
const lookback = 16

// cached is the cached summary of the longest prefix of turns 1..m it can
// find, and the k of the turns 1..k whose hash it was stored under. A
// summary is stored under the hash of the turns it covers and under that
// of the whole history of each request that made or used it, so the same
// conversation resent finds it at once, and one a few turns longer within
// lookback reads; its To is 0 when there is none.
func (f *fitting) cached(ctx context.Context, folder Folder, m int) (Summary, int) {
	if f.hashes == nil {
		f.hashes = f.prefixHashes(len(f.turns))
	}
	get := func(k int) (Summary, bool) {
		s, ok := folder.Cached(ctx, SummaryKey(f.hashes[k]))
		if !ok || s.Text == "" || s.To <= 0 || s.To > m {
			return Summary{}, false
		}
		s.From = 1
		return s, true
	}
	n := len(f.turns)
	if s, ok := get(n); ok {
		return s, n
	}
	for k := min(n-1, m+lookback); k >= max(1, m-lookback); k-- {
		if s, ok := get(k); ok {
			return s, k
		}
	}
	return Summary{}, 0
}

// summary finds or makes the summary of the longest prefix of turns 1..m
// it can: cached for 1..m, else one summarizer call over a cached shorter
// one and the turns after it (consolidation), else over the turns from the
// first. Its To is 0 when there is none; turns after To are dropped.
func (f *fitting) summary(ctx context.Context, folder Folder, m int) (Summary, bool) {
	if folder == nil {
		if f.sum.To > 0 && f.sum.To <= m {
			return f.sum, true
		}
		return Summary{}, false
	}
	prev, k := f.cached(ctx, folder, m)
	hashes := f.hashes
	// Found under this very history (a later stage of the same request on
	// a smaller window, the same conversation resent): it is taken as it
	// is, the turns after it left out, rather than calling the summarizer
	// again for the same turns. Found under a shorter prefix only, it says
	// nothing of the turns after it: an edited or regenerated turn (a new
	// branch of the conversation) has turns of its own there, folded by a
	// call, not dropped.
	if prev.To == m || prev.To > 0 && k == len(f.turns) {
		f.actions = append(f.actions, Action{Action: ActReused, FromTurn: 1, ToTurn: prev.To, SummaryID: prev.ID})
		f.sum = prev
		return prev, true
	}
	prompt, to := f.summaryPrompt(ctx, folder, prev, m)
	if to > prev.To {
		text, shared, err := folder.Summarize(ctx, prompt)
		if text = strings.TrimSpace(text); err == nil && text != "" {
			a := Action{Action: ActSummarized, FromTurn: prev.To + 1, ToTurn: to, SummaryID: SummaryID(hashes[to])}
			switch {
			case shared:
				// No call of this request's: the trace says whose it is.
				a.Action, a.FromTurn, a.Detail = ActReused, 1, "made by a concurrent request"
			case prev.To > 0:
				a.Detail = "consolidated with " + prev.ID + " (turns 1–" + strconv.Itoa(prev.To) + ")"
			}
			f.actions = append(f.actions, a)
			f.sum = Summary{ID: a.SummaryID, Text: text, From: 1, To: to}
			folder.Store(ctx, SummaryKey(hashes[to]), f.sum)
			if n := len(f.turns); n != to {
				folder.Store(ctx, SummaryKey(hashes[n]), f.sum)
			}
			return f.sum, true
		} else if err != nil {
			f.failure = err
		}
	}
	if prev.To > 0 {
		f.actions = append(f.actions, Action{Action: ActReused, FromTurn: 1, ToTurn: prev.To, SummaryID: prev.ID})
		f.sum = prev
		return prev, true
	}
	return Summary{}, false
}

// summarizeLead opens the summarizer's user message.
const summarizeLead = "Summarise this conversation:\n\n"

// SummaryTokens bounds a summary, in tokens: the summarizer's answer is
// capped there, and asked for no more words than it allows.
const SummaryTokens = 512

// summarizerReserve is kept in the summarizer's window for its answer
// (SummaryTokens) and its chat template.
const summarizerReserve = 768

// minTurnRoom is the least room worth cutting a turn into for the
// summarizer; headTailMark is what HeadTail's omission line may add beyond
// its limit.
const (
	minTurnRoom  = 400
	headTailMark = 40
)

// summaryPrompt is the summarizer's prompt for turns prev.To+1..to, with
// prev's text when there is one, and to: the last turn that fits the
// summarizer's own window (its messages cut to a few lines each).
func (f *fitting) summaryPrompt(ctx context.Context, folder Folder, prev Summary, m int) ([]Message, int) {
	window, ratio := folder.Window(ctx)
	// The summary's share, at most what the summarizer may answer, at two
	// tokens a word: French or German take about twice the tokens of
	// English words, and a summary asked more words than its cap is cut
	// before the latest turns it covers.
	words := max(min(Tokens(f.in.share(f.in.Shares.Summaries), f.in.Ratio), SummaryTokens)/2, 60)
	sys := fmt.Sprintf("You summarise the earlier part of a conversation for an assistant that will not see it. In at most %d words, say what the user asked, what was answered, which tools were called with which arguments and what they returned, and which files, names and numbers matter. Write in the language of the conversation, keeping the user's own terms. Facts only, no preamble.", words)
	room := int(float64(window-summarizerReserve)*ratio) - len(sys) - len(summarizeLead) - 2*MessageOverhead
	var b strings.Builder
	if prev.To > 0 {
		fmt.Fprintf(&b, "Summary of turns 1–%d:\n%s\n\n", prev.To, prev.Text)
	}
	// Each message gets an even part of the room, within bounds, so that
	// a small summarizer still sees every turn it can.
	count := 0
	for _, t := range f.turns[prev.To:m] {
		count += len(t)
	}
	per := min(max(room/max(count, 1), 160), 1500)
	to := prev.To
	for k := prev.To + 1; k <= m; k++ {
		n := b.Len()
		writeTurn(&b, k, f.turns[k-1], per)
		if b.Len() > room {
			s := b.String()
			b.Reset()
			b.WriteString(s[:n])
			if k == prev.To+1 && room-n >= minTurnRoom {
				// A turn longer than the summarizer's whole window (an
				// agent's many calls before it answered) is cut in its
				// middle, its question and answer kept: whole, it would
				// never be summarized, and every call it made be dropped.
				cut, _ := HeadTail(s[n:], room-n-headTailMark)
				b.WriteString(cut)
				to = k
			}
			break
		}
		to = k
	}
	return []Message{{Role: "system", Content: sys}, {Role: "user", Content: summarizeLead + b.String()}}, to
}

// writeTurn renders turn k for the summarizer: every message, tool calls
// between the question and the answer included (the design document's
// known bug was to lose them), each cut to a few lines.
func writeTurn(b *strings.Builder, k int, msgs []Message, per int) {
	fmt.Fprintf(b, "[turn %d]\n", k)
	for _, m := range msgs {
		if len(m.Parts) > 0 {
			// The summarizer gets text: it is told what it cannot see.
			fmt.Fprintf(b, "(%s attached %s)\n", m.Role, partsSaid(m.Parts))
		}
		switch {
		case m.Role == "tool":
			text, _ := HeadTail(m.Content, min(400, per))
			fmt.Fprintf(b, "tool %s returned: %s\n", nameOr(m.Name, ""), text)
		case len(m.ToolCalls) > 0:
			if m.Content != "" {
				text, _ := HeadTail(m.Content, min(800, per))
				fmt.Fprintf(b, "%s: %s\n", m.Role, text)
			}
			for _, c := range m.ToolCalls {
				args, _ := HeadTail(c.Arguments, 300)
				fmt.Fprintf(b, "%s called %s %s\n", m.Role, c.Name, args)
			}
		default:
			text, _ := HeadTail(m.Content, per)
			fmt.Fprintf(b, "%s: %s\n", m.Role, text)
		}
	}
}

// partsSaid names a message's parts for the summarizer: "1 image", "2
// images and 1 file".
func partsSaid(parts []Part) string {
	images := countImages(parts)
	files := len(parts) - images
	switch {
	case files == 0:
		return plural(images, "image")
	case images == 0:
		return plural(files, "file")
	}
	return plural(images, "image") + " and " + plural(files, "file")
}
