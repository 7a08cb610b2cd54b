package classify

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"chainproxy/config"
)

func aside(name string, count, bytes int) Aside { return Aside{Name: name, Count: count, Bytes: bytes} }

func TestWords(t *testing.T) {
	reminder := "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n# claudeMd\nRun go test.\n</system-reminder>"
	env := "<environment_details>\n# VSCode Visible Files\nmain.go\n\n# Current Mode\nACT MODE\n</environment_details>"
	tests := []struct {
		name    string
		content string
		want    Words
	}{
		{"plain", "What is 2+2?", Words{Text: "What is 2+2?"}},
		{"white space around", "\n  What is 2+2?\n", Words{Text: "What is 2+2?"}},
		{"reminder before", reminder + "\nWhat is 2+2?", Words{Text: "What is 2+2?", Aside: []Aside{aside("system-reminder", 1, len(reminder))}}},
		{"reminder after, parts joined without a separator", "What is 2+2?" + reminder, Words{Text: "What is 2+2?", Aside: []Aside{aside("system-reminder", 1, len(reminder))}}},
		{"two reminders", reminder + reminder + "hey", Words{Text: "hey", Aside: []Aside{aside("system-reminder", 2, 2*len(reminder))}}},
		{"words on both sides", "Fix it." + reminder + "Then test.", Words{Text: "Fix it.\nThen test.", Aside: []Aside{aside("system-reminder", 1, len(reminder))}}},
		{"only blocks", reminder + "\n\n" + reminder, Words{Aside: []Aside{aside("system-reminder", 2, 2*len(reminder))}}},
		{"Cline task", "<task>\nWhat is 2+2?\n</task>\n\n" + env, Words{Text: "What is 2+2?", Aside: []Aside{aside("environment_details", 1, len(env))}, Wrapper: "task"}},
		{"Cursor user_query", "<user_info>\nOS: linux\n</user_info>\n\n<user_query>\nWhat is 2+2?\n</user_query>",
			Words{Text: "What is 2+2?", Aside: []Aside{aside("user_info", 1, 34)}, Wrapper: "user_query"}},
		{"text around a wrapper is set aside", "<env>Unknown context here</env>\n<user_query>hi</user_query>\ntrailing",
			Words{Text: "hi", Wrapper: "user_query", Around: len("<env>Unknown context here</env>") + len("trailing")}},
		{"a question that quotes a wrapper keeps its words", "How do I parse <task>foo</task> in XML?",
			Words{Text: "How do I parse\nfoo\nin XML?"}},
		{"a question after blocks that quotes a wrapper", "<system-reminder>x</system-reminder>Why <task>a</task>?",
			Words{Text: "Why\na\n?", Aside: []Aside{aside("system-reminder", 1, 36)}}},
		{"unknown tags before the wrapper are the client's", "<timestamp>Monday</timestamp>\n<user_query>hi</user_query>",
			Words{Text: "hi", Wrapper: "user_query", Around: len("<timestamp>Monday</timestamp>")}},
		{"two wrappers", "<user_query>one</user_query> x <user_query>two</user_query>",
			Words{Text: "one\ntwo", Wrapper: "user_query", Around: 1}},
		{"block inside a wrapper", "<task>\nExplain 'main.go' (see below for file content)\n\n<file_content path=\"main.go\">\npackage main\n</file_content>\n</task>",
			Words{Text: "Explain 'main.go' (see below for file content)", Aside: []Aside{aside("file_content", 1, 58)}, Wrapper: "task"}},
		{"wrapper inside a block is set aside with it", "<system-reminder><user_query>old</user_query></system-reminder>new",
			Words{Text: "new", Aside: []Aside{aside("system-reminder", 1, 63)}}},
		{"Cline user_input with attributes", `<mode_notice>The user switched from plan mode to act mode before sending this message.</mode_notice><user_input mode="act">What is 2+2?</user_input>`,
			Words{Text: "What is 2+2?", Aside: []Aside{aside("mode_notice", 1, 100)}, Wrapper: "user_input"}},
		{"nested blocks of one name", "<system-reminder>a<system-reminder>b</system-reminder>c</system-reminder>Q",
			Words{Text: "Q", Aside: []Aside{aside("system-reminder", 1, 73)}}},
		{"unclosed block stays text", "What does <system-reminder> mean?", Words{Text: "What does <system-reminder> mean?"}},
		{"stray close tag stays text", "a </system-reminder> b", Words{Text: "a </system-reminder> b"}},
		{"unclosed inner open tag stays text", "<system-reminder>x<task>y</system-reminder>Q",
			Words{Text: "Q", Aside: []Aside{aside("system-reminder", 1, 43)}}},
		{"unknown tags stay", "Use <div> and </div> here", Words{Text: "Use <div> and </div> here"}},
		{"tag names are case sensitive", "<System-Reminder>x</System-Reminder>", Words{Text: "<System-Reminder>x</System-Reminder>"}},
		{"self-closing block", "<environment_context/>hi", Words{Text: "hi", Aside: []Aside{aside("environment_context", 1, 22)}}},
		{"attribute cut by another tag is no tag", "<file_content path=\"<x>\">y</file_content>z", Words{Text: "<file_content path=\"<x>\">y</file_content>z"}},
		{"close tag with attributes is no tag", "<task>a</task x>", Words{Text: "<task>a</task x>"}},
		{"tag at the very end", "hi <task", Words{Text: "hi <task"}},
		{"Codex AGENTS.md and environment in one message",
			"# AGENTS.md instructions for /home/user/demo\n\n<INSTRUCTIONS>\n# Agents\n\nRun go test ./...\n</INSTRUCTIONS><environment_context>\n  <cwd>/home/user/demo</cwd>\n</environment_context>",
			Words{Aside: []Aside{aside("AGENTS.md", 1, 104), aside("environment_context", 1, 73)}}},
		{"INSTRUCTIONS without the heading is the user's", "<INSTRUCTIONS>be brief</INSTRUCTIONS> What is Go?",
			Words{Text: "<INSTRUCTIONS>be brief</INSTRUCTIONS> What is Go?"}},
		{"heading not on the line before", "# AGENTS.md instructions for /x\nmore\n<INSTRUCTIONS>a</INSTRUCTIONS>",
			Words{Text: "# AGENTS.md instructions for /x\nmore\n<INSTRUCTIONS>a</INSTRUCTIONS>"}},
		{"Cline 3 tool result", "[read_file for 'main.go'] Result:\npackage main\n" + env, Words{Aside: []Aside{aside("tool result", 1, 47+len(env))}}},
		{"tool result without argument", "[attempt_completion] Result:\n\nThe user has provided feedback on the results.\n<feedback>\nuse Go\n</feedback>",
			Words{Aside: []Aside{aside("tool result", 1, 106)}}},
		{"tool result header joined to the result", "[read_file for 'main.go'] Result:package main", Words{Aside: []Aside{aside("tool result", 1, 45)}}},
		{"tool result argument with brackets", "[execute_command for 'ls [a]'] Result:\nok", Words{Aside: []Aside{aside("tool result", 1, 41)}}},
		{"a question about a tool result", "[read_file for 'x'] Why did it fail?", Words{Text: "[read_file for 'x'] Why did it fail?"}},
		{"Aider's rules after the question", "Explain the cache\n\n# *SEARCH/REPLACE block* Rules:\n\nEvery *SEARCH/REPLACE block* must use this format:\n1. a\n2. b",
			Words{Text: "Explain the cache", Aside: []Aside{aside("Aider's rules", 1, 95)}}},
		{"Aider's fenced rules", "Why?\n\n\n# *SEARCH/REPLACE block* Rules:\nx", Words{Text: "Why?", Aside: []Aside{aside("Aider's rules", 1, 36)}}},
		{"Aider's context mode", "Add a retry to the upstream call\n\n\nNEVER RETURN CODE!\n", Words{Text: "Add a retry to the upstream call", Aside: []Aside{aside("Aider's rules", 1, 21)}}},
		{"Open WebUI's retrieved context before the question", "### Task:\nRespond to the user query using the provided context, incorporating citations.\n\n<context>\n<source id=\"1\">Compare a and b.</source>\n</context>\n\nWhat is the deadline?",
			Words{Text: "What is the deadline?", Aside: []Aside{aside("Open WebUI's retrieved context", 1, 151)}}},
		{"Open WebUI's code interpreter prompt after the question", "What is 2+2?\n\n#### Tools Available\n\n1. **Code Interpreter**: `<code_interpreter type=\"code\" lang=\"python\"></code_interpreter>`\n   - You have access to a Python shell.",
			Words{Text: "What is 2+2?", Aside: []Aside{aside("Open WebUI's code interpreter prompt", 1, 152)}}},
		{"Open WebUI's template without its context is the user's", "### Task:\nRespond to the user query using the provided context, please.",
			Words{Text: "### Task:\nRespond to the user query using the provided context, please."}},
		{"a rules heading of the user's own", "# File editing rules: what are they?", Words{Text: "# File editing rules: what are they?"}},
		{"brackets that are no tool result", "[x] Results: fine", Words{Text: "[x] Results: fine"}},
		{"markdown checkbox", "[ ] Result: todo", Words{Text: "[ ] Result: todo"}},
		{"Crush's attached files after the prompt", "What is 2+2?\n<system_info>attached</system_info>\n<file path='main.go'>\n\npackage main\n</file>\n",
			Words{Text: "What is 2+2?", Aside: []Aside{aside("system_info", 1, 35), aside("file", 1, 43)}}},
		{"Zed's context after the words", "Why? [@a.go](file:///a.go)<context>\nThe following items were attached by the user. They are up-to-date.\n\n<files>\nx\n</files>\n</context>",
			Words{Text: "Why? [@a.go](file:///a.go)", Aside: []Aside{aside(zedContextName, 1, 108)}}},
		{"a context block of the user's own", "<context>We run Go 1.23.</context> Why is it slow?",
			Words{Text: "<context>We run Go 1.23.</context> Why is it slow?"}},
		{"goose's info-msg before the question", "<info-msg>\nIt is currently 2026-11-26 21:00:00\nWorking directory: /home/user/demo\nCurrent tasks and notes:\n- [ ] Read main.go\n- [ ] Run go test\n</info-msg>\nWhat is 2+2?",
			Words{Text: "What is 2+2?", Aside: []Aside{aside("info-msg", 1, 155)}}},
		{"AnythingLLM's images of a tool result", "[Attached image(s) from tool result]", Words{Aside: []Aside{aside("tool result", 1, 36)}}},
		{"a question about attached images", "[Attached image(s) from tool result] why is it red?", Words{Text: "[Attached image(s) from tool result] why is it red?"}},
		{"AnythingLLM's attached documents after the question", "What is 2+2?\n\n<attached_documents>\n<document name=\"handbook.txt\">\n1. Deploy on Monday.\n2. Review on Friday.\n</document>\n</attached_documents>",
			Words{Text: "What is 2+2?", Aside: []Aside{aside("attached_documents", 1, 127)}}},
	}
	b := NewBlocks(nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := b.Words(tt.content)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Words(%q) mismatch (-want +got):\n%s", tt.content, diff)
			}
		})
	}
}

