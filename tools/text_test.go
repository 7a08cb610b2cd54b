package tools

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestParseTextCalls(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		want     []TextCall
		wantRest string
	}{
		{"no call", "Just an answer.", nil, "Just an answer."},
		{"no call keeps spaces", "  answer \n", nil, "  answer \n"},
		{"markdown link", "see [the docs](http://x) and [1]", nil, "see [the docs](http://x) and [1]"},
		{"one call", `[TOOL:list_dir:{"path":"."}]`, []TextCall{{"list_dir", `{"path":"."}`}}, ""},
		{"text around", `Let me look. [TOOL:list_dir:{"path":"."}] Then read.`, []TextCall{{"list_dir", `{"path":"."}`}}, "Let me look.  Then read."},
		{"no args", `[TOOL:read_file]`, []TextCall{{"read_file", "{}"}}, ""},
		{"empty args", `[TOOL:read_file:]`, []TextCall{{"read_file", "{}"}}, ""},
		{"lower case", `[tool:list_dir:{"path":"a"}]`, []TextCall{{"list_dir", `{"path":"a"}`}}, ""},
		{"whitespace everywhere", "[ TOOL : list_dir : { \"path\" : \"a b\" } ]", []TextCall{{"list_dir", `{ "path" : "a b" }`}}, ""},
		{"newlines", "[TOOL:\n  search_files:\n  {\"pattern\": \"x\"}\n]", []TextCall{{"search_files", `{"pattern": "x"}`}}, ""},
		{"bracket in string", `[TOOL:search_files:{"pattern":"a]b"}]`, []TextCall{{"search_files", `{"pattern":"a]b"}`}}, ""},
		{"escaped quote in string", `[TOOL:search_files:{"pattern":"a\"]"}]`, []TextCall{{"search_files", `{"pattern":"a\"]"}`}}, ""},
		{"nested", `[TOOL:q:{"a":[1,{"b":[2]}]}]`, []TextCall{{"q", `{"a":[1,{"b":[2]}]}`}}, ""},
		{"array args", `[TOOL:q:[1,2]]`, []TextCall{{"q", `[1,2]`}}, ""},
		{
			"two in order", "first [TOOL:list_dir:{\"path\":\".\"}]\nsecond [TOOL:read_file:{\"path\":\"a.txt\"}]",
			[]TextCall{{"list_dir", `{"path":"."}`}, {"read_file", `{"path":"a.txt"}`}}, "first \nsecond",
		},
		{"malformed args kept", `[TOOL:read_file:{"path": .}]`, []TextCall{{"read_file", `{"path": .}`}}, ""},
		{"unbalanced args up to ]", `[TOOL:read_file:{"path":"a"]`, []TextCall{{"read_file", `{"path":"a"`}}, ""},
		{"scalar args", `[TOOL:read_file:"a.txt"]`, []TextCall{{"read_file", `"a.txt"`}}, ""},
		{"unterminated", `[TOOL:list_dir:{"path":"."}`, nil, `[TOOL:list_dir:{"path":"."}`},
		{"no name", `[TOOL:]`, nil, `[TOOL:]`},
		{"not TOOL", `[TOOLS:list_dir]`, nil, `[TOOLS:list_dir]`},
		{"name then junk", `[TOOL:list dir]`, nil, `[TOOL:list dir]`},
		{"bracket before call", `[x] [TOOL:list_dir]`, []TextCall{{"list_dir", "{}"}}, "[x]"},
		{"nested opening bracket", `[[TOOL:list_dir]]`, []TextCall{{"list_dir", "{}"}}, "[]"},
		{"empty", "", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, rest := ParseTextCalls(tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseTextCalls(%q) calls (-want +got):\n%s", tt.in, diff)
			}
			if rest != tt.wantRest {
				t.Errorf("ParseTextCalls(%q) rest = %q, want %q", tt.in, rest, tt.wantRest)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		limit int
		want  string
	}{
		{"shorter", "hello", 10, "hello"},
		{"exact", "hello", 5, "hello"},
		{"ascii", "hello", 3, "hel\n… [truncated: 2 more bytes]"},
		{"inside 2-byte rune", "héllo", 2, "h\n… [truncated: 5 more bytes]"},
		{"after 2-byte rune", "héllo", 3, "hé\n… [truncated: 3 more bytes]"},
		{"inside 3-byte rune", "日本", 4, "日\n… [truncated: 3 more bytes]"},
		{"inside 3-byte rune at 2", "日本", 2, "\n… [truncated: 6 more bytes]"},
		{"inside 4-byte rune", "😀x", 3, "\n… [truncated: 5 more bytes]"},
		{"zero", "abc", 0, "\n… [truncated: 3 more bytes]"},
		{"negative", "abc", -1, "\n… [truncated: 3 more bytes]"},
		{"empty", "", 0, ""},
		{"invalid utf-8 cuts at limit", "\x80\x80\x80\x80\x80", 4, "\x80\x80\x80\x80\n… [truncated: 1 more bytes]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Truncate(tt.in, tt.limit); got != tt.want {
				t.Errorf("Truncate(%q, %d) = %q, want %q", tt.in, tt.limit, got, tt.want)
			}
		})
	}
}

