package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// conversation is a system message, n question/answer turns whose answers
// weigh size bytes each, and a last question.
func conversation(n, size int) []Message {
	msgs := []Message{{Role: "system", Content: "You are a helpful assistant."}}
	for i := 1; i <= n; i++ {
		msgs = append(msgs,
			Message{Role: "user", Content: fmt.Sprintf("Question %d: tell me about topic-%d.", i, i)},
			Message{Role: "assistant", Content: fmt.Sprintf("Answer %d: ", i) + strings.Repeat("lorem ipsum ", size/12)})
	}
	return append(msgs, Message{Role: "user", Content: "What was my first question about?"})
}

func input(msgs []Message, window int) *Input {
	return &Input{Msgs: msgs, Current: len(msgs) - 1, Window: window, Reserve: 256, Ratio: 4, Shares: DefaultShares}
}

// memKV is an in-process KV for the tests.
type memKV struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (k *memKV) Get(_ context.Context, key string) ([]byte, bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.m[key]
	return v, ok, nil
}

func (k *memKV) Set(_ context.Context, key string, val []byte, _ time.Duration) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = map[string][]byte{}
	}
	k.m[key] = val
	return nil
}

// scripted is a Folder whose summarizer writes which turns it covered.
type scripted struct {
	cache   map[string]Summary
	calls   int
	fail    error
	prompts [][]Message
	// window is the summarizer's window, 32768 when 0.
	window int
	// shared says the summary is a concurrent request's.
	shared bool
}

func (s *scripted) Cached(_ context.Context, key string) (Summary, bool) {
	v, ok := s.cache[key]
	return v, ok
}

func (s *scripted) Summarize(_ context.Context, prompt []Message) (string, bool, error) {
	s.calls++
	s.prompts = append(s.prompts, prompt)
	if s.fail != nil {
		return "", false, s.fail
	}
	return fmt.Sprintf("The user asked about %d things.", strings.Count(prompt[1].Content, "[turn ")), s.shared, nil
}

func (s *scripted) Store(_ context.Context, key string, sum Summary) {
	if s.cache == nil {
		s.cache = map[string]Summary{}
	}
	s.cache[key] = sum
}

func (s *scripted) Window(context.Context) (int, float64) {
	if s.window > 0 {
		return s.window, 4
	}
	return 32768, 4
}

func marked(r *Result, mark string) []Message {
	var out []Message
	for i, m := range r.Msgs {
		if r.Marks != nil && r.Marks[i] == mark {
			out = append(out, m)
		}
	}
	return out
}

func TestFitsUntouched(t *testing.T) {
	msgs := conversation(3, 100)
	in := input(msgs, 4096)
	r, err := Fit(context.Background(), in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if &r.Msgs[0] != &msgs[0] || r.Marks != nil || len(r.Actions) != 0 {
		t.Fatalf("a prompt that fits must go as it came: %+v", r.Actions)
	}
	if ok, _ := Fits(in); !ok {
		t.Fatal("Fits says no")
	}
}

func TestFitLongConversation(t *testing.T) {
	for _, tc := range []struct {
		name      string
		folder    *scripted
		wantMarks []string
		wantActs  []string
	}{
		{"no summarizer", nil, []string{MarkOmitted, MarkEarlierQuestions}, []string{ActDropped}},
		{"summarizer", &scripted{}, []string{MarkSummary, MarkEarlierQuestions}, []string{ActSummarized}},
		// A concurrent request's call: used, and said to be another's.
		{"summary shared", &scripted{shared: true}, []string{MarkSummary, MarkEarlierQuestions}, []string{ActReused}},
		{"summarizer down", &scripted{fail: errors.New("node offline")}, []string{MarkOmitted, MarkEarlierQuestions}, []string{ActDropped}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs := conversation(30, 1600) // ~50 KB
			in := input(msgs, 2048)
			var folder Folder
			if tc.folder != nil {
				folder = tc.folder
			}
			r, err := Fit(context.Background(), in, folder)
			if err != nil {
				t.Fatal(err)
			}
			if r.Chars > in.Budget() {
				t.Fatalf("fitted prompt weighs %d chars, budget %d", r.Chars, in.Budget())
			}
			if r.Msgs[0].Content != msgs[0].Content {
				t.Fatal("system message lost")
			}
			if last := r.Msgs[len(r.Msgs)-1]; last.Content != msgs[len(msgs)-1].Content {
				t.Fatalf("last message is %q", last.Content)
			}
			for _, m := range tc.wantMarks {
				if len(marked(r, m)) != 1 {
					t.Errorf("want one %q message; marks %q", m, r.Marks)
				}
			}
			q := marked(r, MarkEarlierQuestions)
			if len(q) == 1 && !strings.Contains(q[0].Content, "[turn 1] Question 1: tell me about topic-1.") {
				t.Errorf("the first question is not in the list:\n%s", q[0].Content)
			}
			var acts []string
			for _, a := range r.Actions {
				acts = append(acts, a.Action)
			}
			if strings.Join(acts, ",") != strings.Join(tc.wantActs, ",") {
				t.Errorf("actions %v, want %v", acts, tc.wantActs)
			}
			if tc.folder != nil && tc.folder.fail != nil && r.SummaryErr == nil {
				t.Error("the summarizer's failure is not reported")
			}
		})
	}
}

