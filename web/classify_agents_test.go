package web

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"chainproxy/chain"
	"chainproxy/config"
)

// The requests in testdata/agents are what agent clients send (captured
// from Qwen Code and Codex CLI, built from the public sources of Claude
// Code, Cline, Roo Code, Aider and Cursor's prompt; testdata/agents/README.md
// says where each comes from). Each asks a trivial and an analytical
// question inside the client's scaffolding.
const (
	trivialQuestion    = "What is 2+2?"
	analyticalQuestion = "Compare goroutines with OS threads for a proxy that holds 10k idle connections, and explain why one scales better."
	// Qwen Code's analytical capture asks its own question.
	qwenAnalytical = "Read README.md, then compare its design with a stateless one and explain why the Redis sessions matter for scaling, step by step."
	// qwenMemory is the reason of Qwen Code's memory extraction request.
	qwenMemory = "Qwen Code's memory extraction request: the client's own work, not the user's words"
	// qwenDream is the reason of Qwen Code's memory dream request.
	qwenDream = "Qwen Code's memory dream request: the client's own work, not the user's words"
	// qwenNextSpeaker is the reason of Qwen Code's next-speaker check.
	qwenNextSpeaker = "Qwen Code's next-speaker check request: the client's own work, not the user's words"
)

// agentRequest reads a request of testdata/agents as a non-streamed Chat
// Completions body. Codex CLI speaks only the Responses API
// (*.responses.json): its input messages carry over as they are (their
// input_text parts are Chat Completions content parts here), with its
// function tools; the hosted tools it adds are left out.
func agentRequest(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "agents", name))
	if err != nil {
		t.Fatal(err)
	}
	var req map[string]any
	if err := json.Unmarshal(raw, &req); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if strings.HasSuffix(name, ".responses.json") {
		var msgs []any
		for _, it := range req["input"].([]any) {
			it := it.(map[string]any)
			if it["type"] == "message" {
				msgs = append(msgs, map[string]any{"role": it["role"], "content": it["content"]})
			}
		}
		var tools []any
		for _, tl := range req["tools"].([]any) {
			tl := tl.(map[string]any)
			if tl["type"] == "function" {
				tools = append(tools, map[string]any{"type": "function", "function": map[string]any{
					"name": tl["name"], "description": tl["description"], "parameters": tl["parameters"]}})
			}
		}
		req = map[string]any{"model": req["model"], "messages": msgs, "tools": tools}
	}
	req["stream"] = false
	delete(req, "stream_options")
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// classified posts body to chain/auto and returns the trace the answer
// carries.
func classified(t *testing.T, s *testServer, body []byte) chain.Trace {
	t.Helper()
	resp := s.post(t, "/v1/chat/completions", string(body))
	out := readAll(t, resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, out)
	}
	var doc struct {
		Chain chain.Trace `json:"chain"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("answer: %v", err)
	}
	if got := resp.Header.Get("X-Chain-Mode"); got != doc.Chain.Mode {
		t.Errorf("X-Chain-Mode = %q, trace mode %q", got, doc.Chain.Mode)
	}
	return doc.Chain
}

// owui is the reason of one of Open WebUI's background requests.
func owui(task string) string {
	return "Open WebUI's " + task + " request: the client's own work, not the user's words"
}

func TestAgentClientsClassified(t *testing.T) {
	s := newTestServer(t, testConfig, func(c *config.Config) { c.Server.MaxBodyBytes = 1 << 20 })
	quote := func(q string) string {
		if r := []rune(q); len(r) > 80 {
			q = strings.TrimRight(string(r[:80]), " ") + "…"
		}
		return `text judged: "` + q + `"`
	}
	tests := []struct {
		file string
		mode string
		want []string // reasons the trace must hold, besides the verdict
	}{
		// Qwen Code puts four <system-reminder> parts (skills, the
		// environment, deferred tools, the date) beside the question.
		{"qwen-code-trivial.json", chain.ModeSimple, []string{quote(trivialQuestion), "ignored 4 <system-reminder> blocks, 9.0 KB"}},
		{"qwen-code-analytical.json", chain.ModeReflexive, []string{quote(qwenAnalytical), "ignored 4 <system-reminder> blocks, 9.0 KB"}},
		// Its follow-ups carry a tool result: same words, same mode.
		{"qwen-code-trivial-tool-result.json", chain.ModeSimple, []string{quote(trivialQuestion)}},
		{"qwen-code-analytical-tool-result.json", chain.ModeReflexive, []string{quote(qwenAnalytical)}},
		// After a turn Qwen Code asks, on its own, for its memory to be
		// updated: the user's question is in the history, the newest
		// user message is Qwen Code's. Simple, whatever the question was.
		{"qwen-code-memory-trivial.json", chain.ModeSimple, []string{qwenMemory}},
		{"qwen-code-memory-analytical.json", chain.ModeSimple, []string{qwenMemory}},
		// After five sessions it also consolidates the memory in the
		// background, an agent of its own: its system prompt, then the task
		// ("Memory directory: …") as the one user message.
		{"qwen-code-dream.json", chain.ModeSimple, []string{qwenDream}},
		// Its chat compression, when the window is nearly full and the
		// provider caches prefixes: the conversation, then the compression
		// prompt and its directive as the newest user message.
		{"qwen-code-compress.json", chain.ModeSimple, []string{"Qwen Code's chat compression request: the client's own work, not the user's words"}},
		// With model.skipNextSpeakerCheck off, after a turn without tool
		// calls it asks whether the model should go on: "Analyze …", a
		// numbered list of rules. Simple, not a chain.
		{"qwen-code-next-speaker.json", chain.ModeSimple, []string{qwenNextSpeaker}},
		// Codex CLI: AGENTS.md and <environment_context> in the user
		// message before the prompt, which is judged alone.
		{"codex-trivial.responses.json", chain.ModeSimple, []string{quote(trivialQuestion)}},
		{"codex-analytical.responses.json", chain.ModeReflexive, []string{quote(analyticalQuestion)}},
		// Its compaction with a provider other than OpenAI's: the
		// conversation, then its checkpoint prompt as a user message.
		{"codex-compact.responses.json", chain.ModeSimple, []string{"Codex CLI's compaction request: the client's own work, not the user's words"}},
		// Claude Code: context and todo reminders around the question.
		{"claude-code-trivial.json", chain.ModeSimple, []string{quote(trivialQuestion), "ignored 2 <system-reminder> blocks, 1.2 KB"}},
		{"claude-code-analytical.json", chain.ModeReflexive, []string{quote(analyticalQuestion), "ignored 2 <system-reminder> blocks, 1.2 KB"}},
		// Its compaction, asked of the main model when the context fills
		// up: the conversation, then "CRITICAL: Respond with TEXT ONLY. Do
		// NOT call any tools." and the summary's sections. Simple: the
		// chain's first stage would call tools, which Claude Code rejects.
		{"claude-code-compact.json", chain.ModeSimple, []string{"Claude Code's compaction request: the client's own work, not the user's words"}},
		// Cline 3: <task> and <environment_details>; a tool result comes
		// back as a user message, passed over for the task.
		{"cline-trivial.json", chain.ModeSimple, []string{quote(trivialQuestion), "ignored 1 <environment_details> block, 416 B"}},
		{"cline-analytical.json", chain.ModeReflexive, []string{quote(analyticalQuestion), "ignored 1 <environment_details> block, 416 B"}},
		{"cline-trivial-tool-result.json", chain.ModeSimple, []string{quote(trivialQuestion), "skipped 1 later user message with no words of the user's (tool result)"}},
		{"cline-analytical-tool-result.json", chain.ModeReflexive, []string{quote(analyticalQuestion), "skipped 1 later user message with no words of the user's (tool result)"}},
		// Roo Code: <user_message> and <environment_details>.
		{"roo-code-trivial.json", chain.ModeSimple, []string{quote(trivialQuestion), "ignored 1 <environment_details> block, 530 B"}},
		{"roo-code-analytical.json", chain.ModeReflexive, []string{quote(analyticalQuestion), "ignored 1 <environment_details> block, 530 B"}},
		// Its context condensing: SUMMARY_PROMPT as the system message,
		// the conversation, then a fixed request.
		{"roo-code-condense.json", chain.ModeSimple, []string{"Roo Code's context condensing request: the client's own work, not the user's words"}},
		// Aider (reminder: user, its default): its edit rules after the
		// question, no tags; the repository map and files are earlier
		// user messages.
		{"aider-trivial.json", chain.ModeSimple, []string{quote(trivialQuestion), "ignored 1 Aider's rules block, 2.0 KB"}},
		{"aider-analytical.json", chain.ModeReflexive, []string{quote(analyticalQuestion), "ignored 1 Aider's rules block, 2.0 KB"}},
		// Its own requests, known by their system prompts: the chat
		// history summarized once it grows long (the transcript, with the
		// analytical question, as the user message), and a commit message
		// after each edit (the diff as the user message).
		{"aider-summary.json", chain.ModeSimple, []string{"Aider's chat summary request: the client's own work, not the user's words"}},
		{"aider-commit.json", chain.ModeSimple, []string{"Aider's commit message request: the client's own work, not the user's words"}},
		// Continue: each @-mention a text part before the question's.
		{"continue-trivial.json", chain.ModeSimple, []string{quote(trivialQuestion), "ignored the text parts before the last (attached context), 502 B"}},
		{"continue-analytical.json", chain.ModeReflexive, []string{quote(analyticalQuestion), "ignored the text parts before the last (attached context), 502 B"}},
		// Open WebUI's own requests, made beside the chat (title, tags,
		// follow-ups, search queries, …): a task prompt with the chat,
		// analytical question included, as its history. Simple: their
		// answer is a small JSON object the UI parses.
		{"open-webui-title.json", chain.ModeSimple, []string{owui("title generation")}},
		{"open-webui-tags.json", chain.ModeSimple, []string{owui("tags generation")}},
		{"open-webui-follow-ups.json", chain.ModeSimple, []string{owui("follow-up suggestions")}},
		{"open-webui-queries.json", chain.ModeSimple, []string{owui("search query generation")}},
		{"open-webui-autocomplete.json", chain.ModeSimple, []string{owui("autocompletion")}},
		{"open-webui-image-prompt.json", chain.ModeSimple, []string{owui("image prompt generation")}},
		{"open-webui-emoji.json", chain.ModeSimple, []string{owui("emoji generation")}},
		// A chat with files: its RAG template and the retrieved
		// documents before the user's words, in the same message. The
		// words are judged, the context set aside.
		{"open-webui-rag-trivial.json", chain.ModeSimple, []string{`text judged: "What is the deadline?"`, "ignored 1 Open WebUI's retrieved context block, 1.7 KB"}},
		{"open-webui-rag-analytical.json", chain.ModeReflexive, []string{quote(analyticalQuestion), "ignored 1 Open WebUI's retrieved context block, 1.7 KB"}},
		// A chat with the code interpreter on (function calling not
		// native): its prompt appended to the user's words.
		{"open-webui-code-interpreter.json", chain.ModeSimple, []string{quote(trivialQuestion), "ignored 1 Open WebUI's code interpreter prompt block, 687 B"}},
		// Its tool selection (function calling "Default"): the template
		// with the tools as the system message, the user's question after
		// "Query: " in the user message. Simple, though the question is
		// analytical: Open WebUI wants a JSON object naming tools.
		{"open-webui-tool-selection.json", chain.ModeSimple, []string{owui("tool selection")}},
		// LibreChat's title, asked of the chat's model after the first
		// answer: "Analyze this conversation …" with the chat below.
		{"librechat-title.json", chain.ModeSimple, []string{"LibreChat's title generation request: the client's own work, not the user's words"}},
		{"librechat-title-completion.json", chain.ModeSimple, []string{"LibreChat's title generation request: the client's own work, not the user's words"}},
		// Its chat title: a fixed prompt, then the user's first message.
		{"continue-title.json", chain.ModeSimple, []string{"Continue's chat title request: the client's own work, not the user's words"}},
		// Zed's thread title: the conversation, then its prompt as an
		// added user message.
		{"zed-title.json", chain.ModeSimple, []string{"Zed's thread title request: the client's own work, not the user's words"}},
		// OpenHands' condensation: its prompt and the events to forget,
		// the user's analytical request among them, as one user message.
		{"openhands-condense.json", chain.ModeSimple, []string{"OpenHands' condensation request: the client's own work, not the user's words"}},
		// Cursor-style: the editor's context, then <user_query>.
		{"cursor-trivial.json", chain.ModeSimple, []string{quote(trivialQuestion), "ignored 1 <user_info> block, 155 B"}},
		{"cursor-analytical.json", chain.ModeReflexive, []string{quote(analyticalQuestion), "ignored 1 <user_info> block, 155 B"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			tr := classified(t, s, agentRequest(t, tt.file))
			if tr.Mode != tt.mode {
				t.Errorf("%s: mode %q, want %q (reasons %q)", tt.file, tr.Mode, tt.mode, tr.Reasons)
			}
			for _, w := range tt.want {
				if !slices.Contains(tr.Reasons, w) {
					t.Errorf("%s: reasons %q, want %q among them", tt.file, tr.Reasons, w)
				}
			}
			for _, r := range tr.Reasons {
				if strings.HasPrefix(r, "length ") || strings.HasPrefix(r, "multi-part") {
					t.Errorf("%s: reason %q: the client's scaffolding was judged", tt.file, r)
				}
			}
		})
	}
}

// TestQwenCodeDreamOneNode: Qwen Code's memory dream, sent in the background
// to chain/auto with its tools, is answered by one node, not the chain, and
// the traces list names it rather than its task's first line ("Memory
// directory: …").
func TestQwenCodeDreamOneNode(t *testing.T) {
	s := newTestServer(t, testConfig, func(c *config.Config) { c.Server.MaxBodyBytes = 1 << 20 })
	tr := classified(t, s, agentRequest(t, "qwen-code-dream.json"))
	if tr.Mode != chain.ModeSimple || len(tr.Stages) != 1 {
		t.Fatalf("mode %q, %d stages (reasons %q), want simple, one node", tr.Mode, len(tr.Stages), tr.Reasons)
	}
	if !slices.Contains(tr.Reasons, qwenDream) {
		t.Errorf("reasons %q, want %q among them", tr.Reasons, qwenDream)
	}
	resp, err := http.Get(s.URL + "/v1/chain/traces")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list traceList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Data) != 1 {
		t.Fatalf("list %+v, err %v", list, err)
	}
	if got, want := list.Data[0].Question, "(Qwen Code's memory dream request)"; got != want {
		t.Errorf("listed as %q, want %q", got, want)
	}
}