// TestTruncateEveryCut: at every limit, a valid string stays valid and the
// note accounts for every byte cut.
func TestTruncateEveryCut(t *testing.T) {
	s := "aé日😀b€ñ𝄞z"
	for limit := range len(s) + 1 {
		got := Truncate(s, limit)
		if !utf8.ValidString(got) {
			t.Errorf("Truncate(%q, %d) = %q, not valid UTF-8", s, limit, got)
		}
		head, note, cut := strings.Cut(got, "\n… [truncated: ")
		if !cut {
			if limit < len(s) || got != s {
				t.Errorf("Truncate(%q, %d) = %q, want a note", s, limit, got)
			}
			continue
		}
		if len(head) > limit || !strings.HasPrefix(s, head) {
			t.Errorf("Truncate(%q, %d) kept %q, want a prefix of at most %d bytes", s, limit, head, limit)
		}
		if want := fmt.Sprintf("%d more bytes]", len(s)-len(head)); note != want {
			t.Errorf("Truncate(%q, %d) note = %q, want %q", s, limit, note, want)
		}
	}
}

func FuzzParseTextCalls(f *testing.F) {
	for _, s := range []string{
		`[TOOL:list_dir:{"path":"."}]`,
		`text [TOOL:read_file] more [TOOL:q:{"a":"]"}]`,
		`[ tool : x : [1,2] ]`,
		`[TOOL:x:{"a":"\"]`,
		`[[[TOOL:`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		calls, rest := ParseTextCalls(s)
		if len(calls) == 0 {
			if rest != s {
				t.Fatalf("ParseTextCalls(%q) found no call but changed the content to %q", s, rest)
			}
			return
		}
		if len(rest) >= len(s) {
			t.Fatalf("ParseTextCalls(%q) found %d calls but rest %q is not shorter", s, len(calls), rest)
		}
		for _, c := range calls {
			if c.Name == "" || c.Arguments == "" {
				t.Fatalf("ParseTextCalls(%q) gave an empty name or arguments: %+v", s, c)
			}
			for i := range len(c.Name) {
				if !isNameByte(c.Name[i]) {
					t.Fatalf("ParseTextCalls(%q) gave name %q outside [a-zA-Z0-9_-]", s, c.Name)
				}
			}
			if !strings.Contains(s, c.Arguments) && c.Arguments != "{}" {
				t.Fatalf("ParseTextCalls(%q) gave arguments %q not in the input", s, c.Arguments)
			}
		}
	})
}

func BenchmarkParseTextCalls(b *testing.B) {
	s := strings.Repeat("Some prose with [brackets] and a call ", 5) + `[TOOL:search_files:{"pattern":"func main","path":"cmd"}] and done.`
	b.ReportAllocs()
	for b.Loop() {
		ParseTextCalls(s)
	}
}

func BenchmarkTruncate(b *testing.B) {
	s := strings.Repeat("résumé ", 4<<10)
	b.ReportAllocs()
	for b.Loop() {
		Truncate(s, 8<<10)
	}
}
