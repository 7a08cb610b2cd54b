package web

import (
	"encoding/json"
	"errors"
	"unicode/utf8"

	gojson "github.com/goccy/go-json"

	"chainproxy/internal/jsonx"
)

// This file is the JSON codec every front's wire is read and written with.

// unmarshal decodes JSON as encoding/json does, in about a third of its
// time on a chat request: a validator of JSON and UTF-8 in one pass
// (jsonx.Valid), then goccy/go-json's decoder, which is three times as fast
// as encoding/json's but lets syntax errors pass in the values it skips.
// Invalid JSON, invalid UTF-8 (which encoding/json replaces with U+FFFD
// and goccy keeps as is) and anything goccy refuses are decoded again by
// encoding/json, whose result or error (with the field and offset the
// messages quote) is then the answer. FuzzUnmarshalMatchesStd checks that
// the two agree.
func unmarshal(data []byte, v any) error {
	if jsonx.Valid(data) && gojson.Unmarshal(data, v) == nil {
		return nil
	}
	return json.Unmarshal(data, v)
}

// marshal encodes the proxy's own response types with goccy/go-json, in
// about 60 % of encoding/json's time. It writes the bytes encoding/json
// writes (HTML escaping, U+FFFD for invalid UTF-8, compacted raw messages),
// as FuzzMarshalMatchesStd checks, but for \b and \f, which it escapes as
// \u0008 and \u000c: the same JSON. Unlike encoding/json it does not
// validate raw messages; the trace's are valid by construction.
func marshal(v any) ([]byte, error) { return gojson.Marshal(v) }

// plainString returns the text of the JSON string token raw when it has no
// escapes and is valid UTF-8, which is most message contents: then it is
// the bytes between the quotes, with no decoder needed.
func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	in := raw[1 : len(raw)-1]
	for _, c := range in {
		if c < 0x20 || c == '"' || c == '\\' {
			return "", false
		}
	}
	if !utf8.Valid(in) {
		return "", false
	}
	return string(in), true
}

// decodeBody decodes a request body into v, its faults as the 400 the
// fronts answer: the field of the wrong type, or what is wrong with the
// JSON.
func decodeBody(body []byte, v any) error {
	if err := unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return invalid(te.Field, "invalid type for %s: want %s", te.Field, te.Type)
		}
		return invalid("", "invalid JSON in request body: %v", err)
	}
	return nil
}
