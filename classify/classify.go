// Package classify decides per request whether one model is enough (simple
// mode) or the reflexive chain should run, and says why in short reasons
// that end up in the chain trace ("keyword: compare", "length 412 ≥ 280").
//
// It judges the user's own words and the route category, nothing else of a
// request: not the system prompt, not the tools a client offers, not the
// history. Agent clients put their own text into user messages (Claude
// Code's <system-reminder>, Codex's <environment_context>, Cline's
// <environment_details>, …): Blocks sets it aside, and the words judged are
// those of the last user message that has any, so the follow-ups of an
// agent turn (tool results, injected context) get the mode of its first
// request. The reasons quote the words judged and name what was set aside.
// Forcing a mode (model chain/simple, header X-Chain-Mode) is decided by the
// caller before it asks.
//
// Classification runs on every request, so New precomputes everything
// (folded keywords in a byte trie, reason strings) and Classify makes one
// pass over the message that skips the inside of words and, where a keyword
// may start, walks the trie while folding the text (lowercase, accents
// stripped, through a table for Latin-1 and Latin Extended-A), with no
// buffer; questions and list items are counted by skimming from '?' to '?'
// and from line to line. No regexp, no allocation per keyword or per byte:
// a call allocates its Reasons slice and, for a reflexive message, the
// strings that carry numbers.
//
// It imports no other package of the project but config.
package classify

import (
	"slices"
	"strconv"
	"strings"

	"chainproxy/config"
)

// Modes a Decision can carry. They equal chain.ModeSimple and
// chain.ModeReflexive (chain imports this package, not the reverse).
const (
	ModeSimple    = "simple"
	ModeReflexive = "reflexive"
)

// Default thresholds, in runes, used when the configuration leaves them 0.
const (
	DefaultShortChars = 50
	DefaultLongChars  = 280
)

// CategorySimple is the route category that, like no category, leaves the
// decision to the message.
const CategorySimple = "simple"

// defaultKeywords are matched on word boundaries, so a keyword matches only
// as a whole word or phrase: "compare" does not match "comparison", and
// "analyse" does not match "analyses". Rather than match prefixes (which
// would make "evaluate" match "evaluated" but also "compare" match
// "comparable"), the list spells out the forms in which people ask: the
// French infinitive and both imperatives (analyse, analyser, analysez), and
// the four agreements of "détaillé". Accents and case do not matter:
// "detaillee" matches "détaillée".
var defaultKeywords = []string{
	// English
	"analyze", "analyse", "compare", "search and explain", "detailed",
	"explain why", "step by step", "reason about", "evaluate", "pros and cons",
	// French ("analyse" and "compare" are shared with English)
	"analyser", "analysez",
	"comparer", "comparez",
	"cherche et explique", "cherchez et expliquez",
	"détaillé", "détaillée", "détaillés", "détaillées",
	"explique pourquoi", "expliquez pourquoi",
	"étape par étape",
	"raisonne", "raisonnez", "raisonner",
	"évalue", "évaluez", "évaluer",
	"avantages et inconvénients",
}

// defaultCategories are the route categories (header X-Chain-Category) that
// run the chain whatever the message.
var defaultCategories = []string{"code", "archi", "data-analyst", "raisonnement", "reasoning"}

// DefaultKeywords returns a copy of the complex keywords used when
// classify.keywords is not configured.
func DefaultKeywords() []string { return slices.Clone(defaultKeywords) }

// DefaultCategories returns a copy of the reflexive route categories used
// when classify.categories is not configured.
func DefaultCategories() []string { return slices.Clone(defaultCategories) }

// Decision is the classifier's verdict: a mode and at least one reason.
type Decision struct {
	// Mode is ModeSimple or ModeReflexive.
	Mode string
	// Reasons explain the mode, in a fixed order: length, multi-part,
	// keywords (in order of appearance), category, tools (in order of
	// appearance). A new slice per call; the caller may keep it.
	Reasons []string
	// Text is the user's words that were judged ("" for a client's own
	// request): what names the request, its injected blocks set aside.
	Text string
	// Background names the client's own request the newest user message
	// is (a title, a compaction; see backgroundRequests), "" for the
	// user's words.
	Background string
}

// pattern is a keyword or tool name, folded, with its reason precomputed.
type pattern struct {
	text   string // folded form
	reason string
	tool   bool // a server tool name rather than a keyword
	// wordEnd: the pattern ends with a word byte, so the byte after a match
	// must not be one. A pattern that ends otherwise ("c++") needs no end
	// boundary; start boundaries are the business of scan.
	wordEnd bool
}

// Classifier classifies messages. It is immutable after New and safe for
// concurrent use.
type Classifier struct {
	blocks      *Blocks
	short, long int
	patterns    []pattern
	trie        *trie
	categories  []string // lowercase, trimmed
	// catReasons[i] is "category: " + categories[i].
	catReasons []string
	// shortReasons[n] and midReasons[n-short] are the reasons of a simple
	// message of n runes, precomputed up to maxPrecomputed entries.
	shortReasons, midReasons []string
}

// maxPrecomputed bounds the reason strings New prepares for simple
// messages, in case the thresholds are configured very large.
const maxPrecomputed = 4096

