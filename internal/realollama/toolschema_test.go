package realollama_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestToolRefs: a tool whose parameters give a nested model by reference,
// as Pydantic writes every nested model (and FastMCP servers pass on):
// the real server takes it, and the model sees the nested model's fields,
// exactly as when the client writes them in place. Ollama alone would
// render the referenced property as an empty schema, since its types
// (v0.17.4 api/types.go, ToolProperty) have no $ref: the prompt proves the
// proxy's inlining by its length.
func TestToolRefs(t *testing.T) {
	f := setup(t)
	address := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"street":  map[string]any{"type": "string", "description": "Street and number of the delivery address"},
			"country": map[string]any{"type": "string", "enum": []string{"DE", "FR", "IT"}},
		},
		"required": []string{"street", "country"},
	}
	// Pydantic v2's shape: the model by reference, Optional as anyOf with
	// null, a list of models by reference in items.
	byRef := map[string]any{
		"type": "object",
		"$defs": map[string]any{
			"Address": address,
		},
		"properties": map[string]any{
			"to":    map[string]any{"$ref": "#/$defs/Address", "description": "Where it goes"},
			"from":  map[string]any{"anyOf": []any{map[string]any{"$ref": "#/$defs/Address"}, map[string]any{"type": "null"}}, "default": nil},
			"stops": map[string]any{"type": "array", "items": map[string]any{"$ref": "#/$defs/Address"}},
		},
		"required": []string{"to"},
	}
	inPlace := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"to":    merge(address, map[string]any{"description": "Where it goes"}),
			"from":  map[string]any{"anyOf": []any{address, map[string]any{"type": "null"}}, "default": nil},
			"stops": map[string]any{"type": "array", "items": address},
		},
		"required": []string{"to"},
	}
	// What Ollama makes of an unresolved reference: an empty schema.
	empty := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"to":    map[string]any{"description": "Where it goes"},
			"from":  map[string]any{"anyOf": []any{map[string]any{}, map[string]any{"type": "null"}}, "default": nil},
			"stops": map[string]any{"type": "array", "items": map[string]any{}},
		},
		"required": []string{"to"},
	}
	prompt := func(params map[string]any) int {
		t.Helper()
		status, out := postRaw(t, f.proxy+"/v1/chat/completions", map[string]any{
			"model": "tools", "max_tokens": 1, "temperature": 0, "seed": 1,
			"messages": []map[string]any{{"role": "user", "content": "ship it"}},
			"tools":    []map[string]any{{"type": "function", "function": map[string]any{"name": "ship", "description": "Ship a parcel", "parameters": params}}},
		})
		if status != http.StatusOK {
			t.Fatalf("status %d: %.2000s", status, out)
		}
		var r struct {
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			}
		}
		if err := json.Unmarshal(out, &r); err != nil || r.Usage.PromptTokens == 0 {
			t.Fatalf("answer %.2000s: %v", out, err)
		}
		return r.Usage.PromptTokens
	}
	ref, in, none := prompt(byRef), prompt(inPlace), prompt(empty)
	t.Logf("prompt tokens: by reference %d, in place %d, empty %d", ref, in, none)
	if ref != in {
		t.Errorf("the tool by reference makes a prompt of %d tokens, in place %d: the model does not see the same schema", ref, in)
	}
	if ref <= none {
		t.Errorf("the tool by reference makes a prompt of %d tokens, no longer than with empty schemas (%d): the nested fields did not reach the model", ref, none)
	}
}

func merge(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
