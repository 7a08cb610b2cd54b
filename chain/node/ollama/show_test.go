package ollama

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"chainproxy/chain/node"
	"chainproxy/internal/fakeollama"
)

func TestDescribe(t *testing.T) {
	tests := []struct {
		name     string
		declare  map[string][]string // models the server has; nil: any
		wantCaps []string
		wantErr  string
	}{
		{"any model", nil, fakeollama.DefaultCapabilities, ""},
		{"no tools", map[string][]string{"qwen3:1.7b": {"completion"}}, []string{"completion"}, ""},
		{"thinking and tools", map[string][]string{"qwen3:1.7b": {"completion", "tools", "thinking"}}, []string{"completion", "tools", "thinking"}, ""},
		{"missing", map[string][]string{"other": {"completion"}}, nil, `model "qwen3:1.7b" not found on %s: ollama pull qwen3:1.7b`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeollama.New(t)
			for m, caps := range tc.declare {
				srv.SetModel(m, caps...)
			}
			info, err := New(nodeAt(srv.URL), nil).Describe(t.Context())
			if tc.wantErr != "" {
				want := fmt.Sprintf(tc.wantErr, srv.URL)
				if !errors.Is(err, node.ErrModelNotFound) || err.Error() != want {
					t.Fatalf("Describe() error = %v, want %q (ErrModelNotFound)", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(info.Capabilities, tc.wantCaps) {
				t.Errorf("Describe() capabilities = %q, want %q", info.Capabilities, tc.wantCaps)
			}
		})
	}
}

// TestChatMissingModelNamesNodeAndModel: Ollama's 404 keeps its message and
// gains the node and model, and stays a status error (502 to the client).
func TestChatMissingModelNamesNodeAndModel(t *testing.T) {
	srv := fakeollama.New(t)
	srv.SetModel("other", "completion")
	_, err := collect(t.Context(), New(nodeAt(srv.URL), nil), userRequest("hi"))
	var ue *node.UpstreamError
	if !errors.As(err, &ue) || ue.Status != http.StatusNotFound {
		t.Fatalf("Chat() error = %v, want a 404 *node.UpstreamError", err)
	}
	want := fmt.Sprintf(`node OL1: upstream status error (HTTP 404): model 'qwen3:1.7b' not found (node OL1, model "qwen3:1.7b" on %s): ollama pull qwen3:1.7b`, srv.URL)
	if err.Error() != want {
		t.Errorf("Chat() error =\n%q, want\n%q", err, want)
	}
}

func TestChatKeepAlive(t *testing.T) {
	tests := []struct {
		name string
		ka   *time.Duration
		want any // the body's keep_alive; nil: absent
	}{
		{"unset", nil, nil},
		{"for ever", ptr(time.Duration(-1)), float64(-1)},
		{"unload", ptr(time.Duration(0)), "0s"},
		{"five minutes", ptr(5 * time.Minute), "5m0s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeollama.New(t)
			req := userRequest("hi")
			req.KeepAlive = tc.ka
			if _, err := collect(t.Context(), New(nodeAt(srv.URL), nil), req); err != nil {
				t.Fatal(err)
			}
			got, ok := srv.Bodies()[0]["keep_alive"]
			if tc.want == nil && ok || tc.want != nil && got != tc.want {
				t.Errorf("keep_alive on the wire = %v (present %v), want %v", got, ok, tc.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
