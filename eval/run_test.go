package eval

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"chainproxy/chain"
)

// fakeRunner answers from a function of the model and the question; it
// records the calls it got.
type fakeRunner struct {
	mu     sync.Mutex
	calls  []string // "model:question"
	answer func(ctx context.Context, model, question string) (string, error)
}

func (f *fakeRunner) Run(ctx context.Context, req *chain.RunRequest, emit func(chain.Event) error) (*chain.Result, error) {
	q := req.Messages[len(req.Messages)-1].Content
	f.mu.Lock()
	f.calls = append(f.calls, req.Model+":"+q)
	f.mu.Unlock()
	text, err := f.answer(ctx, req.Model, q)
	if err != nil {
		return nil, &chain.Failure{Trace: chain.Trace{Mode: chain.ModeSimple}, Err: err}
	}
	if emit != nil {
		if err := emit(chain.Event{Kind: chain.EventDelta, Content: text}); err != nil {
			return nil, err
		}
	}
	tr := chain.Trace{Mode: chain.ModeSimple, Stages: []chain.StageTrace{{Node: req.Model, Status: chain.StageOK, Usage: chain.Usage{PromptTokens: 10, CompletionTokens: 2}, Calls: []chain.ModelCall{{Turn: 1}}}}}
	if strings.HasPrefix(req.Model, "chain/") {
		tr.Mode = chain.ModeReflexive
		tr.Stages = append(tr.Stages, chain.StageTrace{Node: "X", Status: chain.StageStoppedRepeat})
	}
	return &chain.Result{Message: chain.Message{Role: "assistant", Content: text}, Trace: tr}, nil
}

func items(t *testing.T, lines ...string) []Item {
	t.Helper()
	its, err := ReadItems(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return its
}

func TestPlanInterleavesModes(t *testing.T) {
	its := items(t, `{"id":"a","question":"qa","answer":1}`, `{"id":"b","question":"qb","answer":1}`, `{"id":"c","question":"qc","answer":1}`)
	var got []string
	for _, j := range Plan(its, []string{"M1", "M2", "chain/auto"}, []Result{{ID: "b", Mode: "chain/auto"}}) {
		got = append(got, j.item.ID+"/"+j.mode)
	}
	want := []string{"a/M1", "a/M2", "a/chain/auto", "b/M2", "b/M1", "c/chain/auto", "c/M1", "c/M2"}
	if !slices.Equal(got, want) {
		t.Errorf("Plan = %v, want %v", got, want)
	}
}

func TestRunScoresRecordsFailuresAndCounts(t *testing.T) {
	its := items(t, `{"id":"a","question":"qa","answer":1}`, `{"id":"b","question":"qb","answer":2}`)
	r := &fakeRunner{answer: func(_ context.Context, model, q string) (string, error) {
		switch {
		case model == "M1" && q == "qb":
			return "", errors.New("upstream 500")
		case q == "qa":
			return "it is 1", nil
		}
		return "it is 3", nil
	}}
	res, err := Run(context.Background(), r, Options{Items: its, Modes: []string{"M1", "chain/reflexive"}, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	rep := Summarize(its, []string{"M1", "chain/reflexive"}, []string{"M1"}, res)
	if len(rep.Results) != 4 {
		t.Fatalf("results = %d, want 4 (a failure is a result)", len(rep.Results))
	}
	m1 := rep.Modes[0]
	if m1.Items != 2 || m1.Correct != 1 || m1.Failed != 1 || m1.Accuracy != 0.5 {
		t.Errorf("M1 = %d items, %d correct, %d failed, accuracy %v; want 2, 1, 1, 0.5", m1.Items, m1.Correct, m1.Failed, m1.Accuracy)
	}
	ch := rep.Modes[1]
	if ch.TokensIn != 20 || ch.TokensOut != 4 || ch.Calls != 2 || ch.GuardStops != 2 {
		t.Errorf("chain/reflexive tokens %d/%d, calls %d, guard stops %d; want 20/4, 2, 2", ch.TokensIn, ch.TokensOut, ch.Calls, ch.GuardStops)
	}
	for _, r := range rep.Results {
		if r.TraceID == "" || (r.Failed && !strings.Contains(r.Error, "upstream 500")) {
			t.Errorf("result %+v: want a trace id, and a failure's error", r)
		}
	}
}

func TestRunStopsWhenCancelled(t *testing.T) {
	its := items(t, `{"id":"a","question":"qa","answer":1}`, `{"id":"b","question":"qb","answer":1}`, `{"id":"c","question":"qc","answer":1}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	r := &fakeRunner{answer: func(ctx context.Context, _, _ string) (string, error) {
		n++ // one worker: no race
		if n == 3 {
			cancel() // Ctrl-C during the third request
			<-ctx.Done()
			return "", ctx.Err()
		}
		return "1", nil
	}}
	res, err := Run(ctx, r, Options{Items: its, Modes: []string{"M1", "M2"}, Concurrency: 1})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run error = %v, want context.Canceled", err)
	}
	if len(res) != 2 {
		t.Fatalf("results = %+v, want the two that finished (the cut one is not a result)", res)
	}
	// Resumed, the run asks only what is missing.
	r2 := &fakeRunner{answer: func(context.Context, string, string) (string, error) { return "1", nil }}
	all, err := Run(context.Background(), r2, Options{Items: its, Modes: []string{"M1", "M2"}, Done: res})
	if err != nil || len(all) != 6 || len(r2.calls) != 4 {
		t.Errorf("resumed: %d results, %d asked, error %v; want 6, 4, nil", len(all), len(r2.calls), err)
	}
}

func TestRunJudge(t *testing.T) {
	its := items(t, `{"id":"poem","question":"write a haiku","rubric":"three lines"}`, `{"id":"fact","question":"2+2","answer":4}`)
	r := &fakeRunner{answer: func(_ context.Context, model, q string) (string, error) {
		if model == "J" {
			if !strings.Contains(q, "Rubric:\nthree lines") || !strings.Contains(q, "Answer to grade:\nline one") {
				return "", errors.New("the judge's question lacks the rubric or the answer: " + q)
			}
			return "CORRECT\nThree lines.", nil
		}
		return "line one", nil
	}}
	res, err := Run(context.Background(), r, Options{Items: its, Modes: []string{"M1"}, Judge: "J"})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(res, func(a, b Result) int { return strings.Compare(a.ID, b.ID) })
	if res[0].ID != "fact" || res[0].Judge != nil || res[0].Correct {
		t.Errorf("fact = %+v, want scored by its answer (wrong), not judged", res[0])
	}
	if p := res[1]; !p.Correct || p.Judge == nil || p.Judge.Reason != "CORRECT\nThree lines." || p.Judge.TraceID == "" {
		t.Errorf("poem = %+v (judge %+v), want judged correct with the judge's reason and trace", p, p.Judge)
	}
	if got := JudgeWarnings("J", []string{"M1", "chain/auto"}, func(m string) []string {
		if m == "chain/auto" {
			return []string{"M1", "J"}
		}
		return []string{m}
	}); len(got) != 1 || !strings.Contains(got[0], "chain/auto") {
		t.Errorf("JudgeWarnings = %q, want one, for chain/auto", got)
	}
}
