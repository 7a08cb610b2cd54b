package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"

	"chainproxy/internal/fakeollama"
	"chainproxy/internal/mcptest"
)

// step is one tool call a scripted research model means to make, and the
// words it asks find_tools with when the tool is not offered.
type step struct {
	tool  string
	args  map[string]any
	words string
}

// researcher scripts OL1 as a small model that calls only the tools it is
// offered: for the question that contains a plan's key, it makes the
// plan's calls in order, asking find_tools for a tool it was not offered,
// then answers with the results it got.
func researcher(plans map[string][]step) func(int, *api.ChatRequest) fakeollama.Reply {
	return func(_ int, req *api.ChatRequest) fakeollama.Reply {
		last := 0
		for i, m := range req.Messages {
			if m.Role == "user" {
				last = i
			}
		}
		var plan []step
		for key, p := range plans {
			if strings.Contains(req.Messages[last].Content, key) {
				plan = p
			}
		}
		var called []string
		var results []string
		for _, m := range req.Messages[last+1:] {
			for _, c := range m.ToolCalls {
				called = append(called, c.Function.Name)
			}
			if m.Role == "tool" {
				results = append(results, m.Content)
			}
		}
		offered := map[string]bool{}
		for _, t := range req.Tools {
			offered[t.Function.Name] = true
		}
		done := 0
		for _, c := range called {
			if done < len(plan) && c == plan[done].tool {
				done++
			}
		}
		if done < len(plan) {
			st := plan[done]
			switch {
			case offered[st.tool]:
				return fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{{Name: st.tool, Args: st.args}}}
			case offered["find_tools"] && !slices.Contains(called[max(len(called)-1, 0):], "find_tools"):
				return fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{{Name: "find_tools", Args: map[string]any{"query": st.words}}}}
			}
			return fakeollama.Reply{Content: []string{"I was not offered " + st.tool + "."}}
		}
		return fakeollama.Reply{Content: []string{"Raw findings: " + strings.Join(results, " | ")}}
	}
}

// echoFindings scripts a later stage that answers with the findings that
// head the user's last message.
func echoFindings(_ int, req *api.ChatRequest) fakeollama.Reply {
	return fakeollama.Reply{Content: []string{"Answer from: " + req.Messages[len(req.Messages)-1].Content}}
}

