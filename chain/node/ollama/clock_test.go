package ollama

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"chainproxy/chain/node"
	"chainproxy/config"
)

// slowModel is a transport that answers a chat call as a slow model
// writes: after first, one NDJSON line every gap, lines of them, then the
// done line (or silence for good when hang). It stops when the call's
// context ends.
type slowModel struct {
	first, gap time.Duration
	lines      int
	hang       bool
}

func (m slowModel) RoundTrip(req *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	ctx := req.Context()
	go func() { // exits when the script ends or the call's context does
		wait := func(d time.Duration) bool {
			select {
			case <-time.After(d):
				return true
			case <-ctx.Done():
				pw.CloseWithError(ctx.Err())
				return false
			}
		}
		if !wait(m.first) {
			return
		}
		for i := range m.lines {
			if i > 0 && !wait(m.gap) {
				return
			}
			fmt.Fprintf(pw, `{"model":"m","message":{"role":"assistant","content":"word %d "},"done":false}`+"\n", i)
		}
		if m.hang {
			<-ctx.Done()
			pw.CloseWithError(ctx.Err())
			return
		}
		io.WriteString(pw, `{"model":"m","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop"}`+"\n")
		pw.Close()
	}()
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/x-ndjson"}}, Body: pr, Request: req}, nil
}

// TestCallClock: a streamed call is bounded by its first byte and its
// silences, not by its length, unless nodes[].timeout is set; a call
// answered whole keeps the 120 s bound. The error names the bound that
// ended the call. Under synctest: minutes pass at once.
func TestCallClock(t *testing.T) {
	tests := []struct {
		name  string
		keys  string
		whole bool
		model slowModel
		want  string // "" for no error
	}{
		{"a slow model writes for ten minutes", "", false, slowModel{first: 90 * time.Second, gap: 30 * time.Second, lines: 20}, ""},
		{"no first byte", "", false, slowModel{first: time.Hour}, "no first byte within 2m0s (nodes[].first_byte_timeout)"},
		{"silent mid-answer", "", false, slowModel{first: time.Second, lines: 3, gap: time.Second, hang: true}, "silent for 2m0s (nodes[].idle_timeout)"},
		{"timeout set bounds a stream", "timeout: 5m", false, slowModel{first: time.Second, gap: 30 * time.Second, lines: 20}, "call longer than 5m0s (nodes[].timeout)"},
		{"own keys", "timeout: 5m, first_byte_timeout: 10s", false, slowModel{first: 20 * time.Second}, "no first byte within 10s (nodes[].first_byte_timeout)"},
		{"a whole answer keeps its bound", "", true, slowModel{first: time.Second, gap: 10 * time.Second, lines: 20}, "call longer than 2m0s (nodes[].timeout)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(fmt.Sprintf("nodes:\n  - {name: OL1, provider: ollama, base_url: http://ollama.test, model: m, %s}\nchain: {stages: [{node: OL1, max_turns: 1}], simple_node: OL1}\n", tt.keys)))
			if err != nil {
				t.Fatal(err)
			}
			synctest.Test(t, func(t *testing.T) {
				b := New(cfg.Nodes[0], &http.Client{Transport: tt.model})
				var got strings.Builder
				err := b.Chat(context.Background(), &node.Request{Model: "m", Whole: tt.whole, Messages: []node.Message{{Role: "user", Content: "write"}}}, func(c node.Chunk) error {
					got.WriteString(c.Content)
					return nil
				})
				var ue *node.UpstreamError
				switch {
				case tt.want == "" && err != nil:
					t.Fatalf("Chat() = %v, want the whole answer", err)
				case tt.want == "" && !strings.Contains(got.String(), fmt.Sprintf("word %d", tt.model.lines-1)):
					t.Errorf("answer = %q, want all %d lines", got.String(), tt.model.lines)
				case tt.want != "" && (!errors.As(err, &ue) || ue.Kind != node.KindTimeout || !strings.Contains(err.Error(), tt.want)):
					t.Errorf("Chat() = %v, want an upstream timeout saying %q", err, tt.want)
				}
			})
		})
	}
}
