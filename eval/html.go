package eval

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"net/url"
	"strings"
)

// pageStyle is the page's style sheet, inline: the page opens anywhere,
// offline.
const pageStyle = `:root { --fg: #1d2330; --muted: #667085; --line: #d0d5dd; --node: #7a8aa6; --chain: #2f6fdf; --right: #2e9e5b; --wrong: #c9ced8; --failed: #d9534f; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); margin: 24px auto; max-width: 980px; padding: 0 16px; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 28px 0 8px; }
.meta, .note { color: var(--muted); } .warn { color: #9a5b00; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { padding: 4px 8px; border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
svg { width: 100%; height: auto; display: block; }
svg text { font: 12px system-ui, sans-serif; fill: var(--fg); }
svg .axis { stroke: var(--line); } svg .tick { fill: var(--muted); font-size: 11px; }
svg .bar.node, svg .point.node { fill: var(--node); } svg .bar.chain, svg .point.chain { fill: var(--chain); }
svg .ci { stroke: var(--fg); stroke-width: 1.5; }
svg .right { fill: var(--right); } svg .wrong { fill: var(--wrong); }
.matrix td { text-align: center; } .matrix td:first-child { text-align: left; }
.matrix .right { color: var(--right); } .matrix .wrong { color: #98a2b3; } .matrix .failed { color: var(--failed); font-weight: bold; }
.legend span { margin-right: 14px; } .sw { display: inline-block; width: 10px; height: 10px; margin-right: 4px; vertical-align: -1px; }
details { margin-top: 12px; } code { font-size: 12px; }
`

// Plot geometry, in SVG user units (the SVG scales to the page's width).
const (
	plotW    = 640
	barRow   = 28
	barLeft  = 130 // room for the modes' names
	barRight = 130 // room for the value
	plotPad  = 24
)

// bar is one mode in the accuracy plot.
type bar struct {
	Label                            string
	Y, W, Lo, Hi, TY, CapTop, CapBot float64
	Text                             string
	Node                             bool
}

// point is one mode in the accuracy against latency plot.
type point struct {
	Label              string
	X, Y, YLo, YHi, LX float64
	Node               bool
}

// tick is an axis mark.
type tick struct {
	At   float64
	Text string
}

// routeBar is one part of chain/auto's routing: right and wrong answers.
type routeBar struct {
	Label               string
	Y, Right, Wrong, TX float64
	Text                string
	IDs                 string
}

// cell is one item under one mode in the items' matrix.
type cell struct {
	Mark, Class, Title string
}

// row is one item in the matrix.
type row struct {
	ID    string
	Cells []cell
}

type pageData struct {
	*Report
	Width, BarH, ScatterH, RouteH float64
	BarLeft, BarEnd               float64
	Bars                          []bar
	BarTicks                      []tick
	Points                        []point
	XTicks, YTicks                []tick
	Plot                          struct{ L, R, T, B float64 }
	Routes                        []routeBar
	ModeNames                     []string
	Rows                          []row
}

// traceLink is trace id id as the page shows it: linked to the cockpit
// at base, when given.
func traceLink(base, id string) string {
	code := "<code>" + esc(id) + "</code>"
	if base == "" {
		return code
	}
	return "<a href=\"" + esc(TraceURL(base, id)) + "\">" + code + "</a>"
}

// TraceURL is where the cockpit of the proxy at base opens trace id.
func TraceURL(base, id string) string {
	return strings.TrimRight(base, "/") + "/#/traces/" + url.PathEscape(id)
}

// WriteHTML writes the report as a self-contained page: its style and
// its plots, drawn as inline SVG, are in the page, which has no script.
// It is written with fmt, not html/template: a template calls methods by
// name through reflection, which would keep every unused method in the
// release build (cmd/proxy's TestReleaseBuildPrunesMethods).
func (rep *Report) WriteHTML(w io.Writer) error {
	bw := bufio.NewWriter(w)
	rep.pageData().write(bw)
	return bw.Flush()
}

