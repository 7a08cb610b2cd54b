package node

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"chainproxy/config"
)

// memServer is an Ollama server's answers to the load scheduling, in
// memory: what it holds and has, and the early loads asked of it.
type memServer struct {
	mu       sync.Mutex
	resident map[string]int64
	sizes    map[string]int64
	preloads []string
}

// memLoader is one node's backend on a memServer.
type memLoader struct {
	s     *memServer
	model string
}

var _ ModelLoader = memLoader{}

func (l memLoader) Chat(context.Context, *Request, func(Chunk) error) error { return nil }

func (l memLoader) Resident(context.Context) (map[string]int64, error) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	out := map[string]int64{}
	for m, s := range l.s.resident {
		out[m] = s
	}
	return out, nil
}

func (l memLoader) Sizes(context.Context) (map[string]int64, error) { return l.s.sizes, nil }

func (l memLoader) Preload(context.Context, *time.Duration, int) error {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	l.s.preloads = append(l.s.preloads, l.model)
	return nil
}

// buildSet builds nodes as the proxy does (Build, HostsBackend included),
// each host of a node over the backend backends holds under its name.
func buildSet(t *testing.T, nodes []config.Node, backends map[string]Backend) *Set {
	t.Helper()
	byName := func(n config.Node) Backend {
		b, ok := backends[n.Name]
		if !ok {
			t.Fatalf("no backend for node %s", n.Name)
		}
		return b
	}
	set, err := Build(&config.Config{Nodes: nodes}, Deps{Providers: map[string]Provider{config.ProviderOllama: byName, config.ProviderOpenAI: byName}})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// loadsAdmission is an admission over nodes A (model a) and B (model b) on
// one Ollama server, one call at a time each, scheduled with wait; the
// server holds a, and each model fills its memory alone.
func loadsAdmission(t *testing.T, wait time.Duration) *Admission {
	t.Helper()
	srv := &memServer{resident: map[string]int64{"a:latest": 10}, sizes: map[string]int64{"a:latest": 10, "b:latest": 10}}
	nodes := []config.Node{
		{Name: "A", Provider: config.ProviderOllama, BaseURL: "http://gpu:11434", Model: "a", MaxQueue: 8},
		{Name: "B", Provider: config.ProviderOllama, BaseURL: "http://gpu:11434/", Model: "b", MaxQueue: 8},
	}
	a := NewAdmission(nodes)
	a.ScheduleLoads(nodes, buildSet(t, nodes, map[string]Backend{"A": memLoader{srv, "a:latest"}, "B": memLoader{srv, "b:latest"}}), wait)
	return a
}

// Calls for the loaded model go before one that would evict it, until that
// one has waited admission.max_reorder_wait; then it goes as soon as the
// calls in flight end, ahead of the later calls for the loaded model. Off
// (a wait of 0), calls go in arrival order, each node on its own.
func TestLoadSchedulingGroupsWithinTheBound(t *testing.T) {
	tests := []struct {
		name string
		wait time.Duration
		want []string // the order calls were granted in
	}{
		// A1 runs 0–5s; B1 and A2 arrive at 1s, A3 at 2s. A2 goes at
		// 5s (a is loaded); at 10s B1 has waited 9s: A3 goes too.
		{"bound not reached", 20 * time.Second, []string{"A1", "A2", "A3", "B1"}},
		// At 10s, B1 has waited 9s ≥ 8s: it goes before A3.
		{"bound reached", 8 * time.Second, []string{"A1", "A2", "B1", "A3"}},
		// B1 goes at once, in arrival order, as before.
		{"off", 0, []string{"A1", "B1", "A2", "A3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := loadsAdmission(t, tt.wait)
				var mu sync.Mutex
				var order []string
				call := func(name, node string, hold time.Duration) {
					rel, err := a.Acquire(t.Context(), node, false)
					if err != nil {
						t.Errorf("%s: %v", name, err)
						return
					}
					mu.Lock()
					order = append(order, name)
					mu.Unlock()
					time.Sleep(hold)
					rel()
				}
				var wg sync.WaitGroup
				wg.Go(func() { call("A1", "A", 5*time.Second) })
				synctest.Wait()
				time.Sleep(time.Second)
				wg.Go(func() { call("B1", "B", 5*time.Second) })
				synctest.Wait()
				wg.Go(func() { call("A2", "A", 5*time.Second) })
				synctest.Wait()
				time.Sleep(time.Second)
				wg.Go(func() { call("A3", "A", 5*time.Second) })
				wg.Wait()
				if got := order; !slices.Equal(got, tt.want) {
					t.Errorf("granted %q, want %q", got, tt.want)
				}
			})
		})
	}
}

