package antiloop_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"chainproxy/antiloop"
)

func TestCanonical(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		// Empty arguments.
		{"empty", ``, `{}`},
		{"whitespace only", " \t\r\n ", `{}`},
		{"empty object", `{}`, `{}`},
		{"empty object spaced", `{ }`, `{}`},
		{"empty array", `[ ]`, `[]`},

		// Key order at every depth.
		{"sorted keys", `{"a":1,"b":2}`, `{"a":1,"b":2}`},
		{"reversed keys", `{"b":2,"a":1}`, `{"a":1,"b":2}`},
		{"nested keys", `{"z":{"y":1,"x":{"w":2,"v":3}},"a":[{"d":1,"c":2}]}`,
			`{"a":[{"c":2,"d":1}],"z":{"x":{"v":3,"w":2},"y":1}}`},
		{"byte-wise order", `{"b":1,"B":2,"é":3,"a":4,"aa":5,"":6}`, `{"":6,"B":2,"a":4,"aa":5,"b":1,"é":3}`},
		{"order by decoded key", `{"#":1,"\"":2}`, `{"\"":2,"#":1}`},
		{"keys sharing 8 bytes", `{"abcdefghz":1,"abcdefgha":2,"abcdefgh":3}`, `{"abcdefgh":3,"abcdefgha":2,"abcdefghz":1}`},
		{"key with trailing NUL", `{"a\u0000":1,"a":2}`, `{"a":2,"a\u0000":1}`},
		{"duplicate key last wins", `{"a":1,"b":2,"a":3}`, `{"a":3,"b":2}`},
		{"duplicate key escaped spelling", `{"\u0061":1,"a":2}`, `{"a":2}`},
		{"array order kept", `[3,1,2]`, `[3,1,2]`},

		// Whitespace.
		{"insignificant whitespace", " {\n\t\"a\" : [ 1 , 2 ] ,\r\n \"b\" : { } } ", `{"a":[1,2],"b":{}}`},
		{"whitespace in strings kept", `{"a":" x  y "}`, `{"a":" x  y "}`},

		// Numbers.
		{"int", `1`, `1`},
		{"one point zero", `1.0`, `1`},
		{"one e zero", `1e0`, `1`},
		{"ten e minus one", `10e-1`, `1`},
		{"upper E plus", `1E+0`, `1`},
		{"trailing zeros", `1.500`, `1.5`},
		{"hundred", `100`, `100`},
		{"hundred as exponent", `1e2`, `100`},
		{"fraction as exponent", `125e-2`, `1.25`},
		{"small", `0.000001`, `0.000001`},
		{"smaller uses exponent", `0.0000001`, `1e-7`},
		{"small mantissa", `0.00000015`, `1.5e-7`},
		{"below 1e21 plain", `1e20`, `100000000000000000000`},
		{"1e21 exponent", `1e21`, `1e+21`},
		{"big mantissa", `12345e30`, `1.2345e+34`},
		{"zero", `0`, `0`},
		{"negative zero", `-0`, `0`},
		{"negative zero float", `-0.0e5`, `0`},
		{"zero forms", `[0.0,0e10,0E-3,-0.000]`, `[0,0,0,0]`},
		{"negative", `-12.50`, `-12.5`},
		{"negative exponent form", `-1e-9`, `-1e-9`},
		{"leading zeros of fraction", `0.0125`, `0.0125`},
		{"big integer exact", `12345678901234567890`, `12345678901234567890`},
		{"2^63 exact", `9223372036854775808`, `9223372036854775808`},
		{"2^53+1 exact", `9007199254740993`, `9007199254740993`},
		{"2^53+1 as float", `9007199254740993.0`, `9007199254740993`},
		{"22-digit integer", `1234567890123456789012`, `1.234567890123456789012e+21`},
		{"many digits kept", `0.1000000000000000000000000001`, `0.1000000000000000000000000001`},
		{"huge exponent", `1e400`, `1e+400`},
		{"tiny exponent", `2.5e-400`, `2.5e-400`},
		{"exponent beyond int64", `1.5e123456789012345678901`, `1.5e+123456789012345678901`},
		{"negative exponent beyond int64", `-12e-123456789012345678901`, `-1.2e-123456789012345678900`},
		{"zero with huge exponent", `0e123456789012345678901`, `0`},

		// Strings.
		{"unicode escape decoded", `"\u00e9"`, `"é"`},
		{"raw unicode kept", `"é"`, `"é"`},
		{"surrogate pair", `"\ud83d\ude00"`, `"😀"`},
		{"lone surrogate", `"\ud800x"`, `"` + "\uFFFD" + `x"`},
		{"high surrogate then non-low", `"\ud800\u0041"`, `"` + "\uFFFD" + `A"`},
		{"invalid utf-8", "\"a\xffb\"", `"a` + "\uFFFD" + `b"`},
		{"escaped slash", `"a\/b"`, `"a/b"`},
		{"short escapes", `"\"\\\b\f\n\r\t"`, `"\"\\\b\f\n\r\t"`},
		{"control escape", `"\u0001\u001F"`, `"\u0001\u001f"`},
		{"escaped printable", `"\u0041\u0042"`, `"AB"`},
		{"html not escaped", `"<a href='x'>&amp;</a>"`, `"<a href='x'>&amp;</a>"`},
		{"html escapes decoded", `"\u003c\u003e\u0026"`, `"<>&"`},
		{"line separators escaped", "\"\u2028\u2029\"", `"\u2028\u2029"`},
		{"DEL kept", "\"\x7f\"", "\"\x7f\""},
		{"case kept", `{"Path":"README.md"}`, `{"Path":"README.md"}`},
		{"escaped key", `{"\u00e9":1,"e":2}`, `{"e":2,"é":1}`},
		{"key needing escape", `{"a\nb":1}`, `{"a\nb":1}`},

		// Literals and top-level values.
		{"literals", `[true,false,null]`, `[true,false,null]`},
		{"top-level string", ` "x" `, `"x"`},
		{"top-level number", ` 1.0 `, `1`},
		{"tool arguments", `{"path": ".", "recursive": false, "depth": 2.0}`, `{"depth":2,"path":".","recursive":false}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := antiloop.Canonical([]byte(tt.in))
			if err != nil {
				t.Fatalf("Canonical(%q) error: %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Errorf("Canonical(%q) = %s, want %s", tt.in, got, tt.want)
			}
			again, err := antiloop.Canonical(got)
			if err != nil || string(again) != string(got) {
				t.Errorf("Canonical(%s) = %s, %v; want it unchanged (idempotent)", got, again, err)
			}
		})
	}
}

func TestCanonicalInvalid(t *testing.T) {
	tests := []struct {
		name string
		in   string
	}{
		{"unterminated object", `{"a":1`},
		{"unterminated string", `{"a":"x`},
		{"trailing comma object", `{"a":1,}`},
		{"trailing comma array", `[1,]`},
		{"missing colon", `{"a" 1}`},
		{"unquoted key", `{a:1}`},
		{"single quotes", `{'a':1}`},
		{"two values", `{} {}`},
		{"trailing garbage", `{"a":1}x`},
		{"leading zero", `01`},
		{"leading zero in array", `[01]`},
		{"bare point", `1.`},
		{"point first", `.5`},
		{"plus sign", `+1`},
		{"lone minus", `-`},
		{"empty exponent", `1e`},
		{"exponent sign only", `1e+`},
		{"hex number", `0x10`},
		{"NaN", `NaN`},
		{"Infinity", `Infinity`},
		{"bad literal", `tru`},
		{"capital literal", `True`},
		{"bad escape", `"\x"`},
		{"short unicode escape", `"\u12"`},
		{"bad unicode escape", `"\u12g4"`},
		{"raw newline in string", "\"a\nb\""},
		{"raw tab in string", "\"a\tb\""},
		{"byte order mark", "\uFEFF{}"},
		{"python dict", `{"a": True}`},
		{"text", `list the files`},
		{"comment", `{"a":1 /* x */}`},
		{"too deep", strings.Repeat("[", 10001) + strings.Repeat("]", 10001)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := antiloop.Canonical([]byte(tt.in))
			if !errors.Is(err, antiloop.ErrInvalidJSON) {
				t.Errorf("Canonical(%.40q) = %s, %v; want an error wrapping ErrInvalidJSON", tt.in, got, err)
			}
			if _, err := antiloop.Signature("t", []byte(tt.in)); !errors.Is(err, antiloop.ErrInvalidJSON) {
				t.Errorf("Signature(t, %.40q) error = %v, want one wrapping ErrInvalidJSON", tt.in, err)
			}
		})
	}
}

func TestCanonicalDeepNesting(t *testing.T) {
	// At the depth limit, accepted; and linear work for one-key chains.
	in := strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000)
	got, err := antiloop.Canonical([]byte(in))
	if err != nil {
		t.Fatalf("Canonical(10000 nested objects) error: %v", err)
	}
	if string(got) != in {
		t.Errorf("Canonical(10000 nested objects) changed the document")
	}

	// Every level out of order: each is reordered, and the work stays
	// linear (a single reordering pass, not one copy per level).
	in = strings.Repeat(`{"b":0,"a":`, 10000) + "1" + strings.Repeat("}", 10000)
	want := strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat(`,"b":0}`, 10000)
	got, err = antiloop.Canonical([]byte(in))
	if err != nil {
		t.Fatalf("Canonical(10000 nested unsorted objects) error: %v", err)
	}
	if string(got) != want {
		t.Errorf("Canonical(10000 nested unsorted objects) is not sorted at every depth")
	}
}

