package chain

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"

	"chainproxy/antiloop"
	"chainproxy/chain/node"
	"chainproxy/memory"
	"chainproxy/tools"
)

// Tools that fit a small window (issue 42). The two reference MCP servers
// alone declare 27 tools in about 13,700 characters of schemas: more than
// a 4,096-token window holds beside the instructions, a question and the
// answer's reserve, so a stage offered them whole could only be skipped.
// A stage's tools get a share of its node's window (chain.tools_share):
// when they pass it, their schemas are compacted (descriptions shortened,
// parameter descriptions, examples and defaults removed); when the compact
// ones still pass it, the tools most relevant to the question are offered
// and the others are withheld behind find_tools, which the model asks in
// words. Arguments are checked against the full schema either way (the
// runner's own), never the compact one.

// FindTools is the name of the tool offered when tools were withheld.
const FindTools = "find_tools"

// findTool is find_tools as offered: its description does not change with
// the tools withheld, so the prompt's prefix stays the same.
var findTool = func() Tool {
	t := Tool{
		Name:        FindTools,
		Description: "Find tools not offered yet. Say in a few words what you need to do; the matching tools' names and descriptions come back, and they are offered from your next turn.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`),
	}
	t.Declaration = node.ToolDeclaration(t)
	return t
}()

// findMatches is how many tools one find_tools call returns at most.
const findMatches = 5

// compactDescription is the longest description a compact tool keeps.
const compactDescription = 120

// toolCost is what one tool declaration weighs in a prompt (toolChars).
func toolCost(t *Tool) int {
	return len(t.Name) + len(t.Description) + len(t.Parameters) + memory.MessageOverhead
}

// toolIndex is a tool list ready for choosing: each tool's compact form,
// weights and terms. It is built once per tool set (the server's, in the
// tool view) or once per request (with a client's tools), so that choosing
// costs a scan of precomputed terms and no allocation per tool.
type toolIndex struct {
	tools   []Tool
	compact []Tool
	// cost and small are each tool's weight whole and compact; full and
	// smallSum the whole list's, the chat template's preamble included.
	cost, small    []int
	full, smallSum int
	// post lists, for each word of the tools (of a name, a parameter or a
	// description, hashed after stemming), the tools that have it with
	// its weight there: where it appears, and how rare it is among the
	// tools.
	post     map[uint64][]posting
	names    map[string]int
	findCost int
	// findable: no tool of the list is itself named find_tools, so the
	// run's own may be offered beside them.
	findable bool
}

// posting is a word's weight in one tool.
type posting struct {
	tool int
	w    float64
}

// newToolIndex indexes list; the slice is kept, not copied.
func newToolIndex(list []Tool) *toolIndex {
	ix := &toolIndex{tools: list, compact: make([]Tool, len(list)), cost: make([]int, len(list)), small: make([]int, len(list)),
		post: map[uint64][]posting{}, names: make(map[string]int, len(list)), findCost: toolCost(&findTool)}
	for i := range list {
		t := &list[i]
		ix.names[t.Name] = i
		ix.compact[i] = compactTool(*t)
		ix.cost[i], ix.small[i] = toolCost(t), toolCost(&ix.compact[i])
		ix.full += ix.cost[i]
		ix.smallSum += ix.small[i]
		ws := map[uint64]float64{}
		add := func(w float64) func(uint64) {
			return func(h uint64) { ws[h] = max(ws[h], w) }
		}
		name := t.Name
		if srv, tool, ok := strings.Cut(name, "__"); ok {
			// An MCP tool: its server's name is a weak word of it.
			eachTerm(srv, add(1))
			name = tool
		}
		eachTerm(name, add(3))
		for _, p := range paramNames(t.Parameters) {
			eachTerm(p, add(1.5))
		}
		eachTerm(t.Description, add(1))
		for h, w := range ws {
			ix.post[h] = append(ix.post[h], posting{tool: i, w: w})
		}
	}
	if len(list) > 0 {
		ix.full += toolsPreamble
		ix.smallSum += toolsPreamble
	}
	_, taken := ix.names[FindTools]
	ix.findable = !taken
	n := float64(len(list))
	for _, ps := range ix.post {
		// A word every tool has ("file" among the filesystem's) tells
		// little of which one the question needs.
		idf := math.Log(1 + n/float64(len(ps)))
		for j := range ps {
			ps[j].w *= idf
		}
	}
	return ix
}

