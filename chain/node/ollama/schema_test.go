package ollama

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"

	"chainproxy/chain/node"
)

// pydanticPerson is what FastMCP publishes for
//
//	class Address(BaseModel): street: str; city: str
//	class Person(BaseModel): name: str; address: Address; previous: Address | None = None
//	@mcp.tool()
//	def add_person(person: Person) -> str: ...
//
// (Pydantic v2's model_json_schema: nested models in $defs, used by $ref).
const pydanticPerson = `{"$defs":{"Address":{"properties":{"street":{"title":"Street","type":"string"},"city":{"title":"City","type":"string"}},"required":["street","city"],"title":"Address","type":"object"},"Person":{"properties":{"name":{"title":"Name","type":"string"},"address":{"$ref":"#/$defs/Address","description":"Where they live"},"previous":{"anyOf":[{"$ref":"#/$defs/Address"},{"type":"null"}],"default":null}},"required":["name","address"],"title":"Person","type":"object"}},"properties":{"person":{"$ref":"#/$defs/Person"}},"required":["person"],"title":"add_personArguments","type":"object"}`

// property follows names down the properties of params.
func property(t *testing.T, params api.ToolFunctionParameters, names ...string) api.ToolProperty {
	t.Helper()
	props := params.Properties
	var p api.ToolProperty
	for _, n := range names {
		if props == nil {
			t.Fatalf("no properties above %q", n)
		}
		var ok bool
		if p, ok = props.Get(n); !ok {
			t.Fatalf("no property %q", n)
		}
		props = p.Properties
	}
	return p
}

// TestToolParametersRefs: a nested model given by reference reaches Ollama
// with its properties; Ollama's types have no $ref, and before, the model
// saw person as an empty schema.
func TestToolParametersRefs(t *testing.T) {
	req := &node.Request{Messages: []node.Message{{Role: "user", Content: "add Ada"}},
		Tools: []node.Tool{{Name: "people__add_person", Parameters: json.RawMessage(pydanticPerson)}}}
	creq, err := ToChatRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	params := creq.Tools[0].Function.Parameters
	if p := property(t, params, "person"); p.Type.String() != "object" {
		t.Errorf("person has type %v, want object", p.Type)
	}
	if p := property(t, params, "person", "address", "street"); p.Type.String() != "string" {
		t.Errorf("person.address.street has type %v, want string", p.Type)
	}
	if p := property(t, params, "person", "address"); p.Description != "Where they live" {
		t.Errorf("person.address's description %q, want the one beside the reference", p.Description)
	}
	prev := property(t, params, "person", "previous")
	if len(prev.AnyOf) != 2 || prev.AnyOf[0].Properties == nil {
		t.Fatalf("person.previous = %+v, want the address or null", prev)
	}
	if _, ok := prev.AnyOf[0].Properties.Get("city"); !ok {
		t.Errorf("person.previous's address lacks city")
	}
	if params.Defs != nil {
		t.Errorf("$defs still sent: %v", params.Defs)
	}
}

func TestInlineRefs(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"no reference", `{"type":"object","properties":{"a":{"type":"string"}}}`, `{"type":"object","properties":{"a":{"type":"string"}}}`},
		{"draft-07 definitions", `{"definitions":{"A":{"type":"integer"}},"properties":{"a":{"$ref":"#/definitions/A"}},"type":"object"}`,
			`{"properties":{"a":{"type":"integer"}},"type":"object"}`},
		{"a type that holds itself", `{"$defs":{"Node":{"type":"object","properties":{"child":{"$ref":"#/$defs/Node"}}}},"properties":{"root":{"$ref":"#/$defs/Node"}},"type":"object"}`,
			`{"properties":{"root":{"properties":{"child":{"type":"object"}},"type":"object"}},"type":"object"}`},
		{"a reference to nothing", `{"properties":{"a":{"$ref":"#/$defs/Missing","description":"d"}},"type":"object"}`,
			`{"properties":{"a":{"description":"d","type":"object"}},"type":"object"}`},
		{"not JSON", `{"$ref":`, `{"$ref":`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := inlineRefs(json.RawMessage(tt.in))
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				if string(got) != tt.want {
					t.Fatalf("inlineRefs(%s) = %s, want %s", tt.in, got, tt.want)
				}
				return
			}
			json.Unmarshal([]byte(tt.want), &w)
			gb, _ := json.Marshal(g)
			wb, _ := json.Marshal(w)
			if string(gb) != string(wb) {
				t.Errorf("inlineRefs(%s)\n got %s\nwant %s", tt.in, gb, wb)
			}
		})
	}
}

// TestInlineRefsKeepsOrder: properties keep the order their author wrote
// (Ollama keeps it too, and the model reads them so), not the alphabetical
// order of a Go map; numbers keep their text.
func TestInlineRefsKeepsOrder(t *testing.T) {
	out := string(inlineRefs(json.RawMessage(pydanticPerson)))
	name, address, previous := strings.Index(out, `"name"`), strings.Index(out, `"address"`), strings.Index(out, `"previous"`)
	street, city := strings.Index(out, `"street"`), strings.Index(out, `"city"`)
	if name < 0 || !(name < address && address < previous) || street < 0 || !(street < city) {
		t.Errorf("properties out of order in %s", out)
	}
	if got := string(inlineRefs(json.RawMessage(`{"properties":{"z":{"$ref":"#/$defs/N"},"a":{"type":"integer","maximum":1e3}},"$defs":{"N":{"type":"number","minimum":0.10}}}`))); got != `{"properties":{"z":{"type":"number","minimum":0.10},"a":{"type":"integer","maximum":1e3}}}` {
		t.Errorf("inlineRefs = %s", got)
	}
}
