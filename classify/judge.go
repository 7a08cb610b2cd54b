package classify

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// UserMessage is a user message as the classifier reads it: its text, and
// how many image and file parts it had beside it. Only the text is judged:
// the parts are set aside, and the reasons say so.
type UserMessage struct {
	Text          string
	Images, Files int
	// Lead is where the last of several text parts starts in Text (0 for
	// one): the parts before it are context the client attached.
	Lead int
}

// Judged is what the classifier judges of a request: the words of the
// newest user message that has words of the user's.
type Judged struct {
	Words
	// Images and Files count the parts of the judged message set aside.
	Images, Files int
	// Skipped counts the newer user messages passed over because all they
	// held was set aside (injected blocks, a client's tool result), and
	// SkippedAside says what that was.
	Skipped      int
	SkippedAside []Aside
	// Background names the client's own background request the newest
	// user message is (see backgroundRequests), "" for a user's.
	Background string
}

// backgroundRequests are requests agent clients make of their own, beside
// the user's turns, known by the fixed text their user message opens
// with. They are not the user's words: they are judged simple.
var backgroundRequests = []struct{ opening, name string }{
	// Qwen Code's managed auto-memory extraction, sent after a turn
	// (packages/core/src/memory/extractionAgentPlanner.ts, buildTaskPrompt;
	// captured from @qwen-code/qwen-code 0.24.4, web/testdata/agents).
	{"Managed memory has TWO directories.", "Qwen Code's memory extraction"},
	// Qwen Code's next-speaker check, after a model turn that made no tool
	// call, when model.skipNextSpeakerCheck is false (it is true by
	// default): the model's last turn, then this prompt, which asks for
	// a JSON verdict through a forced tool (packages/core/src/utils/
	// nextSpeakerChecker.ts, CHECK_PROMPT; read from the bundle of
	// @qwen-code/qwen-code 0.24.4, web/testdata/agents/npm). Its rules
	// and "Analyze" would otherwise make it reflexive.
	{"Analyze *only* the content and structure of your immediately preceding response", "Qwen Code's next-speaker check"},
	// Qwen Code's chat compression, when the conversation nears the
	// window: with a provider that caches prefixes, the compression
	// prompt and its directive as the newest user message; otherwise the
	// prompt as the system message and the directive alone (read from the
	// bundle of @qwen-code/qwen-code 0.24.4, web/testdata/agents/npm:
	// getCompressionPrompt, trimmed, and COMPRESSION_REQUEST_DIRECTIVE).
	{"You are the component that summarizes a conversation when its context window is about to overflow.", "Qwen Code's chat compression"},
	{"First, reason in your <analysis> block. Then, produce the <state_snapshot> XML.", "Qwen Code's chat compression"},
	// Open WebUI's tasks, sent beside the chat to the chat's model (its
	// "Task Model" setting, "Current Model" by default): a title and tags
	// after the first answer, follow-up suggestions after every answer,
	// search and retrieval queries before an answer with web search or
	// files, and so on. Each is its default template (the DEFAULT_*
	// templates of backend/open_webui/config.py in open-webui/open-webui
	// at 2586f1f39273cacddb86fb6d793141d663b79803) with the chat as its
	// history, as one user message; the answer is a small JSON object the
	// UI parses, which a chain's review would not give. The opening is
	// the template's own words, before the history.
	{"### Task:\nGenerate a concise, 3-5 word title with an emoji summarizing the chat history.", "Open WebUI's title generation"},
	// An earlier version's title template.
	{"Create a concise, 3-5 word title with an emoji as a title for the ", "Open WebUI's title generation"},
	{"### Task:\nGenerate 1-3 broad tags categorizing the main themes of the chat history", "Open WebUI's tags generation"},
	{"### Task:\nSuggest 3-5 relevant follow-up questions or prompts that the user might naturally ask next", "Open WebUI's follow-up suggestions"},
	{"### Task:\nAnalyze the chat history to determine the necessity of generating search queries", "Open WebUI's search query generation"},
	{"### Task:\nYou are an autocompletion system. Continue the text in `<text>`", "Open WebUI's autocompletion"},
	{"### Task:\nGenerate a detailed prompt for am image generation task", "Open WebUI's image prompt generation"},
	{"Your task is to reflect the speaker's likely facial expression through a fitting emoji.", "Open WebUI's emoji generation"},
	// Claude Code's compaction (/compact, and automatic when the context
	// fills up), asked of the main model after the conversation: it
	// forbids tool calls, which the chain's first stage would make, and
	// wants plain <analysis> and <summary> blocks (read from the binary
	// of @anthropic-ai/claude-code 2.1.331, web/testdata/clients, where
	// the prompt opens with this preamble; earlier versions opened with
	// the task itself, the second line).
	{"CRITICAL: Respond with TEXT ONLY. Do NOT call any tools.", "Claude Code's compaction"},
	{"Your task is to create a detailed summary of the conversation so far, paying close attention to the user's explicit requests and your previous actions.", "Claude Code's compaction"},
	// Roo Code's context condensing (and its forks', Kilo Code's): its
	// summary prompt as the system message, the conversation, then this
	// request (summarizeConversation of src/core/condense/index.ts in
	// RooCodeInc/Roo-Code at e5353cf0adbf704e2007de00c0b42bf7f0c815f9).
	{"Summarize the conversation so far, as described in the prompt instructions.", "Roo Code's context condensing"},
	// Codex CLI's compaction with a provider other than OpenAI's (which
	// compacts on its own servers): the conversation, then this prompt as
	// a user message (SUMMARIZATION_PROMPT of codex-rs core/src/compact.rs,
	// read from the 0.169.0 binary in web/testdata/clients).
	{"You are performing a CONTEXT CHECKPOINT COMPACTION.", "Codex CLI's compaction"},
	// Continue's chat title, asked of the chat's model after the first
	// answer: the prompt, then the user's first message, code blocks
	// removed (ChatDescriber of core/util/chatDescriber.ts in
	// continuedev/continue at bac07196a22266fe8f0014aa4d31594e268773ca;
	// earlier versions asked for "a short summary" after the same words).
	{"Given the following... please reply with a ", "Continue's chat title"},
	// LibreChat's conversation title, asked of the chat's model after the
	// first answer, the chat below it as "User: …" and "AI: …" lines: its
	// structured form (the title and the language, through a tool) and its
	// plain one (defaultTitlePrompt and defaultCompletionPrompt of
	// src/utils/title.ts in danny-avila/agents, @librechat/agents, at
	// d8751a6ab077f9bb9b4fd66a7d55587c512751ac).
	{"Analyze this conversation and provide:\n1. The detected language of the conversation", "LibreChat's title generation"},
	{"Provide a concise, 5-word-or-less title for the conversation, using title case conventions.", "LibreChat's title generation"},
}