// paramNames lists the top-level parameter names of a schema.
func paramNames(params json.RawMessage) []string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if len(params) == 0 || json.Unmarshal(params, &s) != nil {
		return nil
	}
	out := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// compactTool is t with its description cut to its first sentence (at
// most compactDescription characters) and its schema without the
// descriptions, titles, examples and defaults of its parameters: what a
// model needs to call it right, in a third of the room. The schema stays
// valid JSON Schema (only annotation keywords go); a schema that does not
// parse is kept as it is.
func compactTool(t Tool) Tool {
	t.Description = shortDescription(t.Description)
	var v any
	if len(t.Parameters) > 0 && json.Unmarshal(t.Parameters, &v) == nil {
		if b, err := json.Marshal(stripSchema(v)); err == nil {
			t.Parameters = b
		}
	}
	t.Declaration = node.ToolDeclaration(t)
	return t
}

// shortDescription is d's first sentence or line, at most
// compactDescription characters, cut at a word.
func shortDescription(d string) string {
	d = strings.TrimSpace(d)
	if i := strings.IndexAny(d, "\n"); i >= 0 {
		d = d[:i]
	}
	if i := strings.Index(d, ". "); i >= 0 {
		d = d[:i+1]
	}
	if len(d) <= compactDescription {
		return d
	}
	cut := strings.LastIndexByte(d[:compactDescription], ' ')
	if cut < compactDescription/2 {
		cut = compactDescription
	}
	return strings.TrimRight(d[:cut], " ,;:") + "…"
}

// annotations are the JSON Schema keywords that do not constrain a value:
// dropping them keeps what validates, and what a model must send.
var annotations = []string{"description", "title", "examples", "default", "$comment", "$schema", "markdownDescription"}

// stripSchema removes the annotations from schema v and from every schema
// under it (properties, items, combinators, definitions), never from the
// names of properties.
func stripSchema(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	for _, k := range annotations {
		delete(m, k)
	}
	for k, sub := range m {
		switch k {
		case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas":
			if mm, ok := sub.(map[string]any); ok {
				for name, s := range mm {
					mm[name] = stripSchema(s)
				}
			}
		case "items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames", "unevaluatedItems", "unevaluatedProperties", "additionalItems":
			m[k] = stripSchema(sub)
		case "anyOf", "oneOf", "allOf", "prefixItems":
			if arr, ok := sub.([]any); ok {
				for i, s := range arr {
					arr[i] = stripSchema(s)
				}
			}
		}
	}
	return m
}

// toolChoice is the tools one call of a stage is offered.
type toolChoice struct {
	offered  []Tool
	withheld []string
	compact  bool
	// count is how many of the index's tools are offered; find says
	// find_tools is offered after them.
	count int
	find  bool
}

