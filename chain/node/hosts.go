package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"syscall"
	"time"

	"chainproxy/config"
	"chainproxy/internal/redact"
)

// Hosts is the backend of a node served by several hosts (nodes[].base_urls):
// the same model on two or three Ollama boxes or vLLM replicas. Each call
// goes to the host with the fewest calls in flight among those not offline,
// ties in turn; a stage's next turns go to the host of its first when it is
// up and below its limit (Request.Host), so that the model stays warm and
// the server's prompt cache is reused. A host that fails to connect is
// skipped for the node's offline_for and the call goes at once to another:
// the node fails to connect only when all its hosts do, and only then does
// the engine count it offline. A call that finds every host offline probes
// them rather than fail (revive), so that hosts that were down a moment
// serve at once.
type Hosts struct {
	node  string
	limit int // calls in flight per host before a stage leaves its host; 0: none
	ttl   time.Duration
	now   func() time.Time
	// probeFor bounds a revive's probe: the node's connect_timeout and
	// ProbeWait.
	probeFor time.Duration

	mu    sync.Mutex
	hosts []*host
	next  int // where the next tie-break starts: round robin
	// freed, when set, is closed when a call ends: calls that found every
	// host up at its limit wait for it.
	freed chan struct{}
	// reviving, when set, is closed when the probe of a revive ends.
	reviving chan struct{}
	// shared, when set, keeps each host's limit across replicas
	// (SharedAdmission): a call takes a slot of its host there too.
	shared HostAdmitter
}

// ShareLimits makes h take a slot of a's for each call to a host, so that
// each host's limit holds across replicas. It is called before the first
// call.
func (h *Hosts) ShareLimits(a HostAdmitter) { h.shared = a }

// HostAdmitter is the optional capability of an Admitter that keeps the
// limit of each host of a node with several across replicas. The node's
// own limit (its hosts' together) is no guard for each host: every replica
// picks a host from its own counts, and three of them sent three calls
// each to hosts of max_concurrency 2.
type HostAdmitter interface {
	// TakeHost takes one of limit slots of host (a base URL of node)
	// without waiting; ok is false when all are held. release gives it
	// back.
	TakeHost(ctx context.Context, node, host string, limit int) (release func(), ok bool)
}

// ProbeWait bounds a probe past the node's connect_timeout: the answer of a
// version or model list, which a server that answers at all sends at once.
const ProbeWait = 3 * time.Second

// hostPoll is how long a call waits before it tries again the hosts it
// found at their limit across replicas: a slot given back on another
// replica wakes nobody here. Only a call that the node's admission let
// through while a host is offline waits so.
const hostPoll = 100 * time.Millisecond

// host is one base URL of a node and what is known of it. Its fields after
// b are guarded by Hosts.mu.
type host struct {
	url string
	b   Backend

	inFlight int
	calls    uint64
	offUntil time.Time
	cause    string   // why it is offline, or its last probe's failure
	caps     []string // its server's capabilities of the model, when told
}

var (
	_ Backend      = (*Hosts)(nil)
	_ Prober       = (*Hosts)(nil)
	_ Describer    = (*Hosts)(nil)
	_ WindowReader = (*Hosts)(nil)
	_ Thinker      = (*Hosts)(nil)
)

// NewHosts returns the backend of node over backends, one per host of
// node.Hosts() in the same order, each built for its host alone.
func NewHosts(node config.Node, backends []Backend) *Hosts {
	urls := node.Hosts()
	h := &Hosts{node: node.Name, limit: node.Concurrency(), ttl: node.OfflineFor, now: time.Now, probeFor: node.ConnectTimeout + ProbeWait}
	if h.ttl <= 0 {
		h.ttl = 30 * time.Second
	}
	for i, b := range backends {
		h.hosts = append(h.hosts, &host{url: urls[i], b: b})
	}
	return h
}

// HostsBackend returns node's backend: build's for its one host, or a
// Hosts over one built per host when it has several (base_urls). build
// makes a provider's backend for a node of one host (its base_url).
func HostsBackend(node config.Node, build func(config.Node) Backend) Backend {
	if len(node.BaseURLs) == 0 {
		return build(node)
	}
	bs := make([]Backend, len(node.BaseURLs))
	for i, u := range node.BaseURLs {
		h := node
		h.BaseURL, h.BaseURLs = u, nil
		bs[i] = build(h)
	}
	if len(bs) == 1 {
		return bs[0]
	}
	return NewHosts(node, bs)
}

