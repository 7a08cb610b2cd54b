package web

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"chainproxy/chain"
	"chainproxy/chain/node"
	"chainproxy/config"
)

// Metrics are the proxy's Prometheus metrics, on their own registry so that
// tests can build as many servers as they like.
type Metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	own       *prometheus.HistogramVec
	turns     *prometheus.HistogramVec
	stages    *prometheus.CounterVec
	toolCalls *prometheus.CounterVec
	upstream  *prometheus.CounterVec
	queueWait *prometheus.HistogramVec
	fitting   *prometheus.CounterVec
	// loads and loadSeconds count the calls that loaded their model
	// (chain.ModelCall.LoadedModel) and how long each load took.
	loads       *prometheus.CounterVec
	loadSeconds *prometheus.HistogramVec
	// models are the nodes' models (the engine's, set with serverTool):
	// a summary's call names its node only.
	models map[string]string
	// serverTool reports a name of the server's tools (the engine's, set
	// by the first server built on these metrics): other names, a
	// client's tools or a name a model made up, are not labels of their
	// own, or clients and models could grow the series without bound.
	serverTool func(name string) bool

	// The series every request touches, found once by their labels:
	// finding one by label values hashes them each time, and a relay
	// touches five. Both sets are bounded: routes, modes, statuses,
	// nodes and stage statuses are the proxy's own.
	bySeries sync.Map // requestKey → *requestSeries
	byStage  sync.Map // stageKey → *stageSeries

	// loads counts the calls that waited for one load together once.
	ledger node.LoadLedger
}

type requestKey struct {
	route, mode string
	status      int
}

type requestSeries struct {
	requests      prometheus.Counter
	duration, own prometheus.Observer
}

type stageKey struct{ node, status string }

type stageSeries struct {
	turns  prometheus.Observer
	stages prometheus.Counter
}

func (m *Metrics) request(route, mode string, status int) *requestSeries {
	k := requestKey{route, mode, status}
	if v, ok := m.bySeries.Load(k); ok {
		return v.(*requestSeries)
	}
	v, _ := m.bySeries.LoadOrStore(k, &requestSeries{
		requests: m.requests.WithLabelValues(route, mode, strconv.Itoa(status)),
		duration: m.duration.WithLabelValues(route, mode),
		own:      m.own.WithLabelValues(route, mode),
	})
	return v.(*requestSeries)
}

func (m *Metrics) stage(node, status string) *stageSeries {
	k := stageKey{node, status}
	if v, ok := m.byStage.Load(k); ok {
		return v.(*stageSeries)
	}
	v, _ := m.byStage.LoadOrStore(k, &stageSeries{
		turns:  m.turns.WithLabelValues(node),
		stages: m.stages.WithLabelValues(node, status),
	})
	return v.(*stageSeries)
}

// NewMetrics registers the metrics. queued, when set, reports the queue
// depth of a node.
func NewMetrics(nodes []string, queued func(node string) int, storeStatus func() string) *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chainproxy_requests_total", Help: "Requests by route, mode and HTTP status.",
		}, []string{"route", "mode", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "chainproxy_request_duration_seconds", Help: "Request duration by route and mode.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 12),
		}, []string{"route", "mode"}),
		own: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "chainproxy_proxy_duration_seconds", Help: "The proxy's own time per request: its duration less the upstream waits.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 3, 12),
		}, []string{"route", "mode"}),
		turns: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "chainproxy_stage_turns", Help: "Model turns used per stage.", Buckets: []float64{0, 1, 2, 3, 4, 6, 8},
		}, []string{"node"}),
		stages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chainproxy_stages_total", Help: "Stages run, by node and final status (ok, stopped_repeat, …).",
		}, []string{"node", "status"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chainproxy_tool_calls_total", Help: "Tool calls by tool (a server tool's name, (client) for a client's tools, (unknown) for a name no tool has) and status (ok, duplicate, cached, blocked, error).",
		}, []string{"tool", "status"}),
		upstream: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chainproxy_upstream_errors_total", Help: "Stages that failed or were skipped, by node.",
		}, []string{"node", "status"}),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "chainproxy_queue_wait_seconds", Help: "Time calls waited in a node's admission queue.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"node", "class"}),
		fitting: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chainproxy_context_actions_total", Help: "What context fitting did to prompts, by node and action (shortened, summarized, reused, dropped, images_dropped, refit; overflow: a node reported a prompt at its window).",
		}, []string{"node", "action"}),
		loads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chainproxy_model_loads_total", Help: "Model loads, by node and model: a call whose node reported a load of 100 ms or more (Ollama's load_duration, which is a few ms for a model already loaded), or an early load the server took as long to answer; one load calls waited for together counts once.",
		}, []string{"node", "model"}),
		loadSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "chainproxy_model_load_seconds", Help: "How long each model load counted in chainproxy_model_loads_total took, as the node reported it, or as long as the server took to answer an early load (a load and its wait for the models it evicted).",
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 12),
		}, []string{"node", "model"}),
	}
	reg.MustRegister(m.requests, m.duration, m.own, m.turns, m.stages, m.toolCalls, m.upstream, m.queueWait, m.fitting, m.loads, m.loadSeconds)
	if queued != nil {
		for _, n := range nodes {
			reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "chainproxy_queue_depth", Help: "Calls waiting for a node.", ConstLabels: prometheus.Labels{"node": n},
			}, func() float64 { return float64(queued(n)) }))
		}
	}
	if storeStatus != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chainproxy_store_degraded", Help: "1 while the shared store has fallen back to memory.",
		}, func() float64 {
			if storeStatus() == "degraded" {
				return 1
			}
			return 0
		}))
	}
	return m
}