// choose picks the tools that fit budget characters: every tool whole
// when they fit, else every one compact, else the compact ones of the
// highest scores that fit beside find_tools, in the list's own order (a
// set that does not change keeps the prompt's prefix). Ties go to the
// list's order. It allocates a fixed number of slices, none per tool.
func (ix *toolIndex) choose(scores []float64, budget int) toolChoice {
	n := len(ix.tools)
	switch {
	case n == 0:
		return toolChoice{}
	case ix.full <= budget:
		return toolChoice{offered: ix.tools, count: n}
	case ix.smallSum <= budget:
		return toolChoice{offered: ix.compact, compact: true, count: n}
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(scores[b], scores[a]) })
	room := budget - toolsPreamble
	if ix.findable {
		room -= ix.findCost
	}
	k := 0
	for _, i := range order {
		if ix.small[i] <= room {
			room -= ix.small[i]
			order[k] = i
			k++
		}
	}
	taken := order[:k]
	slices.Sort(taken)
	c := toolChoice{offered: make([]Tool, 0, k+1), withheld: make([]string, 0, n-k), compact: true, count: k}
	j := 0
	for i := range ix.tools {
		if j < k && taken[j] == i {
			c.offered = append(c.offered, ix.compact[i])
			j++
		} else {
			c.withheld = append(c.withheld, ix.tools[i].Name)
		}
	}
	if ix.findable {
		c.offered = append(c.offered, findTool)
		c.find = true
	}
	return c
}

// score rates each tool against the query's terms (distinct), into scores
// (len(ix.tools)): the sum of the weights of the tool's terms the query
// has. One map lookup a query word: no allocation, and no scan of the
// tools' long descriptions.
func (ix *toolIndex) score(query []uint64, scores []float64) {
	clear(scores)
	for _, h := range query {
		for _, p := range ix.post[h] {
			scores[p.tool] += p.w
		}
	}
}

// boost puts first the tools named in first, earlier names before later
// ones: found by find_tools, named by the stage's prompt, already called
// in the conversation.
func (ix *toolIndex) boost(scores []float64, first []string) {
	for rank, name := range first {
		if i, ok := ix.names[name]; ok {
			scores[i] = max(scores[i], 1e6-float64(rank))
		}
	}
}

// queryTerms hashes the words of texts, distinct (sorted), into dst.
func queryTerms(dst []uint64, texts ...string) []uint64 {
	for _, t := range texts {
		eachTerm(t, func(h uint64) { dst = append(dst, h) })
	}
	slices.Sort(dst)
	return slices.Compact(dst)
}

// eachTerm calls fn with the hash of each word of s that says something:
// split at anything but letters and digits and at a camelCase hump,
// lower-cased, stemmed, stop words left out and synonyms made one.
func eachTerm(s string, fn func(uint64)) {
	var buf [32]byte
	n := 0
	flush := func() {
		if n > 0 {
			if h, ok := normalize(buf[:n]); ok {
				fn(h)
			}
		}
		n = 0
	}
	prevLower := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z':
			if prevLower {
				flush()
			}
			c += 'a' - 'A'
			prevLower = false
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c >= 0x80:
			prevLower = c >= 'a' && c <= 'z'
		default:
			flush()
			prevLower = false
			continue
		}
		if n < len(buf) {
			buf[n] = c
			n++
		}
	}
	flush()
}

// normalize stems a lower-cased word in place and hashes it, or the stem
// of its synonym; false for a stop word.
func normalize(w []byte) (uint64, bool) {
	if len(w) < 2 || stopWords[string(w)] {
		return 0, false
	}
	w = stem(w)
	if syn, ok := synonyms[string(w)]; ok {
		return xxhash.Sum64String(syn), true
	}
	return xxhash.Sum64(w), true
}

// stem strips the commonest English suffixes, enough for "reads",
// "reading" and "read", "directories" and "directory", "writes" and
// "write", to meet.
func stem(w []byte) []byte {
	switch n := len(w); {
	case n > 4 && string(w[n-3:]) == "ies":
		w = append(w[:n-3], 'y')
	case n > 5 && string(w[n-3:]) == "ing":
		w = w[:n-3]
	case n > 4 && string(w[n-2:]) == "ed":
		w = w[:n-2]
	case n > 3 && w[n-1] == 's' && w[n-2] != 's':
		w = w[:n-1]
	}
	if n := len(w); n > 3 && w[n-1] == 'e' {
		w = w[:n-1]
	}
	return w
}

