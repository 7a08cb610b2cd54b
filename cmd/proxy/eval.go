package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	_ "embed"

	"chainproxy/chain"
	"chainproxy/chain/trace"
	"chainproxy/config"
	"chainproxy/eval"
	"chainproxy/internal/redact"
)

//go:embed eval_demo.yaml
var evalDemoYAML []byte

// evalFlags are proxy eval's command line.
type evalFlags struct {
	cfgPath, data, modes, judge string
	out, cockpit, logLevel      string
	demo, resume                bool
	n, concurrency              int
	temperature                 *float64
	seed                        *int64
}

// parseEvalFlags reads proxy eval's flags, and says on stderr what is
// wrong with them; false when something is (exit code 2).
func parseEvalFlags(args []string, stderr io.Writer) (*evalFlags, bool) {
	f := &evalFlags{}
	fs := flag.NewFlagSet("proxy eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.cfgPath, "config", "", "YAML configuration `file` (default: built-in defaults, a local Ollama)")
	fs.BoolVar(&f.demo, "demo", false, "the demo's scripted models, scripted to be right on some of examples/eval/sample.jsonl")
	fs.StringVar(&f.data, "data", "", "JSONL `file` of items: {\"id\", \"question\" | \"messages\", \"answer\", \"match\"}")
	fs.StringVar(&f.modes, "modes", "nodes,chain/reflexive,chain/auto", "comma-separated modes: node names, \"nodes\" (every node alone), chain/reflexive, chain/auto, chain/simple")
	fs.IntVar(&f.n, "n", 0, "ask only the first `n` items (0: all)")
	fs.IntVar(&f.concurrency, "concurrency", 2, "requests at once")
	fs.StringVar(&f.judge, "judge", "", "`node` that grades items without an answer (or with match judge)")
	fs.StringVar(&f.out, "out", "", "`dir`ectory for report.json, report.html and traces.jsonl")
	fs.StringVar(&f.cockpit, "cockpit", "", "base `URL` of a proxy on the same store (store.redis_url), e.g. http://127.0.0.1:8080: report.html links each trace id to its cockpit")
	fs.BoolVar(&f.resume, "resume", false, "continue the run whose report.json is in -out: ask only what it lacks")
	fs.Func("temperature", "sampling temperature sent with every request (default: each node's own)", func(s string) error {
		v, err := strconv.ParseFloat(s, 64)
		f.temperature = &v
		return err
	})
	fs.Func("seed", "sampling seed sent with every request (default: none)", func(s string) error {
		v, err := strconv.ParseInt(s, 10, 64)
		f.seed = &v
		return err
	})
	fs.StringVar(&f.logLevel, "log-level", "warn", "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		return nil, false
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "eval: unexpected argument %q (flags after an argument are not read)\n", fs.Arg(0))
	case f.data == "":
		fmt.Fprintln(stderr, "eval: -data FILE is required: a JSONL file of questions (see examples/eval/sample.jsonl)")
	case f.resume && f.out == "":
		fmt.Fprintln(stderr, "eval: -resume continues the report in -out DIR: give -out")
	default:
		return f, true
	}
	return nil, false
}

// runEval is the eval subcommand: it asks a JSONL set of questions under
// each mode through the engine the server runs (built by wire), and
// reports accuracy against cost. Exit codes: 0 done, 1 a run that could
// not start or whose report could not be written, 2 bad flags or data,
// 130 interrupted (the report of what finished is written).
func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, ok := parseEvalFlags(args, stderr)
	if !ok {
		return 2
	}
	logger, err := newLogger(stderr, "text", f.logLevel)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	items, err := readItems(f.data, f.n)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}

	cfg, cleanup, err := evalConfig(f.cfgPath, f.demo, logger)
	defer cleanup()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	red := redact.FromConfig(cfg)
	logger = slog.New(red.Handler(logger.Handler()))
	for _, w := range cfg.SharedRunnerWarnings() {
		logger.Warn("nodes sharing an Ollama model will reload it for each other", "detail", w)
	}
	w, err := wire(ctx, cfg, red, logger)
	defer w.Close()
	if err != nil {
		fmt.Fprintln(stderr, "eval:", err)
		return 1
	}
	if err := probeNodes(ctx, w.engine, logger); err != nil {
		fmt.Fprintln(stderr, "eval:", err)
		return 1
	}
	nodes := make([]string, len(cfg.Nodes))
	for i, nd := range cfg.Nodes {
		nodes[i] = nd.Name
	}
	modes, err := evalModes(w.engine, f.modes, nodes)
	if err == nil {
		err = checkJudge(w.engine, f.judge, items)
	}
	if err != nil {
		fmt.Fprintln(stderr, "eval:", err)
		return 2
	}
	var warnings []string
	if f.judge != "" {
		warnings = eval.JudgeWarnings(f.judge, modes, func(m string) []string { return answering(cfg, m) })
	}

	opts := eval.Options{
		Items: items, Modes: modes, Concurrency: f.concurrency, Judge: f.judge,
		Temperature: f.temperature, Seed: f.seed, Progress: stderr, Terminal: isTerminal(stderr),
		Conversation: "eval/" + strconv.FormatInt(time.Now().UnixNano(), 36) + "/",
	}
	started, closeTraces, code := f.openOutput(&opts, stderr)
	defer closeTraces()
	if code != 0 {
		return code
	}
	share, why := evalSharing(cfg, w.store, red, logger)
	opts.Share = share
	if f.cockpit != "" && share == nil {
		warnings = append(warnings, "-cockpit: the traces are not shared with a proxy ("+why+"), so report.html does not link them")
	}
	for _, m := range warnings {
		fmt.Fprintln(stderr, "eval: warning:", m)
	}
	fmt.Fprintf(stderr, "eval: %d items × %d modes (%s), %d at once\n", len(items), len(modes), strings.Join(modes, ", "), max(f.concurrency, 1))

	results, runErr := eval.Run(ctx, w.engine, opts)
	rep := eval.Summarize(items, modes, nodes, results)
	rep.Data, rep.Started, rep.Finished = f.data, started, time.Now().UTC()
	rep.Judge, rep.Warnings = f.judge, warnings
	rep.Interrupted = runErr != nil
	if share != nil {
		rep.Cockpit = f.cockpit
	}
	return f.writeReport(rep, tracesNote(share, why, f.cockpit, f.out), stdout, stderr)
}

