package fakeollama

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The design's GPU (issue 44): 24 GB at 2 GB/s; A is the 30B model (18 GB,
// a 9 s load), B the 16B (9 GB, 4.5 s), S qwen3:1.7b (1.4 GB, 0.7 s).
var gpu = Memory{
	Budget:    24e9,
	Bandwidth: 2e9,
	Sizes:     map[string]int64{"A": 18e9, "B": 9e9, "S": 1.4e9},
}

func dur(d time.Duration) *time.Duration { return &d }

// schedCall is one request of a scheduler table test: it arrives at at,
// holds its runner for hold once it generates, with keep as its keep_alive
// (nil: none sent). A preload acquires and gives back at once, as the empty
// /api/generate does.
type schedCall struct {
	model   string
	at      time.Duration
	hold    time.Duration
	keep    *time.Duration
	preload bool
}

// schedGot is what a call saw: when it started generating and the
// load_duration Ollama would report.
type schedGot struct {
	start, load time.Duration
}

func TestSchedulerTable(t *testing.T) {
	forever := dur(-1)
	tests := []struct {
		name  string
		mem   Memory
		calls []schedCall
		// check is when, after the start, the loaded models are read.
		check      time.Duration
		want       []schedGot
		wantLoads  []string
		wantLoaded []string
	}{
		{
			name:       "a model that fits loads beside the loaded one",
			mem:        gpu,
			calls:      []schedCall{{model: "S", hold: time.Second}, {model: "A", at: time.Millisecond, hold: time.Second}},
			check:      time.Minute,
			want:       []schedGot{{700 * time.Millisecond, 700 * time.Millisecond}, {9001 * time.Millisecond, 9 * time.Second}},
			wantLoads:  []string{"S", "A"},
			wantLoaded: []string{"A", "S"},
		},
		{
			// A generates from 9 s to 19 s; B waits for it, evicts it,
			// then loads for 4.5 s: its load_duration counts the wait.
			name:       "a model that does not fit waits until the one it evicts is idle",
			mem:        gpu,
			calls:      []schedCall{{model: "A", hold: 10 * time.Second}, {model: "B", at: time.Second, hold: time.Second}},
			check:      time.Minute,
			want:       []schedGot{{9 * time.Second, 9 * time.Second}, {23500 * time.Millisecond, 22500 * time.Millisecond}},
			wantLoads:  []string{"A", "B"},
			wantLoaded: []string{"B"},
		},
		{
			// Ollama places one request at a time, in order: the second
			// call for A waits behind B, which evicts A, and then evicts
			// B in turn. Two chains at two models thrash this way.
			name: "a request for the loaded model waits behind one that evicts it",
			mem:  gpu,
			calls: []schedCall{
				{model: "A", hold: 10 * time.Second},
				{model: "B", at: time.Second, hold: time.Second},
				{model: "A", at: 2 * time.Second, hold: time.Second},
			},
			check: 2 * time.Minute,
			want: []schedGot{
				{9 * time.Second, 9 * time.Second},
				{23500 * time.Millisecond, 22500 * time.Millisecond},
				{33500 * time.Millisecond, 31500 * time.Millisecond},
			},
			wantLoads:  []string{"A", "B", "A"},
			wantLoaded: []string{"A"},
		},
		{
			// The second call for A waits for A's load in the queue, as
			// Ollama's useLoadedRunner waits for the runner's lock, and S,
			// which fits, waits behind it.
			name: "a request for a loading model holds the queue until it is loaded",
			mem:  gpu,
			calls: []schedCall{
				{model: "A", hold: time.Second},
				{model: "A", at: time.Millisecond, hold: time.Second},
				{model: "S", at: 2 * time.Millisecond, hold: time.Second},
			},
			check: time.Minute,
			want: []schedGot{
				{9 * time.Second, 9 * time.Second},
				{10 * time.Second, 8999 * time.Millisecond},
				{9700 * time.Millisecond, 9698 * time.Millisecond},
			},
			wantLoads:  []string{"A", "S"},
			wantLoaded: []string{"A", "S"},
		},
		{
			// findRunnerToUnload sorts by keep-alive as unsigned: S, kept
			// for good, comes last, so the idle B goes.
			name: "the idle model with the shortest keep-alive is evicted",
			mem:  gpu,
			calls: []schedCall{
				{model: "S", hold: time.Second, keep: forever},
				{model: "B", at: time.Millisecond, hold: time.Second},
				{model: "A", at: 10 * time.Second, hold: time.Second},
			},
			check: time.Minute,
			want: []schedGot{
				{700 * time.Millisecond, 700 * time.Millisecond},
				{4501 * time.Millisecond, 4500 * time.Millisecond},
				{19 * time.Second, 9 * time.Second},
			},
			wantLoads:  []string{"S", "B", "A"},
			wantLoaded: []string{"A", "S"},
		},
		{
			name:       "an idle model unloads once the default keep-alive passes",
			mem:        gpu,
			calls:      []schedCall{{model: "B", hold: time.Second}},
			check:      4500*time.Millisecond + time.Second + 5*time.Minute + time.Millisecond,
			want:       []schedGot{{4500 * time.Millisecond, 4500 * time.Millisecond}},
			wantLoads:  []string{"B"},
			wantLoaded: nil,
		},
		{
			name:       "an idle model stays until its keep-alive passes",
			mem:        gpu,
			calls:      []schedCall{{model: "B", hold: time.Second}},
			check:      4500*time.Millisecond + time.Second + 5*time.Minute - time.Millisecond,
			want:       []schedGot{{4500 * time.Millisecond, 4500 * time.Millisecond}},
			wantLoads:  []string{"B"},
			wantLoaded: []string{"B"},
		},
		{
			name:       "keep_alive 0 unloads as soon as the request ends",
			mem:        gpu,
			calls:      []schedCall{{model: "B", hold: time.Second, keep: dur(0)}},
			check:      5501 * time.Millisecond,
			want:       []schedGot{{4500 * time.Millisecond, 4500 * time.Millisecond}},
			wantLoads:  []string{"B"},
			wantLoaded: nil,
		},
		{
			name:       "keep_alive -1 keeps the model loaded",
			mem:        gpu,
			calls:      []schedCall{{model: "B", hold: time.Second, keep: forever}},
			check:      24 * time.Hour,
			want:       []schedGot{{4500 * time.Millisecond, 4500 * time.Millisecond}},
			wantLoads:  []string{"B"},
			wantLoaded: []string{"B"},
		},
		{
			// OLLAMA_NUM_PARALLEL's default, 1: the second request holds
			// the runner and waits in it; that wait is not load_duration.
			name: "a loaded model serves one request at a time",
			mem:  gpu,
			calls: []schedCall{
				{model: "B", hold: 2 * time.Second},
				{model: "B", at: time.Millisecond, hold: 2 * time.Second},
			},
			check:      time.Minute,
			want:       []schedGot{{4500 * time.Millisecond, 4500 * time.Millisecond}, {6500 * time.Millisecond, 4499 * time.Millisecond}},
			wantLoads:  []string{"B"},
			wantLoaded: []string{"B"},
		},
		{
			name: "an empty generate preloads the model for a later call",
			mem:  gpu,
			calls: []schedCall{
				{model: "B", preload: true, keep: forever},
				{model: "B", at: 10 * time.Second, hold: time.Second},
			},
			check:      time.Minute,
			want:       []schedGot{{4500 * time.Millisecond, 4500 * time.Millisecond}, {10 * time.Second, 0}},
			wantLoads:  []string{"B"},
			wantLoaded: []string{"B"},
		},
		{
			name: "an empty generate with keep_alive 0 unloads an idle model",
			mem:  gpu,
			calls: []schedCall{
				{model: "B", hold: time.Second},
				{model: "B", at: 10 * time.Second, preload: true, keep: dur(0)},
			},
			check:      11 * time.Second,
			want:       []schedGot{{4500 * time.Millisecond, 4500 * time.Millisecond}, {10 * time.Second, 0}},
			wantLoads:  []string{"B"},
			wantLoaded: nil,
		},
		{
			name:       "a model larger than the budget still loads when nothing else is loaded",
			mem:        Memory{Budget: 8e9, Bandwidth: 2e9, Sizes: gpu.Sizes},
			calls:      []schedCall{{model: "B", hold: time.Second}},
			check:      time.Minute,
			want:       []schedGot{{4500 * time.Millisecond, 4500 * time.Millisecond}},
			wantLoads:  []string{"B"},
			wantLoaded: []string{"B"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newSched(tt.mem)
				defer s.close()
				begin := time.Now()
				got := make([]schedGot, len(tt.calls))
				errs := make([]error, len(tt.calls))
				var wg sync.WaitGroup
				for i, c := range tt.calls {
					wg.Go(func() { // exits once its call is done
						time.Sleep(c.at)
						if c.preload {
							load, err := s.preload(context.Background(), c.model, c.keep)
							got[i], errs[i] = schedGot{time.Since(begin), load}, err
							return
						}
						load, release, err := s.acquire(context.Background(), c.model, c.keep)
						if err != nil {
							errs[i] = err
							return
						}
						got[i] = schedGot{time.Since(begin), load}
						time.Sleep(c.hold)
						release()
					})
				}
				wg.Wait()
				time.Sleep(tt.check - time.Since(begin))
				for i, err := range errs {
					if err != nil {
						t.Fatalf("call %d: %v", i, err)
					}
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("calls (start, load_duration) = %v, want %v", got, tt.want)
				}
				var loads []string
				for _, e := range s.loadEvents() {
					loads = append(loads, e.Model)
				}
				if !slices.Equal(loads, tt.wantLoads) {
					t.Errorf("loads = %q, want %q", loads, tt.wantLoads)
				}
				var loaded []string
				for _, r := range s.running() {
					loaded = append(loaded, r.Model)
				}
				slices.Sort(loaded)
				if !slices.Equal(loaded, tt.wantLoaded) {
					t.Errorf("loaded at %s = %q, want %q", tt.check, loaded, tt.wantLoaded)
				}
			})
		})
	}
}

// A request whose client goes away while it waits for an eviction gives
// nothing back twice and leaves the model it waited for unloaded.
func TestSchedulerCanceledWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(gpu)
		defer s.close()
		_, releaseA, err := s.acquire(context.Background(), "A", nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, _, err := s.acquire(ctx, "B", nil)
			errc <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-errc; err != context.Canceled {
			t.Fatalf("acquire after cancel = %v, want context.Canceled", err)
		}
		releaseA()
		synctest.Wait()
		for _, r := range s.running() {
			if r.Model == "B" {
				t.Errorf("B loaded for a request that went away")
			}
		}
	})
}
