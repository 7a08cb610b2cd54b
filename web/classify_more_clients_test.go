package web

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"chainproxy/chain"
	"chainproxy/config"
)

// goose's <info-msg> ("MOIM"): collect_moim of
// crates/goose/src/agents/extension_manager.rs (the time, the working
// directory, then each platform extension's part; the todo extension's is
// "Current tasks and notes:" and the todo list the model keeps), which
// inject_moim (crates/goose/src/agents/moim.rs in block/goose at
// 0036b819bdd7dd02042fb6038e946d22ef56d926) adds as a user message before
// the newest assistant message, merged with the user message there.
const gooseMOIM = "<info-msg>\nIt is currently 2026-11-26 21:00:00\nWorking directory: /home/user/demo\n" +
	"Current tasks and notes:\n- [x] Read main.go\n- [ ] Run go test ./...\n- [ ] Report the result\n</info-msg>"

// gooseSystem stands for goose's system prompt (crates/goose/src/prompts/
// system.md), shortened: it is not judged.
const gooseSystem = "You are a general-purpose AI agent called goose, created by Block, the parent company of Square, CashApp, and Tidal."

// anythingDocs is what AnythingLLM appends to the newest user message of
// an agent turn (@agent, or a workspace in agent mode) when the workspace
// has pinned documents or the thread parsed files
// (#fetchParsedFileContext of server/utils/agents/index.js, appended by
// AIbitat.reply in server/utils/agents/aibitat/index.js, in
// Mintplex-Labs/anything-llm at 72aabbd15481ae405434efd4c83d46026eef1173).
const anythingDocs = "\n\n<attached_documents>\n<document name=\"handbook.pdf\">\n" +
	"Deployment handbook. 1. Deploys happen on Monday after the review. 2. Every service keeps its sessions in Redis so that " +
	"any replica can answer. 3. Rollbacks are made with the previous image tag, never by hand. 4. On-call engineers " +
	"write the incident report within two days. Why Redis? Because sticky sessions broke the load balancer twice.\n" +
	"</document>\n</attached_documents>"

