package classify

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/text/unicode/norm"

	"chainproxy/config"
)

var serverTools = []string{"list_dir", "read_file", "search_files", "query_db"}

func short(n int) []string { return []string{fmt.Sprintf("short message (%d < 50)", n)} }
func mid(n int) []string   { return []string{fmt.Sprintf("no complex signal (50 ≤ %d < 280)", n)} }

func simple(reasons []string) Decision { return Decision{Mode: ModeSimple, Reasons: reasons} }

// one is a request with one user message.
func one(message string) func() (UserMessage, bool) { return newestFirst(message) }

// newestFirst is a request with these user messages, the newest first.
func newestFirst(user ...string) func() (UserMessage, bool) {
	return func() (UserMessage, bool) {
		if len(user) == 0 {
			return UserMessage{}, false
		}
		u := user[0]
		user = user[1:]
		return UserMessage{Text: u}, true
	}
}

// newestFirstParts is newestFirst with image and file parts.
func newestFirstParts(user ...UserMessage) func() (UserMessage, bool) {
	return func() (UserMessage, bool) {
		if len(user) == 0 {
			return UserMessage{}, false
		}
		u := user[0]
		user = user[1:]
		return u, true
	}
}

// judged is the reason that quotes message, written the obvious way: white
// space runs as one space, the first 80 runes, "…" when cut (after a word).
func judged(message string) string {
	words := strings.Join(strings.Fields(message), " ")
	if words == "" {
		return "no words of the user's to judge"
	}
	if r := []rune(words); len(r) > 80 {
		words = strings.TrimRight(string(r[:80]), " ") + "…"
	}
	return `text judged: "` + words + `"`
}

// with returns d with the reasons that say what was judged of message.
func with(d Decision, message string, about ...string) Decision {
	d.Reasons = append(slices.Clip(d.Reasons), judged(message))
	d.Reasons = append(d.Reasons, about...)
	return d
}

// ignoreText leaves Decision.Text out of the tables that check modes and
// reasons; TestClassifyText checks it.
var ignoreText = cmpopts.IgnoreFields(Decision{}, "Text")

// TestClassifyText: the decision carries the words judged, what names the
// request (the traces list shows it), and none for a client's own request.
func TestClassifyText(t *testing.T) {
	tests := []struct {
		name string
		user []string // newest first
		want string
	}{
		{"a reminder set aside", []string{"<system-reminder>ctx</system-reminder>\n  What is 2+2?  "}, "What is 2+2?"},
		{"a later message with no words", []string{"<environment_context>cwd</environment_context>", "Compare Go and Rust"}, "Compare Go and Rust"},
		{"a client's own request", []string{"Managed memory has TWO directories. Choose…", "What is 2+2?"}, ""},
		{"another of a client's own", []string{"Analyze *only* the content and structure of your immediately preceding response (your last turn…", "Compare Go and Rust"}, ""},
		{"Open WebUI's title request", []string{"### Task:\nGenerate a concise, 3-5 word title with an emoji summarizing the chat history.\n### Guidelines:…", "Compare Go and Rust"}, ""},
		{"a user who writes as a task prompt", []string{"### Task:\nCompare Go and Rust, step by step."}, "### Task:\nCompare Go and Rust, step by step."},
	}
	c := New(config.Classify{}, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := c.Classify(newestFirst(tt.user...), "").Text; got != tt.want {
				t.Errorf("Text = %q, want %q", got, tt.want)
			}
		})
	}
}

func reflexive(reasons ...string) Decision {
	return Decision{Mode: ModeReflexive, Reasons: reasons}
}