func TestWordsTagBound(t *testing.T) {
	// Past maxTags tags of known names, the rest is text: the block that
	// opens at the bound is not set aside.
	b := NewBlocks(nil)
	head := strings.Repeat("<system-reminder>x</system-reminder>", maxTags/2)
	got := b.Words(head + "<system-reminder>late</system-reminder>Q")
	if want := "<system-reminder>late</system-reminder>Q"; got.Text != want {
		t.Errorf("Words(%d blocks then one more).Text = %q, want %q", maxTags/2, got.Text, want)
	}
	if len(got.Aside) != 1 || got.Aside[0].Count != maxTags/2 {
		t.Errorf("Words(%d blocks then one more).Aside = %+v, want %d blocks", maxTags/2, got.Aside, maxTags/2)
	}
}

func TestWordsIgnoreBlocks(t *testing.T) {
	b := NewBlocks([]string{"team-context", "task"})
	got := b.Words("<team-context>on call: Ana</team-context><task>What is 2+2?</task>")
	want := Words{Aside: []Aside{aside("team-context", 1, 41), aside("task", 1, 25)}}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Words with ignore_blocks mismatch (-want +got):\n%s", diff)
	}
	// A name whose first letter no default name has.
	if got := NewBlocks([]string{"zed-context"}).Words("<zed-context>x</zed-context>hi"); got.Text != "hi" {
		t.Errorf("Words with ignore_blocks [zed-context] = %+v, want the block set aside", got)
	}
	if got := NewBlocks(nil).Words("<team-context>x</team-context>"); got.Text == "" {
		t.Errorf("Words without ignore_blocks set aside <team-context>: %+v", got)
	}
}

