package chain

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"chainproxy/antiloop"
	"chainproxy/chain/toolfit"
	"chainproxy/memory"
	"chainproxy/tools"
)

// The tools of a stage fitted to its node's window (issue 42): package
// toolfit chooses them, this file says when and records the choice in the
// stage's trace (ToolsTrace), answers find_tools under the anti-loop's
// rules, and reports the server tools' fit for /readyz.

// toolIndex is the index of the tools the run's stages with tools are
// offered: the tool view's own when they are the server's, else one built
// for the request (a client's tools beside them), once.
func (r *run) toolIndex() *toolfit.Index {
	if r.tix != nil {
		return r.tix
	}
	pool := r.stageTools()
	tvs := r.tv.specs
	if len(pool) == len(tvs) && (len(pool) == 0 || &pool[0] == &tvs[0]) {
		r.tix = r.tv.index
	} else {
		r.tix = toolfit.New(pool)
	}
	return r.tix
}

// toolBudget is what stage s's tools may weigh, in characters: their
// share of its node's window; -1 when the window is unknown (every tool
// offered whole).
func (r *run) toolBudget(ctx context.Context, s *stage) int {
	window := r.e.Window(s.node)
	if window == 0 || r.relay {
		return -1
	}
	return int(float64(window) * r.e.calibration.Ratio(ctx, s.node.Model) * r.e.cfg.Chain.ToolsShare)
}

// chooseTools sets s.tools to the tools its next call is offered: those
// that fit its share (s.toolRoom) of its node's window, chosen by
// relevance to the question and what the earlier stages found, with the
// tools find_tools found, those the stage's prompt names and those the
// conversation already called first. done are the earlier stages.
func (r *run) chooseTools(ctx context.Context, s *stage, done []*stage) {
	ix := r.toolIndex()
	if s.toolRoom == 0 {
		s.toolRoom = r.toolBudget(ctx, s)
	}
	if s.toolRoom < 0 || ix.Full <= s.toolRoom {
		// Every tool whole, as always: nothing to say in the trace.
		s.tools, s.finds = ix.Tools, false
		return
	}
	scores := make([]float64, len(ix.Tools))
	if s.query == nil {
		s.query, s.usedTools = r.toolQuery(done), r.usedTools(done)
	}
	ix.Score(s.query, scores)
	ix.Boost(scores, r.firstTools(s))
	c := ix.Choose(scores, s.toolRoom)
	s.tools, s.finds = c.Offered, c.Find
	tt := &ToolsTrace{Offered: c.Count, Of: len(ix.Tools), Compact: c.Compact, Withheld: c.Withheld}
	if old := s.st.ToolFit; old != nil {
		tt.Found = old.Found
	}
	window := r.e.Window(s.node)
	ratio := r.e.calibration.Ratio(ctx, s.node.Model)
	offered := fmt.Sprintf("the %d most relevant to the question are offered compact, the others through find_tools", c.Count)
	if c.Count == 0 {
		offered = "only find_tools is offered"
	}
	switch share := r.toolBudget(ctx, s); {
	case s.toolRoom < share && len(c.Withheld) > 0:
		tt.Reason = fmt.Sprintf("the %d tools need about %d tokens whole, %d compact; the question and the instructions leave them about %d tokens of %s's %d-token window: %s",
			len(ix.Tools), memory.Tokens(ix.Full, ratio), memory.Tokens(ix.CompactSum, ratio), memory.Tokens(s.toolRoom, ratio), s.node.Name, window, offered)
	case len(c.Withheld) > 0:
		tt.Reason = fmt.Sprintf("the %d tools need about %d tokens whole, %d compact; their share of %s's %d-token window is %d tokens (chain.tools_share %g): %s",
			len(ix.Tools), memory.Tokens(ix.Full, ratio), memory.Tokens(ix.CompactSum, ratio), s.node.Name, window, memory.Tokens(s.toolRoom, ratio), r.e.cfg.Chain.ToolsShare, offered)
	case c.Compact:
		tt.Reason = fmt.Sprintf("the %d tools need about %d tokens whole; their share of %s's %d-token window is %d tokens (chain.tools_share %g): offered compact (%d tokens)",
			len(ix.Tools), memory.Tokens(ix.Full, ratio), s.node.Name, window, memory.Tokens(s.toolRoom, ratio), r.e.cfg.Chain.ToolsShare, memory.Tokens(ix.CompactSum, ratio))
	}
	s.st.ToolFit = tt
}

