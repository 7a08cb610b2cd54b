package fakeollama

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ollama/ollama/api"
)

// memServer is a server with the scheduler on: B (9 GB) loads in 30 ms,
// S (1.4 GB) in under 5 ms; A (18 GB) does not fit beside B.
func memServer(t *testing.T, replies ...Reply) (*Server, *api.Client) {
	t.Helper()
	srv := New(t, replies...)
	srv.SetMemory(Memory{Budget: 24e9, Bandwidth: 300e9, Sizes: map[string]int64{"A": 18e9, "B": 9e9, "S": 1.4e9}})
	base, _ := url.Parse(srv.URL)
	return srv, api.NewClient(base, http.DefaultClient)
}

func loadedModels(loads []LoadEvent) []string {
	var out []string
	for _, e := range loads {
		out = append(out, e.Model)
	}
	return out
}

// The final line of /api/chat and /api/generate reports the time the
// request waited for its model as load_duration, in nanoseconds.
func TestMemoryLoadDurationOnTheWire(t *testing.T) {
	ctx := context.Background()
	for _, endpoint := range []string{"chat", "generate"} {
		t.Run(endpoint, func(t *testing.T) {
			srv, client := memServer(t, Reply{Content: []string{"hi"}})
			var loads []time.Duration
			var text strings.Builder
			for range 2 {
				var err error
				if endpoint == "chat" {
					err = client.Chat(ctx, &api.ChatRequest{Model: "B", Messages: []api.Message{{Role: "user", Content: "hi"}}}, func(r api.ChatResponse) error {
						text.WriteString(r.Message.Content)
						if r.Done {
							loads = append(loads, r.LoadDuration)
						}
						return nil
					})
				} else {
					err = client.Generate(ctx, &api.GenerateRequest{Model: "B", Prompt: "hi"}, func(r api.GenerateResponse) error {
						text.WriteString(r.Response)
						if r.Done {
							loads = append(loads, r.LoadDuration)
						}
						return nil
					})
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if text.String() != "hihi" {
				t.Errorf("answers = %q, want %q", text.String(), "hihi")
			}
			// The first call loaded B (30 ms); the second found it loaded.
			if len(loads) != 2 || loads[0] < 30*time.Millisecond {
				t.Errorf("load_duration = %v, want the first at least 30ms", loads)
			}
			if got := loadedModels(srv.Loads()); !cmp.Equal(got, []string{"B"}) {
				t.Errorf("loads = %q, want [B]", got)
			}
		})
	}
}

func TestMemoryPsAndTags(t *testing.T) {
	ctx := context.Background()
	_, client := memServer(t)
	before := time.Now()
	err := client.Chat(ctx, &api.ChatRequest{Model: "S", Messages: []api.Message{{Role: "user", Content: "hi"}}, KeepAlive: &api.Duration{Duration: time.Hour}}, func(api.ChatResponse) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	ps, err := client.ListRunning(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps.Models) != 1 {
		t.Fatalf("/api/ps = %+v, want one model", ps.Models)
	}
	m := ps.Models[0]
	if m.Name != "S" || m.Model != "S" || m.Size != 1.4e9 || m.SizeVRAM != 1.4e9 {
		t.Errorf("/api/ps model = %s %s size %d size_vram %d, want S S 1400000000 1400000000", m.Name, m.Model, m.Size, m.SizeVRAM)
	}
	if m.ExpiresAt.Before(before.Add(time.Hour)) || m.ExpiresAt.After(time.Now().Add(time.Hour)) {
		t.Errorf("/api/ps expires_at = %s, want an hour after the call", m.ExpiresAt)
	}
	tags, err := client.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, m := range tags.Models {
		got[m.Name] = m.Size
	}
	if diff := cmp.Diff(map[string]int64{"A": 18e9, "B": 9e9, "S": 1.4e9}, got); diff != "" {
		t.Errorf("/api/tags sizes (-want +got):\n%s", diff)
	}
}

// Ollama's preload idiom: an empty /api/generate loads the model for its
// keep_alive; with keep_alive 0 it unloads it.
func TestMemoryPreload(t *testing.T) {
	ctx := context.Background()
	srv, client := memServer(t)
	generate := func(keep time.Duration) string {
		t.Helper()
		var reason string
		err := client.Generate(ctx, &api.GenerateRequest{Model: "B", KeepAlive: &api.Duration{Duration: keep}}, func(r api.GenerateResponse) error {
			reason = r.DoneReason
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return reason
	}
	if got := generate(-1); got != "load" {
		t.Errorf("preload done_reason = %q, want load", got)
	}
	if got := loadedModels(srv.Loads()); !cmp.Equal(got, []string{"B"}) {
		t.Errorf("loads after the preload = %q, want [B]", got)
	}
	if got := srv.Loaded(); len(got) != 1 || got[0].Model != "B" {
		t.Errorf("loaded after the preload = %+v, want B", got)
	}
	if got := generate(0); got != "unload" {
		t.Errorf("unload done_reason = %q, want unload", got)
	}
	if got := srv.Loaded(); len(got) != 0 {
		t.Errorf("loaded after the unload = %+v, want none", got)
	}
	if got := len(srv.Generates()); got != 0 {
		t.Errorf("recorded generates = %d, want 0 (preloads are not)", got)
	}
}

// With the scheduler on, a model the server does not have is refused as
// Ollama refuses it.
func TestMemoryUnknownModel(t *testing.T) {
	_, client := memServer(t)
	err := client.Chat(context.Background(), &api.ChatRequest{Model: "nope", Messages: []api.Message{{Role: "user", Content: "hi"}}}, func(api.ChatResponse) error { return nil })
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusNotFound || se.ErrorMessage != "model 'nope' not found" {
		t.Errorf("chat with an unknown model = %v, want 404 model 'nope' not found", err)
	}
}