// backgroundSystems are requests clients make of their own that are known
// by their system message, their user message holding the user's words:
// the system message opens with the first text and holds the second.
var backgroundSystems = []struct{ opening, holds, name string }{
	// Open WebUI's tool selection, made before the answer when a chat has
	// tools on and the model's function calling is "Default" (prompt
	// based): DEFAULT_TOOLS_FUNCTION_CALLING_PROMPT_TEMPLATE of
	// backend/open_webui/config.py (@2586f1f3) with the tools' specs as
	// JSON where the two texts meet, and the recent history and "Query: "
	// and the question as the user message (get_tools_function_calling_payload
	// of backend/open_webui/utils/middleware.py). Open WebUI parses the
	// answer as a JSON object naming the tools, then runs them itself.
	{"Available Tools: ", "\n\nYour task is to choose and return the correct tool(s) from the list of available tools based on the query.", "Open WebUI's tool selection"},
	// Aider's own requests, sent to its weak model (the main model when no
	// other is set, as with an OpenAI-compatible base URL), each with its
	// prompt as the system message (summarize and commit_system of
	// aider/prompts.py in Aider-AI/aider at
	// 668de71f9ddcd0e6852a5456a1bdc7ed54b5a5c7): the chat history folded
	// into a summary once it grows long, the transcript as the user
	// message (aider/history.py); a commit message after each edit, the
	// diff as the user message (aider/repo.py).
	{"*Briefly* summarize this partial conversation about programming.", "Start the summary with \"I asked you...\".", "Aider's chat summary"},
	{"You are an expert software engineer that generates concise, one-line Git commit messages based on the provided diffs.", "Reply only with the one-line commit message", "Aider's commit message"},
}

