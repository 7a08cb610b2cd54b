package eval

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"chainproxy/chain"
)

// JudgePrompt is the judge's fixed instruction (docs/eval.md quotes it).
// The verdict comes first, alone on its line, so that it is read without
// parsing the judge's prose; the reason after it is kept for the report.
const JudgePrompt = `You grade one answer to a question. Compare the answer with the reference answer, or with the rubric when there is no reference. Judge only whether the answer's substance is right: ignore style, length and spelling. Reply with exactly one word on the first line, CORRECT or INCORRECT, then one short sentence saying why.`

// Verdict is the judge's grading of one answer.
type Verdict struct {
	Correct bool `json:"correct"`
	// Reason is the judge's reply, cut.
	Reason  string `json:"reason"`
	TraceID string `json:"trace_id"`
}

// judgeQuestion is the judge's user message for an item and an answer.
func judgeQuestion(it *Item, answer string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Question:\n%s\n\n", it.Asked())
	if it.Answer != "" {
		fmt.Fprintf(&b, "Reference answer:\n%s\n\n", it.Answer)
	}
	if it.Rubric != "" {
		fmt.Fprintf(&b, "Rubric:\n%s\n\n", it.Rubric)
	}
	fmt.Fprintf(&b, "Answer to grade:\n%s", answer)
	return b.String()
}

// judge asks the judge node, alone, to grade answer, the reply to j's
// item under j's mode, and returns its verdict and its trace to keep (nil
// when the request never started).
func judge(ctx context.Context, r Runner, o *Options, j job, answer string) (*Verdict, *kept, error) {
	it := j.item
	v := &Verdict{TraceID: newID()}
	req := &chain.RunRequest{
		TraceID:      v.TraceID,
		Model:        o.Judge,
		Conversation: o.Conversation + it.ID + "/judge",
		Client:       "chainproxy-eval",
		Messages: []chain.Message{
			{Role: "system", Content: JudgePrompt},
			{Role: "user", Content: judgeQuestion(it, answer)},
		},
		Params: chain.Params{Temperature: o.Temperature, Seed: o.Seed},
	}
	t0 := time.Now()
	out, err := r.Run(ctx, req, nil)
	var k *kept
	var tr *chain.Trace
	var f *chain.Failure
	switch {
	case out != nil:
		tr = &out.Trace
	case errors.As(err, &f):
		tr = &f.Trace
	}
	if tr != nil {
		k = &kept{traceID: v.TraceID, id: it.ID, mode: j.mode, judge: true, tr: tr,
			sum: summary(v.TraceID, time.Since(t0).Milliseconds(), req, t0.UnixMilli(), tr, err)}
		// Listed as what it is: the question it graded is in its prompt.
		k.sum.Question = capQuestion("judging " + it.ID + " under " + j.mode + ": " + question(messages(it.Prompt())))
	}
	if err != nil {
		return v, k, err
	}
	v.Reason = cut(strings.TrimSpace(out.Message.Content), 500)
	correct, ok := ReadVerdict(out.Message.Content)
	if !ok {
		return v, k, fmt.Errorf("the judge's reply does not start with CORRECT or INCORRECT: %q", cut(v.Reason, 80))
	}
	v.Correct = correct
	return v, k, nil
}

// ReadVerdict reads the judge's first word: CORRECT or INCORRECT, in any
// case, markdown emphasis or punctuation around it.
func ReadVerdict(reply string) (correct, ok bool) {
	w := strings.Fields(reply)
	if len(w) == 0 {
		return false, false
	}
	switch strings.ToUpper(strings.Trim(w[0], "*_`\"'.:,!")) {
	case "CORRECT":
		return true, true
	case "INCORRECT":
		return false, true
	}
	return false, false
}

// JudgeWarnings warns when the judge is one of the nodes that answer
// under modes (answering maps a mode to its nodes): a model grading its
// own answers favours them.
func JudgeWarnings(judge string, modes []string, answering func(mode string) []string) []string {
	var out []string
	for _, m := range modes {
		if slices.Contains(answering(m), judge) {
			out = append(out, fmt.Sprintf("the judge %s also answers under %s: it grades its own answers, which tends to favour them", judge, m))
		}
	}
	return out
}