func (rep *Report) pageData() *pageData {
	d := &pageData{Report: rep, Width: plotW, BarLeft: barLeft, BarEnd: plotW - barRight}
	span := float64(plotW - barLeft - barRight)
	x := func(f float64) float64 { return round1(barLeft + span*finite(f)) }
	for i, s := range rep.Modes {
		y := float64(plotPad + i*barRow)
		d.Bars = append(d.Bars, bar{Label: s.Mode, Y: y, W: round1(span * finite(s.Accuracy)), Lo: x(s.CILow), Hi: x(s.CIHigh), TY: y + 14, CapTop: y + 8, CapBot: y + 20,
			Text: fmt.Sprintf("%s (n=%d)", pct(s.Accuracy), s.Items), Node: s.Node})
		d.ModeNames = append(d.ModeNames, s.Mode)
	}
	d.BarH = float64(plotPad*2 + len(rep.Modes)*barRow)
	for _, f := range []float64{0, .25, .5, .75, 1} {
		d.BarTicks = append(d.BarTicks, tick{At: x(f), Text: pct(f)})
	}

	// Accuracy (y) against median latency (x), each mode a point with its
	// interval.
	d.ScatterH = 320
	d.Plot.L, d.Plot.R, d.Plot.T, d.Plot.B = 60, plotW-40, 20, d.ScatterH-40
	maxMS := 1.0
	for _, s := range rep.Modes {
		maxMS = math.Max(maxMS, float64(s.P50MS))
	}
	maxMS = niceCeil(maxMS * 1.1)
	px := func(ms float64) float64 { return round1(d.Plot.L + (d.Plot.R-d.Plot.L)*ms/maxMS) }
	py := func(f float64) float64 { return round1(d.Plot.B - (d.Plot.B-d.Plot.T)*finite(f)) }
	for _, s := range rep.Modes {
		if s.Items == 0 {
			continue
		}
		p := point{Label: s.Mode, X: px(float64(s.P50MS)), Y: py(s.Accuracy), YLo: py(s.CILow), YHi: py(s.CIHigh), Node: s.Node}
		p.LX = p.X + 8
		d.Points = append(d.Points, p)
	}
	for i := 0; i <= 4; i++ {
		ms := maxMS * float64(i) / 4
		d.XTicks = append(d.XTicks, tick{At: px(ms), Text: fmt.Sprintf("%.0f ms", ms)})
		d.YTicks = append(d.YTicks, tick{At: py(float64(i) / 4), Text: pct(float64(i) / 4)})
	}

	if r := rep.Routing; r != nil {
		total := max(r.Simple.Items+r.Reflexive.Items, 1)
		for i, p := range []struct {
			name string
			part RoutePart
		}{{"simple", r.Simple}, {"reflexive", r.Reflexive}} {
			d.Routes = append(d.Routes, routeBar{
				Label: p.name, Y: float64(plotPad + i*barRow),
				Right: round1(span * float64(p.part.Correct) / float64(total)),
				Wrong: round1(span * float64(p.part.Items-p.part.Correct) / float64(total)),
				TX:    round1(barLeft + span*float64(p.part.Items)/float64(total) + 8),
				Text:  fmt.Sprintf("%d items, %s right", p.part.Items, pct(p.part.Accuracy)),
				IDs:   strings.Join(p.part.IDs, ", "),
			})
		}
		d.RouteH = float64(plotPad*2 + 2*barRow)
	}

	// The items' matrix: one row an item, one column a mode.
	idx := map[[2]string]*Result{}
	var ids []string
	for i := range rep.Results {
		r := &rep.Results[i]
		if _, seen := idx[[2]string{r.ID, ""}]; !seen {
			idx[[2]string{r.ID, ""}] = r
			ids = append(ids, r.ID)
		}
		idx[[2]string{r.ID, r.Mode}] = r
	}
	for _, id := range ids {
		rw := row{ID: id}
		for _, m := range d.ModeNames {
			r := idx[[2]string{id, m}]
			switch {
			case r == nil:
				rw.Cells = append(rw.Cells, cell{Mark: "·", Class: "none", Title: "not asked"})
			case r.Failed:
				rw.Cells = append(rw.Cells, cell{Mark: "!", Class: "failed", Title: "failed: " + r.Error + "\ntrace " + r.TraceID})
			case r.Correct:
				rw.Cells = append(rw.Cells, cell{Mark: "✓", Class: "right", Title: cut(r.Answer, 300) + "\ntrace " + r.TraceID})
			default:
				rw.Cells = append(rw.Cells, cell{Mark: "✗", Class: "wrong", Title: cut(r.Answer, 300) + "\ntrace " + r.TraceID})
			}
		}
		d.Rows = append(d.Rows, rw)
	}
	return d
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten, for axis ends.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }

// esc escapes text for an element's content or a quoted attribute.
func esc(s string) string { return html.EscapeString(s) }

// num formats an SVG coordinate.
func num(f float64) string { return fmt.Sprint(f) }

