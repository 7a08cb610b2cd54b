package web

import (
	"fmt"
	"html"
	"strings"

	"chainproxy/chain"
)

// renderDetails renders one collapsible block per stage in the form Open
// WebUI displays natively for tool calls, so chat front ends show the chain
// folded without the cockpit.
func renderDetails(stages []chain.StageTrace) string {
	var b strings.Builder
	for i, st := range stages {
		args := fmt.Sprintf(`{"model":%q,"turns":%d,"status":%q}`, st.Model, st.Turns, st.Status)
		var res strings.Builder
		for _, t := range st.ToolsUsed {
			fmt.Fprintf(&res, "%s %s → %s\n", t.Name, t.Args, t.Status)
		}
		if st.Error != "" {
			res.WriteString(st.Error)
		}
		fmt.Fprintf(&b, "<details type=\"tool_calls\" done=\"true\" id=\"stage-%d\" name=\"%s\" arguments=\"%s\" result=\"%s\">\n<summary>%s</summary>\n</details>\n",
			i, html.EscapeString(st.Node), html.EscapeString(args), html.EscapeString(res.String()), html.EscapeString(badge(st)))
	}
	if b.Len() > 0 {
		b.WriteString("\n")
	}
	return b.String()
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
