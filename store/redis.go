package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// redisTimeout bounds dialling, each read and write, and waiting for a pooled
// connection, so that a dead Redis costs a request at most this long before
// the Fallback takes over.
const redisTimeout = 500 * time.Millisecond

// Trace keys in Redis.
const (
	traceListKey   = "chainproxy:traces" // ids, newest first
	traceKeyPrefix = "chainproxy:trace:" // + id: the trace
	traceTTL       = 7 * 24 * time.Hour  // backstop for keys the list lost
)

// putTraceScript stores a trace and keeps only the newest N, atomically so
// that replicas writing at once agree on which are kept.
//
// KEYS[1] list, KEYS[2] trace key; ARGV[1] id, ARGV[2] data, ARGV[3] N,
// ARGV[4] trace key prefix, ARGV[5] TTL in ms. The keys of dropped traces are
// derived from the list (not declared in KEYS): fine on a single Redis, which
// is what this store targets.
var putTraceScript = redis.NewScript(`
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[5])
redis.call('LREM', KEYS[1], 0, ARGV[1])
redis.call('LPUSH', KEYS[1], ARGV[1])
local n = tonumber(ARGV[3])
local old = redis.call('LRANGE', KEYS[1], n, -1)
for _, id in ipairs(old) do
  redis.call('DEL', ARGV[4] .. id)
end
redis.call('LTRIM', KEYS[1], 0, n - 1)
return #old
`)

// Summary keys in Redis: the trace list's recent chains, shared by the
// replicas (see PutSummary).
const (
	summaryKey      = "chainproxy:summaries"         // hash: id → summary
	summaryOrderKey = "chainproxy:summaries:order"   // sorted set: ids by first put
	summaryChan     = "chainproxy:summaries:changed" // each summary put
)

// putSummaryScript keeps a chain's summary, keeps only the newest N and
// tells every replica, in one step so that replicas putting at once agree
// on which are kept and each message matches what is stored. A chain keeps
// its place (ZADD NX) while its summary changes. Should the order key be
// lost (evicted under an allkeys-* policy) while the hash stays, the
// summaries it no longer orders are dropped, or the hash would grow for
// as long as replicas write to it.
//
// KEYS[1] hash, KEYS[2] order; ARGV[1] id, ARGV[2] summary, ARGV[3] N,
// ARGV[4] TTL in ms, ARGV[5] channel.
var putSummaryScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], 'NX', now, ARGV[1])
local n = tonumber(ARGV[3])
for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, -n - 1)) do
  redis.call('HDEL', KEYS[1], id)
