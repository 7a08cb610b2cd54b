package tools

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"chainproxy/config"
)

// seen is what the fake tool server received.
type seen struct {
	method, contentType, apiKey, body string
}

func newHTTPRegistry(t *testing.T, h config.HTTPTool) *Registry {
	t.Helper()
	r, err := New(config.Tools{Root: t.TempDir(), Timeout: time.Minute, HTTP: []config.HTTPTool{h}}, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

func TestHTTPTool(t *testing.T) {
	tests := []struct {
		name    string
		method  string
		status  int
		reply   string
		args    string
		want    string
		wantErr string
		wantReq seen
	}{
		{
			name: "post", method: "POST", status: 200, reply: `{"rows":[[1]]}`,
			args: `{"sql":"select 1"}`, want: `{"rows":[[1]]}`,
			wantReq: seen{"POST", "application/json", "k-123", `{"sql":"select 1"}`},
		},
		{
			name: "configured method", method: "put", status: 201, reply: "stored",
			args: `{"sql":"x"}`, want: "stored",
			wantReq: seen{"PUT", "application/json", "k-123", `{"sql":"x"}`},
		},
		{
			name: "empty args sent as object", method: "POST", status: 200, reply: "ok",
			args: ``, want: "ok",
			wantReq: seen{"POST", "application/json", "k-123", `{}`},
		},
		{
			name: "empty body", method: "POST", status: 204,
			args: `{}`, want: "(empty response)",
			wantReq: seen{"POST", "application/json", "k-123", `{}`},
		},
		{
			name: "server error", method: "POST", status: 500, reply: "db exploded: table users is locked",
			args: `{"sql":"x"}`, wantErr: "query_db: http 500 Internal Server Error: db exploded: table users is locked",
			wantReq: seen{"POST", "application/json", "k-123", `{"sql":"x"}`},
		},
		{
			name: "client error long body", method: "POST", status: 404, reply: strings.Repeat("n", 500),
			args: `{}`, wantErr: "query_db: http 404 Not Found: " + strings.Repeat("n", maxErrorSnippet) + " …",
			wantReq: seen{"POST", "application/json", "k-123", `{}`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := make(chan seen, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, err := io.ReadAll(r.Body)
				if err != nil {
					t.Errorf("reading request body: %v", err)
				}
				got <- seen{r.Method, r.Header.Get("Content-Type"), r.Header.Get("X-Api-Key"), string(body)}
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.reply)
			}))
			defer srv.Close()
			reg := newHTTPRegistry(t, config.HTTPTool{
				Name: "query_db", URL: srv.URL + "/q?token=s3cret", Method: tt.method, Timeout: 5 * time.Second,
				Headers: map[string]string{"X-Api-Key": "k-123"},
			})

			out, err := reg.Call(t.Context(), "query_db", []byte(tt.args))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Errorf("Call() = %q, %v; want error %q", out, err, tt.wantErr)
				}
			} else if err != nil || out != tt.want {
				t.Errorf("Call() = %q, %v; want %q", out, err, tt.want)
			}
			if req := <-got; req != tt.wantReq {
				t.Errorf("server saw %+v, want %+v", req, tt.wantReq)
			}
		})
	}
}

func TestHTTPToolLargeBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("z", maxHTTPBody+10))
	}))
	defer srv.Close()
	reg := newHTTPRegistry(t, config.HTTPTool{Name: "dump", URL: srv.URL, Method: "POST", Timeout: 5 * time.Second})
	out, err := reg.Call(t.Context(), "dump", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat("z", maxHTTPBody) + "\n… [truncated: response larger than 1048576 bytes]"
	if out != want {
		t.Errorf("Call() = %d bytes ending %q, want %d bytes ending %q", len(out), out[len(out)-60:], len(want), want[len(want)-60:])
	}
}

func TestHTTPToolUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	reg := newHTTPRegistry(t, config.HTTPTool{Name: "gone", URL: url + "/?key=s3cret", Timeout: 5 * time.Second})
	_, err := reg.Call(t.Context(), "gone", nil)
	if err == nil || !strings.HasPrefix(err.Error(), "gone: request failed: ") {
		t.Fatalf("Call() error = %v, want a request failure", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Call() error = %q, leaks the configured URL", err)
	}
}

// hangingServer answers nothing until the request's context ends, then
// reports that it saw the cancellation.
func hangingServer(t *testing.T) (srv *httptest.Server, started, canceled chan struct{}) {
	started = make(chan struct{}, 1)
	canceled = make(chan struct{}, 1)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The server notices a closed connection only once the body is
		// consumed: its background read starts after it.
		io.Copy(io.Discard, r.Body)
		started <- struct{}{}
		<-r.Context().Done()
		canceled <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	return srv, started, canceled
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func TestHTTPToolTimeout(t *testing.T) {
	srv, _, canceled := hangingServer(t)
	reg := newHTTPRegistry(t, config.HTTPTool{Name: "slow", URL: srv.URL, Timeout: 50 * time.Millisecond})
	_, err := reg.Call(t.Context(), "slow", nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Call() error = %v, want context.DeadlineExceeded", err)
	}
	if want := "slow: timed out after 50ms"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Call() error = %q, want prefix %q", err, want)
	}
	waitFor(t, canceled, "the server to see the request end")
}

func TestHTTPToolContextCancel(t *testing.T) {
	srv, started, canceled := hangingServer(t)
	reg := newHTTPRegistry(t, config.HTTPTool{Name: "slow", URL: srv.URL, Timeout: time.Minute})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := reg.Call(ctx, "slow", nil)
		errc <- err
	}()
	waitFor(t, started, "the request to reach the server")
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Call() error = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Call() did not return after its context was canceled")
	}
	waitFor(t, canceled, "the server to see the cancellation")
}
