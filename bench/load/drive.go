package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// target is one server under test.
type target struct {
	name string
	url  string // base URL, http://host:port
	pid  int
	// model is the request's model: "A", the proxy's node A (a plain relay
	// to it), unless set; the bare proxy and the upstream ignore it.
	model string
}

func (t target) modelOr() string {
	if t.model != "" {
		return t.model
	}
	return "A"
}

// cell is one measurement: a target, a mode and a number of connections.
type cell struct {
	target string
	stream bool
	conns  int
}

// sample is what one cell measured.
type sample struct {
	n, errs   int
	warm      int // requests made during the warm-up, not measured
	elapsed   time.Duration
	lat       []time.Duration // whole request, send to last byte
	ttfc      []time.Duration // stream: send to first content chunk
	minChunks int             // stream: content chunks per response
	maxChunks int
	firstErr  string
}

func (s *sample) merge(o *sample) {
	s.n += o.n
	s.errs += o.errs
	s.warm += o.warm
	s.elapsed += o.elapsed
	s.lat = append(s.lat, o.lat...)
	s.ttfc = append(s.ttfc, o.ttfc...)
	if s.minChunks == 0 || o.minChunks != 0 && o.minChunks < s.minChunks {
		s.minChunks = o.minChunks
	}
	s.maxChunks = max(s.maxChunks, o.maxChunks)
	if s.firstErr == "" {
		s.firstErr = o.firstErr
	}
}

func (s *sample) rps() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(s.n) / s.elapsed.Seconds()
}

// requestBody is what every client sends: a model (the upstream reads a
// per-chunk delay from "bench@500ms" and ignores any other), a system and a
// user message, no tools.
func requestBody(model string, stream bool) []byte {
	return fmt.Appendf(nil, `{"model":%q,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Say hello to the benchmark in twenty words."}],"stream":%t}`, model, stream)
}

// newClient is the load generator's client for conns connections: plain
// HTTP/1.1, no compression, enough idle connections to keep them all.
func newClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        conns + 16,
		MaxIdleConnsPerHost: conns + 16,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}}
}

// result is one request's outcome.
type result struct {
	lat, ttfc time.Duration
	chunks    int
	gaps      []time.Duration // with keepGaps: between consecutive content chunks
	err       error
}

var (
	dataPrefix   = []byte("data: ")
	contentKey   = []byte(`"content":"`)
	emptyContent = []byte(`"content":""`)
	doneData     = []byte("[DONE]")
)

// do sends one request and reads its whole answer. For a stream it times
// the first content chunk (and calls onFirst, when set) and counts content
// chunks; it fails unless the stream ends with data: [DONE].
func do(ctx context.Context, client *http.Client, url string, body []byte, stream, keepGaps bool, onFirst func()) result {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return result{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return result{err: fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(msg))}
	}
	if !stream {
		data, err := io.ReadAll(resp.Body)
		r := result{lat: time.Since(start), err: err}
		if err == nil && !bytes.Contains(data, contentKey) {
			r.err = fmt.Errorf("no content in %.200s", data)
		}
		return r
	}
	var r result
	br := bufio.NewReaderSize(resp.Body, 4096)
	var last time.Time
	done := false
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 && bytes.HasPrefix(line, dataPrefix) {
			payload := bytes.TrimSpace(line[len(dataPrefix):])
			switch {
			case bytes.Equal(payload, doneData):
				done = true
			case bytes.Contains(payload, contentKey) && !bytes.Contains(payload, emptyContent):
				now := time.Now()
				if r.chunks == 0 {
					r.ttfc = now.Sub(start)
					if onFirst != nil {
						onFirst()
					}
				} else if keepGaps {
					r.gaps = append(r.gaps, now.Sub(last))
				}
				last = now
				r.chunks++
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			return result{err: errors.New("SSE line longer than 4 KiB")}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return result{err: err}
			}
			break
		}
	}
	r.lat = time.Since(start)
	switch {
	case !done:
		r.err = errors.New("stream ended without data: [DONE]")
	case r.chunks == 0:
		r.err = errors.New("stream without content")
	}
	return r
}

// runCell drives url with conns workers for warmup, then measures for d.
// Requests that start in the measured window count, so the window ends when
// the last of them does.
func runCell(ctx context.Context, t target, c cell, warmup, d time.Duration) *sample {
	client := newClient(c.conns)
	defer client.CloseIdleConnections()
	body := requestBody(t.modelOr(), c.stream)
	begin := time.Now()
	measureFrom, measureTo := begin.Add(warmup), begin.Add(warmup+d)
	per := make([]*sample, c.conns)
	var wg sync.WaitGroup
	var lastEnd time.Time
	var mu sync.Mutex
	for w := range c.conns {
		s := &sample{}
		per[w] = s
		wg.Go(func() { // exits at measureTo or when ctx ends
			var end time.Time
			for ctx.Err() == nil {
				now := time.Now()
				if !now.Before(measureTo) {
					break
				}
				r := do(ctx, client, t.url, body, c.stream, false, nil)
				end = time.Now()
				if now.Before(measureFrom) {
					s.warm++
					continue
				}
				s.n++
				if r.err != nil {
					s.errs++
					if s.firstErr == "" {
						s.firstErr = r.err.Error()
					}
					continue
				}
				s.lat = append(s.lat, r.lat)
				if c.stream {
					s.ttfc = append(s.ttfc, r.ttfc)
					if s.minChunks == 0 || r.chunks < s.minChunks {
						s.minChunks = r.chunks
					}
					s.maxChunks = max(s.maxChunks, r.chunks)
				}
			}
			mu.Lock()
			if end.After(lastEnd) {
				lastEnd = end
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	out := &sample{}
	for _, s := range per {
		out.merge(s)
	}
	out.elapsed = lastEnd.Sub(measureFrom)
	return out
}

// percentile returns the p-th percentile (0 < p ≤ 100) of v, sorted in place.
func percentile(v []time.Duration, p float64) time.Duration {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	i := int(float64(len(v))*p/100+0.999999) - 1
	return v[min(max(i, 0), len(v)-1)]
}

// spread is the relay-as-they-come check of one target.
type spread struct {
	streams  int
	errs     int
	gaps     []time.Duration
	bursts   int             // gaps shorter than half the upstream delay
	spans    []time.Duration // first to last content chunk
	minChunk int
}

// checkSpread sends n streams, one at a time, whose upstream waits delay
// before each chunk, and records when each content chunk reaches the client.
func checkSpread(ctx context.Context, t target, n int, delay time.Duration) *spread {
	client := newClient(1)
	defer client.CloseIdleConnections()
	body := requestBody("bench@"+delay.String(), true)
	sp := &spread{}
	for range n {
		r := do(ctx, client, t.url, body, true, true, nil)
		sp.streams++
		if r.err != nil {
			sp.errs++
			continue
		}
		var span time.Duration
		for _, g := range r.gaps {
			span += g
			if g < delay/2 {
				sp.bursts++
			}
		}
		sp.gaps = append(sp.gaps, r.gaps...)
		sp.spans = append(sp.spans, span)
		if sp.minChunk == 0 || r.chunks < sp.minChunk {
			sp.minChunk = r.chunks
		}
	}
	return sp
}
