package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// soakResult is what a bounded soak saw.
type soakResult struct {
	requests, errors   int64
	firstErr           string
	goroutinesBefore   int
	goroutinesAfter    int
	elapsed            time.Duration
	streams, nonStream int64
}

// soak drives the proxy with conns concurrent clients for d, each
// alternating stream and non-stream requests, and counts every request that
// did not end well (a non-200, a stream without [DONE] or with fewer than
// 20 content chunks, a transport error). Loopback only, bounded in time.
func soak(ctx context.Context, t target, statsURL string, conns int, d time.Duration) (*soakResult, error) {
	res := &soakResult{}
	var err error
	if res.goroutinesBefore, err = goroutines(ctx, statsURL); err != nil {
		return nil, err
	}
	client := newClient(conns)
	defer client.CloseIdleConnections()
	bodies := [2][]byte{requestBody(t.modelOr(), false), requestBody(t.modelOr(), true)}
	var mu sync.Mutex
	var requests, errs, streams atomic.Int64
	deadline := time.Now().Add(d)
	begin := time.Now()
	var wg sync.WaitGroup
	for w := range conns {
		wg.Go(func() { // exits at the deadline or when ctx ends
			for i := w; ctx.Err() == nil && time.Now().Before(deadline); i++ {
				stream := i%2 == 1
				r := do(ctx, client, t.url, bodies[i%2], stream, false, nil)
				requests.Add(1)
				if stream {
					streams.Add(1)
				}
				if r.err == nil && stream && r.chunks < 20 {
					r.err = fmt.Errorf("stream with %d content chunks, want 20", r.chunks)
				}
				if r.err != nil && ctx.Err() == nil {
					errs.Add(1)
					mu.Lock()
					if res.firstErr == "" {
						res.firstErr = r.err.Error()
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(begin)
	res.requests, res.errors, res.streams = requests.Load(), errs.Load(), streams.Load()
	res.nonStream = res.requests - res.streams
	client.CloseIdleConnections()
	if res.goroutinesAfter, err = settle(ctx, statsURL); err != nil {
		return nil, err
	}
	return res, nil
}

func reportSoak(w io.Writer, r *soakResult, conns int) {
	fmt.Fprintf(w, "## Soak\n\n%d concurrent clients for %s, alternating stream and non-stream requests, against the proxy.\n\n", conns, r.elapsed.Round(time.Second))
	fmt.Fprintf(w, "| requests | streams | non-stream | errors | first error | goroutines before | after |\n|---:|---:|---:|---:|---|---:|---:|\n")
	fmt.Fprintf(w, "| %d | %d | %d | %d | %s | %d | %d |\n\n", r.requests, r.streams, r.nonStream, r.errors, r.firstErr, r.goroutinesBefore, r.goroutinesAfter)
}
