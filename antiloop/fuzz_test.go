package antiloop_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"chainproxy/antiloop"
)

// FuzzCanonical checks, for any input: no panic; the same verdict on
// validity as encoding/json; valid JSON out; idempotence; and, when every
// number survives float64, the same result as decoding into any and encoding
// again (encoding/json sorts map keys, so this also checks key order at every
// depth).
func FuzzCanonical(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `{"b":2,"a":1}`, `{"path":"."}`, `[1,1.0,1e0,10e-1,-0]`,
		`{"a":{"c":[{"e":1,"d":2}],"b":"\u00e9"}}`, `"\ud83d\ude00\ud800"`,
		`12345678901234567890123`, `{"a":1,"a":2}`, "\"\u2028<>&\"", `1e400`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := antiloop.Canonical(in)
		blank := len(bytes.TrimLeft(in, " \t\r\n")) == 0
		switch {
		case blank:
			if err != nil || string(got) != "{}" {
				t.Fatalf("Canonical(%q) = %s, %v; want {}", in, got, err)
			}
			return
		case err != nil:
			if !errors.Is(err, antiloop.ErrInvalidJSON) {
				t.Fatalf("Canonical(%q) error %v does not wrap ErrInvalidJSON", in, err)
			}
			if json.Valid(in) {
				t.Fatalf("Canonical(%q) error %v, but encoding/json finds it valid", in, err)
			}
			return
		case !json.Valid(in):
			t.Fatalf("Canonical(%q) = %s, but encoding/json finds the input invalid", in, got)
		}
		if !json.Valid(got) {
			t.Fatalf("Canonical(%q) = %q, not valid JSON", in, got)
		}
		again, err := antiloop.Canonical(got)
		if err != nil || !bytes.Equal(again, got) {
			t.Fatalf("Canonical(Canonical(%q)) = %s, %v; want %s", in, again, err, got)
		}
		if want, ok := reference(in); ok && !bytes.Equal(got, want) {
			t.Fatalf("Canonical(%q) = %s, want %s (decode into any, encode)", in, got, want)
		}
	})
}

// reference canonicalises in through encoding/json: decode into any, encode
// with sorted keys and no HTML escaping. It declines (false) when a number
// would not survive float64: more than 15 significant digits, or a magnitude
// near float64's limits.
func reference(in []byte) ([]byte, bool) {
	d := json.NewDecoder(bytes.NewReader(in))
	d.UseNumber()
	var num any
	if err := d.Decode(&num); err != nil || !floatSafe(num) {
		return nil, false
	}
	var v any
	if err := json.Unmarshal(in, &v); err != nil {
		return nil, false
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(dropNegativeZero(v)); err != nil {
		return nil, false
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), true
}

func floatSafe(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			if !floatSafe(e) {
				return false
			}
		}
	case []any:
		for _, e := range v {
			if !floatSafe(e) {
				return false
			}
		}
	case json.Number:
		mant, exp, _ := strings.Cut(strings.ToLower(string(v)), "e")
		digits := strings.Trim(strings.NewReplacer("-", "", ".", "").Replace(mant), "0")
		if len(digits) > 15 || len(exp) > 4 {
			return false
		}
		f, err := v.Float64()
		if err != nil || (f != 0 && (math.Abs(f) < 1e-290 || math.Abs(f) > 1e290)) {
			return false
		}
		if f == 0 && digits != "" {
			return false // underflows to 0, which Canonical does not write
		}
	}
	return true
}

// dropNegativeZero applies Canonical's one documented departure from
// encoding/json's float output: -0 is written 0.
func dropNegativeZero(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = dropNegativeZero(e)
		}
	case []any:
		for i, e := range v {
			v[i] = dropNegativeZero(e)
		}
	case float64:
		if v == 0 {
			return 0.0
		}
	}
	return v
}