// Chat sends the call to a host. One that does not connect is marked
// offline, and one whose connection broke before it answered anything (a
// pooled connection to a host that just died) is left for this call; either
// way the call goes to the next host, nothing having reached fn.
func (h *Hosts) Chat(ctx context.Context, req *Request, fn func(Chunk) error) error {
	pin := ""
	if req.Host != nil {
		pin = *req.Host
	}
	var tried, busy []bool
	var last error
	revived := false
	for {
		i, x, full := h.pick(pin, tried, busy)
		if full == nil && x == nil && busy != nil {
			// The hosts up are at their limit across replicas.
			if err := h.waitShared(ctx); err != nil {
				return err
			}
			busy = nil
			continue
		}
		if full != nil {
			// A host is down and the others are at their limit: the
			// admitted call waits for one of them rather than overload it.
			select {
			case <-full:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if x == nil {
			if last != nil {
				return last
			}
			if !revived {
				revived = true
				h.revive(ctx)
				continue
			}
			return h.allOffline()
		}
		release := func() {}
		if h.shared != nil && h.limit > 0 {
			var ok bool
			if release, ok = h.shared.TakeHost(ctx, h.node, x.url, h.limit); !ok {
				h.done(x)
				if busy == nil {
					busy = make([]bool, len(h.hosts))
				}
				busy[i] = true
				continue
			}
		}
		if req.Host != nil {
			*req.Host = x.url
		}
		answered := false
		err := x.b.Chat(ctx, req, func(c Chunk) error {
			answered = true
			return fn(c)
		})
		release()
		h.done(x)
		var ue *UpstreamError
		if answered || ctx.Err() != nil || !errors.As(err, &ue) {
			return err
		}
		switch {
		case ue.Offline():
			h.markOffline(x, ue.Error())
		case brokenConn(ue):
		default:
			return err
		}
		if tried == nil {
			tried = make([]bool, len(h.hosts))
		}
		tried[i] = true
		last = err
	}
}

// done counts a call of x out and wakes the calls waiting for a host.
func (h *Hosts) done(x *host) {
	h.mu.Lock()
	x.inFlight--
	if h.freed != nil {
		close(h.freed)
		h.freed = nil
	}
	h.mu.Unlock()
}

// waitShared waits until a call here ends or hostPoll has passed, or
// ctx ends.
func (h *Hosts) waitShared(ctx context.Context) error {
	h.mu.Lock()
	if h.freed == nil {
		h.freed = make(chan struct{})
	}
	freed := h.freed
	h.mu.Unlock()
	t := time.NewTimer(hostPoll)
	defer t.Stop()
	select {
	case <-freed:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// brokenConn reports whether a call failed on a connection that broke
// before any answer: the host went away, and another may serve the call.
func brokenConn(ue *UpstreamError) bool {
	return ue.Kind == KindProtocol && (errors.Is(ue.Err, io.EOF) || errors.Is(ue.Err, io.ErrUnexpectedEOF) || errors.Is(ue.Err, syscall.ECONNRESET) || errors.Is(ue.Err, syscall.EPIPE))
}

// pick chooses the host of a call and counts it in flight: pin when it is
// up and below the limit, else the one with the fewest calls in flight,
// ties in turn. It returns no host when every host not tried (nor busy:
// at its limit across replicas) is offline, and a channel to wait on when
// those up are all at their limit (which admission, counting every host,
// lets happen only while some are down).
func (h *Hosts) pick(pin string, tried, busy []bool) (int, *host, <-chan struct{}) {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	best, pinned := -1, false
	for k := range h.hosts {
		i := (h.next + k) % len(h.hosts)
		x := h.hosts[i]
		if tried != nil && tried[i] || busy != nil && busy[i] || x.offUntil.After(now) {
			continue
		}
		if x.url == pin && (h.limit == 0 || x.inFlight < h.limit) {
			best, pinned = i, true
			break
		}
		if best < 0 || x.inFlight < h.hosts[best].inFlight {
			best = i
		}
	}
	if best < 0 {
		return -1, nil, nil
	}
	if h.limit > 0 && h.hosts[best].inFlight >= h.limit {
		if h.freed == nil {
			h.freed = make(chan struct{})
		}
		return -1, nil, h.freed
	}
	if !pinned {
		h.next = best + 1
	}
	x := h.hosts[best]
	x.inFlight++
	x.calls++
	return best, x, nil
}

// revive probes every host, when a call found them all offline, and brings
// back those that answer: one probe in flight, which the calls that find
// every host offline meanwhile wait for rather than each probing (Envoy's
// panic threshold: rather than fail every call, try the hosts). A waiter
// whose ctx ends returns at once.
func (h *Hosts) revive(ctx context.Context) {
	h.mu.Lock()
	done, waiting := h.reviving, h.reviving != nil
	if !waiting {
		done = make(chan struct{})
		h.reviving = done
	}
	h.mu.Unlock()
	if waiting {
		select {
		case <-done:
		case <-ctx.Done():
		}
		return
	}
	// The probe serves every call waiting for it: the first one going
	// away does not end it.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.probeFor)
	defer cancel()
	_ = h.Probe(pctx) // each host's outcome is recorded by each
	h.mu.Lock()
	h.reviving = nil
	h.mu.Unlock()
	close(done)
}

func (h *Hosts) markOffline(x *host, cause string) {
	h.mu.Lock()
	x.offUntil, x.cause = h.now().Add(h.ttl), cause
	h.mu.Unlock()
}

// allOffline is the error of a call that found every host offline.
func (h *Hosts) allOffline() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return &UpstreamError{Node: h.node, Kind: KindConnect, Message: fmt.Sprintf("all %d hosts are offline; first: %s", len(h.hosts), h.hosts[0].cause)}
}

// Probe checks every host at once and brings back those that answer. It
// fails only when no host answers, with each host's error.
func (h *Hosts) Probe(ctx context.Context) error {
	errs := h.each(ctx, func(ctx context.Context, _ int, b Backend) error {
		if p, ok := b.(Prober); ok {
			return p.Probe(ctx)
		}
		return nil
	}, false)
	if slices.Contains(errs, nil) {
		return nil
	}
	return errors.Join(errs...)
}

// each runs f on every host at once (skipping offline ones when skipOffline)
// and records each outcome: a host that answered is no longer offline, one
// that did not connect is, and either way its error is kept for /readyz.
func (h *Hosts) each(ctx context.Context, f func(ctx context.Context, i int, b Backend) error, skipOffline bool) []error {
	now := h.now()
	errs := make([]error, len(h.hosts))
	var wg sync.WaitGroup
	for i, x := range h.hosts {
		h.mu.Lock()
		off := x.offUntil.After(now)
		h.mu.Unlock()
		if off && skipOffline {
			errs[i] = errOfflineHost
			continue
		}
		wg.Go(func() { errs[i] = f(ctx, i, x.b) }) // exits when f returns, bounded by ctx
	}
	wg.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, x := range h.hosts {
		var ue *UpstreamError
		switch err := errs[i]; {
		case err == errOfflineHost:
		case err == nil:
			x.offUntil, x.cause = time.Time{}, ""
		case errors.As(err, &ue) && ue.Offline():
			x.offUntil, x.cause = h.now().Add(h.ttl), err.Error()
		default:
			x.cause = redact.Text(err.Error())
		}
	}
	return errs
}

// errOfflineHost stands for a host each skipped as offline.
var errOfflineHost = errors.New("host is offline")

// Describe asks every host not offline about the model. A host that lacks
// it is skipped for offline_for like one that is down: each of its calls
// would fail. The node takes the capabilities all answering hosts share.
func (h *Hosts) Describe(ctx context.Context) (ModelInfo, error) {
	infos := make([]ModelInfo, len(h.hosts))
	errs := h.each(ctx, func(ctx context.Context, i int, b Backend) error {
		d, ok := b.(Describer)
		if !ok {
			return nil
		}
		var err error
		infos[i], err = d.Describe(ctx)
		return err
	}, true)
	var out *ModelInfo
	var first error
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, x := range h.hosts {
		err := errs[i]
		if errors.Is(err, ErrModelNotFound) {
			x.offUntil, x.cause = h.now().Add(h.ttl), redact.Text(err.Error())
		}
		if err != nil {
			if first == nil && err != errOfflineHost {
				first = err
			}
			continue
		}
		x.caps = infos[i].Capabilities
		if out == nil {
			out = &infos[i]
			continue
		}
		if infos[i].Capabilities != nil {
			if out.Capabilities == nil {
				out.Capabilities = infos[i].Capabilities
			} else {
				out.Capabilities = slices.DeleteFunc(slices.Clone(out.Capabilities), func(c string) bool { return !slices.Contains(infos[i].Capabilities, c) })
			}
		}
		if m := infos[i].MaxWindow; m > 0 && (out.MaxWindow == 0 || m < out.MaxWindow) {
			out.MaxWindow = m
		}
	}
	if out != nil {
		return *out, nil
	}
	if first == nil {
		first = &UpstreamError{Node: h.node, Kind: KindConnect, Message: fmt.Sprintf("all %d hosts are offline", len(h.hosts))}
	}
	return ModelInfo{}, first
}

// LoadedWindow asks the first host up that can tell.
func (h *Hosts) LoadedWindow(ctx context.Context) (int, error) {
	now := h.now()
	for _, x := range h.hosts {
		h.mu.Lock()
		off := x.offUntil.After(now)
		h.mu.Unlock()
		if wr, ok := x.b.(WindowReader); ok && !off {
			return wr.LoadedWindow(ctx)
		}
	}
	return 0, nil
}

// Thinks reports whether a host's backend saw the model think: the hosts
// serve one model.
func (h *Hosts) Thinks() bool {
	for _, x := range h.hosts {
		if t, ok := x.b.(Thinker); ok && t.Thinks() {
			return true
		}
	}
	return false
}

// HostState is what /readyz and the metrics show of one host of a node.
type HostState struct {
	// URL is the host's base URL, credentials masked.
	URL      string
	InFlight int
	// Calls counts the calls sent to it since startup.
	Calls   uint64
	Offline bool
	// Error is why it is offline, or its last probe's failure.
	Error        string
	Capabilities []string
}

// States reports each host, in configuration order.
func (h *Hosts) States() []HostState {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]HostState, len(h.hosts))
	for i, x := range h.hosts {
		out[i] = HostState{URL: redact.URL(x.url), InFlight: x.inFlight, Calls: x.calls, Offline: x.offUntil.After(now), Error: x.cause, Capabilities: x.caps}
	}
	return out
}
