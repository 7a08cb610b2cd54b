// Package oaischema is a test helper: it validates JSON bodies against OpenAI's
// published OpenAPI description, so tests can prove that the proxy's
// responses, stream chunks and errors have the shape every OpenAI client
// expects.
//
// The schemas it checks against are embedded (openai-chat.yaml): the part of
// OpenAI's description that the tests use, copied unchanged from the public
// repository openai/openai-openapi (commit and refresh command in the file's
// header; the command is ./subset). Nothing is read from outside the
// repository, so validation never skips.
//
// The description is OpenAPI 3.1, whose schemas are JSON Schema 2020-12, but
// it still carries OpenAPI 3.0 "nullable: true" markers, which JSON Schema
// ignores. Some sit on fields the proxy emits (a stream chunk's
// choices[].finish_reason, choices[].logprobs and usage), so a schema compiled
// as is would reject a valid null there. The loader therefore rewrites every
// nullable schema S into anyOf [S, {type: null}] before compiling; see
// rewriteNullable. The other nulls of the file are already written the 3.1
// way (anyOf with type "null") and need nothing.
//
// It imports only the standard library, goccy/go-yaml and
// santhosh-tekuri/jsonschema; production code must not import it.
package oaischema

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// spec holds OpenAI's schemas that the tests validate against.
//
//go:embed openai-chat.yaml
var spec []byte

// specName names the embedded file in messages and schema URLs.
const specName = "openai-chat.yaml"

// ErrUnknownSchema reports a schema name absent from components.schemas.
var ErrUnknownSchema = errors.New("oaischema: unknown schema")

// loaded is the compiler over the parsed specification, built once per test
// binary: decoding the 3 MB YAML takes about half a second.
var loaded struct {
	once     sync.Once
	err      error
	url      string
	names    map[string]bool
	mu       sync.Mutex // guards compiler and schemas: the compiler is not safe for concurrent use
	compiler *jsonschema.Compiler
	schemas  map[string]*jsonschema.Schema
}

// Validate checks that body is JSON valid against the named schema of
// components.schemas ("CreateChatCompletionResponse",
// "CreateChatCompletionStreamResponse", "ErrorResponse",
// "ListModelsResponse", "Response", "ResponseStreamEvent", …) and reports every violation with t.Errorf.
//
// An unknown schema name is a fatal error.
func Validate(t testing.TB, schemaName string, body []byte) {
	t.Helper()
	err := Check(schemaName, body)
	var verr *jsonschema.ValidationError
	switch {
	case err == nil:
	case errors.As(err, &verr), errors.Is(err, errInvalidJSON):
		t.Errorf("body does not validate against %s: %v\nbody: %s", schemaName, err, truncate(body, 2000))
	default:
		t.Fatalf("%v", err)
	}
}

var errInvalidJSON = errors.New("invalid JSON")

// Check is Validate without a testing.TB: it returns nil when body is valid
// against the named schema, a *jsonschema.ValidationError (wrapped) when it
// is not, and ErrUnknownSchema (wrapped) when the schema is not there.
func Check(schemaName string, body []byte) error {
	sch, err := compiled(schemaName)
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %w", errInvalidJSON, err)
	}
	return sch.Validate(v)
}

func compiled(name string) (*jsonschema.Schema, error) {
	loaded.once.Do(load)
	if loaded.err != nil {
		return nil, loaded.err
	}
	if !loaded.names[name] {
		return nil, fmt.Errorf("%w %q in %s", ErrUnknownSchema, name, specName)
	}
	loaded.mu.Lock()
	defer loaded.mu.Unlock()
	if s, ok := loaded.schemas[name]; ok {
		return s, nil
	}
	s, err := loaded.compiler.Compile(loaded.url + "#/components/schemas/" + name)
	if err != nil {
		return nil, fmt.Errorf("oaischema: compile %s: %w", name, err)
	}
	loaded.schemas[name] = s
	return s, nil
}

func load() {
	var doc map[string]any
	if err := yaml.Unmarshal(spec, &doc); err != nil {
		loaded.err = fmt.Errorf("oaischema: decode %s: %w", specName, err)
		return
	}
	components, _ := doc["components"].(map[string]any)
	schemas, _ := components["schemas"].(map[string]any)
	if len(schemas) == 0 {
		loaded.err = fmt.Errorf("oaischema: %s has no components.schemas", specName)
		return
	}
	loaded.names = make(map[string]bool, len(schemas))
	for name, s := range schemas {
		loaded.names[name] = true
		schemas[name] = rewriteNullable(s)
		rewriteRecursive(schemas[name], name)
	}
	// Only components.schemas is handed to the compiler: the compiler checks
	// the resource's root against the meta-schema, and paths, examples and
	// the rest are not schemas. Every $ref of the file is local
	// (#/components/schemas/…), so the pointers stay valid.
	root := map[string]any{"components": map[string]any{"schemas": schemas}}

	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// Unknown keywords (x-oaiMeta, x-stainless-const, discriminator,
	// example, deprecated, format "unixtime") are annotations under 2020-12
	// and are ignored; formats are not asserted (the default), which is what
	// OpenAPI tooling does too.
	loaded.url = "file:///" + specName
	if err := c.AddResource(loaded.url, root); err != nil {
		loaded.err = fmt.Errorf("oaischema: %w", err)
		return
	}
	loaded.compiler = c
	loaded.schemas = map[string]*jsonschema.Schema{}
}

