package classify

import (
	"slices"
	"strings"
)

// What agent clients put in user messages beside the user's words, read
// from their public sources (testdata/agents holds requests built from
// them, each with its origin). Blocks of these tags are set aside whole,
// with what they hold.
var defaultIgnoreBlocks = []string{
	// Claude Code, Qwen Code, Roo Code: context, CLAUDE.md/QWEN.md, skills,
	// todo state, the date, put before or after the question.
	"system-reminder",
	// Claude Code: a slash command's name and echo, local command output
	// and the caveat before it, a "! command" and its output, hook output,
	// subagent notices, IDE context.
	"command-name", "command-message", "local-command-stdout", "local-command-stderr",
	"local-command-caveat", "user-prompt-submit-hook", "bash-input", "bash-stdout", "bash-stderr",
	"task-notification", "ide_opened_file", "ide_selection", "new-diagnostics",
	// Codex CLI (codex-rs protocol.rs and context fragments): its own user
	// messages before the prompt.
	"environment_context", "user_instructions", "apps_instructions", "skills_instructions",
	"plugins_instructions", "collaboration_mode", "turn_aborted", "user_shell_command",
	"subagent_notification",
	// Cline and Roo Code: the editor's state after every message, files and
	// command output behind @-mentions, slash command bodies, hook output,
	// mode switches, canned instructions.
	"environment_details", "file_content", "workspace_diagnostics", "git_working_state",
	"git_commit", "terminal_output", "url_content", "command", "explicit_instructions",
	"hook_context", "mode_notice",
	// Cursor: what the editor attaches around <user_query>, as its
	// published prompts and the tools that read its transcripts show.
	"user_info", "additional_data", "attached_files", "project_layout", "rules",
	"cursor_commands", "manually_added_selection", "open_and_recently_viewed_files",
	"system_reminder", "git_status", "agent_transcripts", "agent_skills", "mcp_file_system",
	"image_files",
	// OpenHands: the workspace context it recalls as a user message.
	"RUNTIME_INFORMATION", "REPOSITORY_INFO", "REPOSITORY_INSTRUCTIONS", "EXTRA_INFO",
	"CONVERSATION_INSTRUCTIONS",
	// Crush: the files the user attaches, after the prompt, announced by a
	// <system_info> line, each in <file path='…'> (PromptWithTextAttachments
	// of internal/message/content.go in charmbracelet/crush at 37f36e93).
	"system_info", "file",
	// goose: its "MOIM", the time, the working directory and its
	// extensions' state (the todo list among them), merged into the user
	// message before the newest assistant message: before the question on
	// a turn's first request, after it on the next ones (collect_moim of
	// crates/goose/src/agents/extension_manager.rs, inject_moim of
	// crates/goose/src/agents/moim.rs in block/goose at 0036b819).
	"info-msg",
	// AnythingLLM's agent: the workspace's pinned documents and the
	// thread's parsed files, appended to the user's words, each in
	// <document name="…"> (#fetchParsedFileContext of
	// server/utils/agents/index.js, appended by AIbitat.reply, in
	// Mintplex-Labs/anything-llm at 72aabbd1).
	"attached_documents",
}

// Tags around the user's words: the tags go, their text stays and is judged.
var unwrapBlocks = []string{
	"task", "user_query", "user_message", "user_input", "user_command", "feedback", "answer",
	"command-args",
}

// DefaultIgnoreBlocks returns a copy of the tag names whose blocks are set
// aside in every user message; classify.ignore_blocks adds to them.
func DefaultIgnoreBlocks() []string { return slices.Clone(defaultIgnoreBlocks) }

// Codex CLI sends a repository's AGENTS.md in a user message before the
// prompt: the heading "# AGENTS.md instructions for <dir>", then the file
// in an <INSTRUCTIONS> block. Both are set aside together; an
// <INSTRUCTIONS> block without the heading is the user's.
const (
	agentsMDStart = "# AGENTS.md instructions for "
	agentsMDTag   = "INSTRUCTIONS"
	agentsMDName  = "AGENTS.md"
)

