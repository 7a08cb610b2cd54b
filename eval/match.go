package eval

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Score says whether reply answers it rightly, for every match but judge
// (which Judge grades).
func Score(it *Item, reply string) bool {
	switch it.Match {
	case MatchExact:
		return fold(reply) == fold(it.Answer)
	case MatchContains:
		return strings.Contains(fold(reply), fold(it.Answer))
	case MatchRegex:
		re := it.re
		if re == nil {
			var err error
			if re, err = regexp.Compile(it.Answer); err != nil {
				return false
			}
		}
		return re.MatchString(reply)
	case MatchNumber:
		want, err := parseNumber(it.Answer)
		if err != nil {
			return false
		}
		got, ok := LastNumber(reply)
		return ok && math.Abs(got-want) <= it.Tolerance
	case MatchChoice:
		got, ok := Choice(reply)
		return ok && got == strings.ToUpper(strings.TrimSpace(it.Answer))
	}
	return false
}

// fold lowers s, collapses its spacing, and drops the quotes, markdown
// emphasis and final full stop a model wraps a short answer in.
func fold(s string) string {
	s = strings.Join(strings.Fields(strings.ToLower(s)), " ")
	s = strings.Trim(s, "*_`\"'")
	s = strings.TrimRight(s, ".!")
	return strings.Trim(s, "*_`\"' ")
}

// numberRe finds numbers as models write them: a sign, thousands
// separators, decimals ("-1,234.5").
var numberRe = regexp.MustCompile(`-?\d[\d,]*(?:\.\d+)?`)

// LastNumber returns the last number in s: where a model that works a
// problem out states its result ("… so she has 18 left."), the rule
// GSM8K's flexible scoring uses.
func LastNumber(s string) (float64, bool) {
	all := numberRe.FindAllString(s, -1)
	for i := len(all) - 1; i >= 0; i-- {
		if f, err := parseNumber(all[i]); err == nil {
			return f, true
		}
	}
	return 0, false
}

func parseNumber(s string) (float64, error) {
	s = strings.ReplaceAll(strings.TrimSpace(s), ",", "")
	s = strings.TrimSuffix(s, ".")
	return strconv.ParseFloat(s, 64)
}

func isNumber(s string) bool {
	_, err := parseNumber(s)
	return err == nil
}

// choiceRes find the letter a reply chooses, most explicit first: "the
// answer is (C)", "Answer: C", then a reply that opens with the letter
// ("C) Paris", "(C)", "C.").
var choiceRes = []*regexp.Regexp{
	regexp.MustCompile(`(?i:answer)(?:\s+is)?\s*[:=]?\s*\**\(?([A-E])\)?(?:[^A-Za-z]|$)`),
	regexp.MustCompile(`^\W*\(?([A-E])(?:[).:]|\s*$)`),
}

// soleLetterRe finds letters A–E standing alone, with the start of the
// next word: "A" before a lower-case word is the article ("A dolphin").
var soleLetterRe = regexp.MustCompile(`\b([A-E])\b(\s+[a-z])?`)

// Choice returns the letter (A–E) reply chooses: the last "answer is X",
// else a letter the reply opens with, else the only letter A–E that
// stands alone in it.
func Choice(reply string) (string, bool) {
	for _, re := range choiceRes {
		if m := re.FindAllStringSubmatch(reply, -1); len(m) > 0 {
			return strings.ToUpper(m[len(m)-1][1]), true
		}
	}
	letter := ""
	for _, m := range soleLetterRe.FindAllStringSubmatch(reply, -1) {
		if m[1] == "A" && m[2] != "" {
			continue
		}
		if letter != "" && m[1] != letter {
			return "", false // several: no choice to read
		}
		letter = m[1]
	}
	return letter, letter != ""
}

// cut shortens s to at most n bytes at a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return strings.TrimRightFunc(s[:i], unicode.IsSpace) + "…"
}
