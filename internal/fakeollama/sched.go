package fakeollama

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"time"
)

// Memory turns on the emulation of Ollama's model scheduler (SetMemory):
// a GPU of Budget bytes holds the loaded models, a model that does not fit
// waits for the ones it must evict to go idle, and a load takes the model's
// size divided by Bandwidth. Every duration is real time: a harness that
// wants seconds of simulated time in milliseconds scales Bandwidth, the
// replies' Delay and KeepAlive alike; a test runs the scheduler under
// testing/synctest.
type Memory struct {
	// Budget is the GPU's memory in bytes ("VRAM").
	Budget int64
	// Bandwidth is how many bytes a second a load reads; 0 loads at once.
	Bandwidth float64
	// Sizes are the models the server has, with their sizes in bytes,
	// which /api/tags lists. A model not listed takes no memory.
	Sizes map[string]int64
	// KeepAlive is how long an idle model stays loaded when a request
	// does not say (OLLAMA_KEEP_ALIVE); 0 means Ollama's default, 5 minutes.
	KeepAlive time.Duration
	// Parallel is how many requests a loaded model serves at once
	// (OLLAMA_NUM_PARALLEL); 0 means Ollama's default, 1. The others wait
	// their turn in the runner, holding it loaded.
	Parallel int
}

// LoadEvent is one model load the scheduler made.
type LoadEvent struct {
	Model string
	// Start is when the load began; Took is how long it lasted.
	Start time.Time
	Took  time.Duration
}

// Running is a loaded model, as /api/ps lists it.
type Running struct {
	Model string
	Size  int64
	// ExpiresAt is when an idle model unloads; while a request uses it,
	// now plus its keep-alive, as Ollama's PsHandler reports.
	ExpiresAt time.Time
}

// errSchedClosed is returned to requests still waiting when the server
// closes.
var errSchedClosed = errors.New("fakeollama: scheduler closed")

// sched is Ollama v0.17.4's scheduler (server/sched.go), reduced to what
// decides when models load and unload: one pending request is placed at a
// time, in arrival order (processPending: "Block other requests until we
// get this pending request running"), so a request for a loaded model
// waits behind one that waits for an eviction; a model that fits beside
// the loaded ones loads at once, the first model loads whatever its size;
// otherwise one runner is chosen for eviction (findRunnerToUnload), its
// keep-alive set to 0 so that it unloads as soon as its last request ends,
// and the request is placed again after the unload.
type sched struct {
	cfg     Memory
	pending chan *placement
	quit    chan struct{}
	done    chan struct{}

	mu     sync.Mutex
	loaded map[string]*runner
	loads  []LoadEvent
	// unloaded wakes the placing loop after an unload (Ollama's
	// unloadedCh); buffered so that an unload never waits for it.
	unloaded chan struct{}
}

// runner is one loaded (or loading) model (Ollama's runnerRef).
type runner struct {
	model string
	size  int64
	// refs counts the requests that hold the runner, the loading one from
	// the start: Ollama holds refMu through the load, so nothing can take
	// or evict a loading runner before its request does.
	refs int
	// session is the keep-alive; math.MaxInt64 for a negative keep_alive
	// (api.Duration's UnmarshalJSON), 0 to unload as soon as idle.
	session   time.Duration
	expiresAt time.Time
	timer     *time.Timer
	ready     chan struct{} // closed once loaded
	// busy counts the requests generating; waiters are the others, in
	// the order they were placed, each woken by closing its channel.
	busy    int
	waiters []chan struct{}
}

// placement is a request waiting for its runner.
type placement struct {
	ctx   context.Context
	model string
	keep  *time.Duration
	got   chan *runner // buffered 1
	// turn is closed when the request may generate; set before got is
	// sent.
	turn chan struct{}
}

func newSched(cfg Memory) *sched {
	if cfg.KeepAlive == 0 {
		cfg.KeepAlive = 5 * time.Minute
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 1
	}
	s := &sched{
		cfg:      cfg,
		pending:  make(chan *placement, 512), // OLLAMA_MAX_QUEUE's default
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
		loaded:   map[string]*runner{},
		unloaded: make(chan struct{}, 512),
	}
	go s.run() // exits when close is called
	return s
}

// close stops the placing loop and waits for it.
func (s *sched) close() {
	close(s.quit)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.loaded {
		if r.timer != nil {
			r.timer.Stop()
		}
	}
}

// keepAlive reads a request's keep_alive as Ollama's api.Duration does: a
// negative value keeps the model loaded for good.
func keepAlive(d time.Duration) time.Duration {
	if d < 0 {
		return time.Duration(math.MaxInt64)
	}
	return d
}

