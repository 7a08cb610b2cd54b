package main

import (
	"context"
	"log/slog"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/chain/node"
	"chainproxy/classify"
	"chainproxy/config"
	"chainproxy/internal/redact"
	"chainproxy/store"
	"chainproxy/tools"
	"chainproxy/tools/mcp"
)

// wired is what a configuration becomes for serving and for eval alike:
// the store, the tools (MCP servers started), the admission of calls to
// nodes, and the engine over them. One constructor, so that an evaluation
// measures the engine the server runs.
type wired struct {
	engine *chain.Engine
	// nodes are the nodes the engine runs on, which the operational
	// endpoints read (web.Options.Nodes).
	nodes     *node.Set
	store     store.Store
	registry  *tools.Registry
	local     *node.Admission
	admission interface {
		node.Admitter
		Queued(node string) int
	}
	closers []func() error
}

// wire builds the engine of cfg. Close releases what it opened, MCP
// sessions and child processes included; it is called even on an error.
func wire(ctx context.Context, cfg *config.Config, red redact.Redactor, logger *slog.Logger) (*wired, error) {
	w := &wired{}
	st, err := store.Open(ctx, cfg.Store.RedisURL, cfg.Chain.Traces, logger)
	if err != nil {
		return w, err
	}
	w.store = st
	w.closers = append(w.closers, st.Close)
	registry, err := tools.New(cfg.Tools, nil)
	if err != nil {
		return w, err
	}
	w.registry = registry
	registry.StartMCP(ctx, cfg.Tools.MCP, mcp.Options{Logger: logger})
	w.closers = append(w.closers, func() error { registry.Close(); return nil }) // ends MCP sessions and child processes
	w.local = node.NewAdmission(cfg.Nodes)
	w.admission = w.local
	if cfg.Store.RedisURL != "" {
		// Replicas on one Redis keep the nodes' limits together.
		slots, err := store.NewSlots(cfg.Store.RedisURL, cfg.Admission.Lease)
		if err != nil {
			return w, err
		}
		w.closers = append(w.closers, slots.Close)
		w.admission = node.NewSharedAdmission(ctx, cfg.Nodes, slots, w.local, logger)
	}
	w.nodes, err = buildNodes(cfg)
	if err != nil {
		return w, err
	}
	if cfg.Store.RedisURL == "" {
		// Replicas sharing limits through Redis keep the shared order:
		// one replica's account of what a server holds would miss the
		// others' calls.
		w.local.ScheduleLoads(cfg.Nodes, w.nodes, cfg.Admission.MaxReorderWait)
	}
	w.engine, err = chain.New(cfg, chain.Deps{
		Nodes:      w.nodes,
		Tools:      registry,
		Guard:      antiloop.NewGuard(st, cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL),
		Classifier: classify.New(cfg.Classify, registry.Names()),
		Logger:     logger,
		Admission:  w.admission,
		Resume:     st,
		Memory:     st,
		Redactor:   red,
	})
	return w, err
}

// Close releases what wire opened, the last opened first.
func (w *wired) Close() {
	for i := len(w.closers) - 1; i >= 0; i-- {
		_ = w.closers[i]()
	}
}
