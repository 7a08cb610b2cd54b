// Package toolfit chooses the tools a model call is offered when they do
// not fit its share of a small window (issue 42). The two reference MCP
// servers alone declare 27 tools in about 13,700 characters of schemas:
// more than a 4,096-token window holds beside the instructions, a question
// and the answer's reserve, so a stage offered them whole could only be
// skipped.
// A stage's tools get a share of its node's window (chain.tools_share):
// when they pass it, their schemas are compacted (descriptions shortened,
// parameter descriptions, examples and defaults removed); when the compact
// ones still pass it, the tools most relevant to the question are offered
// and the others are withheld behind find_tools, which the model asks in
// words. Arguments are checked against the full schema either way (the
// runner's own), never the compact one.
//
// It is a package of its own because it is the one part of the engine
// that is pure computation over a tool list (an index of words, weights
// and compact schemas, a choice within a budget, a search), with its own
// reference data and benchmark: package chain decides when to choose and
// records the choice in the trace (chain/toolfit.go), this package
// decides what. It imports only the node layer's Tool and memory's
// weights; nothing of the engine, the guard or the tools' runner.
package toolfit

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"

	"chainproxy/chain/node"
	"chainproxy/memory"
)

// FindTools is the name of the tool offered when tools were withheld.
const FindTools = "find_tools"

// FindTool is find_tools as offered: its description does not change with
// the tools withheld, so the prompt's prefix stays the same.
var FindTool = func() node.Tool {
	t := node.Tool{
		Name:        FindTools,
		Description: "Find tools not offered yet. Say in a few words what you need to do; the matching tools' names and descriptions come back, and they are offered from your next turn.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`),
	}
	t.Declaration = node.ToolDeclaration(t)
	return t
}()

// FindMatches is how many tools one find_tools call returns at most.
const FindMatches = 5

// compactDescription is the longest description a compact tool keeps.
const compactDescription = 120

// Preamble is what a chat template adds when tools are offered: the
// instructions around their definitions (qwen's and llama's run to 400–600
// characters).
const Preamble = 500

// Chars is what the tool definitions offered weigh in a prompt, in
// characters.
func Chars(tools []node.Tool) int {
	if len(tools) == 0 {
		return 0
	}
	n := Preamble
	for i := range tools {
		n += cost(&tools[i])
	}
	return n
}

// cost is what one tool declaration weighs in a prompt (Chars).
func cost(t *node.Tool) int {
	return len(t.Name) + len(t.Description) + len(t.Parameters) + memory.MessageOverhead
}

// Index is a tool list ready for choosing: each tool's compact form,
// weights and terms. It is built once per tool set (the server's, in the
// tool view) or once per request (with a client's tools), so that choosing
// costs a scan of precomputed terms and no allocation per tool.
type Index struct {
	// Tools is the list as given, and Compact each one's compact form.
	Tools   []node.Tool
	Compact []node.Tool
	// Full and CompactSum are the whole list's weight in characters,
	// whole and compact, the chat template's preamble included.
	Full, CompactSum int
	// cost and small are each tool's weight whole and compact.
	cost, small []int
	// post lists, for each word of the tools (of a name, a parameter or a
	// description, hashed after stemming), the tools that have it with
	// its weight there: where it appears, and how rare it is among the
	// tools.
	post     map[uint64][]posting
	names    map[string]int
	findCost int
	// Findable: no tool of the list is itself named find_tools, so the
	// run's own may be offered beside them.
	Findable bool
}

// posting is a word's weight in one tool.
type posting struct {
	tool int
	w    float64
}