func TestClassifyDefaults(t *testing.T) {
	long := "Compare the two designs below for a proxy that sits between OpenAI clients and local models. " +
		strings.Repeat("The first one keeps state in memory and the second one keeps it in Redis. ", 3) +
		"Use query_db if you need numbers."
	tests := []struct {
		name     string
		message  string
		category string
		want     Decision
	}{
		// Simple.
		{"empty", "", "", simple(short(0))},
		{"short English", "Hi there", "", simple(short(8))},
		{"short French", "Bonjour, ça va ?", "", simple(short(16))},
		{"category simple", "Hi there", "simple", simple(short(8))},
		{"unknown category ignored", "Hi there", "chat", simple(short(8))},
		{"one question", "What is the capital of France?", "", simple(short(30))},
		{"doubled question mark is one question", "Why??", "", simple(short(5))},

		// Thresholds, counted in runes: é is two bytes.
		{"49 runes", strings.Repeat("é", 49), "", simple(short(49))},
		{"50 runes", strings.Repeat("é", 50), "", simple(mid(50))},
		{"279 runes", strings.Repeat("é", 279), "", simple(mid(279))},
		{"280 runes", strings.Repeat("é", 280), "", reflexive("length 280 ≥ 280")},
		{"412 runes", strings.Repeat("a", 412), "", reflexive("length 412 ≥ 280")},

		// Keywords: case, accents, word boundaries.
		{"compare", "Compare Go and Rust", "", reflexive("keyword: compare")},
		{"upper case", "ANALYSE ce fichier", "", reflexive("keyword: analyse")},
		{"accented capital", "Une réponse Détaillé", "", reflexive("keyword: détaillé")},
		{"accents left out", "une reponse detaille", "", reflexive("keyword: détaillé")},
		{"feminine upper case", "une explication DÉTAILLÉE", "", reflexive("keyword: détaillée")},
		{"decomposed accents", "un plan de\u0301taille\u0301", "", reflexive("keyword: détaillé")},
		{"elided article", "fais l'analyse", "", reflexive("keyword: analyse")},
		{"curly apostrophe", "fais l’analyse", "", reflexive("keyword: analyse")},
		{"hyphen is a boundary", "Compare-les", "", reflexive("keyword: compare")},
		{"comparison is not compare", "What is a comparison sort", "", simple(short(25))},
		{"comparable is not compare", "Is it comparable", "", simple(short(16))},
		{"analyses is not analyse", "Les analyses du mois", "", simple(short(20))},
		{"analyzer is not analyze", "Run the analyzer", "", simple(short(16))},
		{"infinitive", "Peux-tu comparer ces offres", "", reflexive("keyword: comparer")},
		{"imperative plural", "Évaluez ce plan", "", reflexive("keyword: évaluez")},
		{"phrase", "Explique pourquoi le ciel est bleu", "", reflexive("keyword: explique pourquoi")},
		{"phrase across whitespace", "explain   why\nthis\tfails", "", reflexive("keyword: explain why")},
		{"phrase across a non-breaking space", "pros\u00a0and  cons", "", reflexive("keyword: pros and cons")},
		{"phrase end boundary", "explain whyever", "", simple(short(15))},
		{"phrase with accents", "ETAPE PAR ETAPE", "", reflexive("keyword: étape par étape")},
		{"step by step", "Solve it step by step.", "", reflexive("keyword: step by step")},
		{"pros and cons", "pros and cons of Go", "", reflexive("keyword: pros and cons")},
		{"avantages", "Avantages et inconvénients du télétravail", "", reflexive("keyword: avantages et inconvénients")},
		{"cherche et explique", "Cherche et explique l'erreur", "", reflexive("keyword: cherche et explique")},
		{"reason about", "Reason about this", "", reflexive("keyword: reason about")},
		{"raisonne", "Raisonne un peu", "", reflexive("keyword: raisonne")},
		{"keyword after a partial phrase", "pros compare", "", reflexive("keyword: compare")},
		{"keyword after a partial phrase and punctuation", "explain, why", "", simple(short(12))},
		{"keywords in order, once", "Evaluate and compare, then compare again", "",
			reflexive("keyword: evaluate", "keyword: compare")},

		// Multi-part.
		{"two questions", "What is Go? Why use it?", "", reflexive("multi-part: 2 questions")},
		{"French questions", "Quoi ? Pourquoi\u00a0? Comment ?", "", reflexive("multi-part: 3 questions")},
		{"repeated marks", "What?? Really?", "", reflexive("multi-part: 2 questions")},
		{"question mark in a URL", "See x.com/s?q=go and tell me why?", "", simple(short(33))},
		{"numbered list", "1. Install Go\n2. Write a test\n3. Run it", "", reflexive("multi-part: list of 3")},
		{"parenthesis list", "1) foo\n2) bar", "", reflexive("multi-part: list of 2")},
		{"dash list", "- a\n- b", "", reflexive("multi-part: list of 2")},
		{"star list", "* a\r\n* b\r\n", "", reflexive("multi-part: list of 2")},
		{"bullet list", "• un\n• deux", "", reflexive("multi-part: list of 2")},
		{"indented list", "Do:\n  - this\n  - that", "", reflexive("multi-part: list of 2")},
		{"one item", "Do:\n- this", "", simple(short(10))},
		{"negative numbers are no list", "-5 today\n-3 tomorrow", "", simple(short(20))},
		{"bold is no list", "**a**\n**b**", "", simple(short(11))},
		{"questions in a list", "1. Why Go?\n2. Why Rust?", "",
			reflexive("multi-part: 2 questions", "multi-part: list of 2")},

		// Category.
		{"category code", "Hi there", "code", reflexive("category: code")},
		{"category case", "Hi there", "CODE", reflexive("category: code")},
		{"category spaces", "Hi there", " Data-Analyst ", reflexive("category: data-analyst")},
		{"category archi", "Hi", "archi", reflexive("category: archi")},
		{"category raisonnement", "Hi", "raisonnement", reflexive("category: raisonnement")},
		{"category reasoning", "Hi", "reasoning", reflexive("category: reasoning")},

		// Server tools.
		{"tool", "use query_db to count users", "", reflexive("tool: query_db")},
		{"tool upper case", "QUERY_DB please", "", reflexive("tool: query_db")},
		{"tool prefix is not the tool", "query_dbx please", "", simple(short(16))},
		{"tool inside a name is not the tool", "my_query_db please", "", simple(short(18))},
		{"built-in tool", "list_dir .", "", reflexive("tool: list_dir")},

		// Everything at once, in the fixed order.
		{"all signals", long + " Why? How?", "code", reflexive(
			fmt.Sprintf("length %d ≥ 280", utf8.RuneCountInString(long+" Why? How?")),
			"multi-part: 2 questions", "keyword: compare", "category: code", "tool: query_db")},
	}
	c := New(config.Classify{ShortChars: 50, LongChars: 280}, serverTools)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // the Classifier is shared: -race checks it
			got := c.Classify(one(tt.message), tt.category)
			if diff := cmp.Diff(with(tt.want, tt.message), got, ignoreText); diff != "" {
				t.Errorf("Classify(%q, %q) mismatch (-want +got):\n%s", tt.message, tt.category, diff)
			}
		})
	}
}