// hostCollector reports each host of the nodes with several (base_urls),
// labelled node and host, read from the node set at each scrape.
type hostCollector struct {
	nodes                    []config.Node
	set                      NodeSet
	inFlight, offline, calls *prometheus.Desc
}

func (c hostCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.inFlight
	ch <- c.offline
	ch <- c.calls
}

func (c hostCollector) Collect(ch chan<- prometheus.Metric) {
	for _, n := range c.nodes {
		for _, h := range c.set.Hosts(n.Name) {
			off := 0.0
			if h.Offline {
				off = 1
			}
			ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(h.InFlight), n.Name, h.URL)
			ch <- prometheus.MustNewConstMetric(c.offline, prometheus.GaugeValue, off, n.Name, h.URL)
			ch <- prometheus.MustNewConstMetric(c.calls, prometheus.CounterValue, float64(h.Calls), n.Name, h.URL)
		}
	}
}

// watchNodes adds the per-host metrics of the nodes of set, and whether
// its shared admission has fallen back to local limits; e tells the
// server's tools from others. A second server built on the same Metrics
// adds nothing: the first's collector stays.
func (m *Metrics) watchNodes(e *chain.Engine, nodes []config.Node, set NodeSet) {
	if e != nil && m.serverTool == nil {
		m.serverTool = e.ServerTool
		m.models = map[string]string{}
		for _, n := range nodes {
			m.models[n.Name] = n.Model
		}
	}
	if set == nil {
		return
	}
	labels := []string{"node", "host"}
	_ = m.reg.Register(hostCollector{
		nodes:    nodes,
		set:      set,
		inFlight: prometheus.NewDesc("chainproxy_host_in_flight", "Calls in flight to each host of a node with several (base_urls).", labels, nil),
		offline:  prometheus.NewDesc("chainproxy_host_offline", "1 while a host of a node with several is skipped as offline.", labels, nil),
		calls:    prometheus.NewDesc("chainproxy_host_calls_total", "Calls sent to each host of a node with several.", labels, nil),
	})
	if set.AdmissionStatus() != "" {
		_ = m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chainproxy_admission_degraded", Help: "1 while Redis is down and this replica keeps the nodes' max_concurrency on its own.",
		}, func() float64 {
			if set.AdmissionStatus() == node.AdmissionLocal {
				return 1
			}
			return 0
		}))
	}
}

// Handler serves the metrics in Prometheus' text format.
func (m *Metrics) Handler() http.Handler { return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}) }

// ObserveQueueWait records an admission wait; it fits node.Admission.OnWait.
func (m *Metrics) ObserveQueueWait(node string, batch bool, d time.Duration) {
	class := "interactive"
	if batch {
		class = "batch"
	}
	m.queueWait.WithLabelValues(node, class).Observe(d.Seconds())
}

// observeRejected counts a request refused before it ran (auth, origin,
// body, validation). route is the matched route pattern, never the raw path,
// so that scanners cannot grow the label set.
func (m *Metrics) observeRejected(route string, status int) {
	if route == "" {
		route = "unmatched"
	}
	m.requests.WithLabelValues(route, "", strconv.Itoa(status)).Inc()
}

