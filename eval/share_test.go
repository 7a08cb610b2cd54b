package eval

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"chainproxy/chain"
	"chainproxy/chain/trace"
)

// memTraces is a TraceStore in memory; fail makes every put fail.
type memTraces struct {
	mu   sync.Mutex
	docs map[string][]byte
	fail error
}

func (m *memTraces) PutTrace(_ context.Context, key string, doc []byte) error {
	if m.fail != nil {
		return m.fail
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.docs[key] = doc
	return nil
}

// TestShareKeepsEachTraceUnderEachOwner: every answer's trace document is
// kept under every owner's key, with the summary the cockpit's list shows
// and the trace; a put that fails is reported, not fatal.
func TestShareKeepsEachTraceUnderEachOwner(t *testing.T) {
	its := items(t, `{"id":"a","question":"qa\nmore","answer":"ok"}`, `{"id":"b","question":"qb","answer":"no"}`)
	modes := []string{"M1", "chain/reflexive"}
	run := func(st *memTraces, owners []string, failed func(string, error)) []Result {
		t.Helper()
		r := &fakeRunner{answer: func(context.Context, string, string) (string, error) { return "ok", nil }}
		res, err := Run(context.Background(), r, Options{Items: its, Modes: modes, Concurrency: 2,
			Share: &Sharing{Store: st, Owners: owners, Redact: func(s string) string { return s }, Failed: failed}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	st := &memTraces{docs: map[string][]byte{}}
	owners := []string{"", "admin1"}
	res := run(st, owners, func(id string, err error) { t.Errorf("trace %s not kept: %v", id, err) })
	if got, want := len(st.docs), len(res)*len(owners); got != want {
		t.Fatalf("%d documents kept, want %d", got, want)
	}
	for _, r := range res {
		for _, who := range owners {
			data, ok := st.docs[trace.TraceKey(who, r.TraceID)]
			if !ok {
				t.Errorf("%s under %s: nothing under owner %q", r.ID, r.Mode, who)
				continue
			}
			var doc struct {
				trace.TraceSummary
				Chain chain.Trace `json:"chain"`
			}
			if err := json.Unmarshal(data, &doc); err != nil {
				t.Fatalf("%s: %v", data, err)
			}
			wantQ := map[string]string{"a": "qa", "b": "qb"}[r.ID]
			if doc.TraceID != r.TraceID || doc.Question != wantQ || doc.Client != "chainproxy-eval" || doc.Mode != r.Routed || len(doc.Chain.Stages) != len(r.Stages) {
				t.Errorf("%s under %s: document %+v, want id %s question %q client chainproxy-eval mode %s, %d stages",
					r.ID, r.Mode, doc.TraceSummary, r.TraceID, wantQ, r.Routed, len(r.Stages))
			}
			if got, want := doc.Status, trace.TraceStatus(&doc.Chain, nil); got != want {
				t.Errorf("%s under %s: status %q, want %q", r.ID, r.Mode, got, want)
			}
		}
	}

	var mu sync.Mutex
	var failed []string
	res = run(&memTraces{fail: errors.New("store down")}, []string{""}, func(id string, err error) {
		mu.Lock()
		failed = append(failed, id)
		mu.Unlock()
	})
	var ids []string
	for _, r := range res {
		ids = append(ids, r.TraceID)
	}
	slices.Sort(ids)
	slices.Sort(failed)
	if !slices.Equal(failed, ids) || len(res) != len(its)*len(modes) {
		t.Errorf("with the store down: %d results, failures reported for %v, want %d results, each reported (%v)", len(res), failed, len(its)*len(modes), ids)
	}
}

// memFeed is a TraceStore that shares the trace list too.
type memFeed struct {
	memTraces
	sums map[string][]byte
}

func (m *memFeed) PutSummary(_ context.Context, key string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sums[key] = data
	return nil
}

// TestShareListsEachTraceOnce: with a store that shares the cockpit's list,
// each kept trace, answers and judgings alike, is listed once, under the
// first owner (an admin key lists every owner's), as one replica's news
// numbered in order.
func TestShareListsEachTraceOnce(t *testing.T) {
	its := items(t, `{"id":"a","question":"qa","answer":"ok"}`, `{"id":"b","question":"qb","rubric":"says ok"}`)
	st := &memFeed{memTraces: memTraces{docs: map[string][]byte{}}, sums: map[string][]byte{}}
	r := &fakeRunner{answer: func(_ context.Context, model, _ string) (string, error) {
		if model == "J" {
			return "CORRECT, it says ok", nil
		}
		return "ok", nil
	}}
	res, err := Run(context.Background(), r, Options{Items: its, Modes: []string{"M1"}, Judge: "J",
		Share: &Sharing{Store: st, Owners: []string{"admin1", "admin2"}, Redact: func(s string) string { return s }}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, r := range res {
		want[r.TraceID] = false
		if r.Judge != nil {
			want[r.Judge.TraceID] = true
		}
	}
	if got := len(st.sums); got != len(want) || len(want) != 3 {
		t.Fatalf("%d summaries listed, want %d (2 answers, 1 judging)", got, len(want))
	}
	replicas := map[string]bool{}
	seqs := map[uint64]bool{}
	for id, judging := range want {
		data, ok := st.sums[trace.TraceKey("admin1", id)]
		if !ok {
			t.Errorf("trace %s not listed under the first owner", id)
			continue
		}
		var m trace.SharedSummary
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		replicas[m.Replica] = true
		seqs[m.Seq] = true
		if m.Owner != "admin1" || m.Summary.TraceID != id || m.Summary.Client != "chainproxy-eval" || m.Summary.Status != "ok" {
			t.Errorf("listed %+v, want owner admin1, trace %s, client chainproxy-eval, ok", m, id)
		}
		if got := strings.HasPrefix(m.Summary.Question, "judging b under M1: qb"); got != judging {
			t.Errorf("listed question %q: a judging's is %v, want %v", m.Summary.Question, got, judging)
		}
	}
	if len(replicas) != 1 || len(seqs) != len(want) {
		t.Errorf("listed by replicas %v with seqs %v, want one replica, a seq each", replicas, seqs)
	}
}
