package store_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"chainproxy/internal/redistest"
)

// TestFallbackRedisRefusesWrites: a Redis that answers PING but refuses
// writes is down for the store, for as long as it refuses them, not once
// a second. It happens to a Redis at its maxmemory under the default
// policy, noeviction ("OOM command not allowed",
// https://redis.io/docs/reference/eviction), and to a master demoted to a
// replica by a failover, read-only by default ("READONLY You can't write
// against a read only replica", https://redis.io/docs/management/replication/).
func TestFallbackRedisRefusesWrites(t *testing.T) {
	for _, tc := range []struct {
		name          string
		refuse, allow func(t *testing.T, c *redis.Client)
	}{
		{
			"full, noeviction",
			func(t *testing.T, c *redis.Client) { do(t, c, "config", "set", "maxmemory", "1") },
			func(t *testing.T, c *redis.Client) { do(t, c, "config", "set", "maxmemory", "0") },
		},
		{
			"demoted to a replica",
			func(t *testing.T, c *redis.Client) {
				master := redistest.Start(t)
				host, port, _ := strings.Cut(master.Addr(), ":")
				do(t, c, "replicaof", host, port)
			},
			func(t *testing.T, c *redis.Client) { do(t, c, "replicaof", "no", "one") },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			ctx := context.Background()
			s, logs := openStore(t, srv.URL())
			c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
			t.Cleanup(func() { c.Close() })

			tc.refuse(t, c)
			for i := range 25 {
				if err := s.Set(ctx, "k", []byte(strconv.Itoa(i)), time.Minute); err != nil {
					t.Fatalf("Set while Redis refuses writes: %v", err)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if got := s.Status(); got != "degraded" {
				t.Errorf("Status() while Redis refuses writes = %q, want degraded", got)
			}
			if n, m := logs.count("redis unreachable"), logs.count("recovered"); n != 1 || m != 0 {
				t.Errorf("while Redis refused writes for 2.5s: %d outages and %d recoveries logged, want 1 and 0; logs:\n%s", n, m, logs)
			}

			tc.allow(t, c)
			eventually(t, "the store to use Redis again", func() bool { return s.Status() == "redis" })
			if err := s.Set(ctx, "k", []byte("after"), time.Minute); err != nil {
				t.Fatal(err)
			}
			if v, _ := c.Get(ctx, "k").Result(); v != "after" || s.Status() != "redis" {
				t.Errorf("after Redis takes writes again: Redis has k = %q, status %q; want after, redis", v, s.Status())
			}
		})
	}
}

func do(t *testing.T, c *redis.Client, args ...any) {
	t.Helper()
	if err := c.Do(context.Background(), args...).Err(); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
}