// toolQueryChars bounds what the earlier stages' findings add to the
// words tools are chosen by.
const toolQueryChars = 4000

// toolQuery is the words a stage's tools are chosen by: the user's last
// message and what the earlier stages (done) found.
func (r *run) toolQuery(done []*stage) []uint64 {
	var texts []string
	for i := len(r.req.Messages) - 1; i >= 0; i-- {
		if m := r.req.Messages[i]; m.Role == "user" {
			texts = append(texts, m.Content[min(m.Lead, len(m.Content)):])
			break
		}
	}
	left := toolQueryChars
	for _, d := range done {
		for _, ev := range d.evidence {
			texts = append(texts, ev.name)
		}
		out := d.answer()
		texts = append(texts, out[:min(len(out), max(left, 0))])
		left -= len(out)
	}
	return toolfit.Query(make([]uint64, 0, 64), texts...)
}

// firstTools names the tools offered before any other, most pressing
// first: those find_tools found in stage s, those its prompt names, those
// it called, and those the conversation or the earlier stages called.
func (r *run) firstTools(s *stage) []string {
	var out []string
	if s.st.ToolFit != nil {
		out = append(out, s.st.ToolFit.Found...)
	}
	if s.cfg.prompt != "" {
		for _, t := range r.toolIndex().Tools {
			if strings.Contains(s.cfg.prompt, t.Name) {
				out = append(out, t.Name)
			}
		}
	}
	for _, u := range s.st.ToolsUsed {
		out = append(out, u.Name)
	}
	return append(out, s.usedTools...)
}

// usedTools names the tools the earlier stages (done) and the
// conversation called, latest first.
func (r *run) usedTools(done []*stage) []string {
	out := []string{}
	for i := len(done) - 1; i >= 0; i-- {
		for _, ev := range done[i].evidence {
			out = append(out, ev.name)
		}
	}
	for i := len(r.req.Messages) - 1; i >= 0; i-- {
		for _, c := range r.req.Messages[i].ToolCalls {
			out = append(out, c.Name)
		}
	}
	return out
}

// shrinkTools halves the room of stage s's tools after its prompt did not
// fit its node's window, and chooses again (s chose once: its query is
// kept); at the end, only find_tools is offered. It reports whether anything changed: a stage is never
// skipped for its tools alone.
func (r *run) shrinkTools(ctx context.Context, s *stage) bool {
	ix := r.toolIndex()
	if len(s.tools) == 0 || len(ix.Tools) == 0 || s.toolRoom < 0 {
		return false
	}
	if len(s.tools) == 1 && s.finds || !ix.Findable {
		return false
	}
	least := ix.Least()
	s.toolRoom = max(s.toolRoom/2, least)
	if s.toolRoom > least && ix.Full > s.toolRoom {
		r.chooseTools(ctx, s, nil)
		if len(s.tools) > 1 {
			return true
		}
	}
	r.offerFindOnly(s, ix, "the question and the instructions leave no room for tools in "+s.node.Name+"'s "+strconv.Itoa(r.e.Window(s.node))+"-token window: only find_tools is offered")
	return true
}

// refitTools chooses stage s's tools again after its node refused a
// prompt that offered them: the refusal taught the model's ratio, and the
// room they were chosen for, counted in characters at the ratio before
// it, is more than their share of the window now (a byte-level tokenizer
// taken for an English one: three times more). *offered follows s.tools
// when it was them.
func (r *run) refitTools(ctx context.Context, s *stage, offered *[]Tool) {
	if !offersStageTools(s, *offered) {
		return
	}
	if share := r.toolBudget(ctx, s); share >= 0 && share < s.toolRoom {
		s.toolRoom = share
		r.chooseTools(ctx, s, nil)
		*offered = s.tools
	}
}

// findOnly offers stage s find_tools alone, its node having refused the
// prompt with other tools for why, and reports whether it did (it did not
// when s was offered no tool but find_tools); *offered follows s.tools
// when it was them.
func (r *run) findOnly(s *stage, offered *[]Tool, why string) bool {
	ix := r.toolIndex()
	if !offersStageTools(s, *offered) || len(s.tools) == 1 && s.finds || !ix.Findable {
		return false
	}
	r.offerFindOnly(s, ix, s.node.Name+" "+why+": only find_tools is offered")
	*offered = s.tools
	return true
}