func TestWordsOneSubstring(t *testing.T) {
	// The words in one piece are a substring of the message: no copy.
	b := NewBlocks(nil)
	msg := "<system-reminder>x</system-reminder>\nWhat is 2+2?\n<system-reminder>y</system-reminder>"
	// One allocation: the list of what was set aside.
	if n := testing.AllocsPerRun(100, func() { b.Words(msg) }); n > 1 {
		t.Errorf("Words(two reminders around the words) allocates %v times, want 1", n)
	}
}

func TestJudge(t *testing.T) {
	reminder := "<system-reminder>ctx</system-reminder>"
	tests := []struct {
		name string
		user []string // newest first
		want Judged
	}{
		{"none", nil, Judged{}},
		{"newest has words", []string{"new", "old"}, Judged{Words: Words{Text: "new"}}},
		{"newest only blocks", []string{reminder, "old"}, Judged{Words: Words{Text: "old"}, Skipped: 1, SkippedAside: []Aside{aside("system-reminder", 1, len(reminder))}}},
		{"tool results then the task", []string{"[read_file for 'a'] Result:\nA", "[list_files for '.'] Result:\nB", "<task>\nList the files\n</task>"},
			Judged{Words: Words{Text: "List the files", Wrapper: "task"}, Skipped: 2, SkippedAside: []Aside{aside("tool result", 2, 59)}}},
		{"empty message is judged", []string{"", "old"}, Judged{}},
		{"every message only blocks", []string{reminder, reminder}, Judged{Skipped: 2, SkippedAside: []Aside{aside("system-reminder", 2, 2*len(reminder))}}},
	}
	b := NewBlocks(nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := b.Judge(newestFirst(tt.user...))
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Judge(%q) mismatch (-want +got):\n%s", tt.user, diff)
			}
		})
	}
}

