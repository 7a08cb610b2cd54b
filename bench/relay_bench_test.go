package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/chain/node"
	"chainproxy/config"
	"chainproxy/internal/nodetest"
	"chainproxy/store"
	"chainproxy/tools"
	"chainproxy/web"
)

// relayUpstream is an OpenAI-compatible server answering from bytes encoded
// once: a stream of 20 one-word chunks, or one chat.completion.
func relayUpstream(b testing.TB) *httptest.Server {
	var stream bytes.Buffer
	event := func(delta, finish string) {
		fmt.Fprintf(&stream, `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1735689600,"model":"bench","choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}]}`+"\n\n", delta, finish)
	}
	var text strings.Builder
	for i := range 20 {
		w := fmt.Sprintf("word%d ", i)
		text.WriteString(w)
		event(fmt.Sprintf(`{"content":%q}`, w), "null")
	}
	event(`{}`, `"stop"`)
	usage := `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1735689600,"model":"bench","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":20,"total_tokens":32}}` + "\n\n"
	whole := fmt.Sprintf(`{"id":"chatcmpl-bench","object":"chat.completion","created":1735689600,"model":"bench","choices":[{"index":0,"message":{"role":"assistant","content":%q},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":20,"total_tokens":32}}`, text.String())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, whole)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(stream.Bytes())
		if bytes.Contains(body, []byte(`"include_usage":true`)) {
			io.WriteString(w, usage)
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	b.Cleanup(srv.Close)
	return srv
}

// relayProxy is the proxy as cmd/proxy wires it, with one OpenAI node A at
// upstream, its log lines formatted but discarded.
func relayProxy(b testing.TB, upstream string) http.Handler {
	return relayProxyLog(b, upstream, slog.NewTextHandler(io.Discard, nil)) // formatted, as in production
}

// relayProxyLog is relayProxy logging through h.
func relayProxyLog(b testing.TB, upstream string, h slog.Handler) http.Handler {
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
nodes:
  - {name: A, provider: openai, base_url: %q, model: bench, max_concurrency: 0}
chain:
  stages: [{node: A, max_turns: 1}]
  simple_node: A
tools:
  root: %q
`, upstream+"/v1", b.TempDir())))
	if err != nil {
		b.Fatal(err)
	}
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		b.Fatal(err)
	}
	mem := store.NewMemory(0, 0)
	eng, err := chain.New(cfg, chain.Deps{
		Nodes:     nodetest.Build(b, cfg, nil),
		Tools:     reg,
		Guard:     antiloop.NewGuard(mem, cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL),
		Admission: node.NewAdmission(cfg.Nodes),
	})
	if err != nil {
		b.Fatal(err)
	}
	return web.New(web.Options{
		Config: cfg, Engine: eng, Traces: mem,
		Logger:  slog.New(h),
		Metrics: web.NewMetrics([]string{"A"}, func(string) int { return 0 }, func() string { return store.StatusMemory }),
	})
}

// BenchmarkRelay is one client request through a target to a loopback
// upstream and back, everything in this process: the bare reverse proxy of
// the load harness, the proxy relaying to node A, or the proxy in simple
// mode (model chain/simple: the server tools and their prompt go upstream). The difference between
// the two is what the proxy adds; run it with -cpu 1 to have client, target
// and upstream share one core, as the harness pins them.
func BenchmarkRelay(b *testing.B) {
	benchRelay(b, []string{"non-stream", "stream"}, func(model string, stream bool) []byte {
		return []byte(`{"model":"` + model + `","stream":` + fmt.Sprint(stream) + `,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello to the proxy in one sentence."}]}`)
	})
}

// BenchmarkRelayLarge is BenchmarkRelay with the request of an agent deep
// in a session: a 40-turn conversation of about 44 KB, French and English
// prose with quotes, tabs and newlines. What the proxy spends per byte of
// the request (checking, decoding, fitting, encoding it upstream, masking
// the stored trace's prompts) shows here, and barely in BenchmarkRelay.
func BenchmarkRelayLarge(b *testing.B) {
	var msgs strings.Builder
	for i := range 40 {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		text, _ := json.Marshal(strings.Repeat(fmt.Sprintf("Turn %d: l'équipe a analysé \"main.go\"\n\tet trouvé <3> erreurs; the proxy relays it. ", i), 12))
		fmt.Fprintf(&msgs, `,{"role":%q,"content":%s}`, role, text)
	}
	benchRelay(b, []string{"non-stream"}, func(model string, stream bool) []byte {
		return []byte(`{"model":"` + model + `","stream":` + fmt.Sprint(stream) + `,"messages":[{"role":"system","content":"You are a coding agent."}` + msgs.String() + `]}`)
	})
}

func benchRelay(b *testing.B, modes []string, request func(model string, stream bool) []byte) {
	for _, mode := range modes {
		for _, target := range []string{"bare", "proxy", "simple"} {
			b.Run(mode+"/"+target, func(b *testing.B) {
				up := relayUpstream(b)
				var h http.Handler
				if target == "bare" {
					u, _ := url.Parse(up.URL)
					rp := httputil.NewSingleHostReverseProxy(u)
					rp.Transport = node.NewHTTPClient(config.Node{}).Transport
					h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						body, _ := io.ReadAll(r.Body)
						r.Body = io.NopCloser(bytes.NewReader(body))
						rp.ServeHTTP(w, r)
					})
				} else {
					h = relayProxy(b, up.URL)
				}
				srv := httptest.NewServer(h)
				b.Cleanup(srv.Close)
				model := "A"
				if target == "simple" {
					model = chain.ModelSimple
				}
				body := request(model, mode == "stream")
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}
				b.ReportAllocs()
				for b.Loop() {
					resp, err := client.Post(srv.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
					if err != nil {
						b.Fatal(err)
					}
					out, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil || resp.StatusCode != 200 || !bytes.Contains(out, []byte("word19")) {
						b.Fatalf("status %d, err %v: %s", resp.StatusCode, err, out)
					}
				}
			})
		}
	}
}
