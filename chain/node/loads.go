package node

import (
	"container/list"
	"context"
	"strings"
	"sync"
	"time"

	"chainproxy/config"
)

// ModelLoader is the optional capability of a backend whose server loads
// its models on demand and tells which it holds (Ollama): what the load
// scheduling reads and the early loads it sends. Model names are keyed as
// config.FullModelName spells them.
type ModelLoader interface {
	// Resident lists the models the server holds in memory now, with
	// the memory each takes (Ollama's /api/ps).
	Resident(ctx context.Context) (map[string]int64, error)
	// Sizes lists every model the server has, with its file's size
	// (Ollama's /api/tags).
	Sizes(ctx context.Context) (map[string]int64, error)
	// Preload loads the node's model without a prompt, run with a
	// window of numCtx tokens (0: the server's default) and kept for
	// keepAlive (nil: the server's default).
	Preload(ctx context.Context, keepAlive *time.Duration, numCtx int) error
}

// Preload is a node whose model a chain will call later: what Warm may load
// early, with the keep-alive and window its calls will ask for, so that
// the server does not load it again for them.
type Preload struct {
	Node      string
	KeepAlive *time.Duration
	NumCtx    int
}

// Warmer is the optional capability of an Admitter that loads the models
// of a chain's later stages early (Admission, when it schedules loads).
type Warmer interface {
	// Warm loads, in the background, those of later's models that fit
	// beside the models in use on their servers and first's, the node
	// the chain calls now.
	Warm(first string, later []Preload)
}

var _ Warmer = (*Admission)(nil)

// residentRead is how long what a server holds (/api/ps) is taken as
// known: a call ends or a chain is classified far more often than a
// model loads, and a read costs the server a lookup.
const residentRead = 200 * time.Millisecond

// sizesRead is how long the models' sizes (/api/tags) are taken as known:
// they change only when a model is pulled or removed.
const sizesRead = time.Minute

// loadsTimeout bounds an early load: it is in no request's path, and a
// large model takes minutes to load from a slow disk (Ollama's own bound,
// OLLAMA_LOAD_TIMEOUT, is 5 minutes). A read of what a server holds is
// bounded by ProbeWait: a call that would evict a model waits for it.
const loadsTimeout = 5 * time.Minute

// runnerQueue schedules the calls of the nodes that share one Ollama
// server (config's runners, one host). Ollama places one request at a time
// in arrival order, and a request for a model that does not fit beside the
// loaded ones waits for them to go idle and evicts them, holding every
// later request behind it: two chains at different stages reload each
// other's model at every call. The queue keeps, instead, the calls for
// the models the server holds going first and sends a call that needs
// another model once the calls for those are done, or once it has waited
// wait; and it loads the later stages' models early when they fit (Warm).
//
// What the server holds is the queue's own account (resident, kept),
// corrected by the server's /api/ps read when no call is in flight, when
// the account cannot be ahead of the server. Ollama does not tell its GPU's
// memory: the budget is the most the server was seen holding at once, so
// that a model fits beside others only once the server has held as much.
//
// Its fields after loader are guarded by Admission.mu.
type runnerQueue struct {
	wait   time.Duration
	loader ModelLoader // of one of its nodes: every node sees one server

	waiters *list.List // of *waiter, in arrival order
	// inFlight counts the calls (and early loads) sent, by model.
	inFlight map[string]int
	// resident are the models, not kept ones, believed loaded: sent
	// since the last read, or listed by it.
	resident map[string]bool
	// kept are the models of keep_loaded nodes, held is whether the
	// server holds each.
	kept map[string]bool
	held map[string]bool
	// size is each model's memory: /api/ps's when it was seen loaded,
	// else its file's.
	size   map[string]int64
	budget int64
	// reading is set while a read is in flight; readAt is when the last
	// one ended, sizesAt when the sizes were last read; sent counts the
	// calls sent, so that a read taken while one was sent is not taken
	// as the whole truth.
	reading         bool
	readAt, sizesAt time.Time
	sent            uint64
}