func TestClassifyConfigured(t *testing.T) {
	tests := []struct {
		name     string
		cfg      config.Classify
		tools    []string
		message  string
		category string
		want     Decision
	}{
		{"zero config takes the defaults", config.Classify{}, nil, "compare", "",
			reflexive("keyword: compare")},
		{"zero config thresholds", config.Classify{}, nil, strings.Repeat("x ", 25) + "x", "",
			simple(mid(51))},
		{"white space around the words does not count", config.Classify{}, nil, "\n  " + strings.Repeat("x ", 25), "",
			simple(short(49))},
		{"keywords replace the defaults", config.Classify{Keywords: []string{"urgent"}}, nil, "compare these", "",
			simple(short(13))},
		{"configured keyword", config.Classify{Keywords: []string{"urgent"}}, nil, "URGENT: fix", "",
			reflexive("keyword: urgent")},
		{"configured phrase folded", config.Classify{Keywords: []string{"  Plan   détaillé "}}, nil, "un plan detaille", "",
			reflexive("keyword: Plan détaillé")},
		{"keyword without word end", config.Classify{Keywords: []string{"c++"}}, nil, "I like c++11", "",
			reflexive("keyword: c++")},
		{"keyword without word end needs a start", config.Classify{Keywords: []string{"c++"}}, nil, "abc++", "",
			simple(short(5))},
		{"categories replace the defaults", config.Classify{Categories: []string{"ops"}}, nil, "hi", "code",
			simple(short(2))},
		{"configured category", config.Classify{Categories: []string{"Ops"}}, nil, "hi", "OPS",
			reflexive("category: ops")},
		{"thresholds short", config.Classify{ShortChars: 10, LongChars: 20}, nil, "123456789", "",
			simple([]string{"short message (9 < 10)"})},
		{"thresholds mid", config.Classify{ShortChars: 10, LongChars: 20}, nil, "1234567890", "",
			simple([]string{"no complex signal (10 ≤ 10 < 20)"})},
		{"thresholds long", config.Classify{ShortChars: 10, LongChars: 20}, nil, strings.Repeat("1", 20), "",
			reflexive("length 20 ≥ 20")},
		{"short beyond precomputed reasons", config.Classify{ShortChars: 5000, LongChars: 10000}, nil, strings.Repeat("a ", 2250), "",
			simple([]string{"short message (4499 < 5000)"})},
		{"mid beyond precomputed reasons", config.Classify{ShortChars: 10, LongChars: 10000}, nil, strings.Repeat("a ", 2500), "",
			simple([]string{"no complex signal (10 ≤ 4999 < 10000)"})},
		{"tools from New", config.Classify{}, []string{"run_pipeline"}, "please run_pipeline now", "",
			reflexive("tool: run_pipeline")},
		{"no tools", config.Classify{}, nil, "please query_db", "", simple(short(15))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := New(tt.cfg, tt.tools).Classify(one(tt.message), tt.category)
			if diff := cmp.Diff(with(tt.want, tt.message), got, ignoreText); diff != "" {
				t.Errorf("Classify(%q, %q) with %+v mismatch (-want +got):\n%s", tt.message, tt.category, tt.cfg, diff)
			}
		})
	}
}

