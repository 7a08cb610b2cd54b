package bench

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"

	"chainproxy/internal/redact"
)

// stackChild marks the process TestStackBudget runs its measurement in.
const stackChild = "CHAINPROXY_STACK_CHILD"

// TestStackBudget: a request through every front, streamed or not, relayed
// or in simple mode, fits in a 16 KiB goroutine stack. A handler that needs
// one byte more has its stack copied to 32 KiB, which every open stream
// then holds (16 MB more for 1,000 streams), and nothing else would show
// it. The deepest points: a stream's first flush, under the whole engine
// and the read of the upstream's answer, and a whole answer's stored
// trace, whose encoder (goccy/go-json's) has a 9 KB frame.
//
// The budget is the production build's: the race detector's frames and
// stack guard differ, and the runtime sizes new stacks from the average it
// sees. (A release build's tags change no frame here: with them the
// margins below read the same.) So the measurement runs in a child
// `go test`, without -race,
// with GODEBUG=adaptivestackstart=0 (stacks start at 2 KiB and double as
// needed) and the collector off (nothing shrinks a stack meanwhile).
func TestStackBudget(t *testing.T) {
	if os.Getenv(stackChild) == "" {
		cmd := exec.Command("go", "test", "-run", "^TestStackBudget$", "-count=1", "-v", ".")
		cmd.Env = append(os.Environ(), stackChild+"=1", "GODEBUG=adaptivestackstart=0", "GOGC=off", "GOFLAGS=")
		out, err := cmd.CombinedOutput()
		t.Logf("child go test:\n%s", out)
		if err != nil {
			t.Fatalf("child go test: %v", err)
		}
		return
	}
	up := relayUpstream(t)
	p := &stackProbe{h: relayProxyLog(t, up.URL, redact.Redactor{}.Handler(slog.NewTextHandler(io.Discard, nil))), moved: make(chan bool, 1)}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	// A connection, and so a handler goroutine, per request.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

	msgs := `"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello to the proxy in one sentence."}]`
	tests := []struct{ name, path, body string }{
		{"chat stream relay", "/v1/chat/completions", `{"model":"A","stream":true,"stream_options":{"include_usage":true},` + msgs + `}`},
		{"chat stream simple", "/v1/chat/completions", `{"model":"chain/simple","stream":true,` + msgs + `}`},
		{"chat whole relay", "/v1/chat/completions", `{"model":"A",` + msgs + `}`},
		{"chat whole simple", "/v1/chat/completions", `{"model":"chain/simple",` + msgs + `}`},
		{"responses stream", "/v1/responses", `{"model":"A","stream":true,"input":"Say hello to the proxy in one sentence."}`},
		{"responses whole", "/v1/responses", `{"model":"A","input":"Say hello to the proxy in one sentence."}`},
		{"anthropic stream", "/v1/messages", `{"model":"A","max_tokens":64,"stream":true,"system":"Be brief.","messages":[{"role":"user","content":"Say hello to the proxy in one sentence."}]}`},
		{"ollama stream", "/api/chat", `{"model":"A",` + msgs + `}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := func(extra int) bool {
				p.extra.Store(int64(extra))
				resp, err := client.Post(srv.URL+tt.path, "application/json", strings.NewReader(tt.body))
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "word19") {
					t.Fatalf("status %d, answer %.300s", resp.StatusCode, body)
				}
				// The handler goes on after the answer (the stored trace,
				// the log line): its own report, not an earlier request's.
				return !<-p.moved
			}
			// The first request of a kind compiles goccy/go-json's codecs
			// for its types, once per process: not what every request
			// costs.
			run(0)
			if !run(0) {
				t.Fatalf("the request needed more than a 16 KiB stack")
			}
			// How many more frames of about 300 bytes it would take: the
			// margin left, for the log.
			n := 1
			for n < 64 && run(n) {
				n++
			}
			if n == 64 {
				// 19 KB more always overflows 16 KiB: the probe is broken.
				t.Fatalf("the stack never moved under %d more frames: the probe does not see growth", n)
			}
			t.Logf("fits in 16 KiB, with room for %d more frames of about 300 bytes", n-1)
		})
	}
}

// stackProbe runs each request on a handler goroutine whose stack is 16
// KiB, under extra frames of about 300 bytes, and reports on moved, once
// the handler has returned, whether the stack had to move: its frames are
// copied to a larger stack only when the request needs more than it has
// (the collector, off, shrinks none). Requests go one at a time.
type stackProbe struct {
	h     http.Handler
	extra atomic.Int64
	moved chan bool
}

func (p *stackProbe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	growStack(11) // about 11.5 KB deep: from 2, 4 or 8 KiB to 16
	var mark byte
	before := uintptr(unsafe.Pointer(&mark))
	if n := int(p.extra.Load()); n > 0 {
		under(n-1, func() { p.h.ServeHTTP(w, r) })
	} else {
		p.h.ServeHTTP(w, r)
	}
	p.moved <- uintptr(unsafe.Pointer(&mark)) != before
}

// sink keeps the padding of growStack's and under's frames.
var sink byte

// growStack takes n frames of about 1 KB, then returns them.
//
//go:noinline
func growStack(n int) {
	var pad [1000]byte
	pad[n%len(pad)] = byte(n)
	if n > 0 {
		growStack(n - 1)
	}
	sink += pad[(n+1)%len(pad)]
}

// under calls f beneath n frames of about 300 bytes.
//
//go:noinline
func under(n int, f func()) {
	var pad [256]byte
	pad[n%len(pad)] = byte(n)
	if n > 0 {
		under(n-1, f)
	} else {
		f()
	}
	sink += pad[(n+1)%len(pad)]
}