// openOutput readies -out for the run: with -resume, the answers the
// report there already has go into opts.Done, and started is the first
// run's; the traces file is opened (appended to when resuming) as
// opts.Traces, closed by the func returned. A code other than 0 is the
// exit code of a failure, said on stderr.
func (f *evalFlags) openOutput(opts *eval.Options, stderr io.Writer) (started time.Time, closeTraces func(), code int) {
	started, closeTraces = time.Now().UTC(), func() {}
	if f.resume {
		prev, err := eval.ReadReport(filepath.Join(f.out, "report.json"))
		if err != nil {
			fmt.Fprintln(stderr, "eval: -resume:", err)
			return started, closeTraces, 2
		}
		opts.Done = resumable(prev.Results, opts.Items, opts.Modes)
		started = prev.Started
		fmt.Fprintf(stderr, "eval: resuming: %d answers kept from %s\n", len(opts.Done), filepath.Join(f.out, "report.json"))
	}
	if f.out == "" {
		return started, closeTraces, 0
	}
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		fmt.Fprintln(stderr, "eval:", err)
		return started, closeTraces, 1
	}
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if f.resume {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	tf, err := os.OpenFile(filepath.Join(f.out, "traces.jsonl"), flags, 0o644)
	if err != nil {
		fmt.Fprintln(stderr, "eval:", err)
		return started, closeTraces, 1
	}
	opts.Traces = tf
	return started, func() { tf.Close() }, 0
}

// writeReport writes rep's table to stdout and, with -out, its files, then
// note (where the traces went); it returns the run's exit code.
func (f *evalFlags) writeReport(rep *eval.Report, note string, stdout, stderr io.Writer) int {
	if err := rep.WriteTable(stdout); err != nil {
		return 1
	}
	if f.out != "" {
		if err := rep.WriteFiles(f.out); err != nil {
			fmt.Fprintln(stderr, "eval:", err)
			return 1
		}
		fmt.Fprintf(stdout, "report: %s, %s (traces: %s)\n", filepath.Join(f.out, "report.html"), filepath.Join(f.out, "report.json"), filepath.Join(f.out, "traces.jsonl"))
	}
	fmt.Fprintln(stdout, note)
	if rep.Interrupted {
		return 130
	}
	return 0
}

// readItems reads the data file, keeping the first n items (n > 0).
func readItems(path string, n int) ([]eval.Item, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	defer f.Close()
	items, err := eval.ReadItems(f)
	if err != nil {
		return nil, fmt.Errorf("eval: %s:\n%w", path, err)
	}
	if n > 0 && n < len(items) {
		items = items[:n]
	}
	return items, nil
}

// evalConfig is the configuration eval runs: the file's, or with -demo
// the demo's scripted nodes, set to answer the sample set (eval_demo.yaml),
// under the file's settings. cleanup removes the demo's workspace.
func evalConfig(path string, demo bool, logger *slog.Logger) (*config.Config, func(), error) {
	cleanup := func() {}
	if !demo {
		cfg, err := config.Load(path)
		if cfg != nil {
			err = errors.Join(err, settleToolsRoot(cfg, logger))
		}
		return cfg, cleanup, err
	}
	cfg, err := demoConfig("")
	if err == nil {
		cfg, err = config.ParseOver(cfg, evalDemoYAML)
	}
	if err == nil && path != "" {
		var data []byte
		if data, err = os.ReadFile(path); err == nil {
			cfg, err = config.ParseOver(cfg, data)
		}
	}
	if err != nil {
		return nil, cleanup, fmt.Errorf("eval -demo: %w", err)
	}
	if cfg.Tools.Root == config.Default().Tools.Root {
		root, err := demoWorkspace()
		if err != nil {
			return nil, cleanup, err
		}
		cfg.Tools.Root, cleanup = root, func() { os.RemoveAll(root) }
	}
	return cfg, cleanup, nil
}

