package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/chain/node"
	"chainproxy/config"
	"chainproxy/internal/nodetest"
	"chainproxy/internal/redistest"
	"chainproxy/store"
	"chainproxy/tools"
	"chainproxy/web"
)

// scriptCalls reads how many scripts the Redis behind c has run since its
// stats were reset: the shared admission's round trips, each one script
// (the commands a script runs inside count apart, and a NOSCRIPT miss
// retried as EVAL counts once).
func scriptCalls(b *testing.B, c *redis.Client) int64 {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\r\n") {
		name, stats, ok := strings.Cut(line, ":")
		if !ok || name != "cmdstat_evalsha" && name != "cmdstat_eval" {
			continue
		}
		for _, kv := range strings.Split(stats, ",") {
			k, v, _ := strings.Cut(kv, "=")
			x, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				n += x
			case "failed_calls":
				n -= x
			}
		}
	}
	return n
}

// BenchmarkAdmission is what admission costs one short call: local (the
// replica's own gate), or shared across replicas through a real Redis (a
// lease taken and given back; its renewal comes only after a third of the
// lease). redis-calls/op counts the round trips to Redis: 2, one to take
// and one to give back.
func BenchmarkAdmission(b *testing.B) {
	limit := 2
	nodes := []config.Node{{Name: "N", Provider: config.ProviderOllama, MaxConcurrency: &limit, MaxQueue: 64}}
	for _, mode := range []string{"local", "shared"} {
		b.Run(mode, func(b *testing.B) {
			var adm node.Admitter = node.NewAdmission(nodes)
			var rc *redis.Client
			if mode == "shared" {
				rs := redistest.Start(b)
				slots, err := store.NewSlots(rs.URL(), 15*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { slots.Close() })
				adm = node.NewSharedAdmission(b.Context(), nodes, slots, node.NewAdmission(nodes), nil)
				rc = redis.NewClient(&redis.Options{Addr: rs.Addr()})
				b.Cleanup(func() { rc.Close() })
			}
			if rc != nil {
				if err := rc.ConfigResetStat(b.Context()).Err(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				release, err := adm.Acquire(b.Context(), "N", false)
				if err != nil {
					b.Fatal(err)
				}
				release()
			}
			if rc != nil {
				b.ReportMetric(float64(scriptCalls(b, rc))/float64(b.N), "redis-calls/op")
			}
		})
	}
}

// BenchmarkAdmissionProxy is BenchmarkRelay's proxy target (non-stream) with
// node A's max_concurrency shared through a real Redis: the whole request
// with a slot taken and given back.
func BenchmarkAdmissionProxy(b *testing.B) {
	up := relayUpstream(b)
	rs := redistest.Start(b)
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
nodes:
  - {name: A, provider: openai, base_url: %q, model: bench, max_concurrency: 2}
chain:
  stages: [{node: A, max_turns: 1}]
  simple_node: A
tools:
  root: %q
store:
  redis_url: %q
`, up.URL+"/v1", b.TempDir(), rs.URL())))
	if err != nil {
		b.Fatal(err)
	}
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		b.Fatal(err)
	}
	slots, err := store.NewSlots(rs.URL(), cfg.Admission.Lease)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { slots.Close() })
	mem := store.NewMemory(0, 0)
	eng, err := chain.New(cfg, chain.Deps{
		Nodes:     nodetest.Build(b, cfg, nil),
		Tools:     reg,
		Guard:     antiloop.NewGuard(mem, cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL),
		Admission: node.NewSharedAdmission(b.Context(), cfg.Nodes, slots, node.NewAdmission(cfg.Nodes), nil),
	})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(web.New(web.Options{Config: cfg, Engine: eng, Traces: mem, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	b.Cleanup(srv.Close)
	body := []byte(`{"model":"A","messages":[{"role":"user","content":"Say hello to the proxy in one sentence."}]}`)
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
}