// Keywords whose value is one schema, a map of schemas, or a list of schemas.
// rewriteNullable descends only through them, so data (example, default,
// enum, const, x-…) and property names are never rewritten.
var (
	schemaKeywords = []string{
		"items", "additionalProperties", "not", "if", "then", "else", "contains",
		"propertyNames", "unevaluatedItems", "unevaluatedProperties", "additionalItems",
	}
	schemaMapKeywords  = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
	schemaListKeywords = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
)

// rewriteNullable turns the OpenAPI 3.0 "nullable" keyword, which JSON
// Schema 2020-12 ignores, into what it means, bottom-up:
//   - a schema S with nullable: true becomes {anyOf: [S without nullable, {type: null}]};
//   - nullable: false is dropped (it is the default);
//   - allOf: [{$ref: X}, {nullable: true}] (the 3.0 idiom for a nullable
//     reference; 8 of them in the file) drops the marker member and makes
//     the enclosing schema nullable, since {anyOf: [{}, null]} inside an
//     allOf would still reject null through the reference.
//
// It also turns numeric bounds the YAML decoder left as strings into numbers.
// It modifies maps in place and returns the schema to store.
// rewriteRecursive replaces the draft 2019-09 keywords that a few Responses
// schemas use (CompoundFilter: $recursiveAnchor: true on the component,
// $recursiveRef: "#" inside it), which a 2020-12 compiler refuses, by what
// they mean there: a $ref to the enclosing component.
func rewriteRecursive(s any, component string) {
	switch v := s.(type) {
	case map[string]any:
		delete(v, "$recursiveAnchor")
		if r, ok := v["$recursiveRef"]; ok && r == "#" {
			delete(v, "$recursiveRef")
			v["$ref"] = "#/components/schemas/" + component
		}
		for _, sub := range v {
			rewriteRecursive(sub, component)
		}
	case []any:
		for _, sub := range v {
			rewriteRecursive(sub, component)
		}
	}
}

func rewriteNullable(s any) any {
	m, ok := s.(map[string]any)
	if !ok {
		return s // boolean schema
	}
	for _, k := range schemaKeywords {
		if v, ok := m[k]; ok {
			if list, ok := v.([]any); ok { // draft-04 style items: [schemas]
				for i := range list {
					list[i] = rewriteNullable(list[i])
				}
				continue
			}
			m[k] = rewriteNullable(v)
		}
	}
	for _, k := range schemaMapKeywords {
		if sub, ok := m[k].(map[string]any); ok {
			for name, v := range sub {
				sub[name] = rewriteNullable(v)
			}
		}
	}
	for _, k := range schemaListKeywords {
		list, ok := m[k].([]any)
		if !ok {
			continue
		}
		kept := list[:0]
		for _, v := range list {
			if k == "allOf" && isNullableMarker(v) {
				m["nullable"] = true
				continue
			}
			kept = append(kept, rewriteNullable(v))
		}
		m[k] = kept
	}
	// Bounds beyond int64 (seed's ±9223372036854776000) come out of the
	// YAML decoder as strings, which the meta-schema refuses.
	for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		if str, ok := m[k].(string); ok {
			if f, err := strconv.ParseFloat(str, 64); err == nil {
				m[k] = f
			}
		}
	}
	n, has := m["nullable"]
	if !has {
		return m
	}
	delete(m, "nullable")
	if n != true {
		return m
	}
	return map[string]any{"anyOf": []any{m, map[string]any{"type": "null"}}}
}

// isNullableMarker reports whether v is a schema that says only
// "nullable: true", possibly with annotations.
func isNullableMarker(v any) bool {
	m, ok := v.(map[string]any)
	if !ok || m["nullable"] != true {
		return false
	}
	for k := range m {
		switch k {
		case "nullable", "description", "title", "deprecated", "example", "examples", "default":
		default:
			if !strings.HasPrefix(k, "x-") {
				return false
			}
		}
	}
	return true
}

func truncate(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	return append(b[:n:n], "…"...)
}