end
redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -n - 1)
if redis.call('HLEN', KEYS[1]) > redis.call('ZCARD', KEYS[2]) then
  for _, id in ipairs(redis.call('HKEYS', KEYS[1])) do
    if not redis.call('ZSCORE', KEYS[2], id) then redis.call('HDEL', KEYS[1], id) end
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
redis.call('PUBLISH', ARGV[5], ARGV[2])
return 1
`)

// Redis is a store in Redis, shared by every replica that uses the same
// server. Claims are SET NX PX; values expire with Redis TTLs; traces are a
// capped list of ids plus one key per trace; the trace list's summaries are
// a capped hash, with a pub/sub channel for their changes.
type Redis struct {
	client *redis.Client
	traces int

	// done is closed by Close, which waits for the summary watchers.
	done     chan struct{}
	mu       sync.Mutex // guards closed and adding watchers
	closed   bool
	watchers sync.WaitGroup
}

// NewRedis returns a store for the Redis at url (redis://[user:pass@]host:port/db
// or rediss://…), keeping the last traces traces (0: DefaultTraces). It does
// not connect: the first operation does. Timeouts not set in the URL default
// to 500 ms and commands are not retried, so that a dead Redis never stalls a
// request for long.
func NewRedis(url string, traces int) (*Redis, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("store: redis url: %w", err)
	}
	if traces <= 0 {
		traces = DefaultTraces
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = redisTimeout
	}
	if opts.ReadTimeout == 0 {
		opts.ReadTimeout = redisTimeout
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = redisTimeout
	}
	if opts.PoolTimeout == 0 {
		opts.PoolTimeout = redisTimeout
	}
	if opts.MaxRetries == 0 {
		opts.MaxRetries = -1 // none: the Fallback is the retry
	}
	if opts.DialerRetries == 0 {
		// One dial attempt per command, not go-redis's five with backoff:
		// a blackholed Redis would otherwise hold a request for seconds.
		opts.DialerRetries = 1
	}
	// Plain Redis has neither CLIENT SETINFO (before 7.2) nor maintenance
	// notifications; asking for them only adds a round trip and log noise.
	opts.DisableIdentity = true
	opts.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return &Redis{client: redis.NewClient(opts), traces: traces, done: make(chan struct{})}, nil
}

// Claim sets key to "pending" for ttl if it is absent (SET NX PX) and
// reports whether it did. A non-positive ttl never expires.
func (r *Redis) Claim(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	args := []any{"set", key, pending, "nx"}
	if ttl > 0 {
		args = append(args, "px", max(ttl.Milliseconds(), 1))
	}
	err := r.client.Do(ctx, args...).Err()
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, redis.Nil):
		return false, nil
	}
	return false, fmt.Errorf("store: redis claim: %w", err)
}

// Get returns the value under key.
func (r *Redis) Get(ctx context.Context, key string) ([]byte, bool, error) {
	val, err := r.client.Get(ctx, key).Bytes()
	switch {
	case err == nil:
		return val, true, nil
	case errors.Is(err, redis.Nil):
		return nil, false, nil
	}
	return nil, false, fmt.Errorf("store: redis get: %w", err)
}

// Set stores val under key for ttl. A non-positive ttl never expires.
func (r *Redis) Set(ctx context.Context, key string, val []byte, ttl time.Duration) error {
	// go-redis reads -1 as KEEPTTL; this store's contract is "no expiry".
	if err := r.client.Set(ctx, key, val, max(ttl, 0)).Err(); err != nil {
		return fmt.Errorf("store: redis set: %w", err)
	}
	return nil
}

// Delete removes key.
func (r *Redis) Delete(ctx context.Context, key string) error {
	if err := r.client.Del(ctx, key).Err(); err != nil {
		return fmt.Errorf("store: redis del: %w", err)
	}
	return nil
}

// PutTrace stores data under id and drops the traces beyond the newest N.
func (r *Redis) PutTrace(ctx context.Context, id string, data []byte) error {
	err := putTraceScript.Run(ctx, r.client, []string{traceListKey, traceKeyPrefix + id},
		id, data, r.traces, traceKeyPrefix, traceTTL.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("store: redis put trace: %w", err)
	}
	return nil
}

// GetTrace returns the trace stored under id.
func (r *Redis) GetTrace(ctx context.Context, id string) ([]byte, bool, error) {
	data, err := r.client.Get(ctx, traceKeyPrefix+id).Bytes()
	switch {
	case err == nil:
		return data, true, nil
	case errors.Is(err, redis.Nil):
		return nil, false, nil
	}
	return nil, false, fmt.Errorf("store: redis get trace: %w", err)
}

// PutSummary keeps data, the latest summary of chain id, among the newest
// N (as many as the traces, so that a listed chain's trace can be read),
// and sends it to every watcher. The summaries expire with the traces'
// TTL after the last put.
func (r *Redis) PutSummary(ctx context.Context, id string, data []byte) error {
	err := putSummaryScript.Run(ctx, r.client, []string{summaryKey, summaryOrderKey},
		id, data, r.traces, traceTTL.Milliseconds(), summaryChan).Err()
	if err != nil {
		return fmt.Errorf("store: redis put summary: %w", err)
	}
	return nil
}

// Summaries returns the summaries kept, in no particular order (each says
// when its chain started).
func (r *Redis) Summaries(ctx context.Context) ([][]byte, error) {
	vals, err := r.client.HVals(ctx, summaryKey).Result()
	if err != nil {
		return nil, fmt.Errorf("store: redis summaries: %w", err)
	}
	out := make([][]byte, len(vals))
	for i, v := range vals {
		out[i] = []byte(v)
	}
	return out, nil
}

// WatchSummaries calls fn with each summary put, by any replica, this one
// included, until ctx ends or the store is closed. While Redis is away the
// subscription comes back by itself; what was put meanwhile is not heard
// (Summaries has it).
func (r *Redis) WatchSummaries(ctx context.Context, fn func(data []byte)) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.watchers.Add(1)
	r.mu.Unlock()
	defer r.watchers.Done()
	ps := r.client.Subscribe(ctx, summaryChan)
	defer ps.Close()
	ch := ps.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.done:
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			fn([]byte(m.Payload))
		}
	}
}

// Ping checks that Redis answers.
func (r *Redis) Ping(ctx context.Context) error {
	if err := r.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("store: redis ping: %w", err)
	}
	return nil
}

// probeKey is the key written to learn that Redis is back after an error.
const probeKey = "chainproxy:probe"

// writable checks that Redis takes a write, not only that it answers: one
// at its maxmemory under noeviction, or a master demoted to a read-only
// replica, answers PING and refuses every write, and a caller that took
// PING for recovery would switch back and forth every second.
func writable(ctx context.Context, c *redis.Client) error {
	if err := c.Set(ctx, probeKey, "", time.Second).Err(); err != nil {
		return fmt.Errorf("store: redis write probe: %w", err)
	}
	return nil
}

// reachable checks that Redis's address accepts a connection, without going
// through the client: go-redis logs every failed dial to its own global
// logger, which a prober retrying every second would flood during an outage.
func (r *Redis) reachable(ctx context.Context) error {
	opts := r.client.Options()
	d := net.Dialer{Timeout: opts.DialTimeout}
	conn, err := d.DialContext(ctx, opts.Network, opts.Addr)
	if err != nil {
		return err
	}
	return conn.Close()
}

// Status returns "redis".
func (r *Redis) Status() string { return StatusRedis }

// Close ends the summary watchers, waits for them, and closes the
// connections.
func (r *Redis) Close() error {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		close(r.done)
	}
	r.mu.Unlock()
	r.watchers.Wait()
	return r.client.Close()
}
