package chain

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
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
