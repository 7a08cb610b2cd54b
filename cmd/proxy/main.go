// Command proxy runs the reflexive multi-model chain proxy: an
// OpenAI-compatible HTTP server that answers with one model or a chain of
// them, guarded against tool-call loops, with a cockpit page at /.
//
// It only parses flags, loads the configuration, wires the packages
// together, serves, and shuts down gracefully.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"chainproxy/chain"
	"chainproxy/chain/mock"
	// The backends of the providers a node may name: node.Build finds
	// them once imported.
	"chainproxy/chain/node"
	_ "chainproxy/chain/node/ollama"
	_ "chainproxy/chain/node/openai"
	"chainproxy/classify"
	"chainproxy/config"
	"chainproxy/internal/redact"
	"chainproxy/web"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal starts the graceful shutdown. Until stop, every
	// later one would be caught and dropped; after it, a second signal
	// (Ctrl-C again) ends the process at once, as an operator who will not
	// wait for the grace period means it to.
	context.AfterFunc(ctx, stop)
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit code (2 for bad
// flags or configuration). "proxy eval …" runs the evaluation (eval.go).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "eval" {
		return runEval(ctx, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "YAML configuration `file` (default: built-in defaults, a local Ollama)")
	addr := fs.String("addr", "", "listen address, overrides server.addr")
	demo := fs.Bool("demo", false, "run scripted mock models OL1/M1/M2: no model server needed")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	logPrompts := fs.Bool("log-prompts", false, "log prompts and tool results (at debug level)")
	logBatch := fs.Duration("log-batch", 50*time.Millisecond, "write log lines together, each at most this late (0: each line at once)")
	showVersion := fs.Bool("version", false, "print the version (from the build info) and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		// Parsing stops at the first argument that is not a flag: the
		// flags after it were dropped, and "proxy c.yaml" would serve the
		// built-in defaults.
		fmt.Fprintf(stderr, "unexpected argument %q: give a configuration file as -config %s (flags after an argument are not read)\n", fs.Arg(0), fs.Arg(0))
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, version())
		return 0
	}
	logOut, flushLog := stderr, func() {}
	if *logBatch > 0 {
		lines := newBatchWriter(stderr, *logBatch)
		logOut, flushLog = lines, func() { _ = lines.Flush() }
		defer flushLog()
	}
	logger, err := newLogger(logOut, *logFormat, *logLevel)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	var cfg *config.Config
	if *demo {
		cfg, err = demoConfig(*cfgPath)
		if err == nil && cfg.Tools.Root == config.Default().Tools.Root {
			cfg.Tools.Root, err = demoWorkspace()
			if err == nil {
				defer os.RemoveAll(cfg.Tools.Root)
			}
		}
	} else {
		cfg, err = config.Load(*cfgPath)
	}
	if cfg != nil {
		if *addr != "" {
			cfg.Server.Addr = *addr
		}
		// Said with the file's own problems, all at once.
		if !*demo {
			err = errors.Join(err, settleToolsRoot(cfg, logger))
		}
		err = errors.Join(err, checkExposure(cfg.Server))
	}
	if err != nil {
		flushLog() // the warnings logged so far come first
		fmt.Fprintln(stderr, err)
		return 2
	}
	// One redactor, from the configuration, in front of every log line
	// and passed to what writes answers and traces.
	red := redact.FromConfig(cfg)
	logger = slog.New(red.Handler(logger.Handler()))
	for _, w := range cfg.SharedRunnerWarnings() {
		logger.Warn("nodes sharing an Ollama model will reload it for each other", "detail", w)
	}
	if err := serve(ctx, cfg, red, logger, *logPrompts, *demo, stdout); err != nil {
		logger.Error("proxy stopped", "err", err)
		return 1
	}
	return 0
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("-log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("-log-format: %q is not text or json", format)
}

// buildNodes builds the nodes of cfg (node.Build). The demo's mock nodes are
// provided here: their script follows the words the classifier judges,
// which the node layer knows nothing of.
func buildNodes(cfg *config.Config) (*node.Set, error) {
	blocks := classify.NewBlocks(cfg.Classify.IgnoreBlocks)
	return node.Build(cfg, node.Deps{Providers: map[string]node.Provider{
		config.ProviderMock: func(n config.Node) node.Backend { return mock.NewWithBlocks(n, blocks) },
	}})
}

