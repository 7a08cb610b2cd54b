package eval

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
)

//go:embed report.html.tmpl
var reportHTML string

// page is the report page's template: one file with its style and its
// plots, drawn as inline SVG here, so that the page opens anywhere,
// offline, and reads the same without scripts.
var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"pct":    pct,
	"pvalue": pvalue,
	"join":   func(ids []string) string { return strings.Join(ids, ", ") },
}).Parse(reportHTML))

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

// WriteHTML writes the report as a self-contained page.
func (rep *Report) WriteHTML(w io.Writer) error {
	return page.Execute(w, rep.pageData())
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
