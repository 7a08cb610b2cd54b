package redact

import (
	"slices"
	"strings"
	"testing"
)

// TestStreamSplitSecrets: whatever the pieces a text arrives in, what the
// Stream lets out is the whole text masked, and never a secret.
func TestStreamSplitSecrets(t *testing.T) {
	r := New("gsk_groqkeyBBBB123", "vllm-token-CCCC123", "abcdef")
	text := "the key is gsk_groqkeyBBBB123, then vllm-token-CCCC123 and abcdefabcdef, ends with gsk_gro"
	want := r.r.Replace(text)
	for size := 1; size <= len(text); size++ {
		s := r.Stream()
		var out, held strings.Builder
		for i := 0; i < len(text); i += size {
			got := s.Feed(text[i:min(i+size, len(text))])
			out.WriteString(got)
			held.WriteString(got)
		}
		out.WriteString(s.Flush())
		if out.String() != want {
			t.Fatalf("pieces of %d: got %q, want %q", size, out.String(), want)
		}
		for _, sec := range r.secrets {
			if strings.Contains(held.String(), sec) {
				t.Fatalf("pieces of %d: secret %q let out", size, sec)
			}
		}
	}
}

func TestStreamPassThrough(t *testing.T) {
	var zero Stream
	if got := zero.Feed("sk-abcdefgh"); got != "sk-abcdefgh" {
		t.Errorf("zero Stream Feed = %q, want the text unchanged", got)
	}
	s := New("secret-value").Stream()
	if got := s.Feed("plain text"); got != "plain text" {
		t.Errorf("Feed(plain text) = %q, want it whole (nothing looks like a secret)", got)
	}
	if got := s.Feed(" and secr"); got != " and " || s.Flush() != "secr" {
		t.Errorf("Feed(\" and secr\") = %q; want the start of a secret held back until Flush", got)
	}
}

func BenchmarkStreamFeed(b *testing.B) {
	r := FromConfig(hostileConfig())
	pieces := strings.Fields(strings.Repeat("Some answer text streamed token by token, with numbers 12345 and code. ", 20))
	b.ReportAllocs()
	for b.Loop() {
		s := r.Stream()
		for _, p := range pieces {
			s.Feed(p)
		}
		s.Flush()
	}
}

// FuzzStream: whatever the text and wherever it is split, the Stream lets
// out the text masked as a whole, and no secret.
func FuzzStream(f *testing.F) {
	f.Add("key gsk_abcdef12 and gsk_abc", uint8(3))
	f.Add("abcabcabcdabcd", uint8(1))
	f.Fuzz(func(t *testing.T, text string, size uint8) {
		r := New("gsk_abcdef12", "abcabcd", "cdabcd")
		n := int(size%16) + 1
		s := r.Stream()
		var out strings.Builder
		for i := 0; i < len(text); i += n {
			out.WriteString(s.Feed(text[i:min(i+n, len(text))]))
		}
		out.WriteString(s.Flush())
		if want := r.Values(text); out.String() != want {
			t.Fatalf("pieces of %d of %q: got %q, want %q", n, text, out.String(), want)
		}
	})
}

// TestEachValue: each string of a list is masked by value; a list that
// holds no secret is returned as it is, and the caller's list is never
// written to.
func TestEachValue(t *testing.T) {
	r := New("node-key-123456")
	for _, tt := range []struct {
		in, want []string
		same     bool
	}{
		{nil, nil, true},
		{[]string{"completion", "tools"}, []string{"completion", "tools"}, true},
		{[]string{"tools", "x_node-key-123456", "node-key-123456"}, []string{"tools", "x_***", "***"}, false},
	} {
		in := slices.Clone(tt.in)
		got := r.EachValue(in)
		if !slices.Equal(got, tt.want) || !slices.Equal(in, tt.in) {
			t.Errorf("EachValue(%q) = %q (list now %q), want %q and the list unchanged", tt.in, got, in, tt.want)
		}
		if same := len(got) > 0 && &got[0] == &in[0]; tt.same && len(got) > 0 && !same {
			t.Errorf("EachValue(%q) copied a list without secrets", tt.in)
		}
	}
}
