package ollama

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
)

// maxRefDepth bounds how deep inlined definitions nest: a recursive type
// (a tree node holding nodes) would otherwise never end.
const maxRefDepth = 8

// inlineRefs returns a tool's parameters with every local reference
// ("$ref": "#/$defs/X", or "#/definitions/X") replaced by the definition it
// names. Ollama reads parameters into its own types (api.ToolProperty), which
// have no $ref: a property given by reference reaches the model's template
// as an empty schema, and Pydantic, which Python MCP servers (FastMCP) use,
// writes every nested model that way. Members keep the order they were
// written in, which Ollama keeps too (the model reads a tool's properties
// in the author's order). Schemas without "$ref" are returned as they are;
// so is one that does not decode.
func inlineRefs(raw json.RawMessage) json.RawMessage {
	if !bytes.Contains(raw, []byte(`"$ref"`)) {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeOrdered(dec)
	if err != nil {
		return raw
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return raw // more than one value
	}
	root, ok := v.(*object)
	if !ok {
		return raw
	}
	defs := map[string]any{}
	for _, key := range []string{"$defs", "definitions"} {
		if d, ok := root.get(key).(*object); ok {
			for i, name := range d.keys {
				defs["#/"+key+"/"+name] = d.vals[i]
			}
		}
	}
	out, ok := inline(root, defs, nil).(*object)
	if !ok {
		return raw // the root itself a reference to a definition that is no object
	}
	// Their content is in place now; left, they would only lengthen the
	// prompt.
	out.drop("$defs")
	out.drop("definitions")
	b, err := json.Marshal(out)
	if err != nil {
		return raw
	}
	return b
}

// object is a JSON object with its members in the order they came.
type object struct {
	keys []string
	vals []any
}

// get is the value of the member k, nil when there is none (the last one
// when k comes twice, as encoding/json reads it).
func (o *object) get(k string) any {
	for i := len(o.keys) - 1; i >= 0; i-- {
		if o.keys[i] == k {
			return o.vals[i]
		}
	}
	return nil
}

// set replaces the member k, or adds it at the end.
func (o *object) set(k string, v any) {
	if i := slices.Index(o.keys, k); i >= 0 {
		o.vals[i] = v
		return
	}
	o.keys, o.vals = append(o.keys, k), append(o.vals, v)
}

func (o *object) drop(k string) {
	for i := len(o.keys) - 1; i >= 0; i-- {
		if o.keys[i] == k {
			o.keys, o.vals = slices.Delete(o.keys, i, i+1), slices.Delete(o.vals, i, i+1)
		}
	}
}

// MarshalJSON writes the members in their order.
func (o *object) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, k := range o.keys {
		if i > 0 {
			b = append(b, ',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		vb, err := json.Marshal(o.vals[i])
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, kb...), ':'), vb...)
	}
	return append(b, '}'), nil
}

// decodeOrdered reads one JSON value: objects as *object, arrays as
// []any, numbers as json.Number (their text kept), the rest as
// encoding/json reads them.
func decodeOrdered(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := &object{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			o.keys, o.vals = append(o.keys, k), append(o.vals, v)
		}
		_, err := dec.Token() // '}'
		return o, err
	case json.Delim('['):
		a := []any{}
		for dec.More() {
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token() // ']'
		return a, err
	}
	return tok, nil
}

// inline copies v with its references replaced; path holds the references
// being expanded, so that a type that contains itself stops at an object.
func inline(v any, defs map[string]any, path []string) any {
	switch x := v.(type) {
	case *object:
		if ref, ok := x.get("$ref").(string); ok && strings.HasPrefix(ref, "#/") {
			def, found := defs[ref]
			if !found || len(path) >= maxRefDepth || slices.Contains(path, ref) {
				// A reference the schema does not define, or a type
				// that holds itself: an object, described.
				return merged(&object{keys: []string{"type"}, vals: []any{"object"}}, x)
			}
			return merged(inline(def, defs, append(path, ref)), x)
		}
		out := &object{keys: slices.Clone(x.keys), vals: make([]any, len(x.vals))}
		for i, e := range x.vals {
			out.vals[i] = inline(e, defs, path)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = inline(e, defs, path)
		}
		return out
	}
	return v
}

// merged is the definition def with the members written beside the
// reference (a description, a default), which describe this use of it.
func merged(def any, ref *object) any {
	d, ok := def.(*object)
	if !ok {
		return def
	}
	out := &object{keys: slices.Clone(d.keys), vals: slices.Clone(d.vals)}
	for i, k := range ref.keys {
		if k != "$ref" {
			out.set(k, ref.vals[i])
		}
	}
	return out
}
