package memory

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Shares are the parts of a window kept for each kind of memory, as
// fractions of the window (design document 004's defaults).
type Shares struct {
	// Questions bounds the list of the user's earlier questions.
	Questions float64
	// Recent is the least the most recent turns get, kept raw.
	Recent float64
	// Summaries bounds the summary of the older turns.
	Summaries float64
}

// DefaultShares are design document 004's: last user queries 5%, recent
// raw turns 5%, summaries 10%.
var DefaultShares = Shares{Questions: 0.05, Recent: 0.05, Summaries: 0.10}

// Marks on a fitted message (Result.Marks), the trace's PromptMessage.Fit.
const (
	MarkSummary          = "summary"
	MarkShortened        = "shortened"
	MarkEarlierQuestions = "earlier_questions"
	MarkOmitted          = "omitted"
)

// Actions of a fitting (Action.Action).
const (
	ActShortened  = "shortened"
	ActSummarized = "summarized"
	ActReused     = "reused"
	ActDropped    = "dropped"
	// ActImagesDropped: the images of an earlier turn were left out, its
	// text kept.
	ActImagesDropped = "images_dropped"
)

// Action is one thing Fit did to a prompt. Turns are the conversation's
// turns (the n-th user message starts turn n) for summarized, reused and
// dropped; for shortened, the turn of the current exchange the tool result
// belongs to (a stage's own turns, counted from 1).
type Action struct {
	Action    string
	FromTurn  int
	ToTurn    int
	SummaryID string
	Detail    string
}

// Input is a prompt to fit.
type Input struct {
	Msgs []Message
	// Current is the index in Msgs of the user's current question: it and
	// everything after it (the stage's own turns, a final note) are the
	// current exchange; the messages before it, after the leading system
	// messages, are the conversation's history.
	Current int
	// Window is the node's context window and Reserve the tokens kept for
	// its answer.
	Window, Reserve int
	// ToolChars is what the tool definitions offered weigh (Chars' unit).
	ToolChars int
	// Ratio is the node's model's characters per token (Calibration.Ratio).
	Ratio  float64
	Shares Shares
	// Tighten is applied to the budget, in (0, 1]: lower after the node
	// refused a prompt that was estimated to fit. 0 means 1.
	Tighten float64
	// ThinkingSent: the node is sent the messages' reasoning, and its
	// template renders that of the current exchange (Ollama's renderers
	// for thinking models keep the thinking after the last user message
	// and leave out the earlier turns'): it is counted there.
	ThinkingSent bool
}

// Budget is what the prompt's messages may weigh, in characters, once the
// answer's reserve, the tool definitions and the safety margin are kept.
func (in *Input) Budget() int {
	return int(float64(in.Window-in.Reserve)*in.perToken()) - in.ToolChars
}

// perToken is the characters a token the budget counts: the ratio,
// tightened, less the safety margin. Tightening stops at minRatio: no
// tokenizer packs text denser than a byte a token (len counts bytes), so
// a budget tightened past it refuses prompts the node would take. After
// a refusal the ratio is already at most the refused prompt's characters
// per window token, and halving that again left a stage of a byte-level
// model no room for even its instructions and question.
func (in *Input) perToken() float64 {
	t := in.Tighten
	if t <= 0 || t > 1 {
		t = 1
	}
	r := in.Ratio
	if t < 1 {
		r = max(r*t, min(r, minRatio))
	}
	return r * safety
}

// safety keeps a tenth of the budget for what the estimate cannot see: the
// chat template's own text, tokens that pack worse than the average.
const safety = 0.9

// share is a fraction of the window, in characters.
func (in *Input) share(f float64) int { return int(float64(in.Window) * in.Ratio * f) }

// Fits reports whether in's prompt fits as it is, and what it weighs. It
// is the check made before every call and allocates nothing.
func Fits(in *Input) (bool, int) {
	c := Chars(in.Msgs)
	if in.ThinkingSent {
		for i := min(max(in.Current, 0), len(in.Msgs)); i < len(in.Msgs); i++ {
			c += len(in.Msgs[i].Reasoning)
		}
	}
	return c <= in.Budget(), c
}

