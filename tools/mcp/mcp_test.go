package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"chainproxy/config"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
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

// loopingCursorServer speaks streamable HTTP with JSON answers, like
// codebase-memory-mcp 0.9.0 behind mcp-proxy
// (DeusData/codebase-memory-mcp#1247): its tools/list always returns the
// same tools and the same nextCursor, which never advances. It counts the
// tools/list requests.
func loopingCursorServer(t *testing.T, lists *atomic.Int64) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed) // no standalone SSE stream
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if req.ID == nil { // a notification
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var result string
		switch req.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"codebase-memory-mcp","version":"0.9.0"}}`
		case "tools/list":
			lists.Add(1)
			result = `{"tools":[{"name":"search_code","inputSchema":{"type":"object"}},{"name":"trace_path","inputSchema":{"type":"object"}}],"nextCursor":"2"}`
		default:
			result = `{}`
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, result)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestListPages: tools/list is followed page by page, and a cursor that
// comes back again ends the list, with each tool once, instead of paging
// until the attempt times out and the server is never up.
func TestListPages(t *testing.T) {
	paged := sdk.NewServer(&sdk.Implementation{Name: "paged", Version: "1"}, &sdk.ServerOptions{PageSize: 2})
	var want []string
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		paged.AddTool(&sdk.Tool{Name: n, InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{}, nil
		})
		want = append(want, "paged__"+n)
	}
	pagedURL := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return paged }, nil))
	t.Cleanup(pagedURL.Close)
	var lists atomic.Int64
	for _, tc := range []struct {
		name, url string
		want      []string
		maxLists  int64
	}{
		{"paged", pagedURL.URL, want, 0},
		{"cbm", loopingCursorServer(t, &lists), []string{"cbm__search_code", "cbm__trace_path"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := Start(t.Context(), []config.MCPServer{{Name: tc.name, URL: tc.url}}, Options{StartTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
			defer m.Close()
			if st := m.Status(); st[0].Err != nil {
				t.Fatalf("Status() = %v, want connected", st[0].Err)
			}
			var names []string
			for _, tl := range m.Tools() {
				names = append(names, tl.Exposed)
			}
			if !slices.Equal(names, tc.want) {
				t.Errorf("Tools() = %v, want %v", names, tc.want)
			}
			if n := lists.Load(); tc.maxLists > 0 && n > tc.maxLists {
				t.Errorf("%d tools/list requests, want %d (the cursor's second coming ends the list)", n, tc.maxLists)
			}
		})
	}
}
