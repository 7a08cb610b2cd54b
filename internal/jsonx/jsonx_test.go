package jsonx

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// validCases are bodies on each side of every rule, and of the depth limit.
var validCases = []string{
	`{}`, `[]`, ` {"a" : [1, -2.5e+3, true, false, null, "x"]} `, `{"a":{}}`, `[[],{}]`,
	`"\"\\\/\b\f\n\r\t\u00e9\uD83D"`, `0`, `-0`, `1.5`, `1E9`, `-0.0e-1`, "\t\r\n 1 \n",
	"\"\xff\"", "\"\xc3\"", "\"é\xe2\x82\"", "\"\xed\xa0\x80\"", // not UTF-8
	``, ` `, `{`, `}`, `[1,]`, `[,1]`, `{"a":1,}`, `{"a"}`, `{"a":}`, `{a:1}`, `{"a":1 "b":2}`,
	`[1 2]`, `01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `--1`, `"\x"`, `"\u12"`, `"\u12g4"`,
	"\"a\x01\"", `"abc`, `tru`, `nulll`, `1 2`, `{"a":1}]`, `[1}`, `{"a":1]`, `[`, `["a":1]`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat("[", 9999) + "[]" + strings.Repeat("]", 9999),
	strings.Repeat("[", 10000) + "[]" + strings.Repeat("]", 10000),
	strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000),
	strings.Repeat(`{"a":`, 10000) + "{}" + strings.Repeat("}", 10000),
}

func TestValid(t *testing.T) {
	for _, c := range validCases {
		if got, want := Valid([]byte(c)), utf8.ValidString(c) && json.Valid([]byte(c)); got != want {
			t.Errorf("Valid(%.40q) = %v, utf8 and encoding/json say %v", c, got, want)
		}
	}
}

// TestValidDeep: a body of brackets as large as a request may be is
// refused without exhausting the stack.
func TestValidDeep(t *testing.T) {
	b := []byte(strings.Repeat("[", 10<<20))
	if Valid(b) {
		t.Fatal("10 MiB of [ is valid")
	}
}

// FuzzValid: Valid agrees with utf8.Valid and encoding/json.Valid on every
// input.
func FuzzValid(f *testing.F) {
	for _, c := range validCases {
		f.Add([]byte(c))
	}
	f.Add([]byte(`{"model":"A","messages":[{"role":"user","content":"l'\u00e9quipe \"a\" <b>"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{}}}}],"temperature":0.2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := Valid(data), utf8.Valid(data) && json.Valid(data); got != want {
			t.Fatalf("Valid(%q) = %v, utf8 and encoding/json say %v", data, got, want)
		}
	})
}

// FuzzAppendString: strings framed by hand are escaped exactly as
// encoding/json escapes them, so what is written by hand is what
// json.Marshal would write.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "hello", "a\"b\\c", "<script>&", "\n\r\t\x00\x1f", "é😀", "\xff\xfe", "\u2028\u2029"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
		}
	})
}

func BenchmarkValid(b *testing.B) {
	small := []byte(`{"model":"A","stream":false,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello to the proxy in one sentence."}]}`)
	var sb strings.Builder
	sb.WriteString(`{"model":"A","messages":[`)
	for i := range 40 {
		if i > 0 {
			sb.WriteByte(',')
		}
		text, _ := json.Marshal(strings.Repeat("L'équipe a analysé le fichier \"main.go\"\n\tet trouvé <3> erreurs. ", 10))
		sb.WriteString(`{"role":"user","content":`)
		sb.Write(text)
		sb.WriteByte('}')
	}
	sb.WriteString(`],"temperature":0.2}`)
	large := []byte(sb.String())
	for _, body := range []struct {
		name string
		data []byte
	}{{"small", small}, {"large", large}} {
		for _, v := range []struct {
			name  string
			valid func([]byte) bool
		}{{"jsonx", Valid}, {"utf8+encoding-json", func(b []byte) bool { return utf8.Valid(b) && json.Valid(b) }}} {
			b.Run(body.name+"/"+v.name, func(b *testing.B) {
				b.SetBytes(int64(len(body.data)))
				b.ReportAllocs()
				for b.Loop() {
					if !v.valid(body.data) {
						b.Fatal("invalid")
					}
				}
			})
		}
	}
}

func BenchmarkAppendString(b *testing.B) {
	for _, s := range []struct{ name, text string }{
		{"word", "word3 "},
		{"sentence", "The proxy relays every chunk as it arrives, and adds little."},
		{"french", "L'équipe a analysé le fichier « main.go » et trouvé 3 erreurs.\n"},
	} {
		b.Run(s.name, func(b *testing.B) {
			buf := make([]byte, 0, 256)
			b.SetBytes(int64(len(s.text)))
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendString(buf[:0], s.text)
			}
		})
	}
}

// FuzzUnquote: Unquote decodes a token as json.Unmarshal into a string
// does, and refuses what it refuses.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`"hello"`, `"a\"b\\c\/d"`, `"\b\f\n\r\t"`, `"\u00e9\u2028"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ud83dx"`, `"\ude00\ud83d"`, `"\ud83d\u0041"`,
		"\"\xff\xfe\"", "\"é😀\"", `"\'"`, `"\x"`, `"\u12"`, `"\u12g4"`, "\"a\x01\"", `"a"b"`, `"abc\"`, `"`, `""`, `abc`, `"a" `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := Unquote(raw)
		var want string
		err := json.Unmarshal(raw, &want)
		if ok != (err == nil) || ok && got != want {
			t.Fatalf("Unquote(%q) = %q, %v; encoding/json: %q, %v", raw, got, ok, want, err)
		}
	})
}

func BenchmarkUnquote(b *testing.B) {
	text, _ := json.Marshal(strings.Repeat("L'équipe a analysé \"main.go\"\n\tet trouvé <3> erreurs; the proxy relays it. ", 12))
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := Unquote(text); !ok {
			b.Fatal("refused")
		}
	}
}