// Result is a fitted prompt.
type Result struct {
	// Msgs is the prompt to send; Marks says, message by message, what the
	// fitting made of it ("" for a message sent as the client wrote it).
	Msgs  []Message
	Marks []string
	// Chars is what Msgs weigh, the current exchange's thinking included
	// when it is sent.
	Chars   int
	Actions []Action
	// SummaryErr is why the summarizer made no summary when it was asked
	// (the older turns were dropped instead); nil otherwise.
	SummaryErr error
}

// TooLongError is a prompt whose parts that are always kept (instructions,
// the current question, the latest turn) do not fit the window.
type TooLongError struct {
	// Window is the node's window and Reserve what is kept for the answer;
	// Estimate is what the prompt weighs cut as far as it can be, counted
	// as the budget counts (so that Estimate+Reserve > Window), all in
	// tokens; Tools is the part of Estimate the tool definitions take.
	Window, Reserve, Estimate, Tools int
}

func (e *TooLongError) Error() string {
	return fmt.Sprintf("the prompt needs about %d tokens but the window is %d tokens, %d of them kept for the answer", e.Estimate, e.Window, e.Reserve)
}

// ErrTooLong is wrapped by every TooLongError, for errors.Is.
var ErrTooLong = errors.New("prompt longer than the context window")

func (e *TooLongError) Unwrap() error { return ErrTooLong }

// Folder folds older turns into a summary and keeps summaries for the next
// requests of the conversation. Fit asks Cached first, Summarize at most
// once, and Stores what Summarize made. A nil Folder neither finds nor makes
// summaries: the older turns are then dropped, with a marker.
type Folder interface {
	// Cached returns the summary stored under key.
	Cached(ctx context.Context, key string) (Summary, bool)
	// Summarize runs the summarizer over prompt and returns its text. It
	// fails when the summarizer is offline, slow or spent. shared is true
	// when the text is another request's call, made at the same moment
	// over the same prompt, which this one waited for instead of calling.
	Summarize(ctx context.Context, prompt []Message) (text string, shared bool, err error)
	// Store keeps s under key.
	Store(ctx context.Context, key string, s Summary)
	// Window is the summarizer's own window and ratio, for its prompt;
	// the ratio may be read from the shared store.
	Window(ctx context.Context) (window int, ratio float64)
}

// Summary is the folded text of turns From to To.
type Summary struct {
	ID   string `json:"id"`
	Text string `json:"text"`
	From int    `json:"from"`
	To   int    `json:"to"`
}

// Fit returns in's prompt fitted to in.Window, or a *TooLongError when even
// the parts always kept do not fit. See the package doc for the order.
func Fit(ctx context.Context, in *Input, folder Folder) (*Result, error) {
	f := newFitting(in)
	if f.fits() {
		return f.result(), nil
	}
	// 1. The current exchange's older tool results, head and tail.
	f.shortenSteps(max(in.share(0.05), 400))
	if f.fits() {
		return f.result(), nil
	}
	// 1b. The images of the history's turns, oldest first: each weighs
	// as much as a page of text, and the user's words about them stay.
	f.dropImages()
	if f.fits() {
		return f.result(), nil
	}
	// 2. The history: earlier questions listed, recent turns raw, older
	// turns folded into a summary or dropped.
	f.foldHistory(ctx, folder)
	if f.fits() {
		return f.result(), nil
	}
	// 3. Harder: the older tool results to a line, then the raw turns kept
	// go too, oldest first, then the summary and the list themselves.
	f.shortenSteps(120)
	for !f.fits() && f.dropRawTurn() {
	}
	if !f.fits() {
		f.dropMemory()
	}
	if !f.fits() && f.raw > 0 {
		// Last: of the earlier questions, only the first, shortened.
		f.firstOnly = true
		f.actions = withoutDropped(f.actions)
		f.buildMemory(ctx, nil, f.raw)
		f.dropMemory()
	}
	if !f.fits() {
		// The latest turn's own results are kept whole while they can be:
		// past that, a result cut in the middle beats refusing the
		// question it serves.
		f.shortenLatest()
	}
	if !f.fits() {
		// Counted as the budget counts (tightened, with the safety margin),
		// what is left is above the window with the reserve: an estimate
		// at the bare ratio could say less than the window it was refused.
		return nil, &TooLongError{Window: in.Window, Reserve: in.Reserve, Estimate: Tokens(f.weight()+in.ToolChars, in.perToken()), Tools: Tokens(in.ToolChars, in.perToken())}
	}
	return f.result(), nil
}