// TestToolsFitFourKWindow is issue 42's test: with OL1 a 4,096-token
// Ollama node and both reference MCP servers (27 tools) beside the
// built-ins, the research stage runs with the tools that fit its window
// instead of being skipped: it reads the marker file through the MCP
// tools and the marker reaches the final answer; the MCP repeat,
// write-then-read and HTTP echo behaviours of issue 14 hold on that
// window, a withheld tool found through find_tools; nothing is cut
// silently.
func TestToolsFitFourKWindow(t *testing.T) {
	node, fsServer, everything := mcptest.Servers(t, "../../tools/mcp/testdata/npm")
	url := mcptest.ServeEverything(t, node, everything)
	work := t.TempDir()
	marker := "MARKER-7f3a-tools-fit"
	if err := os.WriteFile(filepath.Join(work, "marker.txt"), []byte(marker), 0o644); err != nil {
		t.Fatal(err)
	}
	note := filepath.Join(work, "note.txt")
	if err := os.WriteFile(note, []byte("first version"), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(p string) step {
		return step{tool: "fs__read_text_file", args: map[string]any{"path": p}, words: "read a text file"}
	}
	ol1 := fakeollama.NewFunc(t, researcher(map[string][]step{
		"read the marker file": {read(filepath.Join(work, "marker.txt"))},
		"note twice":           {read(note), read(note)},
		"rewrite the note": {
			{tool: "fs__write_file", args: map[string]any{"path": note, "content": "second version"}, words: "write a file"},
			read(note),
			{tool: "everything__echo", args: map[string]any{"message": "over http"}, words: "echo a message back"},
		},
		"inspect the marker": {
			read(filepath.Join(work, "marker.txt")),
			{tool: "everything__get-tiny-image", args: map[string]any{}, words: "a tiny image"},
		},
	}))
	ol1.SetWindow(4096, 4)
	later := fakeollama.NewFunc(t, echoFindings)
	later.SetWindow(4096, 4)
	base := startWired(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, base_url: %[1]q, model: small}
  - {name: M1, provider: ollama, base_url: %[2]q, model: mid}
  - {name: M2, provider: ollama, base_url: %[2]q, model: big}
chain:
  stages: [{node: OL1, max_turns: 5, tools: true}, {node: M1, max_turns: 1}, {node: M2, max_turns: 1}]
  max_total_turns: 10
tools:
  root: %[3]q
  mcp:
    - {name: fs, command: [%[4]q, %[5]q, %[3]q]}
    - {name: everything, url: %[6]q}
`, ol1.URL, later.URL, work, node, fsServer, url))

	type stageOut struct {
		Node      string `json:"node"`
		Status    string `json:"status"`
		Error     string `json:"error"`
		ToolsUsed []struct {
			Name, Status, Result string
		} `json:"tools_used"`
		Tools *struct {
			Offered  int      `json:"offered"`
			Of       int      `json:"of"`
			Withheld []string `json:"withheld"`
			Reason   string   `json:"reason"`
			Found    []string `json:"found"`
		} `json:"tool_fit"`
	}
	ask := func(question string) (answer string, ol1 stageOut) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"model": "chain/reflexive", "messages": []map[string]string{{"role": "user", "content": question}}})
		resp, err := http.Post(base+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
			Chain struct {
				Stages []stageOut `json:"stages"`
			} `json:"chain"`
			Error any `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || len(out.Choices) == 0 || len(out.Chain.Stages) == 0 {
			t.Fatalf("%q: status %d, error %v", question, resp.StatusCode, out.Error)
		}
		return out.Choices[0].Message.Content, out.Chain.Stages[0]
	}
	calls := func(st stageOut) []string {
		var out []string
		for _, u := range st.ToolsUsed {
			out = append(out, u.Name+":"+u.Status)
		}
		return out
	}

	answer, st := ask("read the marker file through the MCP tools")
	if st.Status != "ok" {
		t.Fatalf("OL1 status = %q (%s), want ok", st.Status, st.Error)
	}
	if got, want := calls(st), []string{"fs__read_text_file:ok"}; !slices.Equal(got, want) {
		t.Errorf("OL1 calls = %v, want %v", got, want)
	}
	if !strings.Contains(answer, marker) {
		t.Errorf("answer = %q, want the marker %s", answer, marker)
	}
	if st.Tools == nil || st.Tools.Of < 30 || st.Tools.Offered == 0 || st.Tools.Offered >= st.Tools.Of || len(st.Tools.Withheld) != st.Tools.Of-st.Tools.Offered || st.Tools.Reason == "" {
		t.Errorf("OL1 tools = %+v, want some of the 30 offered, the others withheld with a reason", st.Tools)
	}

	_, st = ask("read the note twice")
	if got, want := calls(st), []string{"fs__read_text_file:ok", "fs__read_text_file:blocked"}; !slices.Equal(got, want) {
		t.Errorf("read twice: calls = %v, want %v", got, want)
	}
	if st.Status != "stopped_repeat" {
		t.Errorf("read twice: OL1 status = %q, want stopped_repeat", st.Status)
	}

	answer, st = ask("rewrite the note with the new version, read it back, and check the echo over http")
	var got []string
	for _, c := range calls(st) {
		if !strings.HasPrefix(c, "find_tools:") {
			got = append(got, c)
		}
	}
	if want := []string{"fs__write_file:ok", "fs__read_text_file:ok", "everything__echo:ok"}; !slices.Equal(got, want) {
		t.Errorf("write then read: calls = %v, want %v (all: %v)", got, want, calls(st))
	}
	if !strings.Contains(answer, "second version") || !strings.Contains(answer, "over http") {
		t.Errorf("write then read: answer = %q, want the fresh text and the echo", answer)
	}

	// A tool the question did not call for is withheld; the model finds
	// it through find_tools, and it is offered from the next turn.
	answer, st = ask("inspect the marker file")
	if got, want := calls(st), []string{"fs__read_text_file:ok", "find_tools:ok", "everything__get-tiny-image:ok"}; !slices.Equal(got, want) {
		t.Errorf("find_tools: calls = %v, want %v", got, want)
	}
	if st.Tools == nil || !slices.Contains(st.Tools.Found, "everything__get-tiny-image") || slices.Contains(st.Tools.Withheld, "everything__get-tiny-image") {
		t.Errorf("find_tools: OL1 tools = %+v, want everything__get-tiny-image found and offered", st.Tools)
	}
	if !strings.Contains(answer, marker) {
		t.Errorf("find_tools: answer = %q, want the marker", answer)
	}
	for _, f := range []*fakeollama.Server{ol1, later} {
		if n := f.Truncated(); n != 0 {
			t.Errorf("%d messages cut silently by a node", n)
		}
	}
}