// New indexes list; the slice is kept, not copied.
func New(list []node.Tool) *Index {
	ix := &Index{Tools: list, Compact: make([]node.Tool, len(list)), cost: make([]int, len(list)), small: make([]int, len(list)),
		post: map[uint64][]posting{}, names: make(map[string]int, len(list)), findCost: cost(&FindTool)}
	for i := range list {
		t := &list[i]
		ix.names[t.Name] = i
		ix.Compact[i] = compactTool(*t)
		ix.cost[i], ix.small[i] = cost(t), cost(&ix.Compact[i])
		ix.Full += ix.cost[i]
		ix.CompactSum += ix.small[i]
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
		ix.Full += Preamble
		ix.CompactSum += Preamble
	}
	_, taken := ix.names[FindTools]
	ix.Findable = !taken
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
func compactTool(t node.Tool) node.Tool {
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

// Choice is the tools one call of a stage is offered.
type Choice struct {
	// Offered are the tools to offer, Withheld the names of those left
	// out; Compact says the offered ones are compact.
	Offered  []node.Tool
	Withheld []string
	Compact  bool
	// Count is how many of the index's tools are offered; Find says
	// find_tools is offered after them.
	Count int
	Find  bool
}

// Choose picks the tools that fit budget characters: every tool whole
// when they fit, else every one compact, else the compact ones of the
// highest scores that fit beside find_tools, in the list's own order (a
// set that does not change keeps the prompt's prefix). Ties go to the
// list's order. It allocates a fixed number of slices, none per tool.
func (ix *Index) Choose(scores []float64, budget int) Choice {
	n := len(ix.Tools)
	switch {
	case n == 0:
		return Choice{}
	case ix.Full <= budget:
		return Choice{Offered: ix.Tools, Count: n}
	case ix.CompactSum <= budget:
		return Choice{Offered: ix.Compact, Compact: true, Count: n}
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(scores[b], scores[a]) })
	room := budget - Preamble
	if ix.Findable {
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
	c := Choice{Offered: make([]node.Tool, 0, k+1), Withheld: make([]string, 0, n-k), Compact: true, Count: k}
	j := 0
	for i := range ix.Tools {
		if j < k && taken[j] == i {
			c.Offered = append(c.Offered, ix.Compact[i])
			j++
		} else {
			c.Withheld = append(c.Withheld, ix.Tools[i].Name)
		}
	}
	if ix.Findable {
		c.Offered = append(c.Offered, FindTool)
		c.Find = true
	}
	return c
}

// Score rates each tool against the query's terms (distinct), into scores
// (len(ix.Tools)): the sum of the weights of the tool's terms the query
// has. One map lookup a query word: no allocation, and no scan of the
// tools' long descriptions.
func (ix *Index) Score(query []uint64, scores []float64) {
	clear(scores)
	for _, h := range query {
		for _, p := range ix.post[h] {
			scores[p.tool] += p.w
		}
	}
}

// Boost puts first the tools named in first, earlier names before later
// ones: found by find_tools, named by the stage's prompt, already called
// in the conversation.
func (ix *Index) Boost(scores []float64, first []string) {
	for rank, name := range first {
		if i, ok := ix.names[name]; ok {
			scores[i] = max(scores[i], 1e6-float64(rank))
		}
	}
}

// Query hashes the words of texts, distinct (sorted), into dst.
func Query(dst []uint64, texts ...string) []uint64 {
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

// Least is the least room a call with tools needs: find_tools alone, with
// the chat template's preamble.
func (ix *Index) Least() int { return Preamble + ix.findCost }

// Names lists the index's tool names.
func (ix *Index) Names() []string {
	out := make([]string, len(ix.Tools))
	for i, t := range ix.Tools {
		out[i] = t.Name
	}
	return out
}

// Find returns the indexes of the k tools not offered that match query
// best, best first, and the names of the offered ones that match (at most
// k).
func (ix *Index) Find(query []uint64, offered map[string]bool, k int) (matches []int, already []string) {
	scores := make([]float64, len(ix.Tools))
	ix.Score(query, scores)
	order := make([]int, 0, len(ix.Tools))
	for i := range ix.Tools {
		if scores[i] > 0 {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(scores[b], scores[a]) })
	for _, i := range order {
		switch name := ix.Tools[i].Name; {
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

// Answer is find_tools' answer to a call with arguments args, from a stage
// offered offered: the tools not offered that match its query (found,
// which the stage is to be offered from its next turn) and the text the
// model gets, which names them, or every tool not offered when none
// matches. ok is false when args hold no query; text then says how to
// ask.
func (ix *Index) Answer(args string, offered []node.Tool) (text string, found []string, ok bool) {
	var a struct {
		Query string `json:"query"`
	}
	if json.Unmarshal([]byte(args), &a) != nil || strings.TrimSpace(a.Query) == "" {
		return "error: call find_tools with {\"query\": \"what you need to do, in a few words\"}", nil, false
	}
	names := make(map[string]bool, len(offered))
	for _, t := range offered {
		names[t.Name] = true
	}
	matches, already := ix.Find(Query(nil, a.Query), names, FindMatches)
	if len(matches) == 0 {
		var rest []string
		for _, t := range ix.Tools {
			if !names[t.Name] {
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
		return msg, nil, true
	}
	found = make([]string, len(matches))
	var b strings.Builder
	for k, i := range matches {
		found[k] = ix.Tools[i].Name
		b.WriteString("\n- " + ix.Tools[i].Name + ": " + ix.Compact[i].Description)
	}
	return "Tools matching " + strconv.Quote(a.Query) + ", offered from your next turn:" + b.String(), found, true
}

// Stage is how the server tools fit the window of a stage with tools,
// for /readyz and the startup log (Index.Measure). A request's own tools (a
// client's) come on top, per request.
type Stage struct {
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

// Measure is how the index's tools fit a window of window tokens (0:
// unknown) at ratio characters a token, given share of it; Stage and Node
// are the caller's to set.
func (ix *Index) Measure(window int, ratio, share float64) Stage {
	st := Stage{Tools: len(ix.Tools), Window: window, Offered: len(ix.Tools), Fit: "unknown_window",
		Tokens: memory.Tokens(ix.Full, ratio), CompactTokens: memory.Tokens(ix.CompactSum, ratio)}
	if window <= 0 {
		return st
	}
	budget := int(float64(window) * ratio * share)
	st.ShareTokens = memory.Tokens(budget, ratio)
	c := ix.Choose(make([]float64, len(ix.Tools)), budget)
	st.Offered = c.Count
	switch {
	case len(c.Withheld) > 0:
		st.Fit = "some"
	case c.Compact:
		st.Fit = "compact"
	default:
		st.Fit = "whole"
	}
	return st
}