// TestGooseAndAnythingLLMClassified: goose and AnythingLLM as chat
// Completions clients (goose's openai provider, AnythingLLM's generic
// OpenAI or Ollama connector): what they put beside the user's words is
// set aside, and goose's session title is its own request.
func TestGooseAndAnythingLLMClassified(t *testing.T) {
	s := newTestServer(t, testConfig, func(c *config.Config) { c.Server.MaxBodyBytes = 1 << 20 })
	own := func(name string) string {
		return name + " request: the client's own work, not the user's words"
	}
	tool := []any{map[string]any{"type": "function", "function": map[string]any{
		"name": "developer__shell", "description": "Execute a command in the shell.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}, "required": []string{"command"}},
	}}}
	// goose's openai format joins a user message's text contents with
	// "\n" into one string (format_messages of
	// crates/goose/src/providers/formats/openai.rs at
	// 008fca37f25db19b5a23197ea7caa6176d4ded47); a tool response is a
	// "tool" message.
	goose := func(q string, followUp bool) map[string]any {
		if !followUp {
			// First request: no assistant message yet, the MOIM goes
			// before the question.
			return map[string]any{"system": gooseSystem, "tools": tool, "messages": []any{
				map[string]any{"role": "user", "content": gooseMOIM + "\n" + q},
			}}
		}
		// Next request of the turn, after a tool call: the MOIM goes
		// before the assistant's call, after the question.
		return map[string]any{"system": gooseSystem, "tools": tool, "messages": []any{
			map[string]any{"role": "user", "content": q + "\n" + gooseMOIM},
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
				"id": "call_1", "type": "function", "function": map[string]any{"name": "developer__shell", "arguments": `{"command":"ls"}`}}}},
			map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "main.go\nREADME.md"},
		}}
	}
	// goose's session name, asked after each of the first three user
	// messages with session_name.md as the system prompt and this one
	// user message, no tools (generate_session_name of
	// crates/goose/src/session/session_naming.rs at
	// 1a4ff79e86b80c35faab286d3a3b1b18424d0256; the markers and the
	// suffix of providers/cli_common.rs). With "preprompt" content (text
	// for the assistant only) in the first message, a background section
	// comes first.
	gooseTitle := func(background bool, q string) map[string]any {
		user := "---BEGIN USER MESSAGES---\n" + q + "\n---END USER MESSAGES---\n\nGenerate a short title for the above messages."
		if background {
			user = "---BEGIN BACKGROUND CONTEXT (for understanding only, do NOT base the title on this)---\n" +
				"Recipe: release checklist\n---END BACKGROUND CONTEXT---\n\n" + user
		}
		return map[string]any{"system": "Generate a short title (four words or less) for this conversation.\n\nTitle what the work is ABOUT, not the mechanical activity.",
			"messages": []any{map[string]any{"role": "user", "content": user}}}
	}
	// AnythingLLM's agent: its role as the system message, the history,
	// then the user's words with the attached documents after them.
	anything := func(q string) map[string]any {
		return map[string]any{"system": "You are a helpful ai assistant who can assist the user and use tools available to help answer the users prompts and questions.",
			"tools": tool, "messages": []any{map[string]any{"role": "user", "content": q + anythingDocs}}}
	}

	tests := []struct {
		name string
		body map[string]any
		mode string
		want []string // reasons the trace must hold, besides the verdict
	}{
		{"goose trivial", goose(trivialQuestion, false), chain.ModeSimple, []string{quote(trivialQuestion), "ignored 1 <info-msg> block, 185 B"}},
		{"goose analytical", goose(analyticalQuestion, false), chain.ModeReflexive, []string{"keyword: compare", "ignored 1 <info-msg> block, 185 B"}},
		// The todo list in the MOIM made the rest of a trivial turn reflexive.
		{"goose trivial, after a tool call", goose(trivialQuestion, true), chain.ModeSimple, []string{quote(trivialQuestion), "ignored 1 <info-msg> block, 185 B"}},
		{"goose analytical, after a tool call", goose(analyticalQuestion, true), chain.ModeReflexive, []string{"keyword: compare"}},
		{"goose session name", gooseTitle(false, analyticalQuestion), chain.ModeSimple, []string{own("goose's session name")}},
		{"goose session name with background", gooseTitle(true, analyticalQuestion), chain.ModeSimple, []string{own("goose's session name")}},
		// goose's compaction: the conversation in the system prompt
		// (compaction.md), this one user message, no tools (do_compact of
		// crates/goose/src/context_mgmt/mod.rs at 0036b819): simple as it is.
		{"goose compaction", map[string]any{"system": "The messages above are a conversation to summarize. Create a structured context checkpoint summary that another LLM will use to continue the work.\n\n**Conversation History:**\n[user]: " + analyticalQuestion,
			"messages": []any{map[string]any{"role": "user", "content": "Please summarize the conversation history provided in the system prompt."}}}, chain.ModeSimple, nil},
		{"AnythingLLM agent trivial, pinned document", anything(trivialQuestion), chain.ModeSimple, []string{quote(trivialQuestion), "ignored 1 <attached_documents> block, 425 B"}},
		{"AnythingLLM agent analytical, pinned document", anything(analyticalQuestion), chain.ModeReflexive, []string{"keyword: compare", "ignored 1 <attached_documents> block, 425 B"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := map[string]any{"model": "chain/auto", "stream": false}
			msgs := tt.body["messages"].([]any)
			if sys, ok := tt.body["system"].(string); ok {
				msgs = append([]any{map[string]any{"role": "system", "content": sys}}, msgs...)
			}
			body["messages"] = msgs
			if tools, ok := tt.body["tools"]; ok {
				body["tools"] = tools
			}
			raw, err := json.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			tr := classified(t, s, raw)
			if tr.Mode != tt.mode {
				t.Errorf("mode %q, want %q (reasons %q)", tr.Mode, tt.mode, tr.Reasons)
			}
			for _, w := range tt.want {
				if !slices.Contains(tr.Reasons, w) {
					t.Errorf("reasons %q, want %q among them", tr.Reasons, w)
				}
			}
			for _, r := range tr.Reasons {
				if strings.HasPrefix(r, "length ") || strings.HasPrefix(r, "multi-part") {
					t.Errorf("reason %q: the client's scaffolding was judged", r)
				}
			}
		})
	}
}