// TestToolsShareWarnsAndNeverSkips: forty HTTP tools pass OL1's share of a
// 4,096-token window. The startup log warns with the figures, /readyz says
// how many are offered, and a question too long to leave them their share
// still runs OL1, with fewer of them, rather than skip it.
func TestToolsShareWarnsAndNeverSkips(t *testing.T) {
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.Copy(w, r.Body)
	}))
	defer echo.Close()
	var cfg strings.Builder
	// OL1 answers at once, but for a question that asks it to search for
	// tools twice: it calls find_tools with the same words each turn.
	ol1 := fakeollama.NewFunc(t, func(_ int, req *api.ChatRequest) fakeollama.Reply {
		if strings.Contains(req.Messages[len(req.Messages)-1].Content, "find tools twice") || req.Messages[len(req.Messages)-1].Role == "tool" && strings.Contains(req.Messages[len(req.Messages)-1].Content, "offered from your next turn") {
			return fakeollama.Reply{ToolCalls: []fakeollama.ToolCall{{Name: "find_tools", Args: map[string]any{"query": "record kind 39"}}}}
		}
		return fakeollama.Reply{Content: []string{"Raw findings: nothing needed a tool."}}
	})
	ol1.SetWindow(4096, 4)
	fmt.Fprintf(&cfg, "nodes:\n  - {name: OL1, provider: ollama, base_url: %q, model: small}\nchain:\n  stages: [{node: OL1, max_turns: 2, tools: true}]\n  simple_node: OL1\ntools:\n  root: \"\"\n  http:\n", ol1.URL)
	for i := range 40 {
		fmt.Fprintf(&cfg, "    - name: lookup_%02d\n      url: %q\n      read_only: true\n      description: %q\n      parameters: {type: object, properties: {q: {type: string, description: %q}}, required: [q]}\n",
			i, echo.URL, fmt.Sprintf("Looks up record kind %d in the catalogue. ", i)+strings.Repeat("It returns the record as JSON, with every field the catalogue keeps. ", 4),
			"What to look up, in a few words; the catalogue matches it against names and tags.")
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	var logs lockedBuffer
	code := make(chan int, 1)
	go func() { // exits when run returns, after cancel below
		code <- run(ctx, []string{"-config", path, "-addr", "127.0.0.1:0", "-log-level", "warn"}, pw, &logs)
		pw.Close()
	}()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if c := <-code; c != 0 {
				t.Errorf("exit code %d, want 0", c)
			}
		}
	}
	defer stop()
	sc := bufio.NewScanner(pr)
	var base string
	for sc.Scan() {
		if after, ok := strings.CutPrefix(sc.Text(), "chainproxy listening on "); ok {
			base = after
			break
		}
	}
	go io.Copy(io.Discard, pr) // exits when pw is closed
	if base == "" {
		t.Fatalf("did not start: %s", logs.String())
	}

	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var ready struct {
		Tools []struct {
			Stage, Tools, Offered, Window, ShareTokens int
			Node, Fit                                  string
		} `json:"tools"`
	}
	err = json.NewDecoder(resp.Body).Decode(&ready)
	resp.Body.Close()
	if err != nil || len(ready.Tools) != 1 {
		t.Fatalf("readyz tools = %+v, %v; want OL1's", ready.Tools, err)
	}
	if r := ready.Tools[0]; r.Node != "OL1" || r.Tools != 40 || r.Fit != "some" || r.Offered == 0 || r.Offered >= 40 || r.Window != 4096 {
		t.Errorf("readyz tools[0] = %+v, want OL1: some of 40 offered on 4096 tokens", r)
	}

	// A question that leaves the tools less than their share: OL1 runs
	// with fewer of them; one that leaves none even for find_tools is the
	// client's to shorten, as before.
	ask := func(question string) (int, []byte) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"model": "chain/reflexive", "messages": []map[string]string{{"role": "user", "content": question}}})
		resp, err := http.Post(base+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	type stageOut struct {
		Status  string
		Error   string
		ToolFit *struct {
			Offered  int
			Withheld []string
			Reason   string
		} `json:"tool_fit"`
		Context *struct {
			Window          int
			EstimatedTokens int `json:"estimated_tokens"`
		}
	}
	offered := map[string]int{}
	for _, tc := range []struct{ name, question, reason string }{
		{"short", "look up record kind 7 in the catalogue", "their share of OL1's 4096-token window is 1024 tokens"},
		{"long", "Look up what this log says. " + strings.Repeat("line of a pasted log that the user wants read ", 190), "the question and the instructions leave them about"},
	} {
		code, b := ask(tc.question)
		var out struct{ Chain struct{ Stages []stageOut } }
		if err := json.Unmarshal(b, &out); err != nil || code != http.StatusOK || len(out.Chain.Stages) != 1 {
			t.Fatalf("%s: status %d, %v, %s", tc.name, code, err, b)
		}
		st := out.Chain.Stages[0]
		if st.Status != "ok" {
			t.Fatalf("%s: OL1 status = %q (%s), want ok", tc.name, st.Status, st.Error)
		}
		if fit := st.ToolFit; fit == nil || len(fit.Withheld) == 0 || !strings.Contains(fit.Reason, tc.reason) {
			t.Fatalf("%s: OL1 tool_fit = %+v, want tools withheld, reason %q", tc.name, fit, tc.reason)
		}
		offered[tc.name] = st.ToolFit.Offered
		// The trace's estimate is of the prompt sent, which fitted
		// beside the answer's reserve (memory.answer_reserve, 1,024
		// tokens), not of those the tools were shrunk from.
		if ct := st.Context; ct == nil || ct.EstimatedTokens == 0 || ct.EstimatedTokens > ct.Window-1024 {
			t.Errorf("%s: OL1 context = %+v, want the estimate of a prompt sent", tc.name, ct)
		}
		req := ol1.Requests()[len(ol1.Requests())-1]
		if n := len(req.Tools); n != st.ToolFit.Offered+1 || req.Tools[n-1].Function.Name != "find_tools" {
			t.Errorf("%s: OL1 was offered %d tools, want %d and find_tools last", tc.name, n, st.ToolFit.Offered+1)
		}
	}
	// find_tools is a read-only tool to the anti-loop guard: the same
	// words twice are a repeat, which stops the stage.
	status, b := ask("find tools twice")
	var twice struct {
		Chain struct {
			Stages []struct {
				Status    string
				ToolsUsed []struct{ Name, Status, Result string } `json:"tools_used"`
				ToolFit   struct{ Found []string }                `json:"tool_fit"`
			}
		}
	}
	if err := json.Unmarshal(b, &twice); err != nil || status != http.StatusOK || len(twice.Chain.Stages) != 1 {
		t.Fatalf("find twice: status %d, %v, %s", status, err, b)
	}
	st := twice.Chain.Stages[0]
	var got []string
	for _, u := range st.ToolsUsed {
		got = append(got, u.Name+":"+u.Status)
	}
	if want := []string{"find_tools:ok", "find_tools:blocked"}; !slices.Equal(got, want) || st.Status != "stopped_repeat" {
		t.Errorf("find twice: calls %v, status %q; want %v, stopped_repeat", got, st.Status, want)
	}
	if len(st.ToolsUsed) > 0 && !strings.Contains(st.ToolsUsed[0].Result, "lookup_39") || !slices.Contains(st.ToolFit.Found, "lookup_39") {
		t.Errorf("find twice: first result %q, found %v; want lookup_39 found", st.ToolsUsed[0].Result, st.ToolFit.Found)
	}
	if offered["long"] >= offered["short"] {
		t.Errorf("offered %v, want fewer tools beside the long question", offered)
	}
	status, b = ask("Look up what this log says. " + strings.Repeat("line of a pasted log that the user wants read ", 300))
	if status != http.StatusBadRequest || !strings.Contains(string(b), "context_length_exceeded") || !strings.Contains(string(b), "and the fewest tools the stage runs with about") {
		t.Errorf("too long a question: %d %s, want 400 context_length_exceeded, the tools' part of the estimate said", status, b)
	}
	if n := ol1.Truncated(); n != 0 {
		t.Errorf("%d messages cut silently", n)
	}
	stop() // the log is written in batches: whole once the proxy stopped
	if l := logs.String(); !strings.Contains(l, "tools pass their share") || !strings.Contains(l, "node=OL1") || !strings.Contains(l, "tools=40") || !strings.Contains(l, "share_tokens=1024") || !strings.Contains(l, "window=4096") {
		t.Errorf("startup log lacks the warning with its figures:\n%s", l)
	}
}

