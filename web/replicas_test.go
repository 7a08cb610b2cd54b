package web

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"chainproxy/antiloop"
	"chainproxy/chain"
	"chainproxy/config"
	"chainproxy/internal/nodetest"
	"chainproxy/internal/redistest"
	"chainproxy/store"
	"chainproxy/tools"
)

// replica is one proxy process's worth of wiring over a shared store.
func replica(t *testing.T, cfg *config.Config, redisURL string) (*httptest.Server, store.Store) {
	t.Helper()
	st, err := store.Open(t.Context(), redisURL, 50, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg, err := tools.New(cfg.Tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := chain.New(cfg, chain.Deps{Nodes: nodetest.Build(t, cfg, nodetest.Mocks), Tools: reg, Guard: antiloop.NewGuard(st, cfg.Antiloop.SignatureTTL, cfg.Antiloop.CallIDTTL)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Options{Config: cfg, Engine: eng, Traces: st}))
	t.Cleanup(srv.Close)
	return srv, st
}

// TestReplicasShareGuards: two proxies on one Redis see each other's
// executed calls, so a conversation bounced between replicas does not run
// the same call twice; with Redis killed, both keep answering.
func TestReplicasShareGuards(t *testing.T) {
	rs := redistest.Start(t)
	cfg, err := config.Parse([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Root = t.TempDir()
	if err := os.WriteFile(filepath.Join(cfg.Tools.Root, "a.txt"), []byte("alpha\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, stA := replica(t, cfg, rs.URL())
	b, _ := replica(t, cfg, rs.URL())
	if stA.Status() != store.StatusRedis {
		t.Fatalf("store status %q, want redis", stA.Status())
	}
	ask := func(srv *httptest.Server, session string) (int, string) {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"chain/reflexive","messages":[{"role":"user","content":"compare"}]}`))
		req.Header.Set("X-Chain-Session", session)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer resp.Body.Close()
		var out tracedResponse
		body, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(body, &out); err != nil || out.Chain == nil {
			return resp.StatusCode, string(body)
		}
		return resp.StatusCode, out.Chain.Stages[0].ToolsUsed[0].Status
	}
	if _, st := ask(a, "s1"); st != "ok" {
		t.Errorf("replica A: list_dir %s, want ok", st)
	}
	if _, st := ask(b, "s1"); st != "cached" {
		t.Errorf("replica B, same conversation: list_dir %s, want cached (A ran it)", st)
	}
	if _, st := ask(b, "s2"); st != "ok" {
		t.Errorf("replica B, other conversation: list_dir %s, want ok", st)
	}

	// Redis dies under load: every request still gets its answer.
	rs.Kill()
	var wg sync.WaitGroup
	for i := range 20 {
		srv := a
		if i%2 == 1 {
			srv = b
		}
		wg.Go(func() {
			if code, _ := ask(srv, "load"); code != 200 {
				t.Errorf("request during the Redis outage: status %d", code)
			}
		})
	}
	wg.Wait()
	resp, err := http.Get(a.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"store":"degraded"`) {
		t.Errorf("readyz during the outage: %d %s", resp.StatusCode, body)
	}

	// Redis comes back: the replicas share their guards again.
	rs.Restart()
	waitFor(t, func() bool { return stA.Status() == store.StatusRedis })
	if _, st := ask(a, "s3"); st != "ok" {
		t.Errorf("after recovery, replica A: %s, want ok", st)
	}
	waitFor(t, func() bool { _, st := ask(b, "s3"); return st == "cached" })
}