func TestSignature(t *testing.T) {
	sig := func(name, args string) uint64 {
		t.Helper()
		s, err := antiloop.Signature(name, []byte(args))
		if err != nil {
			t.Fatalf("Signature(%q, %q) error: %v", name, args, err)
		}
		return s
	}
	same := []struct {
		name   string
		n1, a1 string
		n2, a2 string
	}{
		{"key order", "f", `{"a":1,"b":2}`, "f", `{"b":2,"a":1}`},
		{"nested key order", "f", `{"o":{"x":1,"y":[{"p":1,"q":2}]}}`, "f", `{"o":{"y":[{"q":2,"p":1}],"x":1}}`},
		{"whitespace", "list_dir", `{"path":"."}`, "list_dir", "{ \"path\" :\n \".\" }"},
		{"number forms", "f", `{"n":1}`, "f", `{"n":1.0e0}`},
		{"unicode escape", "f", `{"s":"é"}`, "f", `{"s":"\u00e9"}`},
		{"empty and no-argument object", "f", ``, "f", `{}`},
	}
	for _, tt := range same {
		t.Run("same/"+tt.name, func(t *testing.T) {
			if a, b := sig(tt.n1, tt.a1), sig(tt.n2, tt.a2); a != b {
				t.Errorf("Signature(%q, %q) = %x, Signature(%q, %q) = %x, want equal", tt.n1, tt.a1, a, tt.n2, tt.a2, b)
			}
		})
	}
	differ := []struct {
		name   string
		n1, a1 string
		n2, a2 string
	}{
		{"tool name", "read_file", `{"path":"a"}`, "list_dir", `{"path":"a"}`},
		{"argument value", "f", `{"path":"a"}`, "f", `{"path":"b"}`},
		{"string case", "f", `{"path":"a"}`, "f", `{"path":"A"}`},
		{"number vs string", "f", `{"n":1}`, "f", `{"n":"1"}`},
		{"array order", "f", `[1,2]`, "f", `[2,1]`},
		{"big integers", "f", `9007199254740993`, "f", `9007199254740992`},
	}
	for _, tt := range differ {
		t.Run("differ/"+tt.name, func(t *testing.T) {
			s1, err1 := antiloop.Signature(tt.n1, []byte(tt.a1))
			s2, err2 := antiloop.Signature(tt.n2, []byte(tt.a2))
			if err1 == nil && err2 == nil && s1 == s2 {
				t.Errorf("Signature(%q, %q) = Signature(%q, %q) = %x, want different", tt.n1, tt.a1, tt.n2, tt.a2, s1)
			}
		})
	}
}