// Zed's agent puts what the user @-mentions (files, symbols, threads,
// rules) after the user's words in a <context> block that opens with this
// line ("They are up-to-date and don't need to be re-read." follows, or in
// its earlier agent "You don't need to use other tools to read them."),
// each piece a text part of its own (UserMessage::to_request of
// crates/agent/src/thread.rs in zed-industries/zed). Only that block is
// set aside: a <context> block a user writes is the user's.
const (
	zedContextTag     = "context"
	zedContextOpening = "\nThe following items were attached by the user."
	zedContextName    = "Zed's attached context"
)

// opencode turns each file the user @-mentions into two text parts after
// the user's own words: "Called the Read tool with the following input:
// {…}" and the read tool's output, the file numbered (createUserMessage of
// packages/opencode/src/session/prompt.ts in sst/opencode at fe072387; its
// TUI sends the words first, then the mentions). From the first of them to
// the end, the message is opencode's.
const (
	opencodeRead     = "Called the Read tool with the following input: {"
	opencodeReadName = "opencode's attached file"
)

// Aider (aider/coders/*_prompts.py) appends its edit format's rules to the
// user's last message, after a blank line, when the model is set to
// reminder: user, its default. The rules start with one of these lines;
// from there to the end the message is Aider's. The editor formats
// (editor-diff, editor-diff-fenced, editor-whole) reuse the rules of the
// format they edit with, and the final reminders (lazy_prompt,
// overeager_prompt) come inside the rules; ask, architect and help modes
// have no system_reminder, so nothing is appended to the question there.
var aiderRules = []string{
	"# *SEARCH/REPLACE block* Rules:", // editblock, editblock-fenced, editor-diff*
	"# File editing rules:",           // udiff
	"# V4A Diff Format Rules:",        // patch
	"To suggest changes to a file you MUST return the entire content of the updated file.", // whole, editor-whole
	"NEVER RETURN CODE!", // context mode (context_prompts.py)
}

const aiderName = "Aider's rules"

// Open WebUI's retrieval (files attached, web search) with its default
// RAG_SYSTEM_CONTEXT off puts its RAG template, the retrieved documents
// inside <context>, before the user's message in the same message
// (add_or_update_user_message(..., append=False) in
// backend/open_webui/utils/middleware.py; DEFAULT_RAG_TEMPLATE of
// backend/open_webui/config.py at 2586f1f3, which ends with the context).
// The user's words are what follows the context.
const (
	owuiRAGOpening = "### Task:\nRespond to the user query using the provided context"
	owuiRAGEnd     = "</context>"
	owuiRAGName    = "Open WebUI's retrieved context"
)

// Open WebUI's code interpreter, when a chat turns it on and the model's
// function calling is not native, appends its prompt to the user's
// message (DEFAULT_CODE_INTERPRETER_PROMPT of backend/open_webui/config.py
// at 2586f1f3, added with add_or_update_user_message): from its heading
// to the end, the message is the client's.
const (
	owuiCodeHeading = "#### Tools Available\n\n1. **Code Interpreter**: `<code_interpreter"
	owuiCodeName    = "Open WebUI's code interpreter prompt"
)

// toolResultName names, in Aside, a user message that is a client's tool
// result rather than the user's words: Cline 3 and Roo Code before native
// tool calls send "[read_file for 'main.go'] Result:" and the result as
// the next user message.
const toolResultName = "tool result"

// AnythingLLM's agent sends the images a tool returned in a user message
// of its own, after the tool result: this text and the images as
// image_url parts (handleExecution and handleAsyncExecution of
// server/utils/agents/aibitat/index.js in Mintplex-Labs/anything-llm at
// 72aabbd1). It is a tool result too.
const anythingToolImages = "[Attached image(s) from tool result]"

type tagKind uint8

