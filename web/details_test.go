package web

import (
	"encoding/json"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"chainproxy/chain"
	"chainproxy/config"
)

// TestDetailsStreamMatchesWhole: the "details" rendering is the same text
// whether the answer streams or comes whole, and each stage's block carries
// its output and tool results, the answering stage's block coming before
// the answer.
func TestDetailsStreamMatchesWhole(t *testing.T) {
	s := newTestServer(t, testConfig)
	// Two conversations, so that the second run's tool call is not a repeat.
	body := `{"model":"chain/reflexive","messages":[{"role":"user","content":"compare"}]}`
	resp := s.post(t, "/v1/chat/completions", body, "X-Chain-Render", "details")
	var out chatResponse
	if err := json.Unmarshal(readAll(t, resp.Body), &out); err != nil {
		t.Fatal(err)
	}
	whole := *out.Choices[0].Message.Content

	resp = s.post(t, "/v1/chat/completions", strings.Replace(body, `{"model"`, `{"stream":true,"user":"another conversation","model"`, 1), "X-Chain-Render", "details")
	var streamed strings.Builder
	for _, f := range sseFrames(t, readAll(t, resp.Body)) {
		p, ok := strings.CutPrefix(f, "data: ")
		if !ok || p == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content *string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(p), &ch); err != nil {
			t.Fatal(err)
		}
		for _, c := range ch.Choices {
			if c.Delta.Content != nil {
				streamed.WriteString(*c.Delta.Content)
			}
		}
	}
	if streamed.String() != whole {
		t.Errorf("streamed content = %q, want the whole answer's %q", streamed.String(), whole)
	}
	ol1 := strings.Index(whole, `name="OL1"`)
	m1 := strings.Index(whole, `name="M1"`)
	m2 := strings.Index(whole, `name="M2"`)
	answer := strings.Index(whole, "Final answer from M2.")
	if ol1 < 0 || !(ol1 < m1 && m1 < m2 && m2 < answer) {
		t.Errorf("blocks out of order (OL1 %d, M1 %d, M2 %d, answer %d) in %q", ol1, m1, m2, answer, whole)
	}
	for _, want := range []string{"OL1 found a.txt.", "▸ list_dir", "&#10;a.txt", `result="M1 synthesis."`} {
		if !strings.Contains(whole, want) {
			t.Errorf("details lack %q: %q", want, whole)
		}
	}
}

// TestAllStagesFailedNamesCause: the 502 of a chain whose every stage failed
// says why in its message, and carries the mode header.
func TestAllStagesFailedNamesCause(t *testing.T) {
	s := newTestServer(t, `
nodes:
  - {name: A, provider: mock, mock: {offline: true}}
  - {name: B, provider: mock, mock: {offline: true}}
chain:
  simple_node: A
  stages: [{node: A, max_turns: 1}, {node: B, max_turns: 1}]
`)
	resp := s.post(t, "/v1/chat/completions", `{"model":"chain/reflexive","messages":[{"role":"user","content":"hi"}]}`)
	var out errorBody
	if err := json.Unmarshal(readAll(t, resp.Body), &out); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 502 || !strings.Contains(out.Error.Message, "first cause: node A: upstream") || !strings.Contains(out.Error.Message, "connection refused") {
		t.Errorf("POST = %d %q, want 502 naming node A's refused connection", resp.StatusCode, out.Error.Message)
	}
	if got := resp.Header.Get("X-Chain-Mode"); got != "reflexive" {
		t.Errorf("X-Chain-Mode = %q, want reflexive", got)
	}
}

