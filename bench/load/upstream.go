package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	_ "net/http/pprof" // served only on -pprof's own listener
	"runtime"
	"strings"
	"time"
)

// The mock upstream's answer: chunkCount content chunks of one word each.
const chunkCount = 20

var words = strings.Fields("The proxy relays every chunk as it arrives and adds little to each request it forwards to the model server")

// upstream is a mock OpenAI-compatible server whose answers are encoded once
// at startup, so that it costs as little CPU as possible: it shares CPU 0
// with the proxy under test.
type upstream struct {
	chunks [][]byte // "data: {chunk}\n\n", one per word
	finish []byte   // the finish chunk
	usage  []byte   // the usage chunk, sent when stream_options.include_usage
	full   []byte   // the non-stream chat.completion
	models []byte
}

func newUpstream() *upstream {
	const id, created, model = "chatcmpl-bench", 1735689600, "bench"
	type delta struct {
		Role    string  `json:"role,omitempty"`
		Content *string `json:"content,omitempty"`
	}
	type choice struct {
		Index        int       `json:"index"`
		Delta        delta     `json:"delta"`
		Logprobs     *struct{} `json:"logprobs"`
		FinishReason *string   `json:"finish_reason"`
	}
	type usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	}
	type chunk struct {
		ID      string   `json:"id"`
		Object  string   `json:"object"`
		Created int64    `json:"created"`
		Model   string   `json:"model"`
		Choices []choice `json:"choices"`
		Usage   *usage   `json:"usage,omitempty"`
	}
	event := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err) // static data
		}
		return append(append([]byte("data: "), b...), '\n', '\n')
	}
	u := &upstream{}
	var text strings.Builder
	for i := range chunkCount {
		w := words[i%len(words)] + " "
		text.WriteString(w)
		d := delta{Content: &w}
		if i == 0 {
			d.Role = "assistant"
		}
		u.chunks = append(u.chunks, event(chunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model, Choices: []choice{{Delta: d}}}))
	}
	stop := "stop"
	u.finish = event(chunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model, Choices: []choice{{FinishReason: &stop}}})
	use := usage{PromptTokens: 12, CompletionTokens: chunkCount, TotalTokens: 12 + chunkCount}
	u.usage = event(chunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model, Choices: []choice{}, Usage: &use})
	content := text.String()
	full := map[string]any{
		"id": id, "object": "chat.completion", "created": created, "model": model,
		"choices": []any{map[string]any{
			"index": 0, "message": map[string]any{"role": "assistant", "content": content},
			"logprobs": nil, "finish_reason": "stop",
		}},
		"usage": use,
	}
	u.full, _ = json.Marshal(full)
	u.models, _ = json.Marshal(map[string]any{"object": "list", "data": []any{
		map[string]any{"id": model, "object": "model", "created": created, "owned_by": "bench"},
	}})
	return u
}

var (
	streamTrue   = []byte(`"stream":true`)
	includeUsage = []byte(`"include_usage":true`)
	modelKey     = []byte(`"model":"`)
	doneEvent    = []byte("data: [DONE]\n\n")
)

// chunkDelay reads the per-chunk delay from the model name, "bench@500ms":
// the proxy forwards the model of the node a client names, but none of the
// client's headers, so the model is the one knob all three targets pass on.
func chunkDelay(body []byte) time.Duration {
	i := bytes.Index(body, modelKey)
	if i < 0 {
		return 0
	}
	m := body[i+len(modelKey):]
	if j := bytes.IndexByte(m, '"'); j >= 0 {
		m = m[:j]
	}
	at := bytes.IndexByte(m, '@')
	if at < 0 {
		return 0
	}
	d, err := time.ParseDuration(string(m[at+1:]))
	if err != nil {
		return 0
	}
	return d
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/models":
		w.Header().Set("Content-Type", "application/json")
		w.Write(u.models)
		return
	case "/v1/chat/completions":
	default:
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// Byte searches rather than a JSON decode: both the proxy (go-openai)
	// and the harness write compact JSON, and the upstream must stay cheap.
	if !bytes.Contains(body, streamTrue) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(u.full)
		return
	}
	delay := chunkDelay(body)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	rc := http.NewResponseController(w)
	var timer *time.Timer
	for _, c := range u.chunks {
		if delay > 0 {
			if timer == nil {
				timer = time.NewTimer(delay)
				defer timer.Stop()
			} else {
				timer.Reset(delay)
			}
			select {
			case <-timer.C:
			case <-r.Context().Done():
				return
			}
		}
		if _, err := w.Write(c); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
	w.Write(u.finish)
	if bytes.Contains(body, includeUsage) {
		w.Write(u.usage)
	}
	w.Write(doneEvent)
}

// serveUpstream runs the mock upstream until ctx ends. It prints
// "listening ADDR" once it accepts connections.
func serveUpstream(ctx context.Context, addr, pprofAddr string, stdout io.Writer) error {
	mux := http.NewServeMux()
	mux.Handle("/v1/", newUpstream())
	mux.HandleFunc("/_bench/stats", serveStats)
	return serve(ctx, addr, pprofAddr, upstreamIdleTimeout, mux, stdout)
}

// upstreamIdleTimeout is how long the mock upstream keeps an idle
// keep-alive connection: 5 s, uvicorn's default (vLLM and most Python
// servers). It lets the proxies' pooled upstream connections, and their
// goroutines, go away after a test, as they do in production.
const upstreamIdleTimeout = 5 * time.Second

// serveStats reports the process's goroutines and memory under the names
// of the proxy's /metrics (client_golang's Go collector).
func serveStats(w http.ResponseWriter, r *http.Request) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Fprintf(w, "go_goroutines %d\n", runtime.NumGoroutine())
	fmt.Fprintf(w, "go_memstats_stack_inuse_bytes %d\n", ms.StackInuse)
	fmt.Fprintf(w, "go_memstats_heap_alloc_bytes %d\n", ms.HeapAlloc)
	fmt.Fprintf(w, "go_memstats_next_gc_bytes %d\n", ms.NextGC)
}

// serve runs handler on addr until ctx ends, with the server settings of
// cmd/proxy (no write timeout: it would cut streams) and the given idle
// timeout.
func serve(ctx context.Context, addr, pprofAddr string, idle time.Duration, handler http.Handler, stdout io.Writer) error {
	if pprofAddr != "" {
		// net/http/pprof registered itself on the default mux, which only
		// this listener serves.
		go http.ListenAndServe(pprofAddr, nil) // exits with the process
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: idle}
	fmt.Fprintf(stdout, "listening %s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }() // exits when Close closes the listener
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	srv.Close()
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