const (
	setAside tagKind = iota + 1
	unwrap
	agentsMD   // <INSTRUCTIONS>, set aside only under Codex's heading
	zedContext // <context>, set aside only when Zed's line opens it
)

// Blocks finds the user's own words in a user message: it sets aside the
// blocks agent clients inject, unwraps the tags they put around the words,
// and recognises messages that are wholly the client's. It is immutable
// after NewBlocks and safe for concurrent use.
//
// Only tags that open and close in the message count: an unclosed
// <system-reminder>, or one a user types in a question, stays text.
// Matching tags nest; a close tag pairs with the nearest open tag of its
// name, and open tags it skips stay text. The work is linear in the
// message: each tag is read once, and the pairing uses a stack whose
// entries are each pushed and popped at most once.
type Blocks struct {
	kinds map[string]tagKind
	// first[c] says that a known name starts with c: most '<' in a
	// message (code, HTML) are turned down without a map lookup.
	first [256]bool
}

// NewBlocks returns the Blocks that set aside the default tags and extra
// (tag names without brackets, as classify.ignore_blocks has them). A name
// in extra that is one of the unwrapped tags sets it aside instead.
func NewBlocks(extra []string) *Blocks {
	b := &Blocks{kinds: map[string]tagKind{}}
	for _, n := range unwrapBlocks {
		b.kinds[n] = unwrap
	}
	for _, n := range defaultIgnoreBlocks {
		b.kinds[n] = setAside
	}
	b.kinds[agentsMDTag] = agentsMD
	b.kinds[zedContextTag] = zedContext
	for _, n := range extra {
		if n != "" {
			b.kinds[n] = setAside
		}
	}
	for n := range b.kinds {
		b.first[n[0]] = true
	}
	return b
}

// Words is the part of a user message that the classifier judges.
type Words struct {
	// Text is the user's own words, trimmed: a substring of the message
	// when the words are in one piece, else the pieces joined by newlines.
	Text string
	// Aside says what was set aside, by name in order of first appearance.
	Aside []Aside
	// Wrapper names the tag the words were found in ("user_query"), when
	// they were wrapped, and Around counts the bytes of text (not white
	// space) around the wrappers, set aside with the blocks.
	Wrapper string
	Around  int
}

// Aside counts the blocks of one name set aside from a message.
type Aside struct {
	// Name is the tag name ("system-reminder"), "AGENTS.md" for Codex's
	// instructions message, or "tool result".
	Name string
	// Count is how many blocks, Bytes how many bytes with their tags.
	Count, Bytes int
}

// tag is one open or close tag of a known name found in a message.
type tag struct {
	start, end int // the tag's bytes
	name       string
	close      bool
}

type nameCount struct {
	name string
	n    int
}

// pair is a matched open and close tag.
type pair struct {
	open, close tag
}

// Words returns the user's words in content, one user message.
func (b *Blocks) Words(content string) Words {
	s := strings.TrimSpace(content)
	if isToolResult(s) || s == anythingToolImages {
		return Words{Aside: []Aside{{Name: toolResultName, Count: 1, Bytes: len(content)}}}
	}
	var rag, code, aider Aside
	if strings.HasPrefix(s, owuiRAGOpening) {
		if i := strings.LastIndex(s, owuiRAGEnd); i >= 0 {
			end := i + len(owuiRAGEnd)
			rag = Aside{Name: owuiRAGName, Count: 1, Bytes: end}
			s = strings.TrimSpace(s[end:])
		}
	}
	if i := owuiCodeAt(s); i >= 0 {
		code = Aside{Name: owuiCodeName, Count: 1, Bytes: len(s) - i}
		s = strings.TrimSpace(s[:i])
	}
	if i := aiderRulesAt(s); i >= 0 {
		aider = Aside{Name: aiderName, Count: 1, Bytes: len(s) - i}
		s = strings.TrimSpace(s[:i])
	}
	w := b.words(s)
	if rag.Count > 0 {
		w.Aside = append([]Aside{rag}, w.Aside...)
	}
	if code.Count > 0 {
		w.Aside = append(w.Aside, code)
	}
	if aider.Count > 0 {
		w.Aside = append(w.Aside, aider)
	}
	return w
}