// BackgroundSystem names the client's own request that a request's
// system message marks (see backgroundSystems), or "".
func BackgroundSystem(system string) string {
	for _, r := range backgroundSystems {
		if strings.HasPrefix(system, r.opening) && strings.Contains(system, r.holds) {
			return r.name
		}
	}
	return ""
}

// BackgroundDecision is the decision for the client's own request name:
// simple, with the reason that names it.
func BackgroundDecision(name string) Decision {
	return Decision{Mode: ModeSimple, Reasons: []string{name + " request: the client's own work, not the user's words"}, Background: name}
}

// background names the background request text opens, or "".
//
// The newest user message of every classified request is tested: the
// first byte is compared before the whole opening, which rules out nearly
// every entry without a call to the runtime's memequal.
func background(text string) string {
	for _, r := range backgroundRequests {
		if len(text) >= len(r.opening) && text[0] == r.opening[0] && text[:len(r.opening)] == r.opening {
			return r.name
		}
	}
	return ""
}

// Judge finds the words to judge in the user messages of a request, which
// next returns newest first (and false after the oldest): those of the
// first message that has words of the user's once blocks are set aside. A message that held only blocks is passed
// over for the one before it, so every request of an agent turn (whose
// follow-ups add tool results and injected context, never the user's
// words) is judged on the words that started it. An empty message, with
// nothing set aside, is judged as it is.
//
// next is a function rather than an iter.Seq because the loop body of a
// range over an unknown function escapes, with the variables it shares: a
// few allocations on every request.
//
// Image and file parts are set aside as blocks are: a message that is only
// a picture is passed over like one that is only blocks.
func (b *Blocks) Judge(next func() (UserMessage, bool)) Judged {
	var j Judged
	for first := true; ; first = false {
		m, ok := next()
		if !ok {
			return j
		}
		if first {
			if j.Background = background(m.Text); j.Background != "" {
				return j
			}
		}
		w := b.lastPart(m)
		if w.Text != "" || len(w.Aside) == 0 && m.Images == 0 && m.Files == 0 {
			j.Words, j.Images, j.Files = w, m.Images, m.Files
			return j
		}
		j.Skipped++
		for _, a := range w.Aside {
			j.SkippedAside = addAside(j.SkippedAside, a)
		}
		if m.Images > 0 {
			j.SkippedAside = addAside(j.SkippedAside, Aside{Name: imagePartName, Count: m.Images})
		}
		if m.Files > 0 {
			j.SkippedAside = addAside(j.SkippedAside, Aside{Name: filePartName, Count: m.Files})
		}
	}
}

// lastPart reads the words of m. When m came as several text parts and
// the ones before its last hold words of their own (not only injected
// blocks), those are context the client attached, as Continue attaches
// each @-mention (a file as a fenced block, a folder, docs) as a text part
// before the user's words: only the last part is judged, and the earlier
// ones are set aside whole. Clients whose earlier parts are only blocks
// (Qwen Code's and Claude Code's reminders) are read as one text.
func (b *Blocks) lastPart(m UserMessage) Words {
	if m.Lead <= 0 || m.Lead >= len(m.Text) {
		return b.Words(m.Text)
	}
	last := b.Words(m.Text[m.Lead:])
	if last.Text == "" || b.Words(m.Text[:m.Lead]).Text == "" {
		return b.Words(m.Text)
	}
	last.Aside = append(last.Aside, Aside{Name: attachedName, Count: 1, Bytes: m.Lead})
	return last
}

// attachedName names, in Aside, the text parts before the last one.
const attachedName = "attached context"

// Names, in Aside, of the parts of a message other than its text.
const (
	imagePartName = "image part"
	filePartName  = "file part"
)

func addAside(list []Aside, a Aside) []Aside {
	for i := range list {
		if list[i].Name == a.Name {
			list[i].Count += a.Count
			list[i].Bytes += a.Bytes
			return list
		}
	}
	return append(list, a)
}

// quoteRunes is how much of the words judged a reason quotes.
const quoteRunes = 80