// TestToolsRefitAfterRefusal: OL1 is a 4,096-token Ollama node whose
// tokenizer packs far fewer characters a token than the estimate's four
// (a byte-level one, as the real test tier's tiny model), beside both
// reference MCP servers and the built-ins. Its first prompt, fitted at
// four characters a token, is refused; the refit learns from the refusal
// and offers fewer tools rather than skip the stage, and OL1 reads the
// marker file. For a model that packs its prompt denser still than a byte
// a token (its template adds more than the estimate sees), a refit at
// that floor would be refused as its prompt was: the call is made with
// find_tools alone. Nothing is cut silently.
func TestToolsRefitAfterRefusal(t *testing.T) {
	node, fsServer, everything := mcptest.Servers(t, "../../tools/mcp/testdata/npm")
	url := mcptest.ServeEverything(t, node, everything)
	for _, tc := range []struct {
		name string
		// ratio is the fake's characters a token; findOnly: a call
		// after a refusal was offered find_tools alone.
		ratio    float64
		findOnly bool
	}{
		{"byte-level tokenizer", 1, false},
		{"denser than a byte a token", 0.5, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work := t.TempDir()
			marker := "MARKER-refit-" + strings.ReplaceAll(tc.name, " ", "-")
			if err := os.WriteFile(filepath.Join(work, "marker.txt"), []byte(marker), 0o644); err != nil {
				t.Fatal(err)
			}
			ol1 := fakeollama.NewFunc(t, researcher(map[string][]step{
				"read the marker file": {{tool: "fs__read_text_file", args: map[string]any{"path": filepath.Join(work, "marker.txt")}, words: "read a text file"}},
			}))
			ol1.SetWindow(4096, tc.ratio)
			later := fakeollama.NewFunc(t, echoFindings)
			later.SetWindow(4096, 4)
			base := startWired(t, fmt.Sprintf(`
nodes:
  - {name: OL1, provider: ollama, base_url: %[1]q, model: byte-level}
  - {name: M1, provider: ollama, base_url: %[2]q, model: mid}
  - {name: M2, provider: ollama, base_url: %[2]q, model: big}
chain:
  stages: [{node: OL1, max_turns: 5, tools: true}, {node: M1, max_turns: 1}, {node: M2, max_turns: 1}]
  max_total_turns: 10
tools:
  root: %[3]q
  mcp:
    - {name: fs, command: [%[4]q, %[5]q, %[3]q]}
    - {name: everything, url: %[6]q}
`, ol1.URL, later.URL, work, node, fsServer, url))
			body, _ := json.Marshal(map[string]any{"model": "chain/reflexive", "messages": []map[string]string{{"role": "user", "content": "read the marker file through the MCP tools"}}})
			resp, err := http.Post(base+"/v1/chat/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var out struct {
				Choices []struct {
					Message struct{ Content string } `json:"message"`
				} `json:"choices"`
				Chain struct {
					Stages []struct {
						Status    string
						Error     string
						ToolsUsed []struct{ Name, Status string } `json:"tools_used"`
						ToolFit   *struct {
							Offered, Of int
							Reason      string
						} `json:"tool_fit"`
						Context *struct {
							Window          int
							EstimatedTokens int `json:"estimated_tokens"`
							Actions         []struct{ Action string }
						}
						Calls []struct{ Error string }
					}
				}
				Error any
			}
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Chain.Stages) == 0 {
				t.Fatalf("status %d: %v, error %v", resp.StatusCode, err, out.Error)
			}
			st := out.Chain.Stages[0]
			if st.Status != "ok" {
				t.Fatalf("OL1 status = %q (%s), want ok", st.Status, st.Error)
			}
			var used []string
			for _, u := range st.ToolsUsed {
				used = append(used, u.Name+":"+u.Status)
			}
			if !slices.Contains(used, "fs__read_text_file:ok") {
				t.Errorf("OL1 calls = %v, want fs__read_text_file:ok", used)
			}
			if resp.StatusCode != http.StatusOK || len(out.Choices) == 0 || !strings.Contains(out.Choices[0].Message.Content, marker) {
				t.Errorf("status %d, answer %+v; want the marker %s", resp.StatusCode, out.Choices, marker)
			}
			if st.ToolFit == nil || st.ToolFit.Of < 30 || st.ToolFit.Reason == "" {
				t.Errorf("OL1 tool_fit = %+v, want the 30 tools fitted, with a reason", st.ToolFit)
			}
			// Each refused call is followed by a refit, which the node
			// takes; the calls and the fake's requests are one to one.
			reqs := ol1.Requests()
			if len(reqs) != len(st.Calls) {
				t.Fatalf("OL1: %d requests, %d calls in the trace", len(reqs), len(st.Calls))
			}
			refused, refits, findOnly := 0, 0, false
			for i, c := range st.Calls {
				if c.Error == "" {
					if i > 0 && st.Calls[i-1].Error != "" && len(reqs[i].Tools) == 1 && reqs[i].Tools[0].Function.Name == "find_tools" {
						findOnly = true
					}
					continue
				}
				refused++
				if !strings.Contains(c.Error, "exceeds the context length") || i == len(st.Calls)-1 || st.Calls[i+1].Error != "" {
					t.Errorf("OL1 call %d: %q, want a refusal the next call's refit fixed", i, c.Error)
				}
			}
			for _, a := range st.Context.Actions {
				if a.Action == "refit" {
					refits++
				}
			}
			if refused == 0 || refits != refused {
				t.Errorf("OL1: %d calls refused, %d refits; want the first call refused, a refit for each", refused, refits)
			}
			// Every prompt sent was estimated to fit beside the answer's
			// reserve (1,024 tokens): the trace's estimate is theirs, not
			// that of the prompts the tools were shrunk from.
			if ct := st.Context; ct.EstimatedTokens == 0 || ct.EstimatedTokens > ct.Window-1024 {
				t.Errorf("OL1 context: estimated %d tokens of a %d-token window, want a prompt sent", ct.EstimatedTokens, ct.Window)
			}
			if findOnly != tc.findOnly {
				t.Errorf("a refit offered find_tools alone: %v, want %v", findOnly, tc.findOnly)
			}
			if n := ol1.Truncated(); n != 0 {
				t.Errorf("%d messages cut silently", n)
			}
		})
	}
}