// appendedTail bounds how far from the end of a message the prompts
// clients append to the user's words are looked for (Aider's rules, the
// longest under 3 KB; Open WebUI's code interpreter prompt, about 3 KB):
// they end it, so a long message costs no scan from its start.
const appendedTail = 8 << 10

// owuiCodeAt returns where Open WebUI's code interpreter prompt starts in
// s, or -1.
func owuiCodeAt(s string) int {
	from := max(0, len(s)-appendedTail)
	if i := strings.Index(s[from:], owuiCodeHeading); i >= 0 {
		return from + i
	}
	return -1
}

// aiderRulesAt returns where Aider's rules start in s, or -1.
func aiderRulesAt(s string) int {
	for i := max(0, len(s)-appendedTail); ; {
		j := strings.Index(s[i:], "\n\n")
		if j < 0 {
			return -1
		}
		i += j + 2
		rest := strings.TrimLeft(s[i:], "\n")
		for _, r := range aiderRules {
			if strings.HasPrefix(rest, r) {
				return i - 2
			}
		}
	}
}

// words finds the words of s, trimmed and with no tool result header.
func (b *Blocks) words(s string) Words {
	if strings.IndexByte(s, '<') < 0 {
		return Words{Text: s}
	}
	var pairBuf [16]pair
	pairs := b.pair(s, pairBuf[:0])
	if len(pairs) == 0 {
		return Words{Text: s}
	}
	return b.cut(s, pairs)
}

// isToolResult reports whether s starts as Cline's and Roo Code's tool
// results do: "[name] Result:" or "[name for 'arg'] Result:". Whatever
// follows is the result: the client sends the header as a content part of
// its own, which the flattened message joins to the result.
func isToolResult(s string) bool {
	if len(s) < len("[x] Result:") || s[0] != '[' {
		return false
	}
	i := 1
	for i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z' || s[i] >= '0' && s[i] <= '9' || s[i] == '_' || s[i] == '-') {
		i++
	}
	if i == 1 {
		return false
	}
	rest := s[i:]
	if arg, ok := strings.CutPrefix(rest, " for '"); ok {
		// The argument ends at the first "'] Result:" of its line.
		line := arg
		if nl := strings.IndexByte(arg, '\n'); nl >= 0 {
			line = arg[:nl]
		}
		return strings.Contains(line, "'] Result:")
	}
	return strings.HasPrefix(rest, "] Result:")
}

// maxTags bounds the tags of known names read in one message. Agent
// clients send tens; a message made of tags (a 10 MB body of
// "<task><system-reminder>") would otherwise cost memory for each. Past
// the bound, the rest of the message is text.
const maxTags = 1024

// pair reads the tags of known names in s and returns the matched pairs in
// the order their close tags come.
func (b *Blocks) pair(s string, pairs []pair) []pair {
	tags := 0
	var stackBuf [16]tag
	stack := stackBuf[:0]
	// open counts the open tags of each name on the stack, so that a close
	// tag with no open tag costs no search of the stack. Names are few (the
	// configured ones at most), so a list does.
	var openBuf [8]nameCount
	open := openBuf[:0]
	count := func(name string) *int {
		for i := range open {
			if open[i].name == name {
				return &open[i].n
			}
		}
		open = append(open, nameCount{name: name})
		return &open[len(open)-1].n
	}
	for i := 0; i < len(s); {
		j := strings.IndexByte(s[i:], '<')
		if j < 0 {
			break
		}
		i += j
		t, ok := b.readTag(s, i)
		if !ok {
			i++
			continue
		}
		if tags++; tags > maxTags {
			break
		}
		i = t.end
		if !t.close {
			if t.end-t.start >= 2 && s[t.end-2] == '/' {
				// <name/>: an empty block, its own pair.
				pairs = append(pairs, pair{open: t, close: tag{start: t.end, end: t.end, name: t.name, close: true}})
				continue
			}
			stack = append(stack, t)
			*count(t.name)++
			continue
		}
		if *count(t.name) == 0 {
			continue // a close tag with no open tag stays text
		}
		// Pop to the nearest open tag of this name; the open tags above it
		// are unclosed and stay text.
		for {
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			*count(top.name)--
			if top.name == t.name {
				pairs = append(pairs, pair{open: top, close: t})
				break
			}
		}
	}
	return pairs
}

