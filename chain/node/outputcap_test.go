package node

import (
	"context"
	"strings"
	"testing"

	"chainproxy/internal/redact"

	"github.com/google/go-cmp/cmp"
)

// script is a backend that sends its chunks, then, when endless is set,
// blocks until its context ends, as a server streaming without end would:
// a Chat that did not stop it at the cap would hang there.
type script struct {
	chunks  []Chunk
	endless bool
	gotArgs int // the request's MaxArgsBytes
}

func (s *script) Chat(ctx context.Context, req *Request, fn func(Chunk) error) error {
	s.gotArgs = req.MaxArgsBytes
	for _, c := range s.chunks {
		if err := fn(c); err != nil {
			return err
		}
	}
	if s.endless {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

// TestCapsChatOutputCap: content and reasoning together stop at the node's
// max_output_bytes, cut on a rune boundary; the last chunk delivered
// finishes "length" (or "tool_calls" with the calls it carried) and says
// why in Cut, and the backend's call is cancelled.
func TestCapsChatOutputCap(t *testing.T) {
	call := []ToolCall{{ID: "c", Name: "f", Arguments: "{}"}}
	tests := []struct {
		name    string
		limit   int
		chunks  []Chunk
		endless bool
		want    []Chunk // Cut is checked apart
	}{
		{"under the cap", 10, []Chunk{{Content: "abc"}, {Content: "de", FinishReason: "stop"}}, false,
			[]Chunk{{Content: "abc"}, {Content: "de", FinishReason: "stop"}}},
		{"exactly the cap", 5, []Chunk{{Content: "abc"}, {Content: "de", FinishReason: "stop"}}, false,
			[]Chunk{{Content: "abc"}, {Content: "de", FinishReason: "stop"}}},
		{"endless stream", 5, []Chunk{{Content: "abc"}, {Content: "def"}, {Content: "ghi"}}, true,
			[]Chunk{{Content: "abc"}, {Content: "de", FinishReason: "length"}}},
		{"reasoning counts", 5, []Chunk{{Reasoning: "abcd"}, {Reasoning: "ef", Content: "gh"}}, true,
			[]Chunk{{Reasoning: "abcd"}, {Reasoning: "e", FinishReason: "length"}}},
		{"cut on a rune boundary", 4, []Chunk{{Content: "ab"}, {Content: "é€"}}, true,
			[]Chunk{{Content: "ab"}, {Content: "é", FinishReason: "length"}}},
		{"tool calls in the overflowing last chunk kept", 3, []Chunk{{Content: "abcd", ToolCalls: call, FinishReason: "tool_calls"}}, false,
			[]Chunk{{Content: "abc", ToolCalls: call, FinishReason: "tool_calls"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &script{chunks: tt.chunks, endless: tt.endless}
			cp := &Caps{MaxArgs: 100, MaxOutput: tt.limit}
			var got []Chunk
			err := cp.Chat(t.Context(), b, &Request{}, func(c Chunk) error {
				got = append(got, c)
				return nil
			})
			if err != nil {
				t.Fatalf("chat error = %v, want nil", err)
			}
			capped := len(got) > 0 && got[len(got)-1].Cut != ""
			if wantCut := tt.endless || len(tt.chunks[len(tt.chunks)-1].Content) > len(tt.want[len(tt.want)-1].Content); capped != wantCut {
				t.Errorf("last chunk Cut = %q, want cut %v", got[len(got)-1].Cut, wantCut)
			}
			if capped && !strings.Contains(got[len(got)-1].Cut, "max_output_bytes") {
				t.Errorf("Cut = %q, want it to name max_output_bytes", got[len(got)-1].Cut)
			}
			for i := range got {
				got[i].Cut = ""
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("chunks (-want +got):\n%s", diff)
			}
			if b.gotArgs != 100 {
				t.Errorf("backend got MaxArgsBytes %d, want 100", b.gotArgs)
			}
		})
	}
}

// TestCapsChatMasksSecrets: a secret the upstream writes into its answer,
// split between chunks, in the reasoning or a tool call's arguments, never
// reaches the caller.
func TestCapsChatMasksSecrets(t *testing.T) {
	const key = "node-key-123456"
	b := &script{chunks: []Chunk{
		{Reasoning: "I was sent node-k"}, {Reasoning: "ey-123456."},
		{Content: "Your key: node-ke"}, {Content: "y-1"}, {Content: "23456 and the end node-"},
		{FinishReason: "tool_calls", ToolCalls: []ToolCall{{ID: "c", Name: "f", Arguments: `{"k":"` + key + `"}`}}},
	}}
	cp := &Caps{Redact: redact.New(key)}
	var content, reasoning strings.Builder
	var calls []ToolCall
	if err := cp.Chat(t.Context(), b, &Request{}, func(c Chunk) error {
		content.WriteString(c.Content)
		reasoning.WriteString(c.Reasoning)
		calls = append(calls, c.ToolCalls...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, want := content.String(), "Your key: *** and the end node-"; got != want {
		t.Errorf("content = %q, want %q", got, want)
	}
	if got, want := reasoning.String(), "I was sent ***."; got != want {
		t.Errorf("reasoning = %q, want %q", got, want)
	}
	if len(calls) != 1 || calls[0].Arguments != `{"k":"***"}` {
		t.Errorf("tool calls = %+v, want the key masked in the arguments", calls)
	}
}