func TestClassifyLongMessage(t *testing.T) {
	// A keyword at the very end of a long message.
	c := New(config.Classify{}, nil)
	msg := strings.Repeat("lorem ipsum ", 1000) + "compare"
	want := with(reflexive(fmt.Sprintf("length %d ≥ 280", len(msg)), "keyword: compare"), msg)
	for range 2 {
		if diff := cmp.Diff(want, c.Classify(one(msg), ""), ignoreText); diff != "" {
			t.Fatalf("Classify(long) mismatch (-want +got):\n%s", diff)
		}
	}
}

func TestDefaultsAreCopies(t *testing.T) {
	k := DefaultKeywords()
	k[0] = "changed"
	if got := DefaultKeywords()[0]; got == "changed" {
		t.Errorf("DefaultKeywords()[0] = %q after changing a copy, want the default", got)
	}
}

func TestFoldTable(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"ÀÉÎÕÜ", "aeiou"},
		{"àéîõü", "aeiou"},
		{"Çç", "cc"},
		{"ŒUVRE œuvre", "oeuvre oeuvre"},
		{"Æsir", "aesir"},
		{"Straße", "strasse"},
		{"ÿŸ", "yy"},
		{"İı", "ii"},
		{"Łódź", "lodz"},
		{"Žluťoučký kůň", "zlutoucky kun"},
		{"ſ", "s"},
		{"ĲIJ", "ijij"},
		{"a\u00a0b\u202fc\t \nd", "a b c d"},
		{"3×4", "3\x1a4"},
		{"«oui»", "\x1aoui\x1a"},
		{"ΑΒΓ", "αβγ"},
		{"e\u0301", "e"},
		{"x\x00y", "x\x1ay"},
	}
	for _, tt := range tests {
		got := fold(nil, tt.in)
		if string(got) != tt.want {
			t.Errorf("fold(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestFoldTableMatchesNFD checks the hand-written table against Unicode's
// canonical decomposition: every letter of U+00C0..U+017F that decomposes
// folds to its base letter, lowercased. Letters with no decomposition
// (æ œ ß ø ł đ ı …) must still fold to plain ASCII letters.
func TestFoldTableMatchesNFD(t *testing.T) {
	for r := rune(0xc0); r < 0x180; r++ {
		got := fold(nil, string(r))
		if !unicode.IsLetter(r) {
			if string(got) != "\x1a" {
				t.Errorf("fold(%q U+%04X) = %q, want the punctuation byte", r, r, got)
			}
			continue
		}
		for _, b := range got {
			if b < 'a' || b > 'z' {
				t.Errorf("fold(%q U+%04X) = %q, want ASCII lowercase letters", r, r, got)
				break
			}
		}
		d := norm.NFD.String(string(r))
		base, _ := utf8.DecodeRuneInString(d)
		if len(d) == utf8.RuneLen(base) {
			continue // no decomposition
		}
		if want := string(unicode.ToLower(base)); string(got) != want {
			t.Errorf("fold(%q U+%04X) = %q, want %q (NFD %+q)", r, r, got, want, d)
		}
	}
}

func FuzzClassify(f *testing.F) {
	for _, s := range []string{
		"", "Hi", "Compare A and B", "1. a\n2. b", "Why? How?", "détaillé", "query_db",
		strings.Repeat("é", 300), "de\u0301taille\u0301", "a?b?c?", "\xff\xfe", "• x\n• y",
	} {
		f.Add(s, "")
		f.Add(s, "code")
	}
	c := New(config.Classify{}, serverTools)
	f.Fuzz(func(t *testing.T, message, category string) {
		d := c.Classify(one(message), category)
		if d.Mode != ModeSimple && d.Mode != ModeReflexive {
			t.Fatalf("Classify(%q, %q).Mode = %q, want simple or reflexive", message, category, d.Mode)
		}
		if len(d.Reasons) == 0 {
			t.Fatalf("Classify(%q, %q).Reasons is empty, want at least one", message, category)
		}
		for _, r := range d.Reasons {
			if r == "" {
				t.Fatalf("Classify(%q, %q).Reasons = %q, want no empty reason", message, category, d.Reasons)
			}
		}
		// Length counts the words as judged, without the space around
		// them: 279 characters and a trailing space are not long.
		if n := utf8.RuneCountInString(strings.TrimSpace(message)); n >= DefaultLongChars && d.Mode != ModeReflexive && !strings.Contains(message, "<") {
			t.Fatalf("Classify(%d runes).Mode = %q, want reflexive", n, d.Mode)
		}
		if again := c.Classify(one(message), category); !cmp.Equal(d, again) {
			t.Fatalf("Classify(%q, %q) not deterministic: %v then %v", message, category, d, again)
		}
	})
}

// message300 is 300 runes of ordinary English with one keyword.
const message300 = "I have two services written in Go that talk to a local model server " +
	"through an HTTP proxy. One of them keeps a cache in memory and the other " +
	"uses Redis for everything. Please compare how each would behave when the " +
	"model server restarts in the middle of a long streamed answer to a distant web client."

func BenchmarkClassify300(b *testing.B) {
	if n := utf8.RuneCountInString(message300); n != 300 {
		b.Fatalf("message300 has %d runes, want 300", n)
	}
	c := New(config.Classify{}, serverTools)
	want := with(reflexive("length 300 ≥ 280", "keyword: compare"), message300)
	if diff := cmp.Diff(want, c.Classify(one(message300), ""), ignoreText); diff != "" {
		b.Fatalf("Classify(message300) mismatch (-want +got):\n%s", diff)
	}
	b.ReportAllocs()
	for b.Loop() {
		c.Classify(one(message300), "")
	}
}

func BenchmarkClassifyShortSimple(b *testing.B) {
	c := New(config.Classify{}, serverTools)
	const msg = "How are you today?"
	if got := c.Classify(one(msg), ""); got.Mode != ModeSimple {
		b.Fatalf("Classify(%q).Mode = %q, want simple", msg, got.Mode)
	}
	b.ReportAllocs()
	for b.Loop() {
		c.Classify(one(msg), "")
	}
}

func BenchmarkClassify300French(b *testing.B) {
	msg := "J’ai deux services écrits en Go qui parlent à un serveur de modèles local " +
		"à travers un proxy HTTP. L’un garde un cache en mémoire, l’autre utilise Redis " +
		"pour tout. Explique pourquoi le premier se comporte mieux quand le serveur " +
		"redémarre au milieu d’une longue réponse, et ce que le client verrait à la fin."
	c := New(config.Classify{}, serverTools)
	b.ReportMetric(float64(utf8.RuneCountInString(msg)), "runes")
	b.ReportAllocs()
	for b.Loop() {
		c.Classify(one(msg), "")
	}
}

func BenchmarkClassify20KB(b *testing.B) {
	msg := strings.Repeat(message300+" ", 66)
	c := New(config.Classify{}, serverTools)
	b.ReportAllocs()
	for b.Loop() {
		c.Classify(one(msg), "")
	}
}

func TestASCIIWordAgreesWithFoldTable(t *testing.T) {
	for b := range 0x80 {
		e := foldTable[b]
		var want byte
		if e.n == 1 && isWord[e.b[0]] {
			want = e.b[0]
		}
		if got := asciiWord[b]; got != want {
			t.Errorf("asciiWord[%q] = %q, want %q (from foldTable)", rune(b), got, want)
		}
	}
}

// referenceHits finds the patterns of c in message the slow, obvious way:
// fold the whole text, then look for every pattern at every position,
// checking boundaries. It returns pattern indices, sorted.
func referenceHits(c *Classifier, message string) []int32 {
	text := string(fold(nil, message))
	var hits []int32
	for k, p := range c.patterns {
		for start := 0; start+len(p.text) <= len(text); start++ {
			end := start + len(p.text)
			if text[start:end] != p.text {
				continue
			}
			if isWord[p.text[0]] && start > 0 && isWord[text[start-1]] {
				continue
			}
			if p.wordEnd && end < len(text) && isWord[text[end]] {
				continue
			}
			hits = append(hits, int32(k))
			break
		}
	}
	return hits
}

// oddKeywords exercise what the defaults do not: patterns that start or end
// with a non-word byte, that share prefixes, that repeat a word, and that
// hold non-ASCII letters.
var oddKeywords = []string{
	"c++", ".net", "a a", "a a b", "x y z", "é", "Straße", "ǅemal", "Ωmega", "pros", "pros and cons",
	"and", "compare", "compare it", "?", "ok!", "step-by-step",
}

func FuzzScanMatchesReference(f *testing.F) {
	for _, s := range []string{
		"", "compare", "pros compare", "a a a b", "x  y\nz", "asp.net and c++11", "ÉTAPE PAR ÉTAPE",
		"STRASSE", "ǆemal", "ωMEGA", "ok!ok!", "compare it.", "step-by-step", "?", "de\u0301taille\u0301",
		"\xff\xfecompare", "  leading space compare", "pros\u00a0 and\u2003cons", "c++ .net", "Ωmega ωmega",
	} {
		f.Add(s)
	}
	classifiers := []*Classifier{
		New(config.Classify{}, serverTools),
		New(config.Classify{Keywords: oddKeywords}, serverTools),
	}
	f.Fuzz(func(t *testing.T, message string) {
		for _, c := range classifiers {
			st, got := c.scan(message, nil)
			got = slices.Clone(got)
			slices.Sort(got)
			want := referenceHits(c, message)
			if !slices.Equal(got, want) {
				t.Fatalf("scan(%q) hits %v, reference %v (patterns %q)", message, names(c, got), names(c, want), fold(nil, message))
			}
			if want := utf8.RuneCountInString(message); st.runes != want {
				t.Fatalf("scan(%q) runes = %d, want %d", message, st.runes, want)
			}
		}
	})
}

func names(c *Classifier, hits []int32) []string {
	var s []string
	for _, h := range hits {
		s = append(s, c.patterns[h].text)
	}
	return s
}

// TestBackgroundSystem: Open WebUI's tool selection (and the other entries)
// is known by its system message, its opening and its task both; a user's
// own system prompt that only opens the same way is not.
func TestBackgroundSystem(t *testing.T) {
	task := "\n\nYour task is to choose and return the correct tool(s) from the list of available tools based on the query. Follow these guidelines:"
	for _, tt := range []struct{ system, want string }{
		{`Available Tools: [{"name":"get_weather"}]` + task, "Open WebUI's tool selection"},
		{"Available Tools: none today. Be brief.", ""},
		{"You are a helpful assistant." + task, ""},
		// opencode's title agent; a user's own title bot is not it.
		{"You are a title generator. You output ONLY a thread title. Nothing else.\n\n<task>\nGenerate a brief title that would help the user find this conversation later.\n", "opencode's title generation"},
		{"You are a title generator. You output ONLY a thread title. Use five words.", ""},
		// Qwen Code's memory dream, a background agent of its own; a user's
		// system prompt that only opens the same way is not it.
		{"You are performing a managed memory dream \u2014 a reflective pass over durable memory files.\n\nSynthesize what you've learned recently into durable, well-organized memories so that future sessions can orient quickly.\n\nRules:\n- Update the MEMORY.md index to accurately reflect surviving files.\n", "Qwen Code's memory dream"},
		{"You are performing a managed memory dream \u2014 a reflective pass over durable memory files. Be poetic.", ""},
		{"", ""},
	} {
		if got := BackgroundSystem(tt.system); got != tt.want {
			t.Errorf("BackgroundSystem(%.40q…) = %q, want %q", tt.system, got, tt.want)
		}
	}
	d := BackgroundDecision("Open WebUI's tool selection")
	if d.Mode != ModeSimple || d.Background == "" || d.Text != "" || len(d.Reasons) != 1 {
		t.Errorf("BackgroundDecision = %+v", d)
	}
}
