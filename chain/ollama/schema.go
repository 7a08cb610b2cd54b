package ollama

import (
	"bytes"
	"encoding/json"
	"maps"
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
// writes every nested model that way. Schemas without "$ref" are returned
// as they are; so is one that does not decode.
func inlineRefs(raw json.RawMessage) json.RawMessage {
	if !bytes.Contains(raw, []byte(`"$ref"`)) {
		return raw
	}
	var root map[string]any
	if json.Unmarshal(raw, &root) != nil {
		return raw
	}
	defs := map[string]any{}
	for _, key := range []string{"$defs", "definitions"} {
		if d, ok := root[key].(map[string]any); ok {
			for name, def := range d {
				defs["#/"+key+"/"+name] = def
			}
		}
	}
	out := inline(root, defs, nil)
	if m, ok := out.(map[string]any); ok {
		// Their content is in place now; left, they would only lengthen
		// the prompt.
		delete(m, "$defs")
		delete(m, "definitions")
	}
	b, err := json.Marshal(out)
	if err != nil {
		return raw
	}
	return b
}

// inline copies v with its references replaced; path holds the references
// being expanded, so that a type that contains itself stops at an object.
func inline(v any, defs map[string]any, path []string) any {
	switch x := v.(type) {
	case map[string]any:
		if ref, ok := x["$ref"].(string); ok && strings.HasPrefix(ref, "#/") {
			def, found := defs[ref]
			if !found || len(path) >= maxRefDepth || slices.Contains(path, ref) {
				// A reference the schema does not define, or a type
				// that holds itself: an object, described.
				return merged(map[string]any{"type": "object"}, x)
			}
			return merged(inline(def, defs, append(path, ref)), x)
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = inline(e, defs, path)
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
func merged(def any, ref map[string]any) any {
	m, ok := def.(map[string]any)
	if !ok {
		return def
	}
	out := maps.Clone(m)
	for k, e := range ref {
		if k != "$ref" {
			out[k] = e
		}
	}
	return out
}
