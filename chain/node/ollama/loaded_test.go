package ollama

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"chainproxy/chain/node"
	"chainproxy/internal/fakeollama"
)

// sizes are the design's three models (issue 44).
var sizes = map[string]int64{"qwen3:1.7b": 1.4e9, "qwen3:30b": 18e9, "deepseek-coder-v2:16b": 9e9}

// preload loads model on srv with Ollama's idiom, an empty /api/generate.
func preload(t *testing.T, srv *fakeollama.Server, model, keepAlive string) {
	t.Helper()
	resp, err := http.Post(srv.URL+"/api/generate", "application/json", strings.NewReader(`{"model":"`+model+`","keep_alive":`+keepAlive+`}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("preload %s: status %d", model, resp.StatusCode)
	}
}

func TestLoadedModels(t *testing.T) {
	tests := []struct {
		name  string
		loads []string // preloaded in order, each kept for an hour
		want  []string
	}{
		{"nothing loaded", nil, []string{}},
		{"two that fit together", []string{"qwen3:1.7b", "qwen3:30b"}, []string{"qwen3:1.7b", "qwen3:30b"}},
		{"the third evicts", []string{"qwen3:1.7b", "qwen3:30b", "deepseek-coder-v2:16b"}, []string{"deepseek-coder-v2:16b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeollama.New(t)
			srv.SetMemory(fakeollama.Memory{Budget: 24e9, Sizes: sizes})
			before := time.Now()
			for _, m := range tc.loads {
				preload(t, srv, m, `"1h"`)
			}
			got, err := New(nodeAt(srv.URL), nil).LoadedModels(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			names := []string{}
			for _, m := range got {
				names = append(names, m.Name)
				if m.Size != sizes[m.Name] || m.VRAM != sizes[m.Name] {
					t.Errorf("%s: size %d, vram %d, want both %d", m.Name, m.Size, m.VRAM, sizes[m.Name])
				}
				if m.ExpiresAt.Before(before.Add(time.Hour)) || m.ExpiresAt.After(time.Now().Add(time.Hour)) {
					t.Errorf("%s: expires at %s, want an hour after its load", m.Name, m.ExpiresAt)
				}
			}
			// Ollama lists the longest time left first; equal times here.
			slices.Sort(names)
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("LoadedModels() names (-want +got):\n%s", diff)
			}
		})
	}
}

func TestModelSizes(t *testing.T) {
	srv := fakeollama.New(t)
	srv.SetMemory(fakeollama.Memory{Budget: 24e9, Sizes: sizes})
	got, err := New(nodeAt(srv.URL), nil).ModelSizes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sizes, got); diff != "" {
		t.Errorf("ModelSizes() (-want +got):\n%s", diff)
	}
}

// A server that is gone is an offline node's *node.UpstreamError, as for
// a chat.
func TestLoadedReadersOffline(t *testing.T) {
	srv := fakeollama.New(t)
	url := srv.URL
	srv.Stop()
	b := New(nodeAt(url), nil)
	_, errPs := b.LoadedModels(t.Context())
	_, errTags := b.ModelSizes(t.Context())
	for name, err := range map[string]error{"LoadedModels": errPs, "ModelSizes": errTags} {
		var ue *node.UpstreamError
		if !errors.As(err, &ue) || !ue.Offline() || ue.Node != "OL1" {
			t.Errorf("%s() on a stopped server = %v, want an offline *node.UpstreamError of OL1", name, err)
		}
	}
}

func TestSameModel(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"qwen3", "qwen3:latest", true},
		{"qwen3:1.7b", "qwen3:1.7b", true},
		{"qwen3:1.7b", "qwen3:30b", false},
		{"qwen3", "qwen3:1.7b", false},
		{"host:5000/library/qwen3", "host:5000/library/qwen3:latest", true},
	}
	for _, tc := range tests {
		if got := SameModel(tc.a, tc.b); got != tc.want {
			t.Errorf("SameModel(%q, %q) = %t, want %t", tc.a, tc.b, got, tc.want)
		}
	}
}
