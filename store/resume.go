package store

import (
	"context"
	"time"
)

// resumeKeyPrefix namespaces the chains waiting for a client's tool results
// (chain.ResumeStore); the chain chooses the rest of the key.
const resumeKeyPrefix = "chainproxy:resume:"

// PutResume keeps a paused chain's state under key for ttl.
func (m *Memory) PutResume(ctx context.Context, key string, state []byte, ttl time.Duration) error {
	return m.Set(ctx, resumeKeyPrefix+key, state, ttl)
}

// GetResume returns the paused chain's state under key.
func (m *Memory) GetResume(ctx context.Context, key string) ([]byte, bool, error) {
	return m.Get(ctx, resumeKeyPrefix+key)
}

// PutResume keeps a paused chain's state under key for ttl, where every
// replica finds it.
func (r *Redis) PutResume(ctx context.Context, key string, state []byte, ttl time.Duration) error {
	return r.Set(ctx, resumeKeyPrefix+key, state, ttl)
}

// GetResume returns the paused chain's state under key.
func (r *Redis) GetResume(ctx context.Context, key string) ([]byte, bool, error) {
	return r.Get(ctx, resumeKeyPrefix+key)
}

// PutResume keeps the state in Redis and memory, or in memory alone while
// degraded, so that the replica that paused can resume during an outage.
func (f *Fallback) PutResume(ctx context.Context, key string, state []byte, ttl time.Duration) error {
	return f.Set(ctx, resumeKeyPrefix+key, state, ttl)
}

// GetResume reads the state from Redis, or from memory while degraded.
func (f *Fallback) GetResume(ctx context.Context, key string) ([]byte, bool, error) {
	return f.Get(ctx, resumeKeyPrefix+key)
}
