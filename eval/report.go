package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"chainproxy/chain"
)

// Report is an evaluation's outcome: report.json's document, and what the
// table and the HTML page show.
type Report struct {
	// Data is the items' file, Started and Finished the run's times.
	Data     string    `json:"data"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Interrupted is set on a run stopped before every item was asked
	// (Ctrl-C): -resume continues it.
	Interrupted bool `json:"interrupted,omitempty"`
	// SetSize is how many items the set has (after -n); a mode that did
	// not reach them all says so in its own items count.
	SetSize  int      `json:"set_size"`
	Judge    string   `json:"judge,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	// Cockpit is the base URL of the proxy whose cockpit opens the
	// answers' traces (-cockpit): the page links each trace id there.
	Cockpit string `json:"cockpit,omitempty"`
	// Modes are the modes' summaries, in the order asked.
	Modes []ModeSummary `json:"modes"`
	// Comparisons set each chain mode against the best single node.
	Comparisons []Comparison `json:"comparisons,omitempty"`
	// Routing is how chain/auto routed the items, when it ran.
	Routing *Routing `json:"routing,omitempty"`
	// Results are every answered item under every mode, in the set's
	// order.
	Results []Result `json:"items"`
}

// ModeSummary is one mode's line of the report.
type ModeSummary struct {
	Mode string `json:"mode"`
	// Node marks a single node's mode (simple mode pinned to it).
	Node bool `json:"node,omitempty"`
	// Items counts the answered items, Correct the right ones, Failed
	// those that ended in an error (counted as wrong).
	Items   int `json:"items"`
	Correct int `json:"correct"`
	Failed  int `json:"failed"`
	// Accuracy is Correct/Items, in [CILow, CIHigh], its 95 % Wilson
	// interval.
	Accuracy float64 `json:"accuracy"`
	CILow    float64 `json:"ci_low"`
	CIHigh   float64 `json:"ci_high"`
	// Latency and time to first token, nearest-rank percentiles.
	P50MS     int64 `json:"p50_ms"`
	P95MS     int64 `json:"p95_ms"`
	TTFTP50MS int64 `json:"ttft_p50_ms"`
	// Sums over the mode's items.
	TokensIn   int `json:"tokens_in"`
	TokensOut  int `json:"tokens_out"`
	Calls      int `json:"model_calls"`
	Loads      int `json:"model_loads"`
	GuardStops int `json:"guard_stops"`
}

// Comparison sets a chain mode against a single node, item by item, on
// the items both answered.
type Comparison struct {
	Chain string `json:"chain"`
	Node  string `json:"node"`
	// Wins: the chain right, the node wrong; Losses the reverse; Ties
	// both right or both wrong.
	Pairs  int `json:"pairs"`
	Wins   int `json:"wins"`
	Losses int `json:"losses"`
	Ties   int `json:"ties"`
	// PValue is the exact McNemar test's two-sided p-value of Wins
	// against Losses.
	PValue float64 `json:"mcnemar_p"`
}

// Routing is how chain/auto sent the items, and how right each part was.
type Routing struct {
	Mode      string    `json:"mode"`
	Simple    RoutePart `json:"simple"`
	Reflexive RoutePart `json:"reflexive"`
}

// RoutePart is the items auto sent one way.
type RoutePart struct {
	Items    int     `json:"items"`
	Correct  int     `json:"correct"`
	Accuracy float64 `json:"accuracy"`
	CILow    float64 `json:"ci_low"`
	CIHigh   float64 `json:"ci_high"`
	// IDs are the items, in the set's order.
	IDs []string `json:"ids"`
}

// Summarize builds the report of results for items asked under modes;
// nodes are the configured node names (the modes among them are single
// nodes).
func Summarize(items []Item, modes, nodes []string, results []Result) *Report {
	order := make(map[string]int, len(items))
	for i := range items {
		order[items[i].ID] = i
	}
	rs := slices.Clone(results)
	modeIdx := func(m string) int { return slices.Index(modes, m) }
	slices.SortStableFunc(rs, func(a, b Result) int {
		if d := order[a.ID] - order[b.ID]; d != 0 {
			return d
		}
		return modeIdx(a.Mode) - modeIdx(b.Mode)
	})
	rep := &Report{SetSize: len(items), Results: rs}
	byMode := map[string]map[string]*Result{}
	for i := range rs {
		r := &rs[i]
		if byMode[r.Mode] == nil {
			byMode[r.Mode] = map[string]*Result{}
		}
		byMode[r.Mode][r.ID] = r
	}
	for _, m := range modes {
		rep.Modes = append(rep.Modes, summarize(m, slices.Contains(nodes, m), rs))
	}
	// The best single node: the most accurate, the first listed on a tie.
	best := -1
	for i, s := range rep.Modes {
		if s.Node && s.Items > 0 && (best < 0 || s.Accuracy > rep.Modes[best].Accuracy) {
			best = i
		}
	}
	for _, m := range modes {
		if !strings.HasPrefix(m, "chain/") || best < 0 {
			continue
		}
		rep.Comparisons = append(rep.Comparisons, compare(m, rep.Modes[best].Mode, items, byMode))
	}
	if slices.Contains(modes, chain.ModelAuto) {
		rep.Routing = routing(chain.ModelAuto, items, byMode[chain.ModelAuto])
	}
	return rep
}

