package store

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Slot keys in Redis, per name (a node): the leases held, scored by when
// they expire; the waiters, scored by class then arrival; when each waiter
// was last seen, so that a dead replica's waiters do not block the queue.
const (
	slotKeyPrefix = "chainproxy:slots:"
	slotFreedChan = "chainproxy:slots:freed" // a name was freed: waiters try again
)

// takeScript takes a slot for a caller, or queues it. The leases and
// waiters that expired are dropped first, all against Redis's own clock, so
// that replicas whose clocks differ agree. A waiter left without a deadline
// (a Redis with an allkeys-* maxmemory policy evicts the deadlines' key on
// its own) gets one, or a dead replica's waiter would hold its place, and
// the slots behind it, for good. The queue holding more waiters than there
// are deadlines is the cheap sign of it.
//
// KEYS[1] leases, KEYS[2] queue, KEYS[3] waiters' deadlines, KEYS[4] the
// arrival counter. ARGV[1] id, ARGV[2] class (0 interactive, 1 batch),
// ARGV[3] limit, ARGV[4] max queue, ARGV[5] lease ms, ARGV[6] waiter ttl ms.
//
// Returns {1, queued} when the slot is taken (a lease id = ARGV[1] held for
// the lease), {0, queued} when the caller waits in the queue (its place kept
// by class then arrival), {-1, queued} when the queue is full.
var takeScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local dead = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)
for _, w in ipairs(dead) do redis.call('ZREM', KEYS[2], w) end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
if redis.call('ZCARD', KEYS[2]) > redis.call('ZCARD', KEYS[3]) then
  for _, w in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
    redis.call('ZADD', KEYS[3], 'NX', now + tonumber(ARGV[6]), w)
  end
end
local id = ARGV[1]
local limit = tonumber(ARGV[3])
local free = limit - redis.call('ZCARD', KEYS[1])
local queued = redis.call('ZCARD', KEYS[2])
local score = redis.call('ZSCORE', KEYS[2], id)
if not score then
  if queued == 0 and free > 0 then
    redis.call('ZADD', KEYS[1], now + tonumber(ARGV[5]), id)
    return {1, 0}
  end
  if queued >= tonumber(ARGV[4]) then
    return {-1, queued}
  end
  score = tonumber(ARGV[2]) * 1e15 + redis.call('INCR', KEYS[4])
  redis.call('ZADD', KEYS[2], score, id)
  queued = queued + 1
end
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[6]), id)
if free > 0 and redis.call('ZRANK', KEYS[2], id) < free then
  redis.call('ZREM', KEYS[2], id)
  redis.call('ZREM', KEYS[3], id)
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[5]), id)
  return {1, queued - 1}
end
return {0, queued}
`)

// renewScript extends a lease, taking it again when Redis lost it
// (restarted empty, evicted, or stalled past the lease): only a holder
// whose call still runs renews, and a call that runs must count, even if
// that puts its node over the limit until a call ends. KEYS[1] leases;
// ARGV[1] id, ARGV[2] lease ms. Returns 0 when the lease had been lost.
var renewScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
if not expiry or tonumber(expiry) <= now then return 0 end
return 1
`)

// releaseScript gives a lease back, or leaves the queue, and tells the
// waiters of every replica, when there are any: takeScript queues a caller
// only when it finds no slot, in the same atomic step, so a slot freed
// while the queue is empty is found by the next taker and nobody needs
// waking, and no replica gets a message per call. KEYS[1] leases, KEYS[2] queue, KEYS[3] waiters'
// deadlines; ARGV[1] id, ARGV[2] channel, ARGV[3] name.
var releaseScript = redis.NewScript(`
local n = redis.call('ZREM', KEYS[1], ARGV[1]) + redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if n > 0 and redis.call('ZCARD', KEYS[2]) > 0 then redis.call('PUBLISH', ARGV[2], ARGV[3]) end
return n
`)

// Slots are counting semaphores in Redis shared by replicas: each slot is
// a lease that its holder renews and gives back, and that expires when its
// holder dies. Callers that find no slot wait in a queue kept in Redis,
// interactive before batch then in arrival order, and are woken by a
// pub/sub message when a slot is given back.
type Slots struct {
	client *redis.Client
	lease  time.Duration

	mu     sync.Mutex
	freed  map[string]chan struct{} // closed when name is next freed
	stop   context.CancelFunc
	closed chan struct{}
}