// part is a message of the prompt being fitted.
type part struct {
	m    Message
	mark string
	turn int // history turn (1-based) or current step; 0 for the rest
}

// fitting is a prompt being fitted: the leading system messages, the
// history's turns, the memory parts that stand for folded turns, and the
// current exchange's steps.
type fitting struct {
	in      *Input
	prefix  []Message
	turns   [][]Message // history, by turn; turns[0] is turn 1
	raw     int         // index in turns of the first turn kept raw
	memory  []part      // the summary, the earlier questions, the marker
	current []part
	latest  int // index in current of the latest step's first message
	actions []Action
	// sum is the summary the fitting found or made; failure why the
	// summarizer could not make one, when it was asked.
	sum     Summary
	failure error
	// hashes[k] is the hash of turns 1..k, made once when a summary is
	// looked up.
	hashes []uint64
	// firstOnly lists only the first earlier question: the window has no
	// room for more.
	firstOnly bool
}

func newFitting(in *Input) *fitting {
	f := &fitting{in: in}
	cur := min(max(in.Current, 0), len(in.Msgs))
	p := 0
	for p < cur && in.Msgs[p].Role == "system" {
		p++
	}
	f.prefix = in.Msgs[:p]
	for i := p; i < cur; i++ {
		if in.Msgs[i].Role == "user" || len(f.turns) == 0 {
			f.turns = append(f.turns, nil)
		}
		f.turns[len(f.turns)-1] = append(f.turns[len(f.turns)-1], in.Msgs[i])
	}
	step := 0
	for i := cur; i < len(in.Msgs); i++ {
		m := in.Msgs[i]
		if m.Role == "assistant" {
			step++
			f.latest = len(f.current)
		}
		f.current = append(f.current, part{m: m, turn: step})
	}
	return f
}

func (f *fitting) weight() int {
	n := Chars(f.prefix)
	for _, p := range f.memory {
		n += messageChars(&p.m)
	}
	for _, t := range f.turns[f.raw:] {
		n += Chars(t)
	}
	return n + f.currentChars()
}

// currentChars is what the current exchange weighs, its thinking included
// when the node is sent it.
func (f *fitting) currentChars() int {
	n := 0
	for i := range f.current {
		n += messageChars(&f.current[i].m)
		if f.in.ThinkingSent {
			n += len(f.current[i].m.Reasoning)
		}
	}
	return n
}

func (f *fitting) fits() bool { return f.weight() <= f.in.Budget() }

func (f *fitting) result() *Result {
	r := &Result{Actions: f.actions, SummaryErr: f.failure}
	add := func(m Message, mark string) {
		r.Msgs = append(r.Msgs, m)
		r.Marks = append(r.Marks, mark)
	}
	for _, m := range f.prefix {
		add(m, "")
	}
	for _, p := range f.memory {
		add(p.m, p.mark)
	}
	for _, t := range f.turns[f.raw:] {
		for _, m := range t {
			add(m, "")
		}
	}
	for _, p := range f.current {
		add(p.m, p.mark)
	}
	r.Chars = f.weight()
	if len(f.actions) == 0 {
		// Nothing was done: the prompt goes as it came.
		r.Msgs, r.Marks = f.in.Msgs, nil
	}
	return r
}

// shortenSteps cuts the tool results of the current exchange's older steps
// to about limit characters each, oldest first, until the prompt fits. The
// calls themselves are kept: a model that no longer sees what it already
// called calls it again.
func (f *fitting) shortenSteps(limit int) {
	for i := 0; i < f.latest && !f.fits(); i++ {
		p := &f.current[i]
		if p.m.Role != "tool" || len(p.m.Content) <= limit {
			continue
		}
		text, omitted := HeadTail(p.m.Content, limit)
		if omitted == 0 {
			continue
		}
		p.m.Content = text
		p.mark = MarkShortened
		f.actions = append(f.actions, Action{Action: ActShortened, FromTurn: p.turn, ToTurn: p.turn,
			Detail: fmt.Sprintf("result of %s: %d lines omitted", nameOr(p.m.Name, "a tool"), omitted)})
	}
}