// offerFindOnly offers s find_tools alone, every tool of ix withheld for
// reason.
func (r *run) offerFindOnly(s *stage, ix *toolfit.Index, reason string) {
	s.toolRoom = ix.Least()
	s.tools, s.finds = []Tool{toolfit.FindTool}, true
	tt := &ToolsTrace{Offered: 0, Of: len(ix.Tools), Compact: true, Withheld: ix.Names(), Reason: reason}
	if old := s.st.ToolFit; old != nil {
		tt.Found = old.Found
	}
	s.st.ToolFit = tt
}

// findTools answers a find_tools call of stage s (toolfit.Index.Answer):
// the withheld tools that match the query are offered from the next turn.
func (r *run) findTools(ctx context.Context, s *stage, args string) (string, bool) {
	text, found, ok := r.toolIndex().Answer(args, s.tools)
	if len(found) == 0 {
		return text, ok
	}
	tt := s.st.ToolFit
	if tt == nil {
		tt = &ToolsTrace{}
		s.st.ToolFit = tt
	}
	// The latest found come first, and displace the least relevant.
	tt.Found = append(slices.Clone(found), slices.DeleteFunc(slices.Clone(tt.Found), func(n string) bool { return slices.Contains(found, n) })...)
	r.chooseTools(ctx, s, nil)
	return text, true
}

// judgeFind runs call i of the batch, a find_tools call, under the
// anti-loop's rules for a read-only tool: the same query (however
// written) twice in a stage is a repeat, and stops the stage as one.
func (r *run) judgeFind(ctx context.Context, s *stage, b *batch, i int) {
	c, u := b.calls[i], &b.uses[i]
	sig, err := antiloop.Signature(c.Name, []byte(c.Arguments))
	if err != nil {
		u.Status, u.Result = ToolError, "error: the arguments are not valid JSON. Call find_tools again with {\"query\": \"…\"}."
		s.fmtErrs++
		if s.fmtErrs >= r.e.cfg.Antiloop.MaxFormatErrors && s.stop == "" {
			s.stop = StageStoppedFormatErrors
		}
		return
	}
	s.fmtErrs = 0
	if j, ok := b.firstOf[sig]; ok {
		u.Status, u.Result = ToolDuplicate, duplicateNote(b.calls[j].ID)+b.uses[j].Result
		return
	}
	b.firstOf[sig] = i
	if prev := s.seen[sig]; prev != nil {
		u.Status, u.Result = ToolBlocked, repeatNote
		b.repeated = true
		return
	}
	if s.seen == nil {
		s.seen = map[uint64]*seenCall{}
	}
	s.seen[sig] = &seenCall{kind: tools.Deterministic, runs: 1}
	res, ok := r.findTools(ctx, s, c.Arguments)
	u.Status, u.Result = ToolOK, res
	if !ok {
		u.Status = ToolError
	}
}

// ToolFit reports, for each stage with tools, how the server tools fit
// its node's window.
func (e *Engine) ToolFit(ctx context.Context) []toolfit.Stage {
	return e.toolFit(ctx, e.tools())
}

func (e *Engine) toolFit(ctx context.Context, tv *toolView) []toolfit.Stage {
	ix := tv.index
	if len(ix.Tools) == 0 {
		return nil
	}
	var out []toolfit.Stage
	for i, sc := range e.cfg.Chain.Stages {
		if n := e.nodes[sc.Node]; sc.Tools && n != nil {
			st := ix.Measure(e.Window(n), e.calibration.Ratio(ctx, n.Model), e.cfg.Chain.ToolsShare)
			st.Stage, st.Node = i, n.Name
			out = append(out, st)
		}
	}
	return out
}

// warnToolFit logs a warning for each stage whose tools pass their share
// of its node's window, with the figures: at startup, and when the tool
// set changes (an MCP server came or went).
func (e *Engine) warnToolFit(tv *toolView) {
	for _, st := range e.toolFit(context.Background(), tv) {
		if st.Fit != "compact" && st.Fit != "some" {
			continue
		}
		e.log.Warn("a stage's tools pass their share of its node's window: their schemas are compacted, and the least relevant to each question withheld behind find_tools",
			"stage", st.Stage, "node", st.Node, "tools", st.Tools, "tokens", st.Tokens, "compact_tokens", st.CompactTokens,
			"window", st.Window, "share_tokens", st.ShareTokens, "offered", st.Offered)
	}
}