// acquire waits for model's runner, loading it (and evicting others) as
// Ollama would, and takes one of its generation slots. It returns how long
// it waited for the runner, which Ollama reports as load_duration (routes.go:
// checkpointLoaded minus checkpointStart, the queue included), and the
// function that gives the runner back once the answer is written.
func (s *sched) acquire(ctx context.Context, model string, keep *time.Duration) (load time.Duration, release func(), err error) {
	start := time.Now()
	p := &placement{ctx: ctx, model: model, keep: keep, got: make(chan *runner, 1)}
	select {
	case s.pending <- p:
	case <-ctx.Done():
		return 0, nil, ctx.Err()
	case <-s.quit:
		return 0, nil, errSchedClosed
	}
	var r *runner
	select {
	case r = <-p.got:
	case <-ctx.Done():
		// The loop may still hand a runner over: take it back in the
		// background (exits once the loop has answered or closed).
		go func() {
			select {
			case r := <-p.got:
				s.leave(r, p.turn)
			case <-s.quit:
			}
		}()
		return 0, nil, ctx.Err()
	case <-s.quit:
		return 0, nil, errSchedClosed
	}
	select {
	case <-r.ready:
	case <-ctx.Done():
		s.leave(r, p.turn)
		return 0, nil, ctx.Err()
	case <-s.quit:
		return 0, nil, errSchedClosed
	}
	load = time.Since(start)
	// The runner serves Parallel requests at once; the others wait in it
	// in turn (llm/server.go Completion's semaphore), after load_duration
	// was taken, still holding the runner.
	select {
	case <-p.turn:
	case <-ctx.Done():
		s.leave(r, p.turn)
		return 0, nil, ctx.Err()
	case <-s.quit:
		return 0, nil, errSchedClosed
	}
	var once sync.Once
	return load, func() { once.Do(func() { s.leave(r, p.turn) }) }, nil
}

// preload is the empty /api/generate: the runner is acquired and given
// back at once, which loads the model and sets its keep-alive. With a
// keep_alive of 0 it unloads the model instead (routes.go expireRunner).
func (s *sched) preload(ctx context.Context, model string, keep *time.Duration) (time.Duration, error) {
	if keep != nil && *keep == 0 {
		s.mu.Lock()
		if r := s.loaded[model]; r != nil {
			r.session = 0
			if r.refs == 0 {
				s.unloadLocked(r)
			}
		}
		s.mu.Unlock()
		return 0, nil
	}
	load, release, err := s.acquire(ctx, model, keep)
	if err != nil {
		return 0, err
	}
	release()
	return load, nil
}

func (s *sched) run() {
	defer close(s.done)
	for {
		select {
		case p := <-s.pending:
			s.place(p)
		case <-s.unloaded:
			// An unload with nothing pending is ignored, as in Ollama.
		case <-s.quit:
			return
		}
	}
}

// place gives p its runner, loading and evicting as needed (processPending).
func (s *sched) place(p *placement) {
	for {
		if p.ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		if r := s.loaded[p.model]; r != nil {
			if !r.isReady() {
				// useLoadedRunner takes refMu, which the load holds:
				// the whole queue waits for the load to end.
				s.mu.Unlock()
				if !s.await(r.ready) {
					return
				}
				continue
			}
			s.useLocked(r, p)
			s.mu.Unlock()
			return
		}
		size := s.cfg.Sizes[p.model]
		var used int64
		for _, r := range s.loaded {
			used += r.size
		}
		if len(s.loaded) == 0 || used+size <= s.cfg.Budget {
			s.loadLocked(p, size)
			s.mu.Unlock()
			return
		}
		victim, loading := s.victimLocked()
		if loading != nil {
			s.mu.Unlock()
			if !s.await(loading.ready) {
				return
			}
			continue
		}
		// "resetting model to expire immediately to make room"
		victim.session = 0
		if victim.timer != nil {
			victim.timer.Stop()
			victim.timer = nil
		}
		if victim.refs == 0 {
			s.unloadLocked(victim)
		}
		s.mu.Unlock()
		if !s.await(s.unloaded) {
			return
		}
	}
}

// await waits for c, or reports false once the scheduler closes.
func (s *sched) await(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	case <-s.quit:
		return false
	}
}

func (r *runner) isReady() bool {
	select {
	case <-r.ready:
		return true
	default:
		return false
	}
}