// serve wires the proxy and serves until ctx ends, then lets in-flight
// requests finish for server.shutdown_timeout.
func serve(ctx context.Context, cfg *config.Config, red redact.Redactor, logger *slog.Logger, logPrompts, demo bool, stdout io.Writer) error {
	// Listen first: an address already taken is said at once, before MCP
	// servers are started (and waited for) for nothing.
	ln, err := net.Listen("tcp", cfg.Server.Addr)
	if err != nil {
		hint := "choose another with -addr or server.addr"
		if errors.Is(err, syscall.EADDRINUSE) {
			hint = "another process serves there: stop it, or " + hint
		}
		return fmt.Errorf("%w (%s)", err, hint) // err names the address
	}
	defer ln.Close() // closed by Shutdown once served; here for an early return
	tel, err := startTelemetry(ctx, cfg.Telemetry, logger)
	if err != nil {
		return err
	}
	defer func() {
		// After Shutdown: the last requests' spans are batched by then.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), telemetryFlush)
		defer cancel()
		if err := tel.shutdown(fctx); err != nil {
			logger.Warn("telemetry flush", "err", err)
		}
	}()
	w, err := wire(ctx, cfg, red, logger)
	defer w.Close() // after Shutdown: ends MCP sessions and child processes
	if err != nil {
		return err
	}
	engine, st, registry, admission, local := w.engine, w.store, w.registry, w.admission, w.local
	names := make([]string, len(cfg.Nodes))
	for i, n := range cfg.Nodes {
		names[i] = n.Name
	}
	metrics := web.NewMetrics(names, admission.Queued, st.Status)
	local.OnWait = metrics.ObserveQueueWait
	local.OnPreload = metrics.ObservePreload
	handler := web.New(web.Options{Config: cfg, Engine: engine, Nodes: w.nodes, Traces: st, Logger: logger, Metrics: metrics, LogPrompts: logPrompts, Redactor: red, Tracing: tel.provider})
	srv := &http.Server{
		Handler: handler,
		// No WriteTimeout: it would cut long streams; writes have
		// per-chunk deadlines instead.
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	if err := probeNodes(ctx, engine, logger); err != nil {
		return err
	}
	logger.Info("listening", "addr", ln.Addr().String(), "store", st.Status(), "tools", registry.Names())
	fmt.Fprintf(stdout, "chainproxy listening on http://%s\n  OpenAI base URL: http://%s/v1\n  cockpit:         http://%s/\n  traces:          http://%s/#/traces\n", ln.Addr(), ln.Addr(), ln.Addr(), ln.Addr())
	if demo {
		demoBanner(stdout, ln.Addr().String())
	}

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }() // exits when Shutdown closes the listener
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down; a second signal stops at once", "grace", cfg.Server.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownTimeout)
	defer cancel()
	handler.Drain(time.Now().Add(drainBefore(cfg.Server.ShutdownTimeout)))
	err = srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		srv.Close()
		logger.Warn("in-flight requests cut after the grace period")
	}
	<-errc
	return nil
}

// baseURLs is what a log line says of a node's hosts, credentials masked.
func baseURLs(n config.Node) string {
	hosts := n.Hosts()
	out := make([]string, len(hosts))
	for i, h := range hosts {
		out[i] = redact.URL(h)
	}
	return strings.Join(out, " ")
}

// probeNodes logs whether each node answers, so a misconfigured node shows
// at startup rather than at the first request. A context_window above its
// model's maximum is the one answer that stops the startup: Ollama would
// run the model past what it was trained for.
func probeNodes(ctx context.Context, engine *chain.Engine, logger *slog.Logger) error {
	var tooLarge []error
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	for _, n := range engine.Nodes() {
		err := engine.Probe(ctx, n.Name)
		var we *chain.WindowError
		if errors.As(err, &we) {
			tooLarge = append(tooLarge, err)
			continue
		}
		if errors.Is(err, node.ErrModelNotFound) {
			logger.Warn("node lacks its model", "node", n.Name, "provider", n.Provider, "model", n.Model, "base_url", baseURLs(n.Node), "err", err)
			continue
		}
		if err != nil {
			logger.Warn("node unreachable", "node", n.Name, "provider", n.Provider, "model", n.Model, "base_url", baseURLs(n.Node), "err", err)
			continue
		}
		caps, known := engine.Capabilities(n.Name)
		logger.Info("node ready", "node", n.Name, "provider", n.Provider, "model", n.Model, "base_url", baseURLs(n.Node), "capabilities", caps, "context_window", engine.Window(n))
		if known && !slices.Contains(caps, node.CapTools) {
			logger.Warn("node cannot take tools: stages that want tools run without them there, and clients' tools sent to it get 400", "node", n.Name, "model", n.Model, "capabilities", caps)
		}
	}
	return errors.Join(tooLarge...)
}
