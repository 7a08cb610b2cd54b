package mcp

import (
	"regexp"
	"strings"
	"testing"
)

func TestExposedName(t *testing.T) {
	valid := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	long := strings.Repeat("x", 80)
	for _, tc := range []struct{ server, tool, want string }{
		{"fs", "read_file", "fs__read_file"},
		{"fs", "search.web", "fs__search_web"},
		{"db", "run query/v2", "db__run_query_v2"},
		{"fs", long, ExposedName("fs", long)},
	} {
		got := ExposedName(tc.server, tc.tool)
		if got != tc.want || !valid.MatchString(got) {
			t.Errorf("ExposedName(%q, %q) = %q, want %q matching %s", tc.server, tc.tool, got, tc.want, valid)
		}
	}
	a, b := ExposedName("fs", long+"a"), ExposedName("fs", long+"b")
	if a == b || len(a) != 64 {
		t.Errorf("long names %q and %q: want distinct, 64 long", a, b)
	}
}