func TestSignatureConcurrent(t *testing.T) {
	// The pooled buffers must not leak between goroutines.
	want, err := antiloop.Signature("f", []byte(benchArgs))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan uint64)
	for range 8 {
		go func() {
			var last uint64
			for range 500 {
				last, _ = antiloop.Signature("f", []byte(benchArgs))
				_, _ = antiloop.Canonical([]byte(`{"z":[1,2,{"b":1,"a":2}],"y":"\u00e9"}`))
			}
			done <- last
		}()
	}
	for range 8 {
		if got := <-done; got != want {
			t.Errorf("concurrent Signature = %x, want %x", got, want)
		}
	}
}

func TestCanonicalManyKeys(t *testing.T) {
	// More keys than the insertion sort handles, with a repeated key.
	var in, want strings.Builder
	in.WriteString("{")
	for i := 19; i >= 0; i-- {
		fmt.Fprintf(&in, `"k%02d":%d,`, i, i)
	}
	in.WriteString(`"k05":"last"}`)
	want.WriteString("{")
	for i := range 20 {
		if i > 0 {
			want.WriteString(",")
		}
		if i == 5 {
			want.WriteString(`"k05":"last"`)
			continue
		}
		fmt.Fprintf(&want, `"k%02d":%d`, i, i)
	}
	want.WriteString("}")
	got, err := antiloop.Canonical([]byte(in.String()))
	if err != nil || string(got) != want.String() {
		t.Errorf("Canonical(%s) = %s, %v; want %s", in.String(), got, err, want.String())
	}
}