// TestJudgeLastTextPart: a message of several text parts whose earlier
// parts hold words of their own (Continue's @-mentions) is judged on its
// last part, the earlier ones set aside as attached context; earlier parts
// that are only blocks (Qwen Code's reminders) change nothing.
func TestJudgeLastTextPart(t *testing.T) {
	file := "```main.go\npackage main\n\n// 1. routes\n// 2. middleware\n```\n"
	reminder := "<system-reminder>ctx</system-reminder>"
	zedOpen := "<context>\nThe following items were attached by the user. They are up-to-date and don't need to be re-read.\n\n"
	read := `Called the Read tool with the following input: {"filePath":"/a.go"}`
	tests := []struct {
		name string
		msg  UserMessage
		want Judged
	}{
		{"one part", UserMessage{Text: "What is 2+2?"}, Judged{Words: Words{Text: "What is 2+2?"}}},
		{"attached files, then the question", UserMessage{Text: file + file + "What is 2+2?", Lead: 2 * len(file)},
			Judged{Words: Words{Text: "What is 2+2?", Aside: []Aside{aside(attachedName, 1, 2*len(file))}}}},
		{"reminders, then the question", UserMessage{Text: reminder + "What is 2+2?", Lead: len(reminder)},
			Judged{Words: Words{Text: "What is 2+2?", Aside: []Aside{aside("system-reminder", 1, len(reminder))}}}},
		{"the task, then only blocks", UserMessage{Text: "<task>List the files</task>" + "<environment_details>x</environment_details>", Lead: len("<task>List the files</task>")},
			Judged{Words: Words{Text: "List the files", Wrapper: "task", Aside: []Aside{aside("environment_details", 1, len("<environment_details>x</environment_details>"))}}}},
		{"a lead past the text is ignored", UserMessage{Text: "hi", Lead: 10}, Judged{Words: Words{Text: "hi"}}},
		// Zed's agent: the words, then "<context>…", the files and
		// "</context>", each a part; the block runs across the last parts.
		{"a block across the last part", UserMessage{Text: "Why?" + zedOpen + "<files>\nx\n</files>\n" + "</context>", Lead: len("Why?" + zedOpen + "<files>\nx\n</files>\n")},
			Judged{Words: Words{Text: "Why?", Aside: []Aside{aside(zedContextName, 1, len(zedOpen+"<files>\nx\n</files>\n</context>"))}}}},
		// opencode: the words, then a read announced and its output for
		// each mentioned file, parts joined without a separator.
		{"opencode's reads after the question", UserMessage{Text: "What is 2+2? @a.go" + read + "<path>/a.go</path>" + read + "<path>/b.go</path>", Lead: len("What is 2+2? @a.go" + read + "<path>/a.go</path>" + read)},
			Judged{Words: Words{Text: "What is 2+2? @a.go", Aside: []Aside{aside(opencodeReadName, 2, 2*len(read)+len("<path>/a.go</path><path>/b.go</path>"))}}}},
		// The words after the reads (files put first) are the last part.
		{"opencode's reads before the question", UserMessage{Text: read + "<path>/a.go</path>" + "Why?", Lead: len(read + "<path>/a.go</path>")},
			Judged{Words: Words{Text: "Why?", Aside: []Aside{aside(attachedName, 1, len(read+"<path>/a.go</path>"))}}}},
	}
	b := NewBlocks(nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := false
			got := b.Judge(func() (UserMessage, bool) {
				if done {
					return UserMessage{}, false
				}
				done = true
				return tt.msg, true
			})
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Judge mismatch (-want +got):\n%s", diff)
			}
		})
	}
	d := New(config.Classify{}, nil).Classify(func() func() (UserMessage, bool) {
		done := false
		return func() (UserMessage, bool) {
			if done {
				return UserMessage{}, false
			}
			done = true
			return UserMessage{Text: file + "hi", Lead: len(file)}, true
		}
	}(), "")
	if want := "ignored the text parts before the last (attached context), 59 B"; !slices.Contains(d.Reasons, want) {
		t.Errorf("reasons %q, want %q among them", d.Reasons, want)
	}
}