// maxTagLen bounds how far a tag's attributes are read, so that a '<'
// followed by a long text without '>' costs a bounded look.
const maxTagLen = 512

// readTag reads the tag at s[i] == '<' when its name is known: <name>,
// <name attr="…">, <name/> or </name>.
func (b *Blocks) readTag(s string, i int) (tag, bool) {
	j := i + 1
	closing := j < len(s) && s[j] == '/'
	if closing {
		j++
	}
	if j >= len(s) || !b.first[s[j]] {
		return tag{}, false
	}
	k := j
	for k < len(s) && isNameByte(s[k]) {
		k++
	}
	if k == j || k >= len(s) {
		return tag{}, false
	}
	name := s[j:k]
	if b.kinds[name] == 0 {
		return tag{}, false
	}
	switch c := s[k]; {
	case c == '>':
		return tag{start: i, end: k + 1, name: name, close: closing}, true
	case closing:
		return tag{}, false
	case c == '/' && k+1 < len(s) && s[k+1] == '>':
		return tag{start: i, end: k + 2, name: name}, true
	case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		limit := min(len(s), i+maxTagLen)
		for m := k + 1; m < limit; m++ {
			switch s[m] {
			case '>':
				return tag{start: i, end: m + 1, name: name}, true
			case '<':
				return tag{}, false
			}
		}
	}
	return tag{}, false
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':'
}

// span is a range of bytes of a message: a block to set aside (aside is
// its name), an unwrapped tag to cut, or the whole of a wrapper pair.
type span struct {
	start, end int
	aside      string
	wrapper    string
}

// agentsMDLookBack bounds how far before an <INSTRUCTIONS> block its
// heading line is looked for.
const agentsMDLookBack = 1024

// agentsMDHeading returns where the heading "# AGENTS.md instructions for
// <dir>" starts when it is the line just before pos, with only white space
// between them.
func agentsMDHeading(s string, pos int) (int, bool) {
	from := max(0, pos-agentsMDLookBack)
	h := strings.LastIndex(s[from:pos], agentsMDStart)
	if h < 0 {
		return 0, false
	}
	h += from
	nl := strings.IndexByte(s[h:pos], '\n')
	if nl < 0 || strings.TrimSpace(s[h+nl:pos]) != "" {
		return 0, false
	}
	return h, true
}

