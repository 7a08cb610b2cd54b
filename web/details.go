package web

import (
	"fmt"
	"html"
	"strings"

	"chainproxy/chain"
	"chainproxy/chain/trace"
)

// The blocks follow Open WebUI's own parser and display, as read in its
// source: src/lib/utils/marked/extension.ts (commit 0915a1fbcc44) and
// src/lib/components/common/ToolCallDisplay.svelte (commit 02530d501461).
// The tokenizer wants the block at the start of a line, as
// /^<details(\s+[^>]*)?>\n/ then /^<summary>(.*?)<\/summary>\n/, and reads
// attributes with /(\w+)="(.*?)"/, whose "." stops at a newline. The display
// labels the block with name, entity-decodes arguments and result, shows
// result only when done="true", and shows a result that is not JSON as
// preformatted text. So result is plain text with &, <, >, " and ' escaped
// and each newline written as &#10;.

// detailsRenderer turns a run's events into the "details" rendering: one
// block per stage, written as soon as the stage ends, and the answering
// stage's block just before its first content. The stream and the whole
// answer use it on the same events, so both carry the same text.
type detailsRenderer struct {
	answering int // stage whose content is the answer; -1 before any
	// off is set for a client's own request (Open WebUI's title, tags
	// and follow-ups): its program parses the answer, which blocks
	// before it would break.
	off bool
}

func newDetailsRenderer() *detailsRenderer { return &detailsRenderer{answering: -1} }

// event returns the text that goes out before ev's own content, if any.
func (d *detailsRenderer) event(ev chain.Event) string {
	if ev.Kind == chain.EventClassified && ev.Own {
		d.off = true
	}
	if d.off {
		return ""
	}
	switch ev.Kind {
	case chain.EventStageEnd:
		if ev.Stage == d.answering || ev.StageTrace == nil {
			return ""
		}
		return stageBlock(ev.Stage, *ev.StageTrace)
	case chain.EventDelta:
		if d.answering >= 0 || ev.Content == "" && ev.Reasoning == "" {
			return ""
		}
		d.answering = ev.Stage
		return block(ev.Stage, ev.Node, fmt.Sprintf(`{"node":%q,"answer":true}`, ev.Node), "The answer follows this block.", ev.Node+" ▸ answering") + "\n"
	}
	return ""
}

// stageBlock is the block of an ended stage: its output, then each tool
// call with its result, then its error.
func stageBlock(i int, st chain.StageTrace) string {
	var res strings.Builder
	out := st.Output
	if len(out) > trace.OutputCap {
		out = truncateText(out, trace.OutputCap) + "\n[cut: the whole text is in the trace]"
	}
	res.WriteString(out)
	for _, t := range st.ToolsUsed {
		if res.Len() > 0 {
			res.WriteString("\n\n")
		}
		fmt.Fprintf(&res, "▸ %s %s → %s\n%s", t.Name, t.Args, t.Status, t.Result)
	}
	if st.Error != "" {
		if res.Len() > 0 {
			res.WriteString("\n\n")
		}
		res.WriteString("error: " + st.Error)
	}
	args := fmt.Sprintf(`{"model":%q,"turns":%d,"status":%q}`, st.Model, st.Turns, st.Status)
	return block(i, st.Node, args, res.String(), badge(st))
}

func block(i int, name, args, result, summary string) string {
	return fmt.Sprintf("<details type=\"tool_calls\" done=\"true\" id=\"stage-%d\" name=\"%s\" arguments=\"%s\" result=\"%s\">\n<summary>%s</summary>\n</details>\n",
		i, attr(name), attr(args), attr(result), html.EscapeString(summary))
}

// attr escapes s for a double-quoted attribute on one line.
func attr(s string) string {
	return strings.ReplaceAll(html.EscapeString(s), "\n", "&#10;")
}

// truncateText cuts s to at most n bytes without splitting a rune.
func truncateText(s string, n int) string {
	tr := chain.Trace{Stages: []chain.StageTrace{{Output: s}}}
	c, _ := tr.Capped(n)
	return c.Stages[0].Output
}

// badge is a stage's one-line label: "OL1 ▸ 2 turns", with the status when
// it is not ok.
func badge(st chain.StageTrace) string {
	unit := "turns"
	if st.Turns == 1 {
		unit = "turn"
	}
	s := fmt.Sprintf("%s ▸ %d %s", st.Node, st.Turns, unit)
	if w := statusWord(st.Status); w != "" {
		s += " (" + w + ")"
	}
	return s
}

func statusWord(status string) string {
	switch status {
	case chain.StageStoppedRepeat:
		return "stopped: repeat"
	case chain.StageStoppedBudget:
		return "stopped: budget"
	case chain.StageStoppedFormatErrors:
		return "stopped: format errors"
	case chain.StageSkippedOffline:
		return "skipped: offline"
	case chain.StageFailed:
		return "failed"
	}
	return ""
}