// TestDetailsBlocksParseAsOpenWebUI reads the blocks with Open WebUI's own
// expressions (src/lib/utils/marked/extension.ts): each block tokenizes, and
// its result attribute reads whole, newlines included, once decoded.
func TestDetailsBlocksParseAsOpenWebUI(t *testing.T) {
	detailsRe := regexp.MustCompile(`^<details(\s+[^>]*)?>\n`)
	summaryRe := regexp.MustCompile(`^<summary>(.*?)</summary>\n`)
	attrRe := regexp.MustCompile(`(\w+)="(.*?)"`) // Go's "." also stops at \n
	st := chain.StageTrace{Node: "OL1", Model: "m", Turns: 2, Status: chain.StageOK, Output: "Notes: <b>a & b</b>\n\"quoted\"",
		ToolsUsed: []chain.ToolUse{{Name: "fs__list_dir", Args: json.RawMessage(`{"path":"."}`), Status: chain.ToolOK, Result: "a.txt\nb.txt"}}}
	src := stageBlock(0, st)
	m := detailsRe.FindString(src)
	if m == "" {
		t.Fatalf("block does not tokenize: %q", src)
	}
	if !summaryRe.MatchString(src[len(m):]) {
		t.Errorf("summary does not tokenize: %q", src[len(m):])
	}
	attrs := map[string]string{}
	for _, a := range attrRe.FindAllStringSubmatch(m, -1) {
		attrs[a[1]] = a[2]
	}
	want := "Notes: <b>a & b</b>\n\"quoted\"\n\n▸ fs__list_dir {\"path\":\".\"} → ok\na.txt\nb.txt"
	if got := html.UnescapeString(attrs["result"]); got != want {
		t.Errorf("decoded result = %q, want %q", got, want)
	}
	if attrs["name"] != "OL1" || attrs["done"] != "true" {
		t.Errorf("attributes = %v, want name OL1 and done true", attrs)
	}
}

// TestDetailsNotForOwnRequests: with the "details" rendering on (the
// README's setting for Open WebUI), a client's own request gets the bare
// answer its program parses: Open WebUI reads a title, tags or follow-ups
// from the first "{" to the last "}", and the first "{" would be in a
// block's attributes. The user's own question keeps its blocks.
func TestDetailsNotForOwnRequests(t *testing.T) {
	s := newTestServer(t, testConfig, func(c *config.Config) { c.Server.MaxBodyBytes = 1 << 20 })
	content := func(t *testing.T, req map[string]any, stream bool) string {
		t.Helper()
		req["stream"] = stream
		body, _ := json.Marshal(req)
		resp := s.post(t, "/v1/chat/completions", string(body), "X-Chain-Render", "details")
		raw := readAll(t, resp.Body)
		if !stream {
			var out chatResponse
			if err := json.Unmarshal(raw, &out); err != nil || len(out.Choices) == 0 || out.Choices[0].Message.Content == nil {
				t.Fatalf("%d %s", resp.StatusCode, raw)
			}
			return *out.Choices[0].Message.Content
		}
		var b strings.Builder
		for _, f := range sseFrames(t, raw) {
			p, ok := strings.CutPrefix(f, "data: ")
			if !ok || p == "[DONE]" {
				continue
			}
			var ch struct {
				Choices []struct {
					Delta struct{ Content *string } `json:"delta"`
				} `json:"choices"`
			}
			if json.Unmarshal([]byte(p), &ch) == nil && len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != nil {
				b.WriteString(*ch.Choices[0].Delta.Content)
			}
		}
		return b.String()
	}
	for _, task := range []string{"title", "tags", "follow-ups"} {
		raw, err := os.ReadFile(filepath.Join("testdata", "agents", "open-webui-"+task+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var req struct {
			Messages []map[string]any `json:"messages"`
		}
		if err := json.Unmarshal(raw, &req); err != nil {
			t.Fatal(err)
		}
		for _, model := range []string{"chain/auto", "chain/reflexive"} {
			for _, stream := range []bool{false, true} {
				if got := content(t, map[string]any{"model": model, "messages": req.Messages}, stream); got == "" || strings.Contains(got, "<details") {
					t.Errorf("%s, %s, stream %v: %q, want the bare answer", task, model, stream, got)
				}
			}
		}
	}
	for _, stream := range []bool{false, true} {
		hi := map[string]any{"model": "chain/simple", "messages": []map[string]string{{"role": "user", "content": "hi"}}}
		if got := content(t, hi, stream); !strings.Contains(got, "<details") {
			t.Errorf("the user's question, stream %v: %q, want its block", stream, got)
		}
	}
}
