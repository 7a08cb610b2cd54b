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
// engine, encoding, SSE framing. No network. The other fronts run the same
// request through the same driver, for comparison.
func BenchmarkChatCompletion(b *testing.B) {
	for _, tc := range []struct{ name, path, body string }{
		{"non-stream", "/v1/chat/completions", `{"model":"A","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello"}]}`},
		{"stream", "/v1/chat/completions", `{"model":"A","stream":true,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello"}]}`},
		{"responses-non-stream", "/v1/responses", `{"model":"A","instructions":"Be brief.","input":"Say hello"}`},
		{"responses-stream", "/v1/responses", `{"model":"A","stream":true,"instructions":"Be brief.","input":"Say hello"}`},
		{"ollama-non-stream", "/api/chat", `{"model":"A","stream":false,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello"}]}`},
		{"ollama-stream", "/api/chat", `{"model":"A","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello"}]}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := mustConfig(b, benchConfig)
			srv := New(Options{Config: cfg, Engine: mustEngine(b, cfg), Keepalive: time.Hour})
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				req := httptest.NewRequest("POST", tc.path, strings.NewReader(tc.body))
				req.Host = "localhost" // the server listens on loopback: Host is checked
				srv.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}
