package classify

import "strings"

// backgroundRequests are requests clients make of their own, beside
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
	// OpenHands' condensation, once the history outgrows its condenser's
	// window: one user message, the prompt, the previous summary and the
	// events to forget (LLMSummarizingCondenser of
	// openhands/memory/condenser/impl/llm_summarizing_condenser.py in
	// All-Hands-AI/OpenHands at 396b2c9faab6dd078a5e8529afa959f329c94389;
	// its structured condenser says "an interactive software agent").
	{"You are maintaining a context-aware state summary for an interactive ", "OpenHands' condensation"},
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
	// Zed's thread title, asked after the conversation as an added user
	// message (summarize_thread_prompt.txt, sent by Thread::summarize in
	// zed-industries/zed's crates/agent; its sentences were once on one
	// line, now on one line each).
	{"Generate a concise 3-7 word title for this conversation, omitting punctuation.", "Zed's thread title"},
	// LibreChat's conversation title, asked of the chat's model after the
	// first answer, the chat below it as "User: …" and "AI: …" lines: its
	// structured form (the title and the language, through a tool) and its
	// plain one (defaultTitlePrompt and defaultCompletionPrompt of
	// src/utils/title.ts in danny-avila/agents, @librechat/agents, at
	// d8751a6ab077f9bb9b4fd66a7d55587c512751ac).
	{"Analyze this conversation and provide:\n1. The detected language of the conversation", "LibreChat's title generation"},
	{"Provide a concise, 5-word-or-less title for the conversation, using title case conventions.", "LibreChat's title generation"},
	// opencode's compaction (/compact, and automatic when the context
	// fills up): the conversation, then this prompt and a template as a
	// user message, tools off ("Do not call any tools"); "detailed" and
	// the template's list made it reflexive (the default prompt of
	// packages/opencode/src/session/compaction.ts in anomalyco/opencode,
	// formerly sst/opencode, at 001aa6cc6a2164fe2e836df9f07d11debff1722d).
	// Later versions send one user message, the instruction, the template
	// and the conversation, serialized ("[User]: …"): a new summary, or an
	// update of the previous one (buildPrompt of
	// packages/core/src/session/compaction.ts at
	// 8b9b5784164ba1fbdc21be26608bdb9b88f50874).
	{"Provide a detailed prompt for continuing our conversation above.", "opencode's compaction"},
	{"Create a new anchored summary from the conversation history.", "opencode's compaction"},
	{"Update the anchored summary below using the conversation history above.", "opencode's compaction"},
	// Crush's session title, asked of its small model (then of its large
	// one) after the first prompt, with max_tokens 40: this line, then the
	// user's prompt; and its summary (/summarize, and automatic near the
	// window's end): the conversation, then this line, the todo list after
	// it when there is one (GenerateTitle and buildSummaryPrompt of
	// internal/agent/agent.go in charmbracelet/crush at
	// 37f36e93824e5c4f892e4a817f7f628e2682fe14). "detailed" made the
	// summary reflexive, and the prompt made the title reflexive when it was.
	{"Generate a concise title for the following content:", "Crush's title generation"},
	{"Provide a detailed summary of our conversation above.", "Crush's summary"},
	// goose's session name, asked of its fast model after each of the
	// first three user messages, session_name.md as the system message:
	// the user's messages between these markers, then "Generate a short
	// title for the above messages."; a background section before them
	// when the first message holds text for the assistant only
	// (generate_session_name of crates/goose/src/session/session_naming.rs
	// and the markers of providers/cli_common.rs in block/goose at
	// 1a4ff79e86b80c35faab286d3a3b1b18424d0256). The user's words inside
	// made it reflexive when they were.
	{"---BEGIN USER MESSAGES---\n", "goose's session name"},
	{"---BEGIN BACKGROUND CONTEXT (for understanding only, do NOT base the title on this)---\n", "goose's session name"},
}

// backgroundSystems are requests clients make of their own that are known
// by their system message, their user message holding the user's words or
// a task that varies from run to run: the system message opens with the
// first text and holds the second.
var backgroundSystems = []struct{ opening, holds, name string }{
	// Qwen Code's managed memory dream, run in the background once five
	// sessions (and a day) have passed since the last one: an agent of its
	// own, with file tools, its system prompt DREAM_AGENT_SYSTEM_PROMPT
	// and its one user message the consolidation task, which opens with
	// the memory directory's path ("Memory directory: `…`", what the
	// traces list would show) (packages/core/src/memory/dreamAgentPlanner.ts,
	// DREAM_AGENT_SYSTEM_PROMPT and buildConsolidationTaskPrompt; read from
	// the bundle of @qwen-code/qwen-code 0.24.4, web/testdata/agents/npm).
	// Its phases and "Merge duplicates" made it reflexive. /dream sends
	// the same task in the user's own chat, at the user's word: that one
	// is judged as the user's.
	{"You are performing a managed memory dream \u2014 a reflective pass over durable memory files.", "Update the MEMORY.md index to accurately reflect surviving files.", "Qwen Code's memory dream"},
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
	// opencode's session title, asked after the first prompt with its title
	// agent's prompt as the system message; the user messages are "Generate
	// a title for this conversation:" and then the user's first message,
	// the newest, which is why the user message cannot tell it
	// (packages/opencode/src/agent/prompt/title.txt in anomalyco/opencode at
	// 39e049e7ea17a2272194298d1a8c270f2b018948; ensureTitle of
	// packages/opencode/src/session/prompt.ts in sst/opencode at
	// fe07238773e776ac68ca4a1f42c27626583f1c88).
	{"You are a title generator. You output ONLY a thread title.", "Generate a brief title that would help the user find this conversation later.", "opencode's title generation"},
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

// Background names the client's own request that a request's newest user
// message, text, opens (see backgroundRequests), or "": what Classify
// finds first, and what a caller that does not classify (a mode forced by
// the model name) asks.
//
// The newest user message of every classified request is tested: the
// first byte is compared before the whole opening, which rules out nearly
// every entry without a call to the runtime's memequal.
func Background(text string) string {
	for _, r := range backgroundRequests {
		if len(text) >= len(r.opening) && text[0] == r.opening[0] && text[:len(r.opening)] == r.opening {
			return r.name
		}
	}
	return ""
}