// dropImages leaves out the images of the history's turns, a turn at a
// time, oldest first, until the prompt fits; each message that had one
// says so in a line, so that the model knows the user showed something.
// Files are kept: the model cannot be told what one held.
//
// They go in stretches of half the images the window holds, the fit
// checked only between two: a server's prompt cache (Ollama's runner,
// llama-server's cache_prompt) evaluates again everything after the first
// message that differs from the previous prompt, every later image through
// the vision encoder. Leaving out the fewest each time put the line on a
// new turn at every request of a conversation with a picture a turn; in
// stretches, the same images go over the next requests, until the new
// turns outgrow the room the stretch freed. The stretches are counted from
// the conversation's first image and from the window in tokens, not the
// calibrated ratio that moves a little at every call, so that successive
// requests draw the same lines.
func (f *fitting) dropImages() {
	stretch := max(1, (f.in.Window-f.in.Reserve)/ImageTokens/2)
	dropped, next := 0, 0
	for k := 0; k < len(f.turns); k++ {
		if dropped >= next {
			if f.fits() {
				return
			}
			next = dropped + stretch
		}
		n := 0
		for j := range f.turns[k] {
			n += countImages(f.turns[k][j].Parts)
		}
		if n == 0 {
			continue
		}
		dropped += n
		if f.hashes == nil {
			// The summary cache is keyed by the turns as the client
			// sent them.
			f.hashes = f.prefixHashes(len(f.turns))
		}
		for j := range f.turns[k] {
			m := &f.turns[k][j]
			c := countImages(m.Parts)
			if c == 0 {
				continue
			}
			var kept []Part
			for _, p := range m.Parts {
				if p.Kind != PartImage {
					kept = append(kept, p)
				}
			}
			m.Parts = kept
			m.Content = strings.TrimRight(m.Content, "\n") + "\n" + ImagesOmitted(c, "they did not fit the model's context window")
		}
		f.actions = append(f.actions, Action{Action: ActImagesDropped, FromTurn: k + 1, ToTurn: k + 1, Detail: plural(n, "image") + " left out"})
	}
}

func countImages(parts []Part) int {
	n := 0
	for i := range parts {
		if parts[i].Kind == PartImage {
			n++
		}
	}
	return n
}

// ImagesOmitted is the line that stands for n images a model is not
// shown, and why.
func ImagesOmitted(n int, why string) string {
	return "[" + plural(n, "image") + " of this message not shown: " + why + ".]"
}

func plural(n int, what string) string {
	s := strconv.Itoa(n) + " " + what
	if n != 1 {
		s += "s"
	}
	return s
}

// shortenLatest cuts the latest turn's tool results so that the prompt
// fits, each to an even part of the room left, when that part is worth
// reading (200 characters).
func (f *fitting) shortenLatest() {
	var results []int
	size := 0
	for i := f.latest; i < len(f.current); i++ {
		if f.current[i].m.Role == "tool" {
			results = append(results, i)
			size += len(f.current[i].m.Content)
		}
	}
	if len(results) == 0 {
		return
	}
	room := f.in.Budget() - (f.weight() - size)
	per := room / len(results)
	if per < 200 {
		return
	}
	for _, i := range results {
		p := &f.current[i]
		text, omitted := HeadTail(p.m.Content, per-40)
		if omitted == 0 {
			continue
		}
		p.m.Content = text
		p.mark = MarkShortened
		f.actions = append(f.actions, Action{Action: ActShortened, FromTurn: p.turn, ToTurn: p.turn,
			Detail: fmt.Sprintf("latest result of %s: %d lines omitted", nameOr(p.m.Name, "a tool"), omitted)})
	}
}

func nameOr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