// evalSharing is where the answers' traces are kept for a proxy's cockpit:
// the store, when it is shared (Redis), under the callers that open them
// — "" when the server has no API keys, else each admin key's identity
// (an admin key opens any caller's trace; another key, its own only, and
// eval's are nobody's). nil, and why, when a proxy could not open them.
func evalSharing(cfg *config.Config, st eval.TraceStore, red redact.Redactor, logger *slog.Logger) (*eval.Sharing, string) {
	if cfg.Store.RedisURL == "" {
		return nil, "no store.redis_url: a proxy keeps its traces in its own process"
	}
	var owners []string
	switch {
	case len(cfg.Server.APIKeys) == 0:
		owners = []string{""}
	case len(cfg.Server.AdminKeys) == 0:
		return nil, "server.api_keys without server.admin_keys: only an admin key may open another's traces"
	default:
		for _, k := range cfg.Server.AdminKeys {
			owners = append(owners, trace.CallerID(k))
		}
	}
	return &eval.Sharing{Store: st, Owners: owners, Redact: red.String, Failed: func(id string, err error) {
		logger.Warn("keeping a trace for the cockpit", "trace_id", id, "err", err)
	}}, ""
}

// tracesNote says where the answers' traces are and how to open them.
func tracesNote(share *eval.Sharing, why, cockpit, out string) string {
	switch {
	case share != nil && cockpit != "":
		return "traces: in the store (store.redis_url); open one at " + eval.TraceURL(cockpit, "TRACE_ID") + " (report.html links each)"
	case share != nil:
		return "traces: in the store (store.redis_url); a proxy on this configuration opens one at http://ADDR/#/traces/TRACE_ID (give -cockpit URL for links in report.html)"
	case out != "":
		return "traces: not in a proxy's cockpit (" + why + "); each is a line of " + filepath.Join(out, "traces.jsonl") +
			": grep TRACE_ID " + filepath.Join(out, "traces.jsonl") + " | jq .chain"
	}
	return "traces: not kept (" + why + "): give -out DIR to keep them in DIR/traces.jsonl"
}

// evalModes expands -modes: "nodes" is every node alone; every other name
// must be one the engine serves.
func evalModes(e *chain.Engine, list string, nodes []string) ([]string, error) {
	var modes []string
	var errs []error
	for m := range strings.SplitSeq(list, ",") {
		m = strings.TrimSpace(m)
		switch {
		case m == "":
			continue
		case m == "nodes":
			for _, nd := range nodes {
				if !slices.Contains(modes, nd) {
					modes = append(modes, nd)
				}
			}
			continue
		}
		if _, err := e.Resolve(m); err != nil {
			errs = append(errs, fmt.Errorf("-modes: %w", err))
			continue
		}
		if !slices.Contains(modes, m) {
			modes = append(modes, m)
		}
	}
	if len(modes) == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("-modes names no mode"))
	}
	return modes, errors.Join(errs...)
}

// checkJudge refuses a judge that is not a node, and items that need a
// judge when none is given.
func checkJudge(e *chain.Engine, judge string, items []eval.Item) error {
	if judge == "" {
		var ids []string
		for i := range items {
			if items[i].NeedsJudge() {
				ids = append(ids, items[i].ID)
			}
		}
		if len(ids) > 0 {
			return fmt.Errorf("%d items have no answer to match (%s): give -judge NODE to have a node grade them", len(ids), strings.Join(ids[:min(len(ids), 5)], ", "))
		}
		return nil
	}
	if r, err := e.Resolve(judge); err != nil || r.Node == "" {
		return fmt.Errorf("-judge %q is not a node: name one of the configured nodes", judge)
	}
	return nil
}

// answering lists the nodes whose words mode's replies carry: the node
// itself, the chain's stages, the simple node.
func answering(cfg *config.Config, mode string) []string {
	simple := []string{cfg.Chain.SimpleNode}
	var stages []string
	for _, s := range cfg.Chain.Stages {
		stages = append(stages, s.Node)
	}
	switch mode {
	case chain.ModelSimple:
		return simple
	case chain.ModelReflexive:
		return stages
	case chain.ModelAuto:
		return append(simple, stages...)
	}
	return []string{mode}
}

// resumable keeps the earlier results that belong to this run's items and
// modes.
func resumable(prev []eval.Result, items []eval.Item, modes []string) []eval.Result {
	ids := make(map[string]bool, len(items))
	for i := range items {
		ids[items[i].ID] = true
	}
	var out []eval.Result
	for _, r := range prev {
		if ids[r.ID] && slices.Contains(modes, r.Mode) {
			out = append(out, r)
		}
	}
	return out
}

// isTerminal reports whether w is a terminal, where the progress bar is
// redrawn in place; elsewhere (a file, CI) it prints plain lines.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
