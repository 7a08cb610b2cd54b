package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

// serveBare runs the reference: a bare httputil.ReverseProxy to target,
// with the transport settings of the proxy's OpenAI backend (64 idle
// connections per host). It prints "listening ADDR" once it accepts
// connections.
func serveBare(ctx context.Context, addr, target, pprofAddr string, stdout io.Writer) error {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return fmt.Errorf("-target %q: want an http:// URL", target)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.MaxIdleConnsPerHost = 64
	rp := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
		Transport: t,
		// text/event-stream responses are flushed after every write
		// whatever FlushInterval says; this is the default, spelled out.
		FlushInterval: 0,
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/_bench/stats", serveStats)
	mux.Handle("/", readWhole(rp))
	return serve(ctx, addr, pprofAddr, 120*time.Second, mux, stdout) // cmd/proxy's IdleTimeout
}

// readWhole reads the request body fully before forwarding it, as the proxy
// does (web.readBody): streaming the inbound body straight through races
// with the response on the upstream connection and cuts about 0.1 % of
// streams under load (issue 6).
func readWhole(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		next.ServeHTTP(w, r)
	})
}
