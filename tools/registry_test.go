package tools

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"chainproxy/config"

	"github.com/google/go-cmp/cmp"
)

// queryDB is an HTTP tool with a nested schema, to check field naming below
// the top level.
var queryDB = config.HTTPTool{
	Name:        "query_db",
	Description: "Run a read-only SQL query.",
	Parameters: map[string]any{
		"type": "object",
		"properties": map[string]any{
			"sql": map[string]any{"type": "string"},
			"options": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"limit": map[string]any{"type": "integer", "minimum": 1},
				},
				"required":             []any{"limit"},
				"additionalProperties": false,
			},
			"mode": map[string]any{"enum": []any{"fast", "exact"}},
		},
		"required":             []any{"sql"},
		"additionalProperties": false,
	},
	URL:      "http://127.0.0.1:1/query",
	Method:   "POST",
	Timeout:  time.Second,
	ReadOnly: true,
}

func TestSpecsOrder(t *testing.T) {
	notes := config.HTTPTool{Name: "save_note", URL: "http://127.0.0.1:1/notes", Timeout: time.Second}
	r, err := New(config.Tools{Root: t.TempDir(), HTTP: []config.HTTPTool{queryDB, notes}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantNames := []string{ListDir, ReadFile, SearchFiles, "query_db", "save_note"}
	if diff := cmp.Diff(wantNames, r.Names()); diff != "" {
		t.Errorf("Names() (-want +got):\n%s", diff)
	}
	specs := r.Specs()
	gotNames := make([]string, len(specs))
	for i, s := range specs {
		gotNames[i] = s.Name
		if !json.Valid(s.Parameters) {
			t.Errorf("Specs()[%d].Parameters = %s, not valid JSON", i, s.Parameters)
		}
		want := Deterministic
		if s.Name == "save_note" {
			want = Writing
		}
		if s.Kind != want {
			t.Errorf("Specs()[%d] (%s).Kind = %v, want %v", i, s.Name, s.Kind, want)
		}
	}
	if diff := cmp.Diff(wantNames, gotNames); diff != "" {
		t.Errorf("Specs() names (-want +got):\n%s", diff)
	}
	if s, ok := r.Lookup("save_note"); !ok || string(s.Parameters) != `{"type":"object"}` {
		t.Errorf(`Lookup("save_note") = %+v, %v; want the default object schema`, s, ok)
	}
	if _, ok := r.Lookup("move_file"); ok {
		t.Errorf(`Lookup("move_file") found a tool, want none`)
	}
	// Every built-in schema is closed and names what it requires.
	for _, s := range specs[:3] {
		var sch struct {
			Required             []string `json:"required"`
			AdditionalProperties *bool    `json:"additionalProperties"`
		}
		if err := json.Unmarshal(s.Parameters, &sch); err != nil {
			t.Fatal(err)
		}
		if len(sch.Required) == 0 || sch.AdditionalProperties == nil || *sch.AdditionalProperties {
			t.Errorf("%s schema: required %v, additionalProperties %v; want required set and additionalProperties false", s.Name, sch.Required, sch.AdditionalProperties)
		}
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name string
		tool config.HTTPTool
		want string
	}{
		{
			"invalid schema",
			config.HTTPTool{Name: "bad", URL: "http://x/", Parameters: map[string]any{"type": "nonsense"}},
			"tools: tools.http[0]: invalid parameters schema: ",
		},
		{
			"external ref",
			config.HTTPTool{Name: "ref", URL: "http://x/", Parameters: map[string]any{"$ref": "file:///etc/passwd"}},
			"tools: tools.http[0]: invalid parameters schema: ",
		},
		{
			"bad url",
			config.HTTPTool{Name: "nourl", URL: "ftp://x/"},
			"tools: tools.http[0] (nourl): url: want an absolute http:// or https:// URL",
		},
		{
			"built-in name",
			config.HTTPTool{Name: ReadFile, URL: "http://x/"},
			`tools: tools.http[0]: duplicate tool name "read_file"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(config.Tools{Root: t.TempDir(), HTTP: []config.HTTPTool{tt.tool}}, nil)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("New(%+v) error = %v, want prefix %q", tt.tool, err, tt.want)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	r, err := New(config.Tools{Root: t.TempDir(), HTTP: []config.HTTPTool{queryDB}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		tool    string
		args    string
		wantIs  error
		wantMsg string
	}{
		{"valid", ReadFile, `{"path":"a.txt"}`, nil, ""},
		{"valid with spaces", SearchFiles, ` {"pattern":"x", "path":"sub", "regex":true} `, nil, ""},
		{"valid nested", "query_db", `{"sql":"select 1","options":{"limit":5},"mode":"fast"}`, nil, ""},
		{"unknown tool", "move_file", `{}`, ErrUnknownTool, `unknown tool "move_file"; available tools: list_dir, read_file, search_files, query_db`},
		{"unknown tool ls", "ls", ``, ErrUnknownTool, `unknown tool "ls"; available tools: list_dir, read_file, search_files, query_db`},
		{"bad JSON", ReadFile, `{"path":`, ErrBadArguments, `read_file: arguments are not valid JSON: unexpected EOF`},
		{"bad JSON trailing", ReadFile, `{"path":"a"} x`, ErrBadArguments, `read_file: arguments are not valid JSON: invalid character after top-level value`},
		{"single quotes", ListDir, `{'path':'.'}`, ErrBadArguments, `list_dir: arguments are not valid JSON: invalid character '\'' looking for beginning of object key string`},
		{"missing required", ReadFile, `{}`, ErrBadArguments, `read_file: missing required argument "path"`},
		{"empty args are {}", ReadFile, ``, ErrBadArguments, `read_file: missing required argument "path"`},
		{"null args are {}", ListDir, `null`, ErrBadArguments, `list_dir: missing required argument "path"`},
		{"wrong type", ReadFile, `{"path":3}`, ErrBadArguments, `read_file: argument "path" must be string, got number`},
		{"wrong type bool", SearchFiles, `{"pattern":"x","regex":"yes"}`, ErrBadArguments, `search_files: argument "regex" must be boolean, got string`},
		{"not an object", ListDir, `["."]`, ErrBadArguments, `list_dir: arguments must be a JSON object, got array`},
		{"unexpected argument", ListDir, `{"path":".","recursive":true}`, ErrBadArguments, `list_dir: unexpected argument "recursive" (allowed: path)`},
		{"empty pattern", SearchFiles, `{"pattern":""}`, ErrBadArguments, `search_files: argument "pattern" must not be empty`},
		{"nested missing", "query_db", `{"sql":"x","options":{}}`, ErrBadArguments, `query_db: missing required argument "options.limit"`},
		{"nested type", "query_db", `{"sql":"x","options":{"limit":"5"}}`, ErrBadArguments, `query_db: argument "options.limit" must be integer, got string`},
		{"nested unexpected", "query_db", `{"sql":"x","options":{"limit":1,"x":2}}`, ErrBadArguments, `query_db: unexpected argument "x" in "options"`},
		{"nested minimum", "query_db", `{"sql":"x","options":{"limit":0}}`, ErrBadArguments, `query_db: argument "options.limit": minimum: got 0, want 1`},
		{"enum", "query_db", `{"sql":"x","mode":"slow"}`, ErrBadArguments, `query_db: argument "mode": value must be one of 'fast', 'exact'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := r.Check(tt.tool, []byte(tt.args))
			if tt.wantIs == nil {
				if err != nil {
					t.Fatalf("Check(%s, %s) = %v, want nil", tt.tool, tt.args, err)
				}
				return
			}
			if !errors.Is(err, tt.wantIs) {
				t.Fatalf("Check(%s, %s) = %v, want an error wrapping %v", tt.tool, tt.args, err, tt.wantIs)
			}
			if err.Error() != tt.wantMsg {
				t.Errorf("Check(%s, %s) = %q, want %q", tt.tool, tt.args, err, tt.wantMsg)
			}
			// Call checks the same way before running anything.
			if _, cerr := r.Call(t.Context(), tt.tool, []byte(tt.args)); cerr == nil || cerr.Error() != err.Error() {
				t.Errorf("Call(%s, %s) error = %v, want %v", tt.tool, tt.args, cerr, err)
			}
		})
	}
}

func BenchmarkCheck(b *testing.B) {
	r, err := New(config.Tools{Root: b.TempDir()}, nil)
	if err != nil {
		b.Fatal(err)
	}
	args := []byte(`{"pattern":"func main","path":"cmd/proxy","regex":false}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Check(SearchFiles, args); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkResolve(b *testing.B) {
	sb, err := newSandbox(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sb.resolve(ReadFile, "src/internal/chain/stage.go"); err != nil {
			b.Fatal(err)
		}
	}
}