func TestClassifyReasonsSayWhatWasJudged(t *testing.T) {
	skills := "<system-reminder>\n" + strings.Repeat("- skill: does things. Use when asked? Or not?\n", 210) + "</system-reminder>"
	tests := []struct {
		name string
		user []string // newest first
		want Decision
	}{
		{"reminder set aside", []string{skills + "What is 2+2?"}, simple([]string{
			"short message (12 < 50)", `text judged: "What is 2+2?"`, "ignored 1 <system-reminder> block, 9.5 KB"})},
		{"the question still counts", []string{skills + "Compare Go and Rust"}, reflexive(
			"keyword: compare", `text judged: "Compare Go and Rust"`, "ignored 1 <system-reminder> block, 9.5 KB")},
		{"long words are quoted to 80 runes", []string{strings.Repeat("é ", 50)}, simple([]string{
			"no complex signal (50 ≤ 99 < 280)", `text judged: "` + strings.Repeat("é ", 40)[:119] + `…"`})},
		{"skipped messages", []string{"<environment_context>cwd</environment_context>", "[x] Result:\nok", "hi"}, simple([]string{
			"short message (2 < 50)", `text judged: "hi"`, "skipped 2 later user messages with no words of the user's (<environment_context>, tool result)"})},
		{"text around a wrapper", []string{"<ctx>Some context</ctx>\n<user_query>hi</user_query>"}, simple([]string{
			"short message (2 < 50)", `text judged: "hi"`, "ignored 23 B of text around <user_query>"})},
		{"no words at all", []string{"<system-reminder>x</system-reminder>"}, simple([]string{
			"short message (0 < 50)", "no words of the user's to judge", "skipped 1 later user message with no words of the user's (<system-reminder>)"})},
	}
	c := New(config.Classify{}, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := c.Classify(newestFirst(tt.user...), "")
			if diff := cmp.Diff(tt.want, got, ignoreText); diff != "" {
				t.Errorf("Classify(%q) mismatch (-want +got):\n%s", tt.user, diff)
			}
		})
	}
}