// The second request of a conversation (its history resent, one turn
// longer) reuses the summary the first made, without a summarizer call.
func TestSummaryReused(t *testing.T) {
	folder := &scripted{}
	msgs := conversation(30, 1600)
	if _, err := Fit(context.Background(), input(msgs, 2048), folder); err != nil {
		t.Fatal(err)
	}
	if folder.calls != 1 {
		t.Fatalf("%d summarizer calls, want 1", folder.calls)
	}
	r, err := Fit(context.Background(), input(msgs, 2048), folder)
	if err != nil {
		t.Fatal(err)
	}
	if folder.calls != 1 || len(r.Actions) != 1 || r.Actions[0].Action != ActReused {
		t.Fatalf("calls %d, actions %+v: want the summary reused", folder.calls, r.Actions)
	}
	// More turns than fit raw beside the summary: the summary of the
	// longer prefix is made from the cached one and the new turns only.
	longer := msgs[: len(msgs)-1 : len(msgs)-1]
	for i := 31; i <= 33; i++ {
		longer = append(longer, Message{Role: "user", Content: fmt.Sprintf("Question %d", i)}, Message{Role: "assistant", Content: strings.Repeat("x", 1600)})
	}
	longer = append(longer, Message{Role: "user", Content: "And now?"})
	r, err = Fit(context.Background(), input(longer, 2048), folder)
	if err != nil {
		t.Fatal(err)
	}
	if folder.calls != 2 || r.Actions[0].Action != ActSummarized || !strings.Contains(r.Actions[0].Detail, "consolidated") {
		t.Fatalf("calls %d, actions %+v", folder.calls, r.Actions)
	}
	if p := folder.prompts[1][1].Content; strings.Contains(p, "[turn 1]\n") || !strings.Contains(p, "Summary of turns 1–") {
		t.Fatalf("consolidation prompt should hold the earlier summary, not turn 1 again:\n%.300s", p)
	}
}

// A stage's older tool results are cut in the middle; the calls stay and
// the latest turn stays whole.
func TestShortenStageResults(t *testing.T) {
	big := strings.Repeat("file-line\n", 800)
	msgs := []Message{
		{Role: "system", Content: "research stage"},
		{Role: "user", Content: "List the project files and explain them."},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "1", Name: "list_dir", Arguments: `{"path":"."}`}}},
		{Role: "tool", Name: "list_dir", ToolCallID: "1", Content: big},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "2", Name: "read_file", Arguments: `{"path":"a"}`}}},
		{Role: "tool", Name: "read_file", ToolCallID: "2", Content: big},
	}
	in := &Input{Msgs: msgs, Current: 1, Window: 4096, Reserve: 512, Ratio: 4, Shares: DefaultShares}
	r, err := Fit(context.Background(), in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Marks[3] != MarkShortened || !strings.Contains(r.Msgs[3].Content, "lines omitted") {
		t.Fatalf("older result not shortened: %q", r.Marks)
	}
	if r.Msgs[5].Content != big || r.Msgs[2].ToolCalls[0].Name != "list_dir" {
		t.Fatal("the latest turn or an older call was changed")
	}
	if r.Actions[0].Action != ActShortened || r.Actions[0].FromTurn != 1 {
		t.Fatalf("actions %+v", r.Actions)
	}
}

func TestTooLong(t *testing.T) {
	msgs := []Message{{Role: "user", Content: strings.Repeat("word ", 4000)}}
	_, err := Fit(context.Background(), input(msgs, 2048), nil)
	var tl *TooLongError
	if !errors.As(err, &tl) || !errors.Is(err, ErrTooLong) || tl.Window != 2048 || tl.Estimate < 5000 {
		t.Fatalf("err %v", err)
	}
}

func TestHeadTail(t *testing.T) {
	for _, tc := range []struct {
		in      string
		limit   int
		omitted int
	}{
		{"short", 10, 0},
		{strings.Repeat("line\n", 100), 100, 81},
		{strings.Repeat("é", 500), 100, 1},
	} {
		out, n := HeadTail(tc.in, tc.limit)
		if n != tc.omitted {
			t.Errorf("%.20q: omitted %d, want %d", tc.in, n, tc.omitted)
		}
		if n > 0 && len(out) > tc.limit+40 {
			t.Errorf("%.20q: %d bytes out for limit %d", tc.in, len(out), tc.limit)
		}
		if !strings.HasPrefix(out, tc.in[:min(3, len(tc.in))]) {
			t.Errorf("head lost: %.20q", out)
		}
	}
}

func TestCalibration(t *testing.T) {
	kv := &memKV{}
	a, b := NewCalibration(kv), NewCalibration(kv)
	ctx := context.Background()
	if r := a.Ratio(ctx, "n"); r != DefaultRatio {
		t.Fatalf("default ratio %v", r)
	}
	a.Observe(ctx, "n", 2000, 1000) // 2 chars a token
	if r := a.Ratio(ctx, "n"); r >= DefaultRatio || r < 2 {
		t.Fatalf("ratio after one report %v", r)
	}
	// The other replica reads the shared ratio.
	if r := b.Ratio(ctx, "n"); r >= DefaultRatio {
		t.Fatalf("replica sees %v", r)
	}
}

