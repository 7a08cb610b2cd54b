package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"chainproxy/config"
)

// timeoutErr is what a dialer's deadline produces.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestTransportError(t *testing.T) {
	dial := func(err error) error {
		return &url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: err}}
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		kind string // "" = not an UpstreamError
	}{
		{"refused", context.Background(), dial(os.NewSyscallError("connect", syscall.ECONNREFUSED)), KindConnect},
		{"connect timeout", context.Background(), dial(timeoutErr{}), KindConnect},
		{"read timeout", context.Background(), &url.Error{Op: "Post", URL: "http://x", Err: timeoutErr{}}, KindTimeout},
		{"deadline", context.Background(), fmt.Errorf("reading: %w", context.DeadlineExceeded), KindTimeout},
		{"garbage", context.Background(), errors.New("unexpected EOF"), KindProtocol},
		{"client went away", canceled, fmt.Errorf("read: %w", context.Canceled), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := TransportError(tt.ctx, "M1", tt.err)
			var ue *UpstreamError
			switch {
			case tt.kind == "" && errors.As(err, &ue):
				t.Errorf("TransportError = %v, want no UpstreamError", err)
			case tt.kind == "" && !errors.Is(err, context.Canceled):
				t.Errorf("TransportError = %v, want context.Canceled", err)
			case tt.kind != "" && (!errors.As(err, &ue) || ue.Kind != tt.kind || ue.Node != "M1"):
				t.Errorf("TransportError = %v, want kind %s", err, tt.kind)
			}
		})
	}
}

// TestHTTPClientSmallBuffers checks that the node client's 1 KiB connection
// buffers lose nothing larger than them, in both directions, streamed and
// not: a 100 KB request body, a 3 KB header line, a 200 KB body and a
// 20 KB line written in pieces with flushes between.
func TestHTTPClientSmallBuffers(t *testing.T) {
	reqBody := bytes.Repeat([]byte("0123456789abcdef"), 100_000/16)
	cookie := strings.Repeat("c", 3000)
	line := strings.Repeat("x", 20_000) + "\n"
	body := strings.Repeat(line, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, err := io.ReadAll(r.Body)
		if err != nil || !bytes.Equal(got, reqBody) {
			http.Error(w, fmt.Sprintf("request body: %d bytes, %v", len(got), err), http.StatusBadRequest)
			return
		}
		w.Header().Set("Set-Cookie", "k="+cookie)
		if r.URL.Query().Get("stream") == "" {
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			io.WriteString(w, body)
			return
		}
		f := w.(http.Flusher)
		for i := 0; i < len(body); i += 700 { // chunks that straddle the buffers
			io.WriteString(w, body[i:min(i+700, len(body))])
			f.Flush()
		}
	}))
	defer srv.Close()
	client := NewHTTPClient(config.Node{ConnectTimeout: 5 * time.Second})
	for _, path := range []string{"/", "/?stream=1"} {
		for range 2 { // the second on the kept-alive connection
			resp, err := client.Post(srv.URL+path, "application/octet-stream", bytes.NewReader(reqBody))
			if err != nil {
				t.Fatalf("POST %s: %v", path, err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("POST %s: %d %v: %.200s", path, resp.StatusCode, err, got)
			}
			if c := resp.Header.Get("Set-Cookie"); c != "k="+cookie {
				t.Errorf("POST %s: Set-Cookie of %d bytes, want %d", path, len(c), len(cookie)+2)
			}
			if string(got) != body {
				t.Errorf("POST %s: body of %d bytes, want %d", path, len(got), len(body))
			}
		}
	}
}
