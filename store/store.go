// Package store is where anti-loop state and chain traces live: in process
// ([Memory], the default) or in Redis ([Redis]) so that replicas share them,
// with [Fallback] serving from memory while Redis is unreachable.
//
// Keys are chosen by the callers (antiloop namespaces its own); this package
// only adds the trace keys and the trace list's shared summaries ([Redis]
// and [Fallback] only: in one process the server's own list is the whole
// list), under "chainproxy:". It imports antiloop for the interface its
// stores satisfy and no other project package.
package store

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"chainproxy/antiloop"
)

// Store is what [Open] returns: the anti-loop state, the recent traces and
// the store's health, for wiring at startup. Consumers declare the smaller
// interface they need, such as [antiloop.Store].
type Store interface {
	antiloop.Store
	// PutTrace keeps data under id; only the most recent traces are kept.
	// The store may keep data itself: the caller must not change it after.
	PutTrace(ctx context.Context, id string, data []byte) error
	// GetTrace returns the trace stored under id.
	GetTrace(ctx context.Context, id string) ([]byte, bool, error)
	// PutResume and GetResume keep the chains waiting for a client's tool
	// results (chain.ResumeStore).
	PutResume(ctx context.Context, key string, state []byte, ttl time.Duration) error
	GetResume(ctx context.Context, key string) ([]byte, bool, error)
	// Status is "memory", "redis" or "degraded" (Redis configured but
	// unreachable, serving from memory), as /readyz reports it.
	Status() string
	// Close releases connections and background goroutines.
	Close() error
}

var (
	_ Store = (*Memory)(nil)
	_ Store = (*Redis)(nil)
	_ Store = (*Fallback)(nil)
)

// Status values.
const (
	StatusMemory   = "memory"
	StatusRedis    = "redis"
	StatusDegraded = "degraded"
)

// DefaultTraces is how many traces are kept when the caller says 0.
const DefaultTraces = 500

// pending is the value of a claimed key, as antiloop.Store documents.
const pending = "pending"

// Open returns the store the configuration asks for: [Memory] when redisURL
// is empty, else a [Fallback] over Redis. A malformed URL is an error; a
// Redis that does not answer at startup is not: the store starts degraded,
// logs it, and switches to Redis when it answers. ctx bounds the startup
// ping only. traces is how many recent traces are kept (0: DefaultTraces).
func Open(ctx context.Context, redisURL string, traces int, logger *slog.Logger) (Store, error) {
	if redisURL == "" {
		return NewMemory(0, traces), nil
	}
	r, err := NewRedis(redisURL, traces)
	if err != nil {
		return nil, err
	}
	// go-redis logs every failed dial to its own process-wide logger: one
	// line per request while Redis is down. Fallback already logs the outage
	// once; keep go-redis's lines at debug level in our logger.
	redis.SetLogger(debugLogger{logger})
	f := NewFallback(r, NewMemory(0, traces), logger)
	pingCtx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	if err := r.Ping(pingCtx); err != nil {
		f.degrade(err)
	} else {
		f.logger.Info("store: using redis", "addr", r.client.Options().Addr)
	}
	return f, nil
}

// debugLogger adapts slog to go-redis's logger interface.
type debugLogger struct{ l *slog.Logger }

func (d debugLogger) Printf(ctx context.Context, format string, v ...any) {
	if d.l != nil {
		d.l.DebugContext(ctx, "redis client", "msg", fmt.Sprintf(format, v...))
	}
}