// stopWords say nothing of which tool a question needs.
var stopWords = map[string]bool{
	"the": true, "an": true, "and": true, "or": true, "of": true, "to": true, "in": true, "on": true, "at": true,
	"for": true, "with": true, "from": true, "by": true, "is": true, "are": true, "be": true, "it": true, "its": true,
	"this": true, "that": true, "these": true, "those": true, "me": true, "my": true, "you": true, "your": true,
	"please": true, "can": true, "could": true, "would": true, "what": true, "which": true, "how": true, "all": true,
	"any": true, "use": true, "using": true, "tool": true, "tools": true, "through": true, "there": true, "some": true,
	"do": true, "does": true, "if": true, "as": true, "into": true, "not": true, "will": true, "then": true, "when": true,
	"we": true, "us": true, "our": true, "now": true, "just": true, "only": true, "also": true, "mcp": true, "want": true,
	"need": true, "tell": true, "let": true, "so": true, "than": true, "one": true, "was": true, "were": true,
}

// synonyms map a stemmed word to the stem the tools use for it.
var synonyms = map[string]string{
	"folder": "directory", "dir": "directory", "director": "directory", "subdirectory": "directory", "subfolder": "directory",
	"ls": "list", "cat": "read", "open": "read", "view": "read", "mkdir": "directory", "make": "creat", "new": "creat",
	"save": "writ", "store": "writ", "overwrit": "writ", "modify": "edit", "chang": "edit", "replac": "edit", "updat": "edit", "patch": "edit",
	"find": "search", "locat": "search", "look": "search", "grep": "search", "glob": "search", "where": "search",
	"renam": "mov", "mv": "mov", "relocat": "mov",
	"metadata": "info", "stat": "info", "detail": "info", "modified": "info", "permission": "info",
	"environment": "env", "variabl": "env",
	"picture": "imag", "photo": "imag", "png": "imag", "jpeg": "imag", "jpg": "imag",
	"compress": "gzip", "zip": "gzip",
	"add": "sum", "plu": "sum", "total": "sum", "addition": "sum",
	"repeat": "echo", "say": "echo", "back": "echo",
	"structur": "structured", "json": "structured",
	"sleep": "long", "wait": "long", "progres": "long",
}