// cut removes the matched blocks and the unwrapped tags from s. When the
// words are wrapped (<user_query>, <task>, …) by a client, the client has
// said where they are: only the text inside the wrappers is kept, and what
// is around them is set aside too, so that context a client adds under
// tags nobody listed does not count either. A client's message starts with
// its tags; a user's question that quotes a <task> element starts with
// words, and keeps them all.
func (b *Blocks) cut(s string, pairs []pair) Words {
	var spanBuf [32]span
	spans := spanBuf[:0]
	for _, p := range pairs {
		switch b.kinds[p.open.name] {
		case setAside:
			spans = append(spans, span{start: p.open.start, end: p.close.end, aside: p.open.name})
		case agentsMD:
			if h, ok := agentsMDHeading(s, p.open.start); ok {
				spans = append(spans, span{start: h, end: p.close.end, aside: agentsMDName})
			}
		case zedContext:
			if strings.HasPrefix(s[p.open.end:], zedContextOpening) {
				spans = append(spans, span{start: p.open.start, end: p.close.end, aside: zedContextName})
			}
		case unwrap:
			spans = append(spans,
				span{start: p.open.start, end: p.open.end},
				span{start: p.close.start, end: p.close.end},
				span{start: p.open.start, end: p.close.end, wrapper: p.open.name})
		}
	}
	// Pairs are nested or apart, never crossing (the stack sees to it), so
	// after sorting by start, outer spans first, a span that starts before
	// the end of the last one kept lies inside it. A wrapper sorts before
	// its own open tag.
	slices.SortFunc(spans, func(x, y span) int {
		if x.start != y.start {
			return x.start - y.start
		}
		if x.end != y.end {
			return y.end - x.end
		}
		return len(y.wrapper) - len(x.wrapper)
	})
	var w Words
	// Pieces of kept text, as ranges, and the outermost wrappers not set
	// aside, both in order.
	var pieceBuf, wrapBuf [8][2]int
	pieces, wraps := pieceBuf[:0], wrapBuf[:0]
	at := 0   // end of the last span cut
	wEnd := 0 // end of the last wrapper kept
	for _, sp := range spans {
		if sp.wrapper != "" {
			if sp.start >= at && sp.start >= wEnd {
				wraps = append(wraps, [2]int{sp.start, sp.end})
				wEnd = sp.end
				if w.Wrapper == "" {
					w.Wrapper = sp.wrapper
				}
			}
			continue
		}
		if sp.start < at {
			continue
		}
		pieces = append(pieces, [2]int{at, sp.start})
		at = sp.end
		if sp.aside != "" {
			w.add(sp.aside, sp.end-sp.start)
		}
	}
	pieces = append(pieces, [2]int{at, len(s)})
	if len(wraps) > 0 && startsWithTag(s, pieces, wraps[0][0]) {
		pieces, w.Around = clip(s, pieces, wraps)
	} else {
		w.Wrapper = ""
	}
	var textBuf [8]string
	texts := textBuf[:0]
	for _, p := range pieces {
		if t := strings.TrimSpace(s[p[0]:p[1]]); t != "" {
			texts = append(texts, t)
		}
	}
	switch len(texts) {
	case 0:
	case 1:
		w.Text = texts[0]
	default:
		w.Text = strings.Join(texts, "\n")
	}
	return w
}

// startsWithTag reports whether the text kept before the first wrapper
// (at wrap) is nothing or starts with a tag.
func startsWithTag(s string, pieces [][2]int, wrap int) bool {
	for _, p := range pieces {
		if p[0] >= wrap {
			return true
		}
		if t := strings.TrimSpace(s[p[0]:min(p[1], wrap)]); t != "" {
			return t[0] == '<'
		}
	}
	return true
}

// clip keeps of pieces what lies inside wraps (both sorted and apart) and
// returns it with the count of non-blank bytes left out.
func clip(s string, pieces, wraps [][2]int) ([][2]int, int) {
	out := pieces[:0:0]
	around := 0
	k := 0
	for _, p := range pieces {
		a := p[0]
		for a < p[1] {
			for k < len(wraps) && wraps[k][1] <= a {
				k++
			}
			if k == len(wraps) || wraps[k][0] >= p[1] {
				around += nonBlank(s[a:p[1]])
				break
			}
			if wraps[k][0] > a {
				around += nonBlank(s[a:wraps[k][0]])
				a = wraps[k][0]
			}
			end := min(p[1], wraps[k][1])
			out = append(out, [2]int{a, end})
			a = end
		}
	}
	return out, around
}

func nonBlank(s string) int {
	return len(strings.TrimSpace(s))
}

func (w *Words) add(name string, bytes int) {
	for i := range w.Aside {
		if w.Aside[i].Name == name {
			w.Aside[i].Count++
			w.Aside[i].Bytes += bytes
			return
		}
	}
	w.Aside = append(w.Aside, Aside{Name: name, Count: 1, Bytes: bytes})
}