// ScheduleLoads makes a schedule the calls around model loads on each
// Ollama server that two or more of nodes share (one base_url each,
// backends from set that are ModelLoaders), letting a call wait up to
// wait beyond its arrival order (admission.max_reorder_wait). Nodes alone
// on their server, of several hosts or of another protocol keep the plain
// queue. It is called once, before the first call; a wait of 0 leaves
// every queue plain.
func (a *Admission) ScheduleLoads(nodes []config.Node, set *Set, wait time.Duration) {
	if wait <= 0 {
		return
	}
	byURL := map[string][]config.Node{}
	var order []string
	for _, n := range nodes {
		if n.Provider != config.ProviderOllama || len(n.Hosts()) != 1 || a.gates[n.Name] == nil {
			continue
		}
		b, _ := set.Backend(n.Name)
		if _, ok := b.(ModelLoader); !ok {
			continue
		}
		u := strings.ToLower(strings.TrimRight(n.Hosts()[0], "/"))
		if byURL[u] == nil {
			order = append(order, u)
		}
		byURL[u] = append(byURL[u], n)
	}
	for _, u := range order {
		ns := byURL[u]
		if len(ns) < 2 {
			continue
		}
		b, _ := set.Backend(ns[0].Name)
		r := &runnerQueue{wait: wait, loader: b.(ModelLoader), waiters: list.New(),
			inFlight: map[string]int{}, resident: map[string]bool{}, kept: map[string]bool{}, held: map[string]bool{}, size: map[string]int64{}}
		for _, n := range ns {
			g := a.gates[n.Name]
			b, _ := set.Backend(n.Name)
			g.runner, g.model, g.loader = r, config.FullModelName(n.Model), b.(ModelLoader)
			if n.KeepLoaded {
				r.kept[g.model] = true
			}
		}
	}
}

// acquireOn is Acquire for a node whose server's calls are scheduled
// around loads.
func (a *Admission) acquireOn(ctx context.Context, g *gate, node string, batch bool) (func(), error) {
	r := g.runner
	start := time.Now()
	a.mu.Lock()
	if r.waiters.Len() == 0 && g.free() && r.allowed(g.model, false, nil) {
		r.grant(g)
		a.mu.Unlock()
		return a.runnerReleaser(g), nil
	}
	if g.queued >= g.maxQueue {
		q := g.queued
		a.mu.Unlock()
		return nil, &QueueFullError{Node: node, Queued: q, RetryAfter: time.Second}
	}
	w := &waiter{ready: make(chan struct{}), g: g, batch: batch, at: start}
	w.elem = r.waiters.PushBack(w)
	g.queued++
	a.mu.Unlock()

	select {
	case <-w.ready:
		if a.OnWait != nil {
			a.OnWait(node, batch, time.Since(start))
		}
		return a.runnerReleaser(g), nil
	case <-ctx.Done():
		a.mu.Lock()
		if w.granted {
			// The slot was handed over just as ctx ended: pass it on.
			a.mu.Unlock()
			a.runnerReleaser(g)()
		} else {
			r.waiters.Remove(w.elem)
			g.queued--
			// It may have held back calls for the loaded models.
			r.dispatch(time.Now())
			a.mu.Unlock()
		}
		return nil, ctx.Err()
	}
}

// free reports whether the node may take one more call.
func (g *gate) free() bool { return g.limit == 0 || g.active < g.limit }

// runnerReleaser returns a once-only release of a call sent by acquireOn:
// its slot and its model's count given back, the waiters that may go now
// sent, and what the server holds read again once it is idle.
func (a *Admission) runnerReleaser(g *gate) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			r := g.runner
			a.mu.Lock()
			g.active--
			r.inFlight[g.model]--
			r.dispatch(time.Now())
			read := r.staleLocked(time.Now())
			a.mu.Unlock()
			if read {
				go a.read(r) // exits when the read ends, within ProbeWait
			}
		})
	}
}

// grant sends a call of g's node: a slot of the node, one more call of its
// model, which the server will hold.
func (r *runnerQueue) grant(g *gate) {
	g.active++
	r.inFlight[g.model]++
	r.sent++
	if r.kept[g.model] {
		r.held[g.model] = true
		return
	}
	if !r.resident[g.model] && !r.fits(g.model, nil) {
		// It evicts the others: they are no longer there for the calls
		// that wait for them.
		clear(r.resident)
	}
	r.resident[g.model] = true
}

// busy counts the calls in flight for models that are not kept.
func (r *runnerQueue) busy() int {
	n := 0
	for m, c := range r.inFlight {
		if !r.kept[m] {
			n += c
		}
	}
	return n
}