func BenchmarkFits(b *testing.B) {
	in := input(conversation(20, 200), 32768)
	b.ReportAllocs()
	for b.Loop() {
		if ok, _ := Fits(in); !ok {
			b.Fatal("does not fit")
		}
	}
}

func BenchmarkFit200Messages(b *testing.B) {
	msgs := conversation(100, 1600)
	folder := &scripted{}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Fit(context.Background(), input(msgs, 4096), folder); err != nil {
			b.Fatal(err)
		}
	}
}

// A latest result too big for the window alone is cut in the middle
// rather than the question refused.
func TestShortenLatestResult(t *testing.T) {
	msgs := []Message{
		{Role: "user", Content: "What is in the log?"},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "1", Name: "read_file", Arguments: `{"path":"log"}`}}},
		{Role: "tool", Name: "read_file", ToolCallID: "1", Content: strings.Repeat("log line\n", 2000)},
	}
	in := &Input{Msgs: msgs, Current: 0, Window: 2048, Reserve: 256, Ratio: 4, Shares: DefaultShares}
	r, err := Fit(context.Background(), in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Chars > in.Budget() || r.Marks[2] != MarkShortened || r.Msgs[0].Content != msgs[0].Content {
		t.Fatalf("chars %d budget %d marks %q", r.Chars, in.Budget(), r.Marks)
	}
}

// TestFitDropsOldImages: an image counts ImageChars; when the prompt does
// not fit, the images of the oldest turns go first, the user's words about
// them stay with a line saying so, the action is recorded, and the
// current question's image is kept.
func TestFitDropsOldImages(t *testing.T) {
	img := func() []Part { return []Part{{Kind: PartImage, Data: "iVBORw0KGgo=", MediaType: "image/png"}} }
	msgs := []Message{
		{Role: "system", Content: "You see pictures."},
		{Role: "user", Content: "What is in this one?", Parts: img()},
		{Role: "assistant", Content: "A cat."},
		{Role: "user", Content: "And this one?", Parts: img()},
		{Role: "assistant", Content: "A dog."},
		{Role: "user", Content: "And this last one?", Parts: img()},
	}
	if got, want := Chars(msgs[1:2]), MessageOverhead+len("What is in this one?")+ImageChars; got != want {
		t.Fatalf("Chars(a question with an image) = %d, want %d", got, want)
	}
	tests := []struct {
		name    string
		window  int // tokens
		dropped []int
	}{
		{"everything fits", 4096, nil},
		{"the oldest image goes", 2200, []int{1}},
		{"both old images go", 1500, []int{1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input(msgs, tt.window)
			res, err := Fit(context.Background(), in, nil)
			if err != nil {
				t.Fatal(err)
			}
			var acts []Action
			for _, a := range res.Actions {
				if a.Action == ActImagesDropped {
					acts = append(acts, a)
				}
			}
			if len(acts) != len(tt.dropped) {
				t.Fatalf("actions %+v, want images dropped from turns %v", res.Actions, tt.dropped)
			}
			for i, turn := range tt.dropped {
				if a := acts[i]; a.FromTurn != turn || a.ToTurn != turn || a.Detail != "1 image left out" {
					t.Errorf("action %+v, want turn %d, 1 image", a, turn)
				}
			}
			images := 0
			for _, m := range res.Msgs {
				images += len(m.Parts)
				if m.Role == "user" && len(m.Parts) == 0 && !strings.Contains(m.Content, "[1 image of this message not shown: they did not fit the model's context window.]") {
					t.Errorf("message %q lost its image without a word", m.Content)
				}
			}
			if images != 3-len(tt.dropped) {
				t.Errorf("%d images kept, want %d", images, 3-len(tt.dropped))
			}
			if last := res.Msgs[len(res.Msgs)-1]; len(last.Parts) != 1 {
				t.Errorf("the current question's image was dropped: %+v", last)
			}
			if len(msgs[1].Parts) != 1 || msgs[1].Content != "What is in this one?" {
				t.Errorf("Fit changed its input: %+v", msgs[1])
			}
		})
	}
}

// TestSummaryKeysSeeImages: two histories that differ only by an image
// are two conversations for the summary cache.
func TestSummaryKeysSeeImages(t *testing.T) {
	hash := func(parts []Part) uint64 {
		f := newFitting(input([]Message{{Role: "user", Content: "look", Parts: parts}, {Role: "assistant", Content: "ok"}, {Role: "user", Content: "now?"}}, 4096))
		return f.prefixHashes(len(f.turns))[1]
	}
	a := hash([]Part{{Kind: PartImage, Data: "AAAA", MediaType: "image/png"}})
	b := hash([]Part{{Kind: PartImage, Data: "BBBB", MediaType: "image/png"}})
	if a == b || a == hash(nil) {
		t.Errorf("hashes %x %x %x: an image does not count", a, b, hash(nil))
	}
}
