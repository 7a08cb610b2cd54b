package store

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// probeInterval is how often a degraded Fallback tries Redis again.
const probeInterval = time.Second

// Fallback is a Redis store that keeps answering when Redis does not. Every
// operation goes to Redis while it answers, and its writes are mirrored into
// a Memory so that the anti-loop state of the last moments survives an
// outage. On a Redis error it logs once that it is degraded and serves from
// the Memory; a background goroutine tries a write to Redis every second
// and, when Redis takes it, logs once that it recovered and Redis is used
// again. No operation returns an error because Redis is down; only the
// caller's own context ending is returned.
//
// What was written to the Memory during an outage is not copied back to
// Redis: after recovery, a call made during the outage may run again once on
// another replica.
type Fallback struct {
	redis  *Redis
	mem    *Memory
	logger *slog.Logger

	degraded atomic.Bool
	wake     chan struct{} // buffered 1: a degradation the prober has not seen yet
	stop     context.CancelFunc
	wg       sync.WaitGroup
	once     sync.Once
}

// NewFallback returns a store over r that falls back to mem, logging to
// logger (nil: discard). It starts one goroutine, which exits on Close.
func NewFallback(r *Redis, mem *Memory, logger *slog.Logger) *Fallback {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ctx, stop := context.WithCancel(context.Background())
	f := &Fallback{redis: r, mem: mem, logger: logger, wake: make(chan struct{}, 1), stop: stop}
	f.wg.Add(1)
	go f.probe(ctx)
	return f
}

// probe waits for a degradation, then tries a write to Redis every
// probeInterval until it takes one. It exits when ctx ends (Close).
func (f *Fallback) probe(ctx context.Context) {
	defer f.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		}
		t := time.NewTicker(probeInterval)
		for f.degraded.Load() {
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			pingCtx, cancel := context.WithTimeout(ctx, redisTimeout)
			err := f.redis.reachable(pingCtx)
			if err == nil {
				err = writable(pingCtx, f.redis.client)
			}
			cancel()
			if err == nil && f.degraded.CompareAndSwap(true, false) {
				f.logger.Info("store: redis recovered, using it again")
			}
		}
		t.Stop()
	}
}

// degrade switches to memory after a Redis error, logging once per outage.
func (f *Fallback) degrade(err error) {
	if !f.degraded.CompareAndSwap(false, true) {
		return
	}
	f.logger.Warn("store: redis unreachable, serving from memory", "err", err)
	select {
	case f.wake <- struct{}{}:
	default: // the prober already has a pending wake-up
	}
}

// failed reports whether an error of Redis must be returned (the caller's
// context ended) rather than answered from memory, and degrades otherwise.
func (f *Fallback) failed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	f.degrade(err)
	return nil
}

// Claim claims key in Redis, or in memory while degraded.
func (f *Fallback) Claim(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	if !f.degraded.Load() {
		ok, err := f.redis.Claim(ctx, key, ttl)
		if err == nil {
			if ok {
				_ = f.mem.Set(ctx, key, []byte(pending), ttl)
			}
			return ok, nil
		}
		if err := f.failed(ctx, err); err != nil {
			return false, err
		}
	}
	return f.mem.Claim(ctx, key, ttl)
}

// Get reads key from Redis, or from memory while degraded.
func (f *Fallback) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if !f.degraded.Load() {
		val, ok, err := f.redis.Get(ctx, key)
		if err == nil {
			return val, ok, nil
		}
		if err := f.failed(ctx, err); err != nil {
			return nil, false, err
		}
	}
	return f.mem.Get(ctx, key)
}

// Set writes key to Redis and memory, or to memory alone while degraded.
func (f *Fallback) Set(ctx context.Context, key string, val []byte, ttl time.Duration) error {
	if !f.degraded.Load() {
		if err := f.redis.Set(ctx, key, val, ttl); err != nil {
			if err := f.failed(ctx, err); err != nil {
				return err
			}
		}
	}
	return f.mem.Set(ctx, key, val, ttl)
}

// Delete removes key from Redis and memory, or from memory alone while
// degraded.
func (f *Fallback) Delete(ctx context.Context, key string) error {
	if !f.degraded.Load() {
		if err := f.redis.Delete(ctx, key); err != nil {
			if err := f.failed(ctx, err); err != nil {
				return err
			}
		}
	}
	return f.mem.Delete(ctx, key)
}

// PutTrace stores a trace in Redis and memory, or in memory alone while
// degraded.
func (f *Fallback) PutTrace(ctx context.Context, id string, data []byte) error {
	if !f.degraded.Load() {
		if err := f.redis.PutTrace(ctx, id, data); err != nil {
			if err := f.failed(ctx, err); err != nil {
				return err
			}
		}
	}
	return f.mem.PutTrace(ctx, id, data)
}

// GetTrace reads a trace from Redis, or from memory while degraded.
func (f *Fallback) GetTrace(ctx context.Context, id string) ([]byte, bool, error) {
	if !f.degraded.Load() {
		data, ok, err := f.redis.GetTrace(ctx, id)
		if err == nil {
			return data, ok, nil
		}
		if err := f.failed(ctx, err); err != nil {
			return nil, false, err
		}
	}
	return f.mem.GetTrace(ctx, id)
}

// PutSummary puts a trace list summary in Redis; while degraded it does
// nothing: each replica then lists its own chains, as one without Redis.
func (f *Fallback) PutSummary(ctx context.Context, id string, data []byte) error {
	if f.degraded.Load() {
		return nil
	}
	if err := f.redis.PutSummary(ctx, id, data); err != nil {
		return f.failed(ctx, err)
	}
	return nil
}

// Summaries reads the trace list summaries from Redis; while degraded
// there are none.
func (f *Fallback) Summaries(ctx context.Context) ([][]byte, error) {
	if f.degraded.Load() {
		return nil, nil
	}
	sums, err := f.redis.Summaries(ctx)
	if err != nil {
		return nil, f.failed(ctx, err)
	}
	return sums, nil
}

// WatchSummaries watches the summaries put in Redis, whether degraded or
// not: the subscription outlives an outage by itself, and the replicas
// still writing to Redis are heard.
func (f *Fallback) WatchSummaries(ctx context.Context, fn func(data []byte)) {
	f.redis.WatchSummaries(ctx, fn)
}

// Status returns "redis", or "degraded" while serving from memory.
func (f *Fallback) Status() string {
	if f.degraded.Load() {
		return StatusDegraded
	}
	return StatusRedis
}

// Close stops the prober, waits for it, and closes the Redis connections.
func (f *Fallback) Close() error {
	var err error
	f.once.Do(func() {
		f.stop()
		f.wg.Wait()
		err = f.redis.Close()
	})
	return err
}