// New builds a Classifier from the classify section of the configuration and
// the names of the server tools (built-in and HTTP tools) that a message may
// name. Zero thresholds take the defaults; empty Keywords or Categories take
// the default lists; IgnoreBlocks adds to the default blocks set aside.
func New(cfg config.Classify, serverTools []string) *Classifier {
	c := &Classifier{blocks: NewBlocks(cfg.IgnoreBlocks), short: cfg.ShortChars, long: cfg.LongChars}
	if c.short <= 0 {
		c.short = DefaultShortChars
	}
	if c.long <= 0 {
		c.long = DefaultLongChars
	}
	c.long = max(c.long, c.short)

	keywords := cfg.Keywords
	if len(keywords) == 0 {
		keywords = defaultKeywords
	}
	var pats []pattern
	seen := map[string]bool{}
	add := func(word string, tool bool) {
		word = strings.Join(strings.Fields(word), " ")
		f := fold(nil, word)
		text := strings.TrimSpace(string(f))
		if text == "" || seen[text] {
			return
		}
		seen[text] = true
		reason := "keyword: " + word
		if tool {
			reason = "tool: " + word
		}
		pats = append(pats, pattern{text: text, reason: reason, tool: tool, wordEnd: isWord[text[len(text)-1]]})
	}
	for _, k := range keywords {
		add(k, false)
	}
	for _, t := range serverTools {
		add(t, true)
	}
	c.patterns = pats
	c.trie = newTrie(pats)

	cats := cfg.Categories
	if len(cats) == 0 {
		cats = defaultCategories
	}
	for _, cat := range cats {
		cat = strings.ToLower(strings.TrimSpace(cat))
		if cat != "" && !slices.Contains(c.categories, cat) {
			c.categories = append(c.categories, cat)
			c.catReasons = append(c.catReasons, "category: "+cat)
		}
	}

	for n := range min(c.short, maxPrecomputed) {
		c.shortReasons = append(c.shortReasons, shortReason(n, c.short))
	}
	for n := c.short; n < c.long && n-c.short < maxPrecomputed; n++ {
		c.midReasons = append(c.midReasons, midReason(n, c.short, c.long))
	}
	return c
}

func shortReason(n, short int) string {
	return format("short message (", n, " < ", short, ")")
}

func midReason(n, short, long int) string {
	return format("no complex signal (", short, " ≤ ", n, " < ", long, ")")
}

// format concatenates strings and ints with a single allocation, the
// result; "+" with strconv.Itoa allocates once per number above 99 too.
func format(parts ...any) string {
	var buf [96]byte
	b := buf[:0]
	for _, p := range parts {
		switch p := p.(type) {
		case string:
			b = append(b, p...)
		case int:
			b = strconv.AppendInt(b, int64(p), 10)
		}
	}
	return string(b)
}

// Classify decides the mode of a request from its user messages, which
// next returns newest first (and false after the oldest), and its route
// category ("" when the client sent none). A message's images and files
// are set aside: its text is judged.
//
// It judges the words of the newest user message that has words of the
// user's (see Blocks.Judge). A client's own background request (Qwen
// Code's memory extraction) is simple, whatever its words. Reflexive when any of: the message has at least long runes; it is
// multi-part (two or more questions, or a list of two or more items); it
// contains a complex keyword or names a server tool, as whole words, case
// and accents ignored; the category is a reflexive one. Otherwise simple,
// whether the message is short or between the thresholds. A category that
// is neither "simple" nor reflexive is ignored. The reasons of the verdict
// come first, then the words judged and what was set aside.
func (c *Classifier) Classify(next func() (UserMessage, bool), category string) Decision {
	j := c.blocks.Judge(next)
	if j.Background != "" {
		return BackgroundDecision(j.Background)
	}
	var hitBuf [16]int32
	st, hits := c.scan(j.Text, hitBuf[:0])

	cat := -1
	if category != "" && !strings.EqualFold(category, CategorySimple) {
		category = strings.TrimSpace(category)
		for i, name := range c.categories {
			if strings.EqualFold(category, name) {
				cat = i
				break
			}
		}
	}

	n := len(hits)
	if st.runes >= c.long {
		n++
	}
	if st.questions >= 2 {
		n++
	}
	if st.listItems >= 2 {
		n++
	}
	if cat >= 0 {
		n++
	}
	about := 2 + len(j.Aside)
	if j.Skipped > 0 {
		about++
	}
	if j.Images > 0 {
		about++
	}
	if j.Files > 0 {
		about++
	}
	if n == 0 {
		reasons := make([]string, 0, 1+about)
		reasons = append(reasons, c.simpleReason(st.runes))
		return Decision{Mode: ModeSimple, Reasons: j.reasons(reasons), Text: j.Text}
	}

	reasons := make([]string, 0, n+about)
	if st.runes >= c.long {
		reasons = append(reasons, format("length ", st.runes, " ≥ ", c.long))
	}
	if st.questions >= 2 {
		reasons = append(reasons, format("multi-part: ", st.questions, " questions"))
	}
	if st.listItems >= 2 {
		reasons = append(reasons, format("multi-part: list of ", st.listItems))
	}
	// Keywords, then the category, then tools: the order the issue lists
	// the signals in.
	for _, h := range hits {
		if p := &c.patterns[h]; !p.tool {
			reasons = append(reasons, p.reason)
		}
	}
	if cat >= 0 {
		reasons = append(reasons, c.catReasons[cat])
	}
	for _, h := range hits {
		if p := &c.patterns[h]; p.tool {
			reasons = append(reasons, p.reason)
		}
	}
	return Decision{Mode: ModeReflexive, Reasons: j.reasons(reasons), Text: j.Text}
}

func (c *Classifier) simpleReason(n int) string {
	switch {
	case n < c.short && n < len(c.shortReasons):
		return c.shortReasons[n]
	case n < c.short:
		return shortReason(n, c.short)
	case n-c.short < len(c.midReasons):
		return c.midReasons[n-c.short]
	default:
		return midReason(n, c.short, c.long)
	}
}