// foldHistory keeps the most recent turns raw within what the window has
// left and folds the older ones: their questions listed verbatim, their
// content in a summary when folder can make or find one, else dropped.
//
// A server's prompt cache (Ollama's runner, llama-server's cache_prompt)
// evaluates again everything after the first token that differs from the
// previous prompt, and the summary and the list come right after the
// system message. So a summary of the conversation is used as long as the
// turns after it fit raw, and a new fold goes further than it must, until
// the raw turns take at most half their room: the next turns fit beside
// them, and the summary, the list and the raw turns stay the same, word
// for word, until the next fold, several turns later, with one summarizer
// call. Folding the least each time moved the fold by a turn at every
// request, with a summarizer call each time and the whole prompt
// evaluated again.
func (f *fitting) foldHistory(ctx context.Context, folder Folder) {
	if len(f.turns) == 0 {
		return
	}
	in := f.in
	fixed := Chars(f.prefix) + f.currentChars()
	left := in.Budget() - fixed
	memShare := in.share(in.Shares.Questions) + in.share(in.Shares.Summaries)
	room := max(left-memShare, min(left, in.share(in.Shares.Recent)))
	n := len(f.turns)
	f.raw = f.rawWithin(room)
	if f.raw == 0 {
		return
	}
	if folder == nil {
		f.buildMemory(ctx, nil, f.raw)
		return
	}
	if prev, k := f.cached(ctx, folder, n); prev.To > 0 && turnsChars(f.turns[prev.To:]) <= room {
		// An earlier request's summary, the turns after it raw: no call.
		f.raw, f.sum = prev.To, prev
		f.actions = append(f.actions, Action{Action: ActReused, FromTurn: 1, ToTurn: prev.To, SummaryID: prev.ID})
		if k != n {
			// Under this history too: the next request, a turn longer,
			// finds it at its second read, however many turns are raw,
			// and a later stage of this one takes it as it is.
			folder.Store(ctx, SummaryKey(f.hashes[n]), prev)
		}
		f.buildMemory(ctx, nil, f.raw)
		return
	}
	least := f.raw
	// The latest turn stays raw when it fits at all.
	f.raw = min(f.rawWithin(room/2), max(least, n-1))
	f.buildMemory(ctx, folder, f.raw)
	if f.sum.To < f.raw {
		// No summary, or a shorter one (the summarizer's own window): the
		// turns it does not cover are kept raw as far as they fit rather
		// than dropped.
		f.raw = max(least, f.sum.To)
		f.actions = withoutDropped(f.actions)
		f.buildMemory(ctx, nil, f.raw)
	}
}

// turnsChars is what turns weigh.
func turnsChars(turns [][]Message) int {
	n := 0
	for _, t := range turns {
		n += Chars(t)
	}
	return n
}

// rawWithin is the index in f.turns of the first of the most recent turns
// that weigh at most room together.
func (f *fitting) rawWithin(room int) int {
	raw := len(f.turns)
	for raw > 0 {
		c := Chars(f.turns[raw-1])
		if c > room {
			break
		}
		room -= c
		raw--
	}
	return raw
}

// buildMemory makes the parts that stand for turns 1..m.
func (f *fitting) buildMemory(ctx context.Context, folder Folder, m int) {
	in := f.in
	f.memory = f.memory[:0]
	sum, ok := f.summary(ctx, folder, m)
	if ok {
		text := "Summary of the earlier conversation (turns 1–" + strconv.Itoa(sum.To) + "), which is not shown here:\n" + sum.Text
		text, _ = HeadTail(text, max(in.share(in.Shares.Summaries), 200)-headTailMark)
		f.memory = append(f.memory, part{m: Message{Role: "system", Content: text}, mark: MarkSummary})
	}
	if sum.To < m {
		from := sum.To + 1
		n := 0
		for _, t := range f.turns[from-1 : m] {
			n += len(t)
		}
		f.actions = append(f.actions, Action{Action: ActDropped, FromTurn: from, ToTurn: m, Detail: fmt.Sprintf("%d messages left out", n)})
		f.memory = append(f.memory, part{m: Message{Role: "system", Content: fmt.Sprintf("[%d earlier messages of this conversation (turns %d–%d) are not shown: they did not fit the model's context window.]", n, from, m)}, mark: MarkOmitted})
	}
	if q := f.questions(m); q != "" {
		f.memory = append(f.memory, part{m: Message{Role: "system", Content: q}, mark: MarkEarlierQuestions})
	}
}

// questionCap bounds one question in the earlier-questions list.
const questionCap = 600