// A later stage's model is loaded early when it fits beside the models in
// use, the first stage's and the later stages' the server holds, once the
// server was seen holding as much; not before, and not one already held.
func TestWarmLoadsWhatFits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &memServer{resident: map[string]int64{}, sizes: map[string]int64{"o:latest": 1, "m1:latest": 10, "m2:latest": 6}}
		nodes := []config.Node{
			{Name: "OL1", Provider: config.ProviderOllama, BaseURL: "http://gpu:11434", Model: "o", MaxQueue: 8, KeepLoaded: true},
			{Name: "M1", Provider: config.ProviderOllama, BaseURL: "http://gpu:11434", Model: "m1", MaxQueue: 8},
			{Name: "M2", Provider: config.ProviderOllama, BaseURL: "http://gpu:11434", Model: "m2", MaxQueue: 8},
		}
		a := NewAdmission(nodes)
		set := buildSet(t, nodes, map[string]Backend{"OL1": memLoader{srv, "o:latest"}, "M1": memLoader{srv, "m1:latest"}, "M2": memLoader{srv, "m2:latest"}})
		a.ScheduleLoads(nodes, set, time.Minute)
		later := []Preload{{Node: "M1"}, {Node: "M2"}}
		preloads := func() []string {
			srv.mu.Lock()
			defer srv.mu.Unlock()
			return append([]string(nil), srv.preloads...)
		}

		// Cold: nothing was seen loaded, so nothing is known to fit.
		a.Warm("OL1", later)
		synctest.Wait()
		if got := preloads(); len(got) != 0 {
			t.Fatalf("cold: preloaded %q, want none", got)
		}

		// The server is seen holding o and m1 together (12). m2 would
		// fit beside o alone, but m1, idle, is the chain's next model:
		// loading m2 would evict it for M1's call to load again.
		srv.mu.Lock()
		srv.resident = map[string]int64{"o:latest": 1, "m1:latest": 11}
		srv.mu.Unlock()
		time.Sleep(residentRead)
		a.Warm("OL1", later)
		synctest.Wait()
		if got := preloads(); len(got) != 0 {
			t.Errorf("holding the next stage's model: preloaded %q, want none", got)
		}

		// It holds o and m2: m1 fits beside o, m2 being idle.
		srv.mu.Lock()
		srv.resident = map[string]int64{"o:latest": 1, "m2:latest": 6}
		srv.mu.Unlock()
		time.Sleep(residentRead)
		a.Warm("OL1", later)
		synctest.Wait()
		if got, want := preloads(), []string{"m1:latest"}; !slices.Equal(got, want) {
			t.Errorf("preloaded %q, want %q", got, want)
		}

		// A call uses m2: m1 would evict it, and is not loaded.
		rel, err := a.Acquire(t.Context(), "M2", false)
		if err != nil {
			t.Fatal(err)
		}
		defer rel()
		time.Sleep(residentRead)
		a.Warm("OL1", []Preload{{Node: "M1"}})
		synctest.Wait()
		if got, want := preloads(), []string{"m1:latest"}; !slices.Equal(got, want) {
			t.Errorf("with m2 in use: preloaded %q, want %q", got, want)
		}
	})
}

// plainBackend is a backend that cannot tell what its server holds (an
// OpenAI-compatible one).
type plainBackend struct{}

func (plainBackend) Chat(context.Context, *Request, func(Chunk) error) error { return nil }

