package store

import (
	"context"
	"errors"
	"fmt"
	"net"
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

// Redis is a store in Redis, shared by every replica that uses the same
// server. Claims are SET NX PX; values expire with Redis TTLs; traces are a
// capped list of ids plus one key per trace.
type Redis struct {
	client *redis.Client
	traces int
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
	return &Redis{client: redis.NewClient(opts), traces: traces}, nil
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

// Close closes the connections.
func (r *Redis) Close() error { return r.client.Close() }