func (d *pageData) write(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	rep := d.Report
	p("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	p("<title>chainproxy eval: %s</title>\n<style>\n%s</style>\n</head>\n<body>\n", esc(rep.Data), pageStyle)
	p("<h1>Is the chain worth it on these models?</h1>\n")
	p("<p class=\"meta\">%s · %d items · %s", esc(rep.Data), rep.SetSize, esc(rep.Started.Format("2006-01-02 15:04 MST")))
	if rep.Judge != "" {
		p(" · judge %s", esc(rep.Judge))
	}
	if rep.Interrupted {
		p(" · <strong>interrupted</strong>: what finished (run again with -resume)")
	}
	p("</p>\n")
	for _, m := range rep.Warnings {
		p("<p class=\"warn\">warning: %s</p>\n", esc(m))
	}

	p("\n<h2>Accuracy per mode, with 95 %% Wilson intervals</h2>\n")
	p("<p class=\"legend\"><span><i class=\"sw\" style=\"background:var(--node)\"></i>one node alone</span><span><i class=\"sw\" style=\"background:var(--chain)\"></i>chain</span></p>\n")
	p("<svg id=\"accuracy\" viewBox=\"0 0 %s %s\" role=\"img\" aria-label=\"accuracy per mode\">\n", num(d.Width), num(d.BarH))
	for _, t := range d.BarTicks {
		p("<line class=\"axis\" x1=\"%s\" x2=\"%s\" y1=\"16\" y2=\"%s\"/><text class=\"tick\" x=\"%s\" y=\"12\" text-anchor=\"middle\">%s</text>\n", num(t.At), num(t.At), num(d.BarH), num(t.At), esc(t.Text))
	}
	for _, b := range d.Bars {
		kind := "chain"
		if b.Node {
			kind = "node"
		}
		p("<text x=\"%s\" dx=\"-8\" y=\"%s\" text-anchor=\"end\">%s</text>\n", num(d.BarLeft), num(b.TY), esc(b.Label))
		p("<rect class=\"bar %s\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"20\"><title>%s: %s</title></rect>\n", kind, num(d.BarLeft), num(b.Y), num(b.W), esc(b.Label), esc(b.Text))
		p("<line class=\"ci\" x1=\"%s\" x2=\"%s\" y1=\"%s\" y2=\"%s\"/>", num(b.Lo), num(b.Hi), num(b.TY), num(b.TY))
		p("<line class=\"ci\" x1=\"%s\" x2=\"%s\" y1=\"%s\" y2=\"%s\"/>", num(b.Lo), num(b.Lo), num(b.CapTop), num(b.CapBot))
		p("<line class=\"ci\" x1=\"%s\" x2=\"%s\" y1=\"%s\" y2=\"%s\"/>\n", num(b.Hi), num(b.Hi), num(b.CapTop), num(b.CapBot))
		p("<text x=\"%s\" dx=\"6\" y=\"%s\">%s</text>\n", num(d.BarEnd), num(b.TY), esc(b.Text))
	}
	p("</svg>\n")

	p("\n<h2>Accuracy against latency (median)</h2>\n")
	p("<svg id=\"latency\" viewBox=\"0 0 %s %s\" role=\"img\" aria-label=\"accuracy against latency\">\n", num(d.Width), num(d.ScatterH))
	p("<line class=\"axis\" x1=\"%s\" x2=\"%s\" y1=\"%s\" y2=\"%s\"/>", num(d.Plot.L), num(d.Plot.R), num(d.Plot.B), num(d.Plot.B))
	p("<line class=\"axis\" x1=\"%s\" x2=\"%s\" y1=\"%s\" y2=\"%s\"/>\n", num(d.Plot.L), num(d.Plot.L), num(d.Plot.T), num(d.Plot.B))
	for _, t := range d.XTicks {
		p("<text class=\"tick\" x=\"%s\" y=\"%s\" dy=\"18\" text-anchor=\"middle\">%s</text>\n", num(t.At), num(d.Plot.B), esc(t.Text))
	}
	for _, t := range d.YTicks {
		p("<text class=\"tick\" x=\"%s\" dx=\"-6\" y=\"%s\" dy=\"4\" text-anchor=\"end\">%s</text>\n", num(d.Plot.L), num(t.At), esc(t.Text))
	}
	for _, pt := range d.Points {
		kind := "chain"
		if pt.Node {
			kind = "node"
		}
		p("<line class=\"ci\" x1=\"%s\" x2=\"%s\" y1=\"%s\" y2=\"%s\"/>\n", num(pt.X), num(pt.X), num(pt.YLo), num(pt.YHi))
		p("<circle class=\"point %s\" cx=\"%s\" cy=\"%s\" r=\"6\"><title>%s</title></circle><text x=\"%s\" y=\"%s\" dy=\"-6\">%s</text>\n", kind, num(pt.X), num(pt.Y), esc(pt.Label), num(pt.LX), num(pt.Y), esc(pt.Label))
	}
	p("</svg>\n")

	if r := rep.Routing; r != nil {
		p("\n<h2>Where %s routed the items</h2>\n", esc(r.Mode))
		p("<p class=\"legend\"><span><i class=\"sw\" style=\"background:var(--right)\"></i>right</span><span><i class=\"sw\" style=\"background:var(--wrong)\"></i>wrong</span></p>\n")
		p("<svg id=\"routing\" viewBox=\"0 0 %s %s\" role=\"img\" aria-label=\"chain/auto routing\">\n", num(d.Width), num(d.RouteH))
		for _, b := range d.Routes {
			p("<text x=\"%s\" dx=\"-8\" y=\"%s\" dy=\"14\" text-anchor=\"end\">%s</text>\n", num(d.BarLeft), num(b.Y), esc(b.Label))
			p("<rect class=\"right\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"20\"><title>%s</title></rect>", num(d.BarLeft), num(b.Y), num(b.Right), esc(b.IDs))
			p("<rect class=\"wrong\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"20\" transform=\"translate(%s 0)\"><title>%s</title></rect>\n", num(d.BarLeft), num(b.Y), num(b.Wrong), num(b.Right), esc(b.IDs))
			p("<text x=\"%s\" y=\"%s\" dy=\"14\">%s</text>\n", num(b.TX), num(b.Y), esc(b.Text))
		}
		p("</svg>\n")
		p("<p class=\"note\">simple: %s<br>reflexive: %s</p>\n", esc(strings.Join(r.Simple.IDs, ", ")), esc(strings.Join(r.Reflexive.IDs, ", ")))
	}

	p("\n<h2>Per mode</h2>\n<table id=\"modes\">\n")
	p("<tr><th>mode</th><th>items</th><th>accuracy</th><th>95 %% CI</th><th>p50 ms</th><th>p95 ms</th><th>TTFT p50 ms</th><th>tokens in</th><th>tokens out</th><th>model calls</th><th>model loads</th><th>guard stops</th><th>failed</th></tr>\n")
	for _, s := range rep.Modes {
		p("<tr><td>%s</td><td>%d</td><td>%s</td><td>%s–%s</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td></tr>\n",
			esc(s.Mode), s.Items, pct(s.Accuracy), pct(s.CILow), pct(s.CIHigh), s.P50MS, s.P95MS, s.TTFTP50MS, s.TokensIn, s.TokensOut, s.Calls, s.Loads, s.GuardStops, s.Failed)
	}
	p("</table>\n<p class=\"note\">Model loads count the calls whose node reported loading its model (Ollama's load_duration of 100 ms or more); a node that reports none, such as an OpenAI-compatible server, counts none. Guard stops count stages that ended stopped_* (a repeated call, format errors, no progress, the turn budget).</p>\n")

	if len(rep.Comparisons) > 0 {
		p("\n<h2>Chain against the best single node, item by item</h2>\n<table id=\"comparisons\">\n")
		p("<tr><th>chain</th><th>node</th><th>pairs</th><th>wins</th><th>losses</th><th>ties</th><th>exact McNemar p</th></tr>\n")
		for _, c := range rep.Comparisons {
			p("<tr><td>%s</td><td>%s</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%s</td></tr>\n", esc(c.Chain), esc(c.Node), c.Pairs, c.Wins, c.Losses, c.Ties, pvalue(c.PValue))
		}
		p("</table>\n<p class=\"note\">A win: the chain right where the node was wrong. The p-value tests wins against losses (ties say nothing of which is better); a small one, below 0.05 say, means the difference is unlikely to be luck.</p>\n")
	}

	p("\n<h2>Items</h2>\n<p class=\"note\">✓ right · ✗ wrong · ! failed · hover a mark for the answer and its trace id.</p>\n")
	p("<table class=\"matrix\" id=\"items\">\n<tr><th>item</th>")
	for _, m := range d.ModeNames {
		p("<th>%s</th>", esc(m))
	}
	p("</tr>\n")
	for _, r := range d.Rows {
		p("<tr><td>%s</td>", esc(r.ID))
		for _, c := range r.Cells {
			p("<td class=\"%s\" title=\"%s\">%s</td>", c.Class, esc(c.Title), c.Mark)
		}
		p("</tr>\n")
	}
	p("</table>\n<details><summary>Every answer, with its trace id</summary>\n<table id=\"results\">\n")
	p("<tr><th>item</th><th>mode</th><th>routed</th><th>stages</th><th>result</th><th>ms</th><th>trace id</th></tr>\n")
	for _, r := range rep.Results {
		stages := make([]string, len(r.Stages))
		for i, s := range r.Stages {
			stages[i] = s.Node + " " + s.Status
		}
		result := "wrong"
		switch {
		case r.Failed:
			result = "failed"
		case r.Correct:
			result = "right"
		}
		trace := traceLink(d.Cockpit, r.TraceID)
		if r.Judge != nil && r.Judge.TraceID != "" {
			// The judging that graded the answer, beside it.
			trace += " · judged in " + traceLink(d.Cockpit, r.Judge.TraceID)
		}
		p("<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td>%s</td></tr>\n",
			esc(r.ID), esc(r.Mode), esc(r.Routed), esc(strings.Join(stages, " → ")), result, r.LatencyMS, trace)
	}
	p("</table>\n</details>\n</body>\n</html>\n")
}