// Only the nodes of an Ollama server that another node shares, of one
// host each, are scheduled: a single node, OpenAI-compatible nodes, nodes
// of several hosts and every node with the scheduling off keep the plain
// queue.
func TestScheduleLoadsOnlySharedOllama(t *testing.T) {
	srv := &memServer{}
	ollama := func(name, url string) config.Node {
		return config.Node{Name: name, Provider: config.ProviderOllama, BaseURL: url, Model: name, MaxQueue: 8}
	}
	tests := []struct {
		name      string
		nodes     []config.Node
		loaders   bool // the backends are ModelLoaders
		wait      time.Duration
		scheduled []string
	}{
		{"shared ollama server", []config.Node{ollama("A", "http://gpu:11434"), ollama("B", "http://GPU:11434/"), ollama("C", "http://other:11434")}, true, time.Minute, []string{"A", "B"}},
		{"one node", []config.Node{ollama("A", "http://gpu:11434")}, true, time.Minute, nil},
		{"openai-compatible", []config.Node{
			{Name: "A", Provider: config.ProviderOpenAI, BaseURL: "http://gpu:8000/v1", Model: "a"},
			{Name: "B", Provider: config.ProviderOpenAI, BaseURL: "http://gpu:8000/v1", Model: "b"},
		}, false, time.Minute, nil},
		{"several hosts", []config.Node{
			{Name: "A", Provider: config.ProviderOllama, BaseURLs: []string{"http://gpu:11434", "http://gpu2:11434"}, Model: "a"},
			ollama("B", "http://gpu:11434"),
		}, true, time.Minute, nil},
		{"off", []config.Node{ollama("A", "http://gpu:11434"), ollama("B", "http://gpu:11434")}, true, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			backends := map[string]Backend{}
			for _, n := range tt.nodes {
				backends[n.Name] = plainBackend{}
				if tt.loaders {
					backends[n.Name] = memLoader{srv, n.Model}
				}
			}
			a := NewAdmission(tt.nodes)
			a.ScheduleLoads(tt.nodes, buildSet(t, tt.nodes, backends), tt.wait)
			var got []string
			for _, n := range tt.nodes {
				if a.gates[n.Name].runner != nil {
					got = append(got, n.Name)
				}
			}
			if !slices.Equal(got, tt.scheduled) {
				t.Errorf("scheduled nodes = %q, want %q", got, tt.scheduled)
			}
		})
	}
}

// A call that waits for another model and is cancelled leaves the queue at
// once (Queued drops, Acquire returns the context's error, the bubble ends
// with no goroutine left), and once overdue it no longer holds back the
// calls for the loaded model: A2 goes as soon as A1 ends, not after B1.
func TestLoadSchedulingCancelledWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := loadsAdmission(t, 2*time.Second)
		rel1, err := a.Acquire(t.Context(), "A", false)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		var b1 error
		var wg sync.WaitGroup
		wg.Go(func() {
			rel, err := a.Acquire(ctx, "B", false)
			if err == nil {
				rel()
			}
			b1 = err
		})
		var a2 time.Time
		wg.Go(func() {
			rel, err := a.Acquire(t.Context(), "A", false)
			if err != nil {
				t.Errorf("A2: %v", err)
				return
			}
			a2 = time.Now()
			rel()
		})
		synctest.Wait()
		if got := a.Queued("B"); got != 1 {
			t.Fatalf("B queued = %d, want 1", got)
		}
		time.Sleep(5 * time.Second) // B1 is overdue: it goes next
		cancel()
		synctest.Wait()
		if got := a.Queued("B"); got != 0 {
			t.Errorf("B queued after its cancel = %d, want 0", got)
		}
		if b1 != context.Canceled {
			t.Errorf("B1's Acquire = %v, want %v", b1, context.Canceled)
		}
		ended := time.Now()
		rel1()
		wg.Wait()
		if got := a2.Sub(ended); got != 0 {
			t.Errorf("A2 went %v after A1 ended, want at once", got)
		}
	})
}
