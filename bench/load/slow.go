package main

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// slowResult is what holding many slow streams through one target showed.
type slowResult struct {
	target             string
	streams, errs      int
	firstErr           string
	openIn             time.Duration // until every stream had its first chunk
	held               time.Duration // until the last stream ended
	rssBase, rssPeak   int64         // bytes; peak is the largest VmRSS sample
	fileBase, filePeak int64         // their file-backed part (RssFile)
	hwm                int64         // VmHWM at the end: the kernel's peak
	gBase, gPeak       int           // goroutines before and while all are open
	open               goStats       // the Go runtime's figures once all are open
	gAfter             int           // goroutines once the clients closed
	gAfterIn           time.Duration // how long they took to get back
	gBack              bool
	rssAfter           int64
	minChunks, chunks  int
}

// goStats are the Go runtime's figures a target reports in Prometheus text
// (the proxy's /metrics through client_golang's Go collector, the bench
// roles' /_bench/stats with the same names).
type goStats struct {
	goroutines int
	stacks     int64 // go_memstats_stack_inuse_bytes: goroutine stacks
	heap       int64 // go_memstats_heap_alloc_bytes: heap objects, live and not yet collected
	nextGC     int64 // go_memstats_next_gc_bytes: the heap size that starts the next GC
}

// goroutines reads go_goroutines from a Prometheus text page.
func goroutines(ctx context.Context, url string) (int, error) {
	s, err := readGoStats(ctx, url)
	return s.goroutines, err
}

// readGoStats reads goStats from a Prometheus text page (the proxy's
// /metrics, or the bench roles' /_bench/stats).
func readGoStats(ctx context.Context, url string) (goStats, error) {
	var s goStats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return s, err
	}
	// A fresh connection each time, closed after: the probe must not leave
	// an idle connection (and its goroutine) behind in the server.
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	found := false
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			continue
		}
		switch name {
		case "go_goroutines":
			s.goroutines, found = int(f), true
		case "go_memstats_stack_inuse_bytes":
			s.stacks = int64(f)
		case "go_memstats_heap_alloc_bytes":
			s.heap = int64(f)
		case "go_memstats_next_gc_bytes":
			s.nextGC = int64(f)
		}
	}
	if !found {
		return s, errors.New("no go_goroutines in " + url)
	}
	return s, sc.Err()
}

// holdSlowStreams opens n concurrent streams whose upstream waits delay
// before each of its 20 chunks, samples the target's RSS and goroutines
// while they are all open, and checks the goroutines come back to their
// level before once the streams end and the clients close their
// connections. statsURL serves go_goroutines.
func holdSlowStreams(ctx context.Context, t target, statsURL string, n int, delay time.Duration) (*slowResult, error) {
	res := &slowResult{target: t.name, streams: n}
	// Warm the target up, so that whatever it starts once (pools, caches)
	// is in the baseline, then let every connection close: the client's
	// now, the upstream's at its idle timeout.
	warm := newClient(100)
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() { do(ctx, warm, t.url, requestBody("A", true), true, false, nil) })
	}
	wg.Wait()
	warm.CloseIdleConnections()
	var err error
	if res.gBase, err = settle(ctx, statsURL); err != nil {
		return nil, err
	}
	if res.rssBase, _, res.fileBase, err = rssFile(t.pid); err != nil {
		return nil, err
	}

	client := newClient(n)
	body := requestBody("bench@"+delay.String(), true)
	var opened, finished atomic.Int64
	var mu sync.Mutex
	start := time.Now()
	for range n {
		wg.Go(func() { // exits when its stream ends, at most delay × 20 plus slack
			r := do(ctx, client, t.url, body, true, false, func() { opened.Add(1) })
			finished.Add(1)
			mu.Lock()
			defer mu.Unlock()
			if r.err != nil {
				res.errs++
				if res.firstErr == "" {
					res.firstErr = r.err.Error()
				}
				return
			}
			res.chunks += r.chunks
			if res.minChunks == 0 || r.chunks < res.minChunks {
				res.minChunks = r.chunks
			}
		})
	}
	// Sample RSS every 100 ms while the streams run, and the goroutines
	// once they are all open.
	tick := time.NewTicker(100 * time.Millisecond)
	sampled := false
	for finished.Load() < int64(n) {
		select {
		case <-ctx.Done():
			tick.Stop()
			wg.Wait()
			return nil, ctx.Err()
		case <-tick.C:
		}
		if cur, _, file, err := rssFile(t.pid); err == nil && cur > res.rssPeak {
			res.rssPeak, res.filePeak = cur, file
		}
		if !sampled && opened.Load() == int64(n) {
			sampled = true
			res.openIn = time.Since(start)
			if st, err := readGoStats(ctx, statsURL); err == nil {
				res.gPeak, res.open = st.goroutines, st
			}
		}
	}
	tick.Stop()
	wg.Wait()
	res.held = time.Since(start)
	_, res.hwm, _ = rss(t.pid)

	client.CloseIdleConnections()
	after := time.Now()
	for {
		g, err := goroutines(ctx, statsURL)
		if err != nil {
			return nil, err
		}
		res.gAfter, res.gAfterIn = g, time.Since(after)
		if g <= res.gBase {
			res.gBack = true
			break
		}
		if time.Since(after) > upstreamIdleTimeout+10*time.Second {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	res.rssAfter, _, _ = rss(t.pid)
	return res, nil
}

// settle waits until the goroutine count has not dropped for 2 s, at least
// past the upstream's idle timeout and at most 20 s, and returns it.
func settle(ctx context.Context, statsURL string) (int, error) {
	start := time.Now()
	low, lowAt := -1, start
	for {
		g, err := goroutines(ctx, statsURL)
		if err != nil {
			return 0, err
		}
		now := time.Now()
		if low < 0 || g < low {
			low, lowAt = g, now
		}
		if now.Sub(start) > upstreamIdleTimeout && now.Sub(lowAt) >= 2*time.Second || now.Sub(start) > 20*time.Second {
			return low, nil
		}
		select {
		case <-time.After(250 * time.Millisecond):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}