func TestQuote(t *testing.T) {
	tests := []struct{ in, want string }{
		{"hi", `text judged: "hi"`},
		{"  a \n\t b  ", `text judged: "a b"`},
		{strings.Repeat("x", 80), `text judged: "` + strings.Repeat("x", 80) + `"`},
		{strings.Repeat("x", 81), `text judged: "` + strings.Repeat("x", 80) + `…"`},
		{strings.Repeat("x", 79) + " y", `text judged: "` + strings.Repeat("x", 79) + `…"`},
		{"say \"hi\"", `text judged: "say "hi""`},
		{"\xff", "text judged: \"\uFFFD\""},
	}
	for _, tt := range tests {
		if got := quote(tt.in); got != tt.want {
			t.Errorf("quote(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestUnquoted: every reason a decision gives is content-free once
// Unquoted, the words judged included, and keeps what is not content.
func TestUnquoted(t *testing.T) {
	c := New(config.Classify{}, []string{"read_file"})
	d := c.Classify(one("<system-reminder>x</system-reminder>Compare secret-words-1 and secret-words-2 with read_file, step by step?"), "code")
	var got []string
	for _, r := range d.Reasons {
		got = append(got, Unquoted(r))
	}
	want := []string{"keyword: compare", "keyword: step by step", "category: code", "tool: read_file", "text judged", "ignored 1 <system-reminder> block, 36 B"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Unquoted reasons mismatch (-want +got):\n%s\nfrom %q", diff, d.Reasons)
	}
}

func TestAppendSize(t *testing.T) {
	tests := []struct {
		n    int
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KB"}, {9830, "9.6 KB"}, {40 << 10, "40.0 KB"}, {1 << 20, "1024.0 KB"}}
	for _, tt := range tests {
		if got := string(appendSize(nil, tt.n)); got != tt.want {
			t.Errorf("appendSize(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

// referenceWords is the stripper written the slow, obvious way, for the
// fuzzer: repeatedly find a matched pair with no known tag between its
// tags (an innermost one), and replace it; what is left of the known tags
// after that stays text. It knows nothing of wrappers, AGENTS.md, Aider's
// rules and tool results: the fuzzer gives it messages without them.
func referenceWords(b *Blocks, s string) string {
	type tok struct {
		start, end int
		name       string
		close      bool
	}
	for {
		var toks []tok
		for i := 0; i < len(s); i++ {
			if s[i] != '<' {
				continue
			}
			if t, ok := b.readTag(s, i); ok {
				toks = append(toks, tok(t))
			}
		}
		done := true
		for k := 0; k < len(toks); k++ {
			o := toks[k]
			if o.close || b.kinds[o.name] != setAside {
				continue
			}
			if s[o.end-2] == '/' {
				s = s[:o.start] + "\n" + s[o.end:]
				done = false
				break
			}
			// The next known tag must be its close tag.
			if k+1 < len(toks) && toks[k+1].close && toks[k+1].name == o.name {
				s = s[:o.start] + "\n" + s[toks[k+1].end:]
				done = false
				break
			}
		}
		if done {
			break
		}
	}
	var parts []string
	for _, p := range strings.Split(s, "\n") {
		if p = strings.TrimSpace(p); p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, " ")
}

func FuzzWords(f *testing.F) {
	for _, s := range []string{
		"", "hi", "<system-reminder>x</system-reminder>hi", "<system-reminder>", "</system-reminder>",
		"<system-reminder><system-reminder>a</system-reminder>", "a<environment_details>b</environment_details>c",
		"<task>q</task><environment_details>e</environment_details>", "<user_query>q", "[x] Result:\ny",
		"# AGENTS.md instructions for /x\n\n<INSTRUCTIONS>i</INSTRUCTIONS>", "<file_content path=\"a\">b</file_content>",
		"<environment_context/>", "<command-name>/x</command-name><command-args>why?</command-args>",
		strings.Repeat("<system-reminder>", 50) + strings.Repeat("</system-reminder>", 49),
		strings.Repeat("<task><user_query>", 30) + "x",
		owuiRAGOpening + "\n<context>\n<source id=\"1\">d</source>\n</context>\nq", owuiRAGOpening + "</context>",
	} {
		f.Add(s)
	}
	b := NewBlocks([]string{"x-ctx"})
	f.Fuzz(func(t *testing.T, s string) {
		w := b.Words(s)
		if w.Text != strings.TrimSpace(w.Text) {
			t.Fatalf("Words(%q).Text = %q, not trimmed", s, w.Text)
		}
		if len(w.Text) > len(s) {
			t.Fatalf("Words(%q).Text = %q, longer than the message", s, w.Text)
		}
		if utf8.ValidString(s) && !utf8.ValidString(w.Text) {
			t.Fatalf("Words(%q).Text = %q, invalid UTF-8 from valid", s, w.Text)
		}
		set := 0
		for _, a := range w.Aside {
			if a.Count <= 0 || a.Bytes <= 0 {
				t.Fatalf("Words(%q).Aside = %+v, want positive counts", s, w.Aside)
			}
			set += a.Bytes
		}
		if set+len(w.Text) > len(s)+strings.Count(w.Text, "\n") {
			t.Fatalf("Words(%q): %d bytes set aside and %d kept, of %d", s, set, len(w.Text), len(s))
		}
		// Without wrappers, AGENTS.md and tool results, the words are what
		// the slow reference leaves, up to how pieces are joined.
		if strings.Contains(s, "AGENTS.md") || strings.HasPrefix(strings.TrimSpace(s), "[") || aiderRulesAt(s) >= 0 || strings.HasPrefix(strings.TrimSpace(s), owuiRAGOpening) || strings.Contains(s, owuiCodeHeading) {
			return
		}
		for _, name := range unwrapBlocks {
			if strings.Contains(s, "<"+name) || strings.Contains(s, "</"+name) {
				return
			}
		}
		// Nor of Zed's <context>, set aside by what it holds.
		if strings.Contains(s, "<"+zedContextTag) || strings.Contains(s, "</"+zedContextTag) {
			return
		}
		if strings.Count(s, "<") > maxTags {
			return // the reference reads every tag
		}
		want := referenceWords(b, s)
		got := strings.Join(strings.Fields(strings.ReplaceAll(w.Text, "\n", " ")), " ")
		if want = strings.Join(strings.Fields(want), " "); got != want {
			t.Fatalf("Words(%q).Text = %q, reference %q", s, w.Text, want)
		}
	})
}

// adversarial are messages of n repeats of tag shapes that a quadratic
// stripper would choke on. BenchmarkWordsAdversarial runs each at two
// sizes: a linear stripper keeps the same MB/s at both (docs/performance-log.md).
var adversarial = []struct {
	name  string
	shape func(n int) string
}{
	{"unclosed-opens", func(n int) string { return strings.Repeat("<system-reminder>", n) }},
	{"stray-closes", func(n int) string { return strings.Repeat("</system-reminder>", n) }},
	{"opens-then-other-close", func(n int) string { return strings.Repeat("<task>", n) + "</system-reminder>" }},
	{"alternating-names", func(n int) string { return strings.Repeat("<task><system-reminder>", n) + strings.Repeat("</task>", n) }},
	{"nested", func(n int) string {
		return strings.Repeat("<system-reminder>", n) + strings.Repeat("</system-reminder>", n)
	}},
	{"long-attributes", func(n int) string { return strings.Repeat("<file_content "+strings.Repeat("a", 600), n) }},
	{"agents-md-headings", func(n int) string { return strings.Repeat(agentsMDStart+"x\n<INSTRUCTIONS></INSTRUCTIONS>", n) }},
	{"wrappers", func(n int) string { return strings.Repeat("x <user_query>q</user_query> ", n) }},
}

func BenchmarkWordsAdversarial(b *testing.B) {
	blocks := NewBlocks(nil)
	for _, a := range adversarial {
		for _, n := range []int{1000, 16000} {
			msg := a.shape(n)
			b.Run(fmt.Sprintf("%s/%d", a.name, n), func(b *testing.B) {
				b.SetBytes(int64(len(msg)))
				b.ReportAllocs()
				for b.Loop() {
					blocks.Words(msg)
				}
			})
		}
	}
}

func BenchmarkWords(b *testing.B) {
	skills := "<system-reminder>\n" + strings.Repeat("- skill: does things. Use when asked.\n", 260) + "</system-reminder>"
	for _, bb := range []struct {
		name string
		msg  string
	}{
		{"plain", "What is 2+2?"},
		{"reminder-10KB", skills + "What is 2+2?"},
	} {
		blocks := NewBlocks(nil)
		b.Run(bb.name, func(b *testing.B) {
			b.SetBytes(int64(len(bb.msg)))
			b.ReportAllocs()
			for b.Loop() {
				blocks.Words(bb.msg)
			}
		})
	}
}

// agent40KB is a user message the size agent clients send: 40 KB of
// injected context around a short question, in four reminders as Qwen
// Code sends them.
func agent40KB(question string) string {
	var sb strings.Builder
	for i := range 4 {
		fmt.Fprintf(&sb, "<system-reminder>\nContext %d:\n", i)
		for sb.Len() < (i+1)*10<<10-64 {
			sb.WriteString("- skill: reads files, answers why? and how? lists:\n1. one\n2. two\n")
		}
		sb.WriteString("</system-reminder>")
	}
	sb.WriteString(question)
	return sb.String()
}

func BenchmarkClassifyAgent40KB(b *testing.B) {
	c := New(config.Classify{}, serverTools)
	for _, q := range []struct{ name, text, mode string }{
		{"trivial", "What is 2+2?", ModeSimple},
		{"analytical", "Compare goroutines with threads and explain why one scales better.", ModeReflexive},
	} {
		msg := agent40KB(q.text)
		user := []string{msg}
		if d := c.Classify(newestFirst(user...), ""); d.Mode != q.mode {
			b.Fatalf("Classify(40 KB agent message, %q) = %+v, want %s", q.text, d, q.mode)
		}
		b.Run(q.name, func(b *testing.B) {
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			for b.Loop() {
				c.Classify(newestFirst(user...), "")
			}
		})
	}
}

// TestClassifyAgentAllocs bounds what classification allocates on every
// request of an agent client (40 KB of injected context): the reasons,
// the quote, the list of what was set aside and its reason. Allocations are
// counted, not timed; BenchmarkClassifyAgent40KB has the time.
func TestClassifyAgentAllocs(t *testing.T) {
	c := New(config.Classify{}, serverTools)
	msg := agent40KB("What is 2+2?")
	n := testing.AllocsPerRun(50, func() {
		done := false
		c.Classify(func() (UserMessage, bool) {
			if done {
				return UserMessage{}, false
			}
			done = true
			return UserMessage{Text: msg}, true
		}, "")
	})
	if n > 4 {
		t.Errorf("Classify(40 KB agent message) allocates %v times, want at most 4", n)
	}
}

// TestClassifyParts: images and files are set aside as blocks are: the
// text beside them is judged, the reasons count them, and a message that
// is only a picture is passed over for the user's words before it.
func TestClassifyParts(t *testing.T) {
	reminder := "<system-reminder>ctx</system-reminder>"
	tests := []struct {
		name string
		user []UserMessage // newest first
		want Decision
	}{
		{"an image with a question", []UserMessage{{Text: "What is in this picture?", Images: 1}}, simple([]string{
			"short message (24 < 50)", `text judged: "What is in this picture?"`, "set aside 1 image part"})},
		{"images and a file with an analytical question", []UserMessage{{Text: "Compare these two charts with the report", Images: 2, Files: 1}}, reflexive(
			"keyword: compare", `text judged: "Compare these two charts with the report"`, "set aside 2 image parts", "set aside 1 file part")},
		{"blocks and an image", []UserMessage{{Text: reminder + "Describe it", Images: 1}}, simple([]string{
			"short message (11 < 50)", `text judged: "Describe it"`, "ignored 1 <system-reminder> block, 38 B", "set aside 1 image part"})},
		{"only an image: the words before it", []UserMessage{{Images: 1}, {Text: "Explain why the sky is blue"}}, reflexive(
			"keyword: explain why", `text judged: "Explain why the sky is blue"`, "skipped 1 later user message with no words of the user's (image part)")},
		{"only blocks and a file", []UserMessage{{Text: reminder, Files: 1}, {Text: "hi"}}, simple([]string{
			"short message (2 < 50)", `text judged: "hi"`, "skipped 1 later user message with no words of the user's (<system-reminder>, file part)"})},
		// After a tool whose result holds images, AnythingLLM's agent sends
		// them in a user message of its own after the tool result: this
		// text and the images as image_url parts (handleExecution of
		// server/utils/agents/aibitat/index.js and
		// formatMessageWithAttachments of aibitat/providers/ai-provider.js,
		// Mintplex-Labs/anything-llm at 72aabbd1). The question before it
		// is judged.
		{"AnythingLLM's images of a tool result", []UserMessage{{Text: "[Attached image(s) from tool result]", Images: 1}, {Text: "Explain why the sky is blue"}}, reflexive(
			"keyword: explain why", `text judged: "Explain why the sky is blue"`, "skipped 1 later user message with no words of the user's (tool result, image part)")},
		{"only an image, nothing before", []UserMessage{{Images: 1}}, simple([]string{
			"short message (0 < 50)", "no words of the user's to judge", "skipped 1 later user message with no words of the user's (image part)"})},
	}
	c := New(config.Classify{}, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := c.Classify(newestFirstParts(tt.user...), "")
			if diff := cmp.Diff(tt.want, got, ignoreText); diff != "" {
				t.Errorf("Classify(%+v) mismatch (-want +got):\n%s", tt.user, diff)
			}
		})
	}
}
