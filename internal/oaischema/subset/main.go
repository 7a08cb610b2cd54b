// Command subset refreshes the copy of OpenAI's OpenAPI description that the
// oaischema package embeds. The full description is 3 MB and almost all of
// it describes endpoints the proxy does not serve, so only the schemas the
// tests validate against are kept, with every schema they reference.
//
// Usage, from the repository root, with a copy of openapi.yaml from the
// public repository openai/openai-openapi:
//
//	go run ./internal/oaischema/subset -spec path/to/openapi.yaml -commit SHA -date YYYY-MM-DD
//
// It rewrites internal/oaischema/openai-chat.yaml.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
)

// roots are the schemas the tests name; keep in step with oaischema's doc.
var roots = []string{
	"CreateChatCompletionRequest",
	"CreateChatCompletionResponse",
	"CreateChatCompletionStreamResponse",
	"ErrorResponse",
	"ListModelsResponse",
	"CreateResponse",
	"Response",
	"ResponseStreamEvent",
}

const refPrefix = "#/components/schemas/"

func main() {
	spec := flag.String("spec", "", "path of OpenAI's full openapi.yaml")
	out := flag.String("out", "internal/oaischema/openai-chat.yaml", "file to write")
	commit := flag.String("commit", "", "openai/openai-openapi commit the spec was taken from")
	date := flag.String("date", "", "date of that commit")
	flag.Parse()
	if *spec == "" || *commit == "" || *date == "" {
		fmt.Fprintln(os.Stderr, "usage: subset -spec FILE -commit SHA -date YYYY-MM-DD [-out FILE]")
		os.Exit(2)
	}
	if err := run(*spec, *out, *commit, *date); err != nil {
		fmt.Fprintln(os.Stderr, "subset:", err)
		os.Exit(1)
	}
}

func run(spec, out, commit, date string) error {
	data, err := os.ReadFile(spec)
	if err != nil {
		return err
	}
	var doc struct {
		Components struct {
			Schemas map[string]any `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("decode %s: %w", spec, err)
	}
	all := doc.Components.Schemas
	kept := map[string]any{}
	todo := slices.Clone(roots)
	for len(todo) > 0 {
		name := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if _, ok := kept[name]; ok {
			continue
		}
		s, ok := all[name]
		if !ok {
			return fmt.Errorf("%s has no schema %q", spec, name)
		}
		kept[name] = s
		refs(s, func(ref string) {
			if n, ok := strings.CutPrefix(ref, refPrefix); ok {
				todo = append(todo, n)
			}
		})
	}
	body, err := yaml.MarshalWithOptions(map[string]any{"components": map[string]any{"schemas": kept}}, yaml.UseLiteralStyleIfMultiline(true))
	if err != nil {
		return err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# The schemas of OpenAI's OpenAPI description that the tests validate against\n")
	fmt.Fprintf(&b, "# (%s) and every schema they reference, unchanged.\n", strings.Join(roots, ", "))
	fmt.Fprintf(&b, "# Taken from the public repository openai/openai-openapi, commit %s (%s).\n", commit, date)
	fmt.Fprintf(&b, "# Refresh: go run ./internal/oaischema/subset -spec openapi.yaml -commit SHA -date DATE\n")
	b.Write(body)
	return os.WriteFile(out, b.Bytes(), 0o644)
}

// refs calls f with every $ref found in v.
func refs(v any, f func(string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "$ref" {
				f(s)
				continue
			}
			refs(x, f)
		}
	case []any:
		for _, x := range v {
			refs(x, f)
		}
	}
}