// useLocked hands a loaded runner to p (useLoadedRunner): one more
// reference, no expiry while used, and p's keep_alive, when it sends one,
// replaces the runner's.
func (s *sched) useLocked(r *runner, p *placement) {
	r.refs++
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	r.expiresAt = time.Time{}
	if p.keep != nil {
		r.session = keepAlive(*p.keep)
	}
	p.turn = s.queueLocked(r)
	p.got <- r
}

// loadLocked starts loading p's model; the load takes size ÷ Bandwidth.
func (s *sched) loadLocked(p *placement, size int64) {
	session := s.cfg.KeepAlive
	if p.keep != nil {
		session = keepAlive(*p.keep)
	}
	r := &runner{
		model:   p.model,
		size:    size,
		refs:    1,
		session: session,
		ready:   make(chan struct{}),
	}
	s.loaded[p.model] = r
	var took time.Duration
	if s.cfg.Bandwidth > 0 {
		took = time.Duration(float64(size) / s.cfg.Bandwidth * float64(time.Second))
	}
	s.loads = append(s.loads, LoadEvent{Model: p.model, Start: time.Now(), Took: took})
	p.turn = s.queueLocked(r)
	p.got <- r
	if took <= 0 {
		close(r.ready)
		return
	}
	time.AfterFunc(took, func() { close(r.ready) })
}

// victimLocked is findRunnerToUnload: the runners sorted by keep-alive,
// shortest first (as unsigned, so a kept-for-good model comes last), then
// by name; the first idle one, else the first. Ollama takes each runner's
// refMu in that order to read its references, and a load holds it: met
// before an idle one, a loading runner is returned as loading, to be
// waited for before the choice is made again.
func (s *sched) victimLocked() (victim, loading *runner) {
	rs := make([]*runner, 0, len(s.loaded))
	for _, r := range s.loaded {
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b *runner) int {
		return cmp.Or(cmp.Compare(uint64(a.session), uint64(b.session)), cmp.Compare(a.model, b.model))
	})
	for _, r := range rs {
		if !r.isReady() {
			return nil, r
		}
		if r.refs == 0 {
			return r, nil
		}
	}
	return rs[0], nil
}

// queueLocked queues a request for one of r's generation slots.
func (s *sched) queueLocked(r *runner) chan struct{} {
	c := make(chan struct{})
	r.waiters = append(r.waiters, c)
	s.grantLocked(r)
	return c
}

// grantLocked lets the first waiters generate while r has free slots.
func (s *sched) grantLocked(r *runner) {
	for r.busy < s.cfg.Parallel && len(r.waiters) > 0 {
		close(r.waiters[0])
		r.waiters = r.waiters[1:]
		r.busy++
	}
}

// leave ends a request's use of r: out of the queue, or its slot given to
// the next, then its reference given back.
func (s *sched) leave(r *runner, turn chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.Index(r.waiters, turn); i >= 0 {
		r.waiters = slices.Delete(r.waiters, i, i+1)
	} else {
		r.busy--
		s.grantLocked(r)
	}
	s.releaseLocked(r)
}

// releaseLocked gives a reference back (processCompleted): an idle runner
// with no keep-alive unloads, any other unloads once its keep-alive passes.
func (s *sched) releaseLocked(r *runner) {
	r.refs--
	if r.refs > 0 {
		return
	}
	if r.session <= 0 {
		s.unloadLocked(r)
		return
	}
	if r.timer != nil {
		r.timer.Stop()
	}
	var t *time.Timer
	t = time.AfterFunc(r.session, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if r.timer == t && r.refs == 0 {
			s.unloadLocked(r)
		}
	})
	r.timer = t
	r.expiresAt = time.Now().Add(r.session)
}

// unloadLocked removes an idle runner and wakes the placing loop.
func (s *sched) unloadLocked(r *runner) {
	if s.loaded[r.model] != r {
		return // a duplicate expiry, as Ollama ignores
	}
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	delete(s.loaded, r.model)
	select {
	case s.unloaded <- struct{}{}:
	default:
	}
}

// running lists the loaded models, the longest time left first (PsHandler).
func (s *sched) running() []Running {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	var out []Running
	for _, r := range s.loaded {
		exp := r.expiresAt
		if exp.IsZero() {
			exp = now.Add(r.session)
		}
		out = append(out, Running{Model: r.model, Size: r.size, ExpiresAt: exp})
	}
	slices.SortStableFunc(out, func(a, b Running) int {
		return cmp.Or(cmp.Compare(b.ExpiresAt.Unix(), a.ExpiresAt.Unix()), cmp.Compare(a.Model, b.Model))
	})
	return out
}

// loadEvents returns every load so far.
func (s *sched) loadEvents() []LoadEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.loads)
}