// questions lists the user's questions of turns 1..m verbatim (each cut in
// the middle beyond questionCap), within the questions share: the first
// one always, then the most recent ones that fit.
func (f *fitting) questions(m int) string {
	var qs []string
	for i, t := range f.turns[:m] {
		for _, msg := range t {
			if msg.Role == "user" {
				q, _ := HeadTail(strings.TrimSpace(msg.Content), questionCap)
				qs = append(qs, "[turn "+strconv.Itoa(i+1)+"] "+q)
				break
			}
		}
	}
	if len(qs) == 0 {
		return ""
	}
	const head = "The user's earlier questions in this conversation, oldest first:"
	if f.firstOnly {
		q, _ := HeadTail(qs[0], 200)
		return head + "\n" + q
	}
	// The share holds the head, the first question and the line that
	// counts the questions left out, each on its line.
	const more = "\n[%d more questions not listed]"
	room := f.in.share(f.in.Shares.Questions) - len(head) - 1 - len(qs[0]) - len(fmt.Sprintf(more, len(qs)))
	keep := len(qs)
	for keep > 1 && room-len(qs[keep-1]) >= 0 {
		room -= len(qs[keep-1]) + 1
		keep--
	}
	var b strings.Builder
	b.WriteString(head)
	b.WriteString("\n")
	b.WriteString(qs[0])
	if keep > 1 {
		fmt.Fprintf(&b, more, keep-1)
	}
	for _, q := range qs[keep:] {
		b.WriteString("\n")
		b.WriteString(q)
	}
	return b.String()
}

// dropRawTurn folds the oldest turn still kept raw into the memory parts.
func (f *fitting) dropRawTurn() bool {
	if f.raw >= len(f.turns) {
		return false
	}
	f.raw++
	// The summary already found or made stands for what it covers; the
	// turns after it are dropped: Fit has had its one summarizer call.
	f.actions = withoutDropped(f.actions)
	f.buildMemory(context.Background(), nil, f.raw)
	return true
}

// withoutDropped removes the "dropped" action of an earlier buildMemory,
// which the next one replaces.
func withoutDropped(acts []Action) []Action {
	out := acts[:0]
	for _, a := range acts {
		if a.Action != ActDropped {
			out = append(out, a)
		}
	}
	return out
}

// dropMemory removes the summary, keeping the marker and the questions.
func (f *fitting) dropMemory() {
	var kept []part
	for _, p := range f.memory {
		if p.mark != MarkSummary {
			kept = append(kept, p)
		}
	}
	f.memory = kept
}

// HeadTail cuts s to about limit bytes, keeping its first lines and its
// last lines around a "[… N lines omitted …]" line, and returns how many
// lines it left out (0: s returned whole). Text on one line is cut by
// bytes instead, on rune boundaries.
func HeadTail(s string, limit int) (string, int) {
	if len(s) <= limit {
		return s, 0
	}
	lines := strings.Split(s, "\n")
	if len(lines) < 3 {
		h := cutRunes(s, limit*3/4, true)
		t := cutRunes(s, limit/4, false)
		omitted := len(s) - len(h) - len(t)
		return h + fmt.Sprintf(" […%d characters omitted…] ", omitted) + t, 1
	}
	headB, tailB := limit*3/4, limit/4
	h := 0
	for n := 0; h < len(lines)-1 && n+len(lines[h])+1 <= headB; h++ {
		n += len(lines[h]) + 1
	}
	// last is the least t may be: one line left out at least, unless the
	// first line is cut.
	last := h + 1
	if h == 0 {
		// A first line longer than the head's share (a minified file, a
		// pasted payload) is cut as text on one line is: the short lines
		// after it may all fit in the tail's share.
		head := cutRunes(lines[0], headB, true)
		lines[0] = head + fmt.Sprintf(" […%d characters omitted…]", len(lines[0])-len(head))
		h, last = 1, 1
	}
	t := len(lines)
	for n := 0; t > last && n+len(lines[t-1])+1 <= tailB; t-- {
		n += len(lines[t-1]) + 1
	}
	if t == h {
		return strings.Join(lines, "\n"), 1
	}
	omitted := t - h
	return strings.Join(lines[:h], "\n") + fmt.Sprintf("\n[… %d lines omitted …]\n", omitted) + strings.Join(lines[t:], "\n"), omitted
}

// cutRunes returns the first (head) or last n bytes of s, on rune
// boundaries.
func cutRunes(s string, n int, head bool) string {
	if n >= len(s) {
		return s
	}
	if head {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		return s[:n]
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}
