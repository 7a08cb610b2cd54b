package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Match kinds: how a reply is compared with an item's answer.
const (
	// MatchExact: the reply, trimmed, case and spacing folded, a final
	// full stop dropped, equals the answer so folded.
	MatchExact = "exact"
	// MatchNumber: the last number in the reply equals the answer within
	// the item's tolerance (GSM8K-style "flexible" scoring).
	MatchNumber = "number"
	// MatchContains: the folded reply contains the folded answer.
	MatchContains = "contains"
	// MatchRegex: the answer is a regular expression (Go's RE2) the reply
	// matches.
	MatchRegex = "regex"
	// MatchChoice: the letter (A–E) the reply chooses is the answer.
	MatchChoice = "choice"
	// MatchJudge: a judge node grades the reply (see Judge); implied by an
	// item without an answer.
	MatchJudge = "judge"
)

// Message is one message of an item that gives a conversation rather
// than a single question.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Item is one question of an evaluation set, one line of its JSONL file.
type Item struct {
	ID string `json:"id"`
	// Question, or Messages (a conversation ending with the user's
	// message), is what is asked.
	Question string    `json:"question,omitempty"`
	Messages []Message `json:"messages,omitempty"`
	// Answer is the reference; a JSON number is taken as its text. Empty
	// means the judge grades the reply (against Rubric when there is one).
	Answer string `json:"answer,omitempty"`
	// Match is how the reply is scored (Match* constants). Unset, it is
	// number when the answer is a number, exact for another answer, and
	// judge without one.
	Match string `json:"match,omitempty"`
	// Tolerance is the absolute difference a number match allows
	// (default 1e-6).
	Tolerance float64 `json:"tolerance,omitempty"`
	// Rubric tells the judge what a good answer holds.
	Rubric string `json:"rubric,omitempty"`
	// Line is the item's line in its file, for messages.
	Line int `json:"-"`

	re *regexp.Regexp // the compiled answer of a regex match
}

// rawItem is a line as decoded: the answer may be a string or a number.
type rawItem struct {
	ID        json.RawMessage `json:"id"`
	Question  string          `json:"question"`
	Messages  []Message       `json:"messages"`
	Answer    json.RawMessage `json:"answer"`
	Match     string          `json:"match"`
	Tolerance *float64        `json:"tolerance"`
	Rubric    string          `json:"rubric"`
}

// defaultTolerance is a number match's tolerance when the item sets none:
// room for a float printed with rounding, none for a wrong integer.
const defaultTolerance = 1e-6

// maxLine caps one line of the data file (a long few-shot conversation
// fits; a file that is not JSONL fails fast).
const maxLine = 8 << 20

// ParseItem decodes and checks one JSONL line. An item without an id is
// named after its line ("line-12"), so that public sets without ids run
// as downloaded (and -resume still finds each item, as long as the file
// is unchanged).
func ParseItem(line []byte, lineNo int) (Item, error) {
	var raw rawItem
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&raw); err != nil {
		return Item{}, fmt.Errorf("not a JSON object: %w", err)
	}
	if dec.More() {
		return Item{}, errors.New("more than one JSON value on the line")
	}
	it := Item{Question: raw.Question, Messages: raw.Messages, Match: raw.Match, Rubric: raw.Rubric, Line: lineNo, Tolerance: defaultTolerance}
	var err error
	if it.ID, err = scalar(raw.ID); err != nil {
		return Item{}, fmt.Errorf("id: %w", err)
	}
	if it.ID == "" {
		it.ID = "line-" + strconv.Itoa(lineNo)
	}
	if it.Answer, err = scalar(raw.Answer); err != nil {
		return Item{}, fmt.Errorf("item %q: answer: %w", it.ID, err)
	}
	if raw.Tolerance != nil {
		if *raw.Tolerance < 0 {
			return Item{}, fmt.Errorf("item %q: tolerance %v is negative", it.ID, *raw.Tolerance)
		}
		it.Tolerance = *raw.Tolerance
	}
	if err := it.check(); err != nil {
		return Item{}, fmt.Errorf("item %q: %w", it.ID, err)
	}
	return it, nil
}

// scalar reads a JSON string or number as text ("" for null or absent).
func scalar(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	switch raw[0] {
	case '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		var n json.Number
		err := json.Unmarshal(raw, &n)
		return n.String(), err
	}
	return "", fmt.Errorf("want a string or a number, got %s", cut(string(raw), 40))
}

func (it *Item) check() error {
	switch {
	case strings.TrimSpace(it.Question) == "" && len(it.Messages) == 0:
		return errors.New(`neither "question" nor "messages"`)
	case it.Question != "" && len(it.Messages) > 0:
		return errors.New(`both "question" and "messages": give one`)
	}
	for i, m := range it.Messages {
		switch m.Role {
		case "system", "user", "assistant":
		default:
			return fmt.Errorf("messages[%d].role %q is not system, user or assistant", i, m.Role)
		}
	}
	if n := len(it.Messages); n > 0 && it.Messages[n-1].Role != "user" {
		return fmt.Errorf("messages[%d] is %s: the conversation must end with the user's message", n-1, it.Messages[n-1].Role)
	}
	if it.Match == "" {
		switch {
		case it.Answer == "":
			it.Match = MatchJudge
		case isNumber(it.Answer):
			it.Match = MatchNumber
		default:
			it.Match = MatchExact
		}
	}
	if it.Answer == "" && it.Match != MatchJudge {
		return fmt.Errorf("match %q needs an answer (leave both out to have -judge grade it)", it.Match)
	}
	switch it.Match {
	case MatchExact, MatchContains, MatchJudge:
	case MatchNumber:
		if !isNumber(it.Answer) {
			return fmt.Errorf("match number: answer %q is not a number", it.Answer)
		}
	case MatchRegex:
		re, err := regexp.Compile(it.Answer)
		if err != nil {
			return fmt.Errorf("match regex: %w", err)
		}
		it.re = re
	case MatchChoice:
		if a := strings.ToUpper(strings.TrimSpace(it.Answer)); len(a) != 1 || a[0] < 'A' || a[0] > 'E' {
			return fmt.Errorf("match choice: answer %q is not one letter A–E", it.Answer)
		}
	default:
		return fmt.Errorf("match %q is not exact, number, contains, regex, choice or judge", it.Match)
	}
	return nil
}

// NeedsJudge reports whether the item is graded by the judge.
func (it *Item) NeedsJudge() bool { return it.Match == MatchJudge }

// Prompt is what the item asks, as the engine's messages.
func (it *Item) Prompt() []Message {
	if len(it.Messages) > 0 {
		return it.Messages
	}
	return []Message{{Role: "user", Content: it.Question}}
}

// Asked is the item's question: its user's last message.
func (it *Item) Asked() string {
	p := it.Prompt()
	return p[len(p)-1].Content
}

// ReadItems reads a JSONL file: one item a line, blank lines skipped.
// Every bad line is reported, each with its number, in one error.
func ReadItems(r io.Reader) ([]Item, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	var items []Item
	var errs []error
	seen := map[string]int{}
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		it, err := ParseItem(line, n)
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", n, err))
			continue
		}
		if first, dup := seen[it.ID]; dup {
			errs = append(errs, fmt.Errorf("line %d: id %q is already on line %d", n, it.ID, first))
			continue
		}
		seen[it.ID] = n
		items = append(items, it)
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("line %d: %w", n+1, err))
	}
	if len(errs) == 0 && len(items) == 0 {
		errs = append(errs, errors.New("no items"))
	}
	return items, errors.Join(errs...)
}