// NewSlots returns the semaphores in the Redis at url, with leases of
// lease. It starts one goroutine listening for freed slots, which exits on
// Close. Every call fails fast while Redis is down (see NewRedis).
func NewSlots(url string, lease time.Duration) (*Slots, error) {
	r, err := NewRedis(url, 0)
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &Slots{client: r.client, lease: lease, freed: map[string]chan struct{}{}, stop: stop, closed: make(chan struct{})}
	ps := s.client.Subscribe(ctx, slotFreedChan)
	// Wait for the subscription to be in place, as go-redis advises before
	// anything is published: a slot freed before it would wake nobody
	// here. Bounded like every Redis call: with Redis down the
	// subscription comes up by itself later, and waiters poll meanwhile.
	rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, _ = ps.Receive(rctx)
	cancel()
	go s.listen(ctx, ps)
	return s, nil
}

// Lease is how long a slot lasts unless renewed.
func (s *Slots) Lease() time.Duration { return s.lease }

// listen wakes the local waiters of each name freed, on any replica. The
// subscription reconnects by itself after an outage; waiters also poll, so
// a message lost then only delays them. It exits when ctx ends (Close).
func (s *Slots) listen(ctx context.Context, ps *redis.PubSub) {
	defer close(s.closed)
	defer ps.Close()
	ch := ps.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			s.wake(m.Payload)
		}
	}
}

func (s *Slots) wake(name string) {
	s.mu.Lock()
	if c, ok := s.freed[name]; ok {
		close(c)
		delete(s.freed, name)
	}
	s.mu.Unlock()
}

// Freed returns a channel closed the next time a slot of name is given
// back on any replica.
func (s *Slots) Freed(name string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.freed[name]
	if !ok {
		c = make(chan struct{})
		s.freed[name] = c
	}
	return c
}

func slotKeys(name string) []string {
	p := slotKeyPrefix + name
	return []string{p + ":leases", p + ":queue", p + ":seen", p + ":seq"}
}

// Take takes a slot of name for id when one is free and nobody waits
// before id, else keeps id's place in the queue (batch after interactive,
// then in arrival order). A caller that waits calls Take again, within
// waitTTL, until it is granted, or Leave: a waiter not seen for waitTTL is
// dropped. full means the queue already held maxQueue waiters; queued is
// how many wait.
func (s *Slots) Take(ctx context.Context, name, id string, batch bool, limit, maxQueue int, waitTTL time.Duration) (granted, full bool, queued int, err error) {
	class := 0
	if batch {
		class = 1
	}
	res, err := takeScript.Run(ctx, s.client, slotKeys(name), id, class, limit, maxQueue, s.lease.Milliseconds(), waitTTL.Milliseconds()).Int64Slice()
	if err != nil {
		return false, false, 0, fmt.Errorf("store: take slot: %w", err)
	}
	return res[0] == 1, res[0] == -1, int(res[1]), nil
}

// Renew extends id's lease of name by the lease; held is false when the
// lease had been lost, and Renew took it again.
func (s *Slots) Renew(ctx context.Context, name, id string) (held bool, err error) {
	n, err := renewScript.Run(ctx, s.client, slotKeys(name)[:1], id, s.lease.Milliseconds()).Int64()
	if err != nil {
		return false, fmt.Errorf("store: renew slot: %w", err)
	}
	return n == 1, nil
}

// Release gives id's slot of name back, or takes id out of its queue, and
// wakes the waiters of every replica.
func (s *Slots) Release(ctx context.Context, name, id string) error {
	if err := releaseScript.Run(ctx, s.client, slotKeys(name)[:3], id, slotFreedChan, name).Err(); err != nil {
		return fmt.Errorf("store: release slot: %w", err)
	}
	return nil
}

// Ping reports whether Redis answers and takes writes, as every call of
// the slots needs.
func (s *Slots) Ping(ctx context.Context) error { return writable(ctx, s.client) }

// Close stops listening and closes the connections.
func (s *Slots) Close() error {
	s.stop()
	<-s.closed
	return s.client.Close()
}
