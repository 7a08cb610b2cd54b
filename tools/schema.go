package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// noLoader refuses every external $ref: a tool schema is self-contained, and
// compiling it must never read a file or fetch a URL.
type noLoader struct{}

func (noLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("external schema reference %q is not allowed", u)
}

// topLevelProperties lists the names a schema declares under "properties",
// sorted, for messages.
func topLevelProperties(params []byte) []string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(params, &s) != nil {
		return nil
	}
	return slices.Sorted(maps.Keys(s.Properties))
}

// compileSchema compiles a tool's parameters schema once, at New (or when
// an MCP server lists it). patterns compiles its "pattern" and
// "patternProperties" regexps; nil is Go's regexp, which refuses what RE2
// cannot express.
func compileSchema(name string, params []byte, patterns jsonschema.RegexpEngine) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(params))
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	c.UseRegexpEngine(patterns)
	loc := "mem:///tools/" + url.PathEscape(name) + ".json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	return c.Compile(loc)
}

// serverPatterns compiles the patterns of a schema an MCP server sent.
// JSON Schema patterns are ECMA-262 regexps, and generated schemas use what
// RE2 lacks: zod's hostname, duration and emoji patterns open with
// lookaheads. Such a pattern goes unchecked here rather than the whole tool
// being dropped: the server validates its own arguments, and its error
// reaches the model. A config's schema keeps Go's strict engine, so that a
// typo there fails at startup.
func serverPatterns(p string) (jsonschema.Regexp, error) {
	if re, err := regexp.Compile(p); err == nil {
		return re, nil
	}
	return uncheckedPattern(p), nil
}

// uncheckedPattern is a pattern left to the server: it matches everything.
type uncheckedPattern string

func (p uncheckedPattern) String() string        { return string(p) }
func (uncheckedPattern) MatchString(string) bool { return true }

var printer = message.NewPrinter(language.English)

// describeValidation turns the library's error tree into one line a small
// model can act on: each leaf failure, naming the argument it concerns.
func describeValidation(err error, props []string) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	var msgs []string
	collectLeaves(ve, props, &msgs)
	msgs = slices.Compact(msgs)
	if len(msgs) == 0 {
		return "arguments do not match the schema"
	}
	return strings.Join(msgs, "; ")
}

func collectLeaves(ve *jsonschema.ValidationError, props []string, out *[]string) {
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			collectLeaves(c, props, out)
		}
		return
	}
	*out = append(*out, describeLeaf(ve, props))
}

// describeLeaf words one failure. props are the top-level argument names, to
// tell a model that invented an argument which ones exist.
func describeLeaf(ve *jsonschema.ValidationError, props []string) string {
	loc := ve.InstanceLocation
	field := strings.Join(loc, ".")
	// where qualifies a message about an object's members: nothing at the
	// top level, " in "a.b"" deeper down.
	where := ""
	if field != "" {
		where = fmt.Sprintf(" in %q", field)
	}
	switch k := ve.ErrorKind.(type) {
	case *kind.Required:
		if len(k.Missing) == 1 {
			return fmt.Sprintf("missing required argument %q", qualify(loc, k.Missing[0]))
		}
		q := make([]string, len(k.Missing))
		for i, m := range k.Missing {
			q[i] = fmt.Sprintf("%q", qualify(loc, m))
		}
		return "missing required arguments " + strings.Join(q, ", ")
	case *kind.AdditionalProperties:
		q := make([]string, len(k.Properties))
		for i, p := range k.Properties {
			q[i] = fmt.Sprintf("%q", p)
		}
		allowed := ""
		if field == "" && len(props) > 0 {
			allowed = " (allowed: " + strings.Join(props, ", ") + ")"
		}
		if len(q) == 1 {
			return "unexpected argument " + q[0] + where + allowed
		}
		return "unexpected arguments " + strings.Join(q, ", ") + where + allowed
	case *kind.Type:
		if field == "" {
			return fmt.Sprintf("arguments must be a JSON %s, got %s", strings.Join(k.Want, " or "), k.Got)
		}
		return fmt.Sprintf("argument %q must be %s, got %s", field, strings.Join(k.Want, " or "), k.Got)
	case *kind.MinLength:
		if k.Want == 1 {
			return fmt.Sprintf("argument %q must not be empty", field)
		}
		return fmt.Sprintf("argument %q must be at least %d characters long, got %d", field, k.Want, k.Got)
	}
	msg := ve.ErrorKind.LocalizedString(printer)
	if field == "" {
		return msg
	}
	return fmt.Sprintf("argument %q: %s", field, msg)
}

// qualify names a member of the object at loc with a dotted path.
func qualify(loc []string, member string) string {
	if len(loc) == 0 {
		return member
	}
	return strings.Join(loc, ".") + "." + member
}