// fits reports whether model fits within the budget beside the models the
// server holds, or, for an early load (want set), beside those of them a
// call uses or waits for and the ones in want, which a chain is about to
// use, the others being evicted at need. A model fits beside none; one
// whose size is not known yet fits beside no other.
func (r *runnerQueue) fits(model string, want map[string]bool) bool {
	early := want != nil
	var total int64
	others, unknown := 0, false
	add := func(m string) {
		total += r.size[m]
		unknown = unknown || r.size[m] == 0
	}
	add(model)
	for m := range r.resident {
		if m == model || want[m] || early && r.inFlight[m] == 0 && !r.awaited(m) {
			continue
		}
		add(m)
		others++
	}
	for m := range r.kept {
		if (r.held[m] || want[m]) && m != model {
			add(m)
			others++
		}
	}
	for m := range want {
		if m != model && !r.kept[m] {
			add(m)
			others++
		}
	}
	return others == 0 || !unknown && total <= r.budget
}

// awaited reports whether a call waits for model.
func (r *runnerQueue) awaited(model string) bool {
	for el := r.waiters.Front(); el != nil; el = el.Next() {
		if el.Value.(*waiter).g.model == model {
			return true
		}
	}
	return false
}

// allowed reports whether a call for model may be sent now: a kept model,
// one the server holds or that fits beside them, at once; one that would
// evict others once none of their calls is in flight and, unless it is
// overdue, none waits for them.
func (r *runnerQueue) allowed(model string, overdue bool, skip *waiter) bool {
	if r.kept[model] || r.resident[model] || r.fits(model, nil) {
		return true
	}
	if r.busy() > 0 || r.reading {
		// A read in flight tells whether the model fits: it ends soon.
		return false
	}
	if overdue {
		return true
	}
	for el := r.waiters.Front(); el != nil; el = el.Next() {
		if w := el.Value.(*waiter); w != skip && r.resident[w.g.model] {
			return false
		}
	}
	return true
}

// dispatch sends the waiters that may go, best first: calls for kept
// models; then a call that has waited its wait while another model was
// held, alone (the calls for the held models wait until it is sent); then
// the calls for the held models, those that fit beside them, and last a
// call that evicts them. Within each, interactive before batch, then in
// arrival order, as the plain queue does.
func (r *runnerQueue) dispatch(now time.Time) {
	for {
		w := r.pick(now)
		if w == nil {
			return
		}
		r.waiters.Remove(w.elem)
		w.g.queued--
		r.grant(w.g)
		w.granted = true
		close(w.ready)
	}
}

// pick chooses the next waiter to send, or none.
func (r *runnerQueue) pick(now time.Time) *waiter {
	var found *waiter
	each := func(f func(w *waiter) bool) *waiter {
		for _, batch := range [2]bool{false, true} {
			for el := r.waiters.Front(); el != nil; el = el.Next() {
				if w := el.Value.(*waiter); w.batch == batch && f(w) {
					return w
				}
			}
		}
		return nil
	}
	if found = each(func(w *waiter) bool { return r.kept[w.g.model] && w.g.free() }); found != nil {
		return found
	}
	if due := each(func(w *waiter) bool {
		return now.Sub(w.at) >= r.wait && !r.resident[w.g.model] && !r.fits(w.g.model, nil)
	}); due != nil {
		if due.g.free() && r.allowed(due.g.model, true, due) {
			return due
		}
		return nil
	}
	if found = each(func(w *waiter) bool { return w.g.free() && r.resident[w.g.model] }); found != nil {
		return found
	}
	if found = each(func(w *waiter) bool { return w.g.free() && r.fits(w.g.model, nil) }); found != nil {
		return found
	}
	return each(func(w *waiter) bool { return w.g.free() && r.allowed(w.g.model, false, w) })
}

// staleLocked reports whether what the server holds should be read again
// now, and if so marks the read begun: once no call is in flight (the
// account cannot be ahead of the server then) and residentRead after the
// last.
func (r *runnerQueue) staleLocked(now time.Time) bool {
	if r.reading || now.Sub(r.readAt) < residentRead {
		return false
	}
	for _, c := range r.inFlight {
		if c > 0 {
			return false
		}
	}
	r.reading = true
	return true
}