// reasons appends to r the reasons that say what was judged: the words
// (quoted), each kind of block set aside, and the messages skipped.
func (j *Judged) reasons(r []string) []string {
	if j.Text == "" {
		r = append(r, "no words of the user's to judge")
	} else {
		r = append(r, quote(j.Text))
	}
	for _, a := range j.Aside {
		r = append(r, asideReason(a))
	}
	if j.Images > 0 {
		r = append(r, partsReason(j.Images, imagePartName))
	}
	if j.Files > 0 {
		r = append(r, partsReason(j.Files, filePartName))
	}
	if j.Around > 0 {
		b := make([]byte, 0, 64)
		b = append(b, "ignored "...)
		b = appendSize(b, j.Around)
		b = append(b, " of text around <"...)
		b = append(b, j.Wrapper...)
		r = append(r, string(append(b, '>')))
	}
	if j.Skipped > 0 {
		b := make([]byte, 0, 96)
		b = append(b, "skipped "...)
		b = strconv.AppendInt(b, int64(j.Skipped), 10)
		b = append(b, " later user message"...)
		if j.Skipped > 1 {
			b = append(b, 's')
		}
		b = append(b, " with no words of the user's ("...)
		for i, a := range j.SkippedAside {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendAsideName(b, a.Name)
		}
		r = append(r, string(append(b, ')')))
	}
	return r
}

// quote is the reason that quotes the words judged: their first 80 runes,
// each run of white space as one space, "…" when cut.
func quote(text string) string {
	var buf [16 + quoteRunes*4 + 8]byte
	b := append(buf[:0], `text judged: "`...)
	n := 0
	space := false
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		i += size
		if isSpace(r) {
			space = true
			continue
		}
		if n == quoteRunes {
			b = append(b, "…"...)
			space = false
			break
		}
		if space && n > 0 {
			if n+1 == quoteRunes {
				b = append(b, "…"...)
				break
			}
			b = append(b, ' ')
			n++
		}
		space = false
		b = utf8.AppendRune(b, r)
		n++
	}
	return string(append(b, '"'))
}

func isSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '\v', '\f', 0x85, 0xa0, 0x2028, 0x2029, 0x202f, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// asideReason says what was set aside of one name: "ignored 1
// <system-reminder> block, 9.6 KB".
func asideReason(a Aside) string {
	if a.Name == attachedName {
		// "ignored the text parts before the last (attached context), 3.1 KB"
		b := append(make([]byte, 0, 80), "ignored the text parts before the last (attached context), "...)
		return string(appendSize(b, a.Bytes))
	}
	b := make([]byte, 0, 64)
	b = append(b, "ignored "...)
	b = strconv.AppendInt(b, int64(a.Count), 10)
	b = append(b, ' ')
	b = appendAsideName(b, a.Name)
	b = append(b, " block"...)
	if a.Count > 1 {
		b = append(b, 's')
	}
	b = append(b, ", "...)
	return string(appendSize(b, a.Bytes))
}

// partsReason says what parts of the judged message were set aside: "set
// aside 1 image part".
func partsReason(n int, name string) string {
	b := make([]byte, 0, 32)
	b = append(b, "set aside "...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, ' ')
	b = append(b, name...)
	if n > 1 {
		b = append(b, 's')
	}
	return string(b)
}

// appendAsideName writes a tag name in its brackets; the names of whole
// messages ("AGENTS.md", "tool result") and of parts as they are.
func appendAsideName(b []byte, name string) []byte {
	if name == agentsMDName || name == toolResultName || name == aiderName || name == owuiRAGName || name == imagePartName || name == filePartName || name == attachedName {
		return append(b, name...)
	}
	b = append(b, '<')
	b = append(b, name...)
	return append(b, '>')
}

// appendSize writes a size in bytes as "812 B" or, from 1 KB (1024 bytes)
// on, in KB with one decimal: "9.6 KB".
func appendSize(b []byte, n int) []byte {
	if n < 1024 {
		b = strconv.AppendInt(b, int64(n), 10)
		return append(b, " B"...)
	}
	tenths := (n*10 + 512) / 1024
	b = strconv.AppendInt(b, int64(tenths/10), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(tenths%10), 10)
	return append(b, " KB"...)
}