// runToolIndex is the index of the tools the run's stages with tools are
// offered: the tool view's own when they are the server's, else one built
// for the request (a client's tools beside them), once.
func (r *run) toolIndex() *toolIndex {
	if r.tix != nil {
		return r.tix
	}
	pool := r.stageTools()
	tvs := r.tv.specs
	if len(pool) == len(tvs) && (len(pool) == 0 || &pool[0] == &tvs[0]) {
		r.tix = r.tv.index
	} else {
		r.tix = newToolIndex(pool)
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
	if s.toolRoom < 0 || ix.full <= s.toolRoom {
		// Every tool whole, as always: nothing to say in the trace.
		s.tools, s.finds = ix.tools, false
		return
	}
	scores := make([]float64, len(ix.tools))
	if s.query == nil {
		s.query, s.usedTools = r.toolQuery(done), r.usedTools(done)
	}
	ix.score(s.query, scores)
	ix.boost(scores, r.firstTools(s))
	c := ix.choose(scores, s.toolRoom)
	s.tools, s.finds = c.offered, c.find
	tt := &ToolsTrace{Offered: c.count, Of: len(ix.tools), Compact: c.compact, Withheld: c.withheld}
	if old := s.st.ToolFit; old != nil {
		tt.Found = old.Found
	}
	window := r.e.Window(s.node)
	ratio := r.e.calibration.Ratio(ctx, s.node.Model)
	offered := fmt.Sprintf("the %d most relevant to the question are offered compact, the others through find_tools", c.count)
	if c.count == 0 {
		offered = "only find_tools is offered"
	}
	switch share := r.toolBudget(ctx, s); {
	case s.toolRoom < share && len(c.withheld) > 0:
		tt.Reason = fmt.Sprintf("the %d tools need about %d tokens whole, %d compact; the question and the instructions leave them about %d tokens of %s's %d-token window: %s",
			len(ix.tools), memory.Tokens(ix.full, ratio), memory.Tokens(ix.smallSum, ratio), memory.Tokens(s.toolRoom, ratio), s.node.Name, window, offered)
	case len(c.withheld) > 0:
		tt.Reason = fmt.Sprintf("the %d tools need about %d tokens whole, %d compact; their share of %s's %d-token window is %d tokens (chain.tools_share %g): %s",
			len(ix.tools), memory.Tokens(ix.full, ratio), memory.Tokens(ix.smallSum, ratio), s.node.Name, window, memory.Tokens(s.toolRoom, ratio), r.e.cfg.Chain.ToolsShare, offered)
	case c.compact:
		tt.Reason = fmt.Sprintf("the %d tools need about %d tokens whole; their share of %s's %d-token window is %d tokens (chain.tools_share %g): offered compact (%d tokens)",
			len(ix.tools), memory.Tokens(ix.full, ratio), s.node.Name, window, memory.Tokens(s.toolRoom, ratio), r.e.cfg.Chain.ToolsShare, memory.Tokens(ix.smallSum, ratio))
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
	return queryTerms(make([]uint64, 0, 64), texts...)
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
		for _, t := range r.toolIndex().tools {
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
	if len(s.tools) == 0 || len(ix.tools) == 0 || s.toolRoom < 0 {
		return false
	}
	if len(s.tools) == 1 && s.finds || !ix.findable {
		return false
	}
	least := toolsPreamble + ix.findCost
	s.toolRoom = max(s.toolRoom/2, least)
	if s.toolRoom > least && ix.full > s.toolRoom {
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
	if !offersStageTools(s, *offered) || len(s.tools) == 1 && s.finds || !ix.findable {
		return false
	}
	r.offerFindOnly(s, ix, s.node.Name+" "+why+": only find_tools is offered")
	*offered = s.tools
	return true
}

// offerFindOnly offers s find_tools alone, every tool of ix withheld for
// reason.
func (r *run) offerFindOnly(s *stage, ix *toolIndex, reason string) {
	s.toolRoom = toolsPreamble + ix.findCost
	s.tools, s.finds = []Tool{findTool}, true
	tt := &ToolsTrace{Offered: 0, Of: len(ix.tools), Compact: true, Withheld: ix.allNames(), Reason: reason}
	if old := s.st.ToolFit; old != nil {
		tt.Found = old.Found
	}
	s.st.ToolFit = tt
}

// allNames lists the index's tool names.
func (ix *toolIndex) allNames() []string {
	out := make([]string, len(ix.tools))
	for i, t := range ix.tools {
		out[i] = t.Name
	}
	return out
}

// findTools answers a find_tools call of stage s: the withheld tools that
// match the query, which are offered from the next turn. The result says
// so, or lists every tool not offered when none matches.
func (r *run) findTools(ctx context.Context, s *stage, args string) (string, bool) {
	var a struct {
		Query string `json:"query"`
	}
	if json.Unmarshal([]byte(args), &a) != nil || strings.TrimSpace(a.Query) == "" {
		return "error: call find_tools with {\"query\": \"what you need to do, in a few words\"}", false
	}
	ix := r.toolIndex()
	offered := make(map[string]bool, len(s.tools))
	for _, t := range s.tools {
		offered[t.Name] = true
	}
	matches, already := ix.find(queryTerms(nil, a.Query), offered, findMatches)
	found := make([]string, len(matches))
	var b strings.Builder
	for k, i := range matches {
		found[k] = ix.tools[i].Name
		b.WriteString("\n- " + ix.tools[i].Name + ": " + ix.compact[i].Description)
	}
	if len(found) == 0 {
		var rest []string
		for _, t := range ix.tools {
			if !offered[t.Name] {
				rest = append(rest, t.Name)
			}
		}
		msg := "No tool not offered yet matches " + strconv.Quote(a.Query) + "."
		if len(already) > 0 {
			msg += " Already offered: " + strings.Join(already, ", ") + "."
		}
		if len(rest) > 0 {
			msg += " The tools not offered are: " + strings.Join(rest, ", ") + "; ask again in other words."
		}
		return msg, true
	}
	tt := s.st.ToolFit
	if tt == nil {
		tt = &ToolsTrace{}
		s.st.ToolFit = tt
	}
	// The latest found come first, and displace the least relevant.
	tt.Found = append(slices.Clone(found), slices.DeleteFunc(slices.Clone(tt.Found), func(n string) bool { return slices.Contains(found, n) })...)
	r.chooseTools(ctx, s, nil)
	return "Tools matching " + strconv.Quote(a.Query) + ", offered from your next turn:" + b.String(), true
}

// find returns the indexes of the k tools not offered that match query
// best, best first, and the names of the offered ones that match (at most
// k).
func (ix *toolIndex) find(query []uint64, offered map[string]bool, k int) (matches []int, already []string) {
	scores := make([]float64, len(ix.tools))
	ix.score(query, scores)
	order := make([]int, 0, len(ix.tools))
	for i := range ix.tools {
		if scores[i] > 0 {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(scores[b], scores[a]) })
	for _, i := range order {
		switch name := ix.tools[i].Name; {
		case offered[name]:
			if len(already) < k {
				already = append(already, name)
			}
		case len(matches) < k:
			matches = append(matches, i)
		}
	}
	return matches, already
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

// StageTools is how the server tools fit the window of a stage with
// tools, for /readyz and the startup log. A request's own tools (a
// client's) come on top, per request.
type StageTools struct {
	Stage int    `json:"stage"`
	Node  string `json:"node"`
	Tools int    `json:"tools"`
	// Window is the node's window in tokens, 0 when unknown (every tool
	// is offered whole); Tokens and CompactTokens what the tools weigh,
	// whole and compact; ShareTokens their share of the window.
	Window        int `json:"window"`
	Tokens        int `json:"tokens"`
	CompactTokens int `json:"compact_tokens"`
	ShareTokens   int `json:"share_tokens,omitempty"`
	// Offered is how many are offered to a call: all of them, or about
	// this many chosen by relevance to its question, the others withheld
	// behind find_tools.
	Offered int `json:"offered"`
	// Fit is "whole", "compact", "some" or "unknown_window".
	Fit string `json:"fit"`
}

// ToolFit reports, for each stage with tools, how the server tools fit
// its node's window.
func (e *Engine) ToolFit(ctx context.Context) []StageTools {
	return e.toolFit(ctx, e.tools())
}

func (e *Engine) toolFit(ctx context.Context, tv *toolView) []StageTools {
	ix := tv.index
	if len(ix.tools) == 0 {
		return nil
	}
	var out []StageTools
	for i, sc := range e.cfg.Chain.Stages {
		n := e.nodes[sc.Node]
		if !sc.Tools || n == nil {
			continue
		}
		st := StageTools{Stage: i, Node: n.Name, Tools: len(ix.tools), Window: e.Window(n), Offered: len(ix.tools), Fit: "unknown_window"}
		ratio := e.calibration.Ratio(ctx, n.Model)
		st.Tokens, st.CompactTokens = memory.Tokens(ix.full, ratio), memory.Tokens(ix.smallSum, ratio)
		if st.Window > 0 {
			budget := int(float64(st.Window) * ratio * e.cfg.Chain.ToolsShare)
			st.ShareTokens = memory.Tokens(budget, ratio)
			c := ix.choose(make([]float64, len(ix.tools)), budget)
			st.Offered = c.count
			switch {
			case len(c.withheld) > 0:
				st.Fit = "some"
			case c.compact:
				st.Fit = "compact"
			default:
				st.Fit = "whole"
			}
		}
		out = append(out, st)
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