// read reads what r's server holds (and, now and then, its models' sizes)
// and takes it into the account: the budget learns from it whenever it is
// read; the resident models are replaced by it only when no call was sent
// meanwhile and none is in flight.
func (a *Admission) read(r *runnerQueue) {
	ctx, cancel := context.WithTimeout(context.Background(), ProbeWait)
	defer cancel()
	a.mu.Lock()
	sent, sizes := r.sent, time.Since(r.sizesAt) >= sizesRead
	a.mu.Unlock()
	held, err := r.loader.Resident(ctx)
	var files map[string]int64
	if err == nil && sizes {
		files, err = r.loader.Sizes(ctx)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	r.reading, r.readAt = false, time.Now()
	// A call that would evict the others may have waited for the read.
	defer r.dispatch(time.Now())
	if err != nil {
		return
	}
	if files != nil {
		r.sizesAt = r.readAt
		for m, s := range files {
			// A size seen in /api/ps is the larger: a loaded model
			// holds its context's cache too.
			if m = config.FullModelName(m); r.size[m] == 0 {
				r.size[m] = s
			}
		}
	}
	var total int64
	for m, s := range held {
		m = config.FullModelName(m)
		r.size[m] = s
		total += s
	}
	r.budget = max(r.budget, total)
	if r.sent != sent || r.busy() > 0 || r.heldBusy() {
		return
	}
	clear(r.resident)
	clear(r.held)
	for m := range held {
		m = config.FullModelName(m)
		if r.kept[m] {
			r.held[m] = true
		} else {
			r.resident[m] = true
		}
	}
}

// heldBusy reports whether a call of a kept model is in flight.
func (r *runnerQueue) heldBusy() bool {
	for m := range r.kept {
		if r.inFlight[m] > 0 {
			return true
		}
	}
	return false
}

// Warm loads early, in the background, the models of nodes whose server
// the admission schedules (ScheduleLoads) when they fit beside the models
// the calls in flight or waiting use, after reading what the server holds
// when that is stale; never while calls wait for the server, whose order
// a load would upset, nor a model already held. Nodes of other servers
// cost a map lookup each.
func (a *Admission) Warm(first string, later []Preload) {
	var runners []*runnerQueue
	var wanted [][]Preload
	for _, p := range later {
		g := a.gates[p.Node]
		if g == nil || g.runner == nil {
			continue
		}
		i := 0
		for i < len(runners) && runners[i] != g.runner {
			i++
		}
		if i == len(runners) {
			runners = append(runners, g.runner)
			wanted = append(wanted, nil)
		}
		wanted[i] = append(wanted[i], p)
	}
	for i, r := range runners {
		now := ""
		if g := a.gates[first]; g != nil && g.runner == r {
			now = g.model
		}
		go a.warm(r, now, wanted[i]) // exits when its read and loads end, within ProbeWait and loadsTimeout
	}
}

// warm is Warm on one server; first is the model of the chain's first
// stage when it is on it, which its call will use at once. A model of
// nodes the server holds already is one the chain will use too: loading a
// later one must not evict it.
func (a *Admission) warm(r *runnerQueue, first string, nodes []Preload) {
	a.mu.Lock()
	read := r.staleLocked(time.Now())
	a.mu.Unlock()
	if read {
		a.read(r)
	}
	var load []Preload
	var gates []*gate
	want := map[string]bool{}
	if first != "" {
		want[first] = true
	}
	a.mu.Lock()
	for _, p := range nodes {
		g := a.gates[p.Node]
		m := g.model
		if r.resident[m] || r.held[m] || r.inFlight[m] > 0 {
			want[m] = true
			continue
		}
		if r.waiters.Len() > 0 || !r.fits(m, want) {
			continue
		}
		// The idle models it may evict are no longer counted on.
		for x := range r.resident {
			if r.inFlight[x] == 0 && !r.awaited(x) && !want[x] {
				delete(r.resident, x)
			}
		}
		r.inFlight[m]++
		r.sent++
		if r.kept[m] {
			r.held[m] = true
		} else {
			r.resident[m] = true
		}
		load = append(load, p)
		gates = append(gates, g)
	}
	a.mu.Unlock()
	var wg sync.WaitGroup
	for i, p := range load {
		g := gates[i]
		wg.Go(func() { // exits when the load ends, within loadsTimeout
			ctx, cancel := context.WithTimeout(context.Background(), loadsTimeout)
			defer cancel()
			sent := time.Now()
			// A load that fails leaves the call to load it.
			if err := g.loader.Preload(ctx, p.KeepAlive, p.NumCtx); err == nil && a.OnPreload != nil {
				a.OnPreload(p.Node, sent, time.Since(sent))
			}
			a.mu.Lock()
			r.inFlight[g.model]--
			r.dispatch(time.Now())
			a.mu.Unlock()
		})
	}
	wg.Wait()
}
