package web

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"chainproxy/chain/trace"
	"chainproxy/config"
	"chainproxy/internal/fakeopenai"
)

// The hostile-client suite: each test is one finding of the security
// review, run against the real server.

const okBody = `{"model":"chain/simple","messages":[{"role":"user","content":"hi"}]}`

// rawConn opens a TCP connection to the test server.
func rawConn(t *testing.T, s *httptest.Server) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func heapInuse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestIdleHugeContentLength: connections declaring a 10 MB body and sending
// one byte must not make the server allocate the declared size.
func TestIdleHugeContentLength(t *testing.T) {
	s := newTestServer(t, testConfig, func(c *config.Config) { c.Server.MaxBodyBytes = 10 << 20 })
	const conns = 30
	before := heapInuse()
	for range conns {
		c := rawConn(t, s.Server)
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 10485000\r\n\r\n{", s.Listener.Addr())
	}
	// Let the handlers reach their body reads; a request that reached the
	// handler shows up as its goroutine blocked on the read.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && runtime.NumGoroutine() < conns {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	grew := int64(heapInuse()) - int64(before)
	if limit := int64(conns) << 20; grew > limit { // 1 MiB per connection, far below 10 MB each
		t.Errorf("%d idle connections with a 10 MB Content-Length grew the heap by %d MB, want under %d MB", conns, grew>>20, limit>>20)
	}
}

// TestSlowBodyClosed: a body sent slower than server.read_timeout is cut
// off with 408, so an idle connection holds nothing for long.
func TestSlowBodyClosed(t *testing.T) {
	s := newTestServer(t, testConfig, func(c *config.Config) { c.Server.ReadTimeout = 200 * time.Millisecond })
	c := rawConn(t, s.Server)
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", s.Listener.Addr())
	c.SetReadDeadline(time.Now().Add(20 * time.Second)) // a hang detector, not a timing target
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("slow body: no answer (%v); want 408 once server.read_timeout passes", err)
	}
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("slow body: status %d, want 408", resp.StatusCode)
	}
}