// observeRequest counts a request that ended after d, upstream of it spent
// waiting for nodes, with its trace tr. since is when the request started,
// in the trace's milliseconds: a resumed chain's trace holds the calls of
// its earlier requests too, which were counted with them; t0 is when the
// trace's milliseconds start (zero: unknown).
func (m *Metrics) observeRequest(route, mode string, status int, d, upstream time.Duration, tr *chain.Trace, since int64, t0 time.Time) {
	rs := m.request(route, mode, status)
	rs.requests.Inc()
	rs.duration.Observe(d.Seconds())
	if upstream > 0 {
		rs.own.Observe(max(d-upstream, 0).Seconds())
	}
	if tr == nil {
		return
	}
	// A resumed chain's stages that began before this request ended in
	// the earlier requests and were counted with them, but for the last
	// of them, the stage that awaited the client and went on now.
	resumed := -1
	for i := range tr.Stages {
		if since > 0 && tr.Stages[i].StartMS < since {
			resumed = i
		}
	}
	for i := range tr.Stages {
		st := &tr.Stages[i]
		for _, t := range st.ToolsUsed {
			// A client's call once, as passed to the client: its result
			// comes with the next request, whose trace holds it again.
			if t.StartMS >= since {
				m.toolCalls.WithLabelValues(m.toolLabel(t), t.Status).Inc()
			}
		}
		for i := range st.Calls {
			if c := &st.Calls[i]; c.StartMS >= since && c.LoadedModel() {
				m.observeLoad(st, c, t0)
			}
		}
		// A stage once, with its final status: not while it awaits the
		// client, nor again when it ended in an earlier request.
		if st.Status == chain.StageAwaitingClient || i < resumed {
			continue
		}
		ss := m.stage(st.Node, st.Status)
		ss.turns.Observe(float64(st.Turns))
		ss.stages.Inc()
		if st.Status == chain.StageFailed || st.Status == chain.StageSkippedOffline || st.Status == chain.StageSkippedContext {
			m.upstream.WithLabelValues(st.Node, st.Status).Inc()
		}
		if ct := st.Context; ct != nil {
			for _, a := range ct.Actions {
				m.fitting.WithLabelValues(st.Node, a.Action).Inc()
			}
			if ct.Overflow {
				m.fitting.WithLabelValues(st.Node, "overflow").Inc()
			}
		}
	}
}

// ObservePreload counts an early load of nodeName's model (the load
// scheduling's; it fits node.Admission.OnPreload) that the server took
// node.LoadThreshold or more to answer, as Ollama reports a call's load:
// a model already loaded answers in a few ms. A load that calls waited for
// too counts once.
func (m *Metrics) ObservePreload(nodeName string, sent time.Time, took time.Duration) {
	if took < node.LoadThreshold || !m.ledger.First(nodeName, sent.Add(took)) {
		return
	}
	m.loads.WithLabelValues(nodeName, m.models[nodeName]).Inc()
	m.loadSeconds.WithLabelValues(nodeName, m.models[nodeName]).Observe(took.Seconds())
}

// observeLoad counts the model load of c, a call of st: the stage's node
// and model, or for a summary the summarizer's; once, when calls waited for
// it together.
func (m *Metrics) observeLoad(st *chain.StageTrace, c *chain.ModelCall, t0 time.Time) {
	node, model := st.Node, st.Model
	if c.Node != "" {
		node, model = c.Node, m.models[c.Node]
	}
	if !t0.IsZero() && !m.ledger.First(node, c.Ready(t0)) {
		return
	}
	m.loads.WithLabelValues(node, model).Inc()
	m.loadSeconds.WithLabelValues(node, model).Observe(float64(*c.LoadMS) / 1000)
}

// Tool labels of the calls that are not the server's own tools.
const (
	toolLabelClient  = "(client)"
	toolLabelUnknown = "(unknown)"
)

// toolLabel is the tool label of a call: the server tool's name, else
// whose the tool was.
func (m *Metrics) toolLabel(t chain.ToolUse) string {
	switch {
	case t.Client:
		return toolLabelClient
	case m.serverTool != nil && m.serverTool(t.Name):
		return t.Name
	}
	return toolLabelUnknown
}
