package web

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const benchConfig = `
nodes:
  - {name: A, provider: mock, mock: {turns: [{content: "Hello there, this is a short answer of a few words."}]}}
chain:
  stages: [{node: A, max_turns: 1}]
  simple_node: A
`

// BenchmarkChatCompletion measures the proxy's own cost per request in
// simple mode against a mock node that answers at once: decoding, the
// engine, encoding, SSE framing. No network.
func BenchmarkChatCompletion(b *testing.B) {
	for _, tc := range []struct{ name, body string }{
		{"non-stream", `{"model":"A","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello"}]}`},
		{"stream", `{"model":"A","stream":true,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello"}]}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := mustConfig(b, benchConfig)
			srv := New(Options{Config: cfg, Engine: mustEngine(b, cfg), Keepalive: time.Hour})
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				srv.ServeHTTP(w, httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(tc.body)))
				if w.Code != 200 {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}