// TestRequestLimits: every array and identifier has a cap, and beyond it
// the answer is 400 invalid_request_error naming the field.
func TestRequestLimits(t *testing.T) {
	s := newTestServer(t, testConfig, func(c *config.Config) {
		c.Server.MaxBodyBytes = 1 << 20
		c.Server.MaxMessages = 3
	})
	msg := `{"role":"user","content":"x"}`
	tool := `{"type":"function","function":{"name":"f"}}`
	tests := []struct {
		name, body, param string
		hdr               []string
	}{
		{"too many messages", `{"model":"chain/simple","messages":[` + strings.Repeat(msg+",", 3) + msg + `]}`, "messages", nil},
		{"too many tools", `{"model":"chain/simple","messages":[` + msg + `],"tools":[` + strings.Repeat(tool+",", maxTools) + tool + `]}`, "tools", nil},
		{"too many stops", `{"model":"chain/simple","messages":[` + msg + `],"stop":["a","b","c","d","e"]}`, "stop", nil},
		{"long user", `{"model":"chain/simple","messages":[` + msg + `],"user":"` + strings.Repeat("u", maxIDBytes+1) + `"}`, "user", nil},
		{"long session", okBody, "X-Chain-Session", []string{"X-Chain-Session", strings.Repeat("s", maxIDBytes+1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := s.post(t, "/v1/chat/completions", tt.body, tt.hdr...)
			body := string(readAll(t, resp.Body))
			if resp.StatusCode != 400 || !strings.Contains(body, `"param":"`+tt.param+`"`) || !strings.Contains(body, `"type":"invalid_request_error"`) {
				t.Errorf("status %d, body %s; want 400 invalid_request_error with param %q", resp.StatusCode, body, tt.param)
			}
		})
	}
	t.Run("chat history", func(t *testing.T) {
		resp := s.post(t, "/chat", `{"message":"hi","history":[`+strings.Repeat(`{"role":"user","content":"x"},`, 3)+`{"role":"user","content":"x"}]}`)
		body := string(readAll(t, resp.Body))
		if resp.StatusCode != 400 || !strings.Contains(body, `"param":"history"`) {
			t.Errorf("status %d, body %s; want 400 with param history", resp.StatusCode, body)
		}
	})
}

func get(t *testing.T, url string, hdr ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestTraceScopedPerKey: with api_keys, a trace belongs to the key that
// made it; another key gets 404.
func TestTraceScopedPerKey(t *testing.T) {
	s := newTestServer(t, testConfig, func(c *config.Config) { c.Server.APIKeys = []string{"key-a", "key-b"} })
	resp := s.post(t, "/v1/chat/completions", okBody, "Authorization", "Bearer key-a")
	readAll(t, resp.Body)
	id := resp.Header.Get("X-Chain-Trace-Id")
	if resp.StatusCode != 200 || id == "" {
		t.Fatalf("status %d, trace id %q", resp.StatusCode, id)
	}
	for _, tt := range []struct {
		key    string
		status int
	}{{"key-a", 200}, {"key-b", 404}} {
		if got := get(t, s.URL+"/v1/chain/traces/"+id, "Authorization", "Bearer "+tt.key).StatusCode; got != tt.status {
			t.Errorf("GET trace with %s: status %d, want %d", tt.key, got, tt.status)
		}
	}
}

// TestConversationScopedPerKey: the same session id or user under two keys
// names two conversations, so one key never sees the other's cached tool
// results nor has its calls blocked; and the key is fixed-length whatever
// the client sent.
func TestConversationScopedPerKey(t *testing.T) {
	key := func(callerKey, session, user string) string {
		c, _ := gin.CreateTestContext(httptest.NewRecorder())
		c.Request = httptest.NewRequest("POST", "/", nil)
		if session != "" {
			c.Request.Header.Set("X-Chain-Session", session)
		}
		if callerKey != "" {
			c.Set("caller", trace.CallerID(callerKey))
		}
		return conversationKey(c, user, nil)
	}
	if a, b := key("key-a", "s1", ""), key("key-b", "s1", ""); a == b {
		t.Errorf("session s1 under two keys: same conversation %q", a)
	}
	if a, b := key("key-a", "", "u1"), key("key-b", "", "u1"); a == b {
		t.Errorf("user u1 under two keys: same conversation %q", a)
	}
	if a, b := key("key-a", "s1", ""), key("key-a", "s1", ""); a != b {
		t.Errorf("one key, one session: conversations %q and %q differ", a, b)
	}
	long := key("", "", strings.Repeat("u", 9<<20))
	if short := key("", "", "u"); len(long) != len(short) {
		t.Errorf("conversation key length %d for a 9 MB user, %d for a short one; want fixed", len(long), len(short))
	}
}

// TestBrowserGuard: a page on another origin cannot drive the proxy, DNS
// rebinding (a foreign Host) is refused on loopback, and the origins in
// server.cors_origins are served with CORS, preflight included.
func TestBrowserGuard(t *testing.T) {
	s := newTestServer(t, testConfig, func(c *config.Config) {
		c.Server.CORSOrigins = []string{"https://app.example"}
		c.Server.AllowedHosts = []string{"proxy.lan"}
	})
	do := func(method, origin, host, ctype string) *http.Response {
		req, _ := http.NewRequest(method, s.URL+"/v1/chat/completions", strings.NewReader(okBody))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if host != "" {
			req.Host = host
		}
		if method == http.MethodOptions {
			req.Header.Set("Access-Control-Request-Method", "POST")
			req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	tests := []struct {
		name                 string
		method, origin, host string
		ctype                string
		status               int
		acao                 string
	}{
		{"no origin (curl, SDKs)", "POST", "", "", "application/json", 200, ""},
		{"cross-origin text/plain", "POST", "https://evil.example", "", "text/plain", 403, ""},
		{"null origin", "POST", "null", "", "text/plain", 403, ""},
		{"same origin (cockpit)", "POST", s.URL, "", "application/json", 200, ""},
		{"foreign Host (DNS rebinding)", "POST", "", "evil.example:80", "application/json", 403, ""},
		{"rebinding with matching origin", "POST", "http://evil.example", "evil.example", "text/plain", 403, ""},
		{"allowed host", "POST", "", "proxy.lan:8080", "application/json", 200, ""},
		{"localhost name", "POST", "", "localhost:1", "application/json", 200, ""},
		{"allowed origin", "POST", "https://app.example", "", "application/json", 200, "https://app.example"},
		{"allowed origin preflight", "OPTIONS", "https://app.example", "", "", 204, "https://app.example"},
		{"foreign preflight", "OPTIONS", "https://evil.example", "", "", 403, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := do(tt.method, tt.origin, tt.host, tt.ctype)
			if resp.StatusCode != tt.status || resp.Header.Get("Access-Control-Allow-Origin") != tt.acao {
				t.Errorf("status %d, Access-Control-Allow-Origin %q; want %d, %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), tt.status, tt.acao)
			}
			if tt.status == 204 && !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
				t.Errorf("preflight allows headers %q, want Authorization among them", resp.Header.Get("Access-Control-Allow-Headers"))
			}
		})
	}
}

// TestCockpitHeaders: the page forbids inline script and framing, and no
// answer is content-sniffed.
func TestCockpitHeaders(t *testing.T) {
	s := newTestServer(t, testConfig)
	resp := get(t, s.URL+"/")
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("Content-Security-Policy = %q; want script-src 'self', frame-ancestors 'none', no unsafe-inline", csp)
	}
	if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("X-Content-Type-Options = %q, want nosniff", got)
	}
}

// TestOpsEndpointsBehindKeys: with api_keys, /metrics and /readyz need a
// key unless server.public_metrics; /healthz stays open.
func TestOpsEndpointsBehindKeys(t *testing.T) {
	for _, public := range []bool{false, true} {
		t.Run(fmt.Sprintf("public_metrics=%v", public), func(t *testing.T) {
			s := newTestServer(t, testConfig, func(c *config.Config) {
				c.Server.APIKeys = []string{"k1"}
				c.Server.PublicMetrics = public
			})
			s.Config.Handler = New(Options{Config: s.cfg, Engine: mustEngine(t, s.cfg), Traces: s.store, Metrics: NewMetrics(nil, nil, nil)})
			want := 401
			if public {
				want = 200
			}
			for _, path := range []string{"/metrics", "/readyz"} {
				if got := get(t, s.URL+path).StatusCode; got != want {
					t.Errorf("GET %s without a key: %d, want %d", path, got, want)
				}
				if got := get(t, s.URL+path, "Authorization", "Bearer k1").StatusCode; got != 200 {
					t.Errorf("GET %s with the key: %d, want 200", path, got)
				}
			}
			if got := get(t, s.URL+"/healthz").StatusCode; got != 200 {
				t.Errorf("GET /healthz: %d, want 200", got)
			}
		})
	}
}

// TestRejectedRequestsCounted: bad JSON, an unknown model, an empty /chat
// and a bad key are counted in chainproxy_requests_total with their 4xx.
func TestRejectedRequestsCounted(t *testing.T) {
	s := newTestServer(t, testConfig, func(c *config.Config) { c.Server.APIKeys = []string{"k1"} })
	s.Config.Handler = New(Options{Config: s.cfg, Engine: mustEngine(t, s.cfg), Traces: s.store, Metrics: NewMetrics(nil, nil, nil)})
	auth := []string{"Authorization", "Bearer k1"}
	readAll(t, s.post(t, "/v1/chat/completions", `{bad`, auth...).Body)
	readAll(t, s.post(t, "/v1/chat/completions", `{"model":"nope","messages":[{"role":"user","content":"x"}]}`, auth...).Body)
	readAll(t, s.post(t, "/chat", `{"message":""}`, auth...).Body)
	readAll(t, s.post(t, "/v1/chat/completions", okBody).Body)
	body := string(readAll(t, get(t, s.URL+"/metrics", auth...).Body))
	for _, want := range []string{
		`chainproxy_requests_total{mode="",route="/v1/chat/completions",status="400"} 1`,
		`chainproxy_requests_total{mode="",route="/v1/chat/completions",status="404"} 1`,
		`chainproxy_requests_total{mode="",route="/chat",status="400"} 1`,
		`chainproxy_requests_total{mode="",route="/v1/chat/completions",status="401"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestBearerParsing: the scheme is required and case-insensitive.
func TestBearerParsing(t *testing.T) {
	s := newTestServer(t, testConfig, func(c *config.Config) { c.Server.APIKeys = []string{"sk-good"} })
	for _, tt := range []struct {
		hdr    string
		status int
	}{
		{"Bearer sk-good", 200},
		{"bearer sk-good", 200},
		{"BEARER sk-good", 200},
		{"sk-good", 401},
		{"Basic sk-good", 401},
		{"Bearer", 401},
		{"Bearer sk-goodX", 401},
	} {
		resp := s.post(t, "/v1/chat/completions", okBody, "Authorization", tt.hdr)
		readAll(t, resp.Body)
		if resp.StatusCode != tt.status {
			t.Errorf("Authorization %q: status %d, want %d", tt.hdr, resp.StatusCode, tt.status)
		}
	}
}

// TestUpstreamSecretsMasked: an upstream 401 whose body echoes the bearer
// token reaches the client masked, in the message and in the trace.
func TestUpstreamSecretsMasked(t *testing.T) {
	fake := fakeopenai.New(t, fakeopenai.Reply{Status: 401, Error: "invalid key: Bearer sk-leaked-123456, key sk-proj-ABCDEFGH"})
	n := openaiNode("A", fake.BaseURL())
	_, srv := wireProxy(t, []config.Node{n}, oneStage)
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"A","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body := string(readAll(t, resp.Body))
	if resp.StatusCode < 400 {
		t.Fatalf("status %d, want an error", resp.StatusCode)
	}
	for _, secret := range []string{"sk-leaked-123456", "sk-proj-ABCDEFGH"} {
		if strings.Contains(body, secret) {
			t.Errorf("error body shows %s: %s", secret, body)
		}
	}
}