func summarize(mode string, node bool, rs []Result) ModeSummary {
	s := ModeSummary{Mode: mode, Node: node}
	var lat, ttft []time.Duration
	for i := range rs {
		r := &rs[i]
		if r.Mode != mode {
			continue
		}
		s.Items++
		if r.Correct {
			s.Correct++
		}
		if r.Failed {
			s.Failed++
		}
		lat = append(lat, time.Duration(r.LatencyMS)*time.Millisecond)
		if r.TTFTMS > 0 {
			ttft = append(ttft, time.Duration(r.TTFTMS)*time.Millisecond)
		}
		s.TokensIn += r.TokensIn
		s.TokensOut += r.TokensOut
		s.Calls += r.Calls
		s.Loads += r.Loads
		s.GuardStops += r.GuardStops
	}
	if s.Items > 0 {
		s.Accuracy = float64(s.Correct) / float64(s.Items)
	}
	s.CILow, s.CIHigh = Wilson(s.Correct, s.Items)
	s.P50MS = Percentile(lat, 50).Milliseconds()
	s.P95MS = Percentile(lat, 95).Milliseconds()
	s.TTFTP50MS = Percentile(ttft, 50).Milliseconds()
	return s
}

func compare(chainMode, node string, items []Item, byMode map[string]map[string]*Result) Comparison {
	c := Comparison{Chain: chainMode, Node: node}
	for i := range items {
		a, b := byMode[chainMode][items[i].ID], byMode[node][items[i].ID]
		if a == nil || b == nil {
			continue
		}
		c.Pairs++
		switch {
		case a.Correct && !b.Correct:
			c.Wins++
		case !a.Correct && b.Correct:
			c.Losses++
		default:
			c.Ties++
		}
	}
	c.PValue = McNemar(c.Wins, c.Losses)
	return c
}

func routing(mode string, items []Item, got map[string]*Result) *Routing {
	r := &Routing{Mode: mode}
	for i := range items {
		res := got[items[i].ID]
		if res == nil {
			continue
		}
		part := &r.Simple
		if res.Routed == chain.ModeReflexive {
			part = &r.Reflexive
		}
		part.Items++
		part.IDs = append(part.IDs, res.ID)
		if res.Correct {
			part.Correct++
		}
	}
	for _, p := range []*RoutePart{&r.Simple, &r.Reflexive} {
		if p.Items > 0 {
			p.Accuracy = float64(p.Correct) / float64(p.Items)
		}
		p.CILow, p.CIHigh = Wilson(p.Correct, p.Items)
		if p.IDs == nil {
			p.IDs = []string{}
		}
	}
	return r
}

// pct formats a fraction as a percentage with one decimal.
func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

// WriteTable writes the report as the terminal shows it.
func (rep *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	// The modes' names are padded to one width: left-aligned, where the
	// figures are right-aligned.
	width := len("mode")
	for _, s := range rep.Modes {
		width = max(width, len(s.Mode))
	}
	fmt.Fprintf(tw, "%-*s\titems\taccuracy\t95%% CI\tp50 ms\tp95 ms\tTTFT p50\ttokens in\ttokens out\tcalls\tloads\tguard stops\tfailed\t\n", width, "mode")
	for _, s := range rep.Modes {
		fmt.Fprintf(tw, "%-*s\t%d\t%s\t%s–%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", width, s.Mode, s.Items, pct(s.Accuracy), pct(s.CILow), pct(s.CIHigh),
			s.P50MS, s.P95MS, s.TTFTP50MS, s.TokensIn, s.TokensOut, s.Calls, s.Loads, s.GuardStops, s.Failed)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range rep.Comparisons {
		fmt.Fprintf(w, "%s against %s (the best single node), on %d items: %d wins, %d losses, %d ties; exact McNemar p = %s\n",
			c.Chain, c.Node, c.Pairs, c.Wins, c.Losses, c.Ties, pvalue(c.PValue))
	}
	if r := rep.Routing; r != nil {
		fmt.Fprintf(w, "%s routed %d items to simple mode (%s right) and %d to the reflexive chain (%s right)\n",
			r.Mode, r.Simple.Items, pct(r.Simple.Accuracy), r.Reflexive.Items, pct(r.Reflexive.Accuracy))
	}
	if rep.Interrupted {
		fmt.Fprintln(w, "interrupted: the report holds what finished; run again with -resume to continue")
	}
	for _, m := range rep.Warnings {
		fmt.Fprintln(w, "warning:", m)
	}
	return nil
}

// pvalue formats a p-value: three significant digits, small ones in
// scientific notation.
func pvalue(p float64) string {
	if p < 1e-3 {
		return fmt.Sprintf("%.2e", p)
	}
	return fmt.Sprintf("%.3g", p)
}

// WriteJSON writes the report as report.json holds it.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// ReadReport reads a report.json, to resume its run.
func ReadReport(path string) (*Report, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &rep, nil
}

// WriteFiles writes report.json and report.html into dir, each whole or
// not at all (written aside, then renamed).
func (rep *Report) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range []struct {
		name  string
		write func(io.Writer) error
	}{{"report.json", rep.WriteJSON}, {"report.html", rep.WriteHTML}} {
		if err := writeFile(filepath.Join(dir, f.name), f.write); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".report-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, there is nothing left to remove
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := write(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// finite keeps NaN and infinities out of the page's coordinates.
func finite(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}
