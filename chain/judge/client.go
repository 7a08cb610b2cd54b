package judge

import (
	"encoding/json"
	"strconv"
	"strings"

	"chainproxy/antiloop"
	"chainproxy/chain/node"
	"chainproxy/chain/trace"
	"chainproxy/tools"
)

// The anti-loop's judge of the calls a client's own tools receive: the
// proxy never runs them, so the conversation's earlier results are all it
// can judge a call by (package chain passes the verdicts on, in simple
// mode, and judges a chain's client calls as they come back).

// ClientJudgement is the anti-loop's verdict on one call to a client tool.
type ClientJudgement struct {
	// Status is trace.ToolOK (pass it on), trace.ToolDuplicate (the same call is
	// earlier in the batch) or trace.ToolBlocked (a loop: do not pass it on).
	Status string
	// Reason says why, for the trace and the model.
	Reason string
	// Earlier are the tool_call_ids of the earlier results of a loop.
	Earlier []string
}

// ClientHistory is what a conversation shows of the client-tool calls
// already made: the results of each call identity, oldest first.
type ClientHistory map[uint64][]clientResult

type clientResult struct {
	id, content string
}

// ClientHistoryOf reads the answered tool calls of msgs, keyed as
// ClientCalls keys them.
func ClientHistoryOf(msgs []node.Message, clientTools []node.Tool) ClientHistory {
	results := map[string]string{}
	for _, m := range msgs {
		if m.Role == "tool" && m.ToolCallID != "" {
			results[m.ToolCallID] = m.Content
		}
	}
	idf := ClientIdentities(clientTools)
	out := ClientHistory{}
	for _, m := range msgs {
		if m.Role != "assistant" {
			continue
		}
		for _, c := range m.ToolCalls {
			res, ok := results[c.ID]
			if !ok {
				continue
			}
			if sig, ok := idf.Hash(c); ok {
				out[sig] = append(out[sig], clientResult{id: c.ID, content: res})
			}
		}
	}
	return out
}

// ClientCalls applies the anti-loop to a batch of calls the client
// will execute. Client tools are volatile: a call already made runs again
// while its result changes, and is a loop when its last two results were
// the same, or once it ran maxPolls times. Identities fill in the tool
// schema's defaults and drop null optional fields, as for server tools.
// Calls whose arguments do not parse are passed on: the client's own
// validation answers them.
func ClientCalls(calls []node.ToolCall, clientTools []node.Tool, history ClientHistory, maxPolls int) []ClientJudgement {
	idf := ClientIdentities(clientTools)
	out := make([]ClientJudgement, len(calls))
	first := map[uint64]string{}
	for i, c := range calls {
		out[i].Status = trace.ToolOK
		sig, ok := idf.Hash(c)
		if !ok {
			continue
		}
		if id, dup := first[sig]; dup {
			out[i] = ClientJudgement{Status: trace.ToolDuplicate, Reason: "not passed on: same call as " + id + " earlier in this response"}
			continue
		}
		first[sig] = c.ID
		h := history[sig]
		ids := make([]string, len(h))
		for k, r := range h {
			ids[k] = r.id
		}
		switch n := len(h); {
		case n >= 2 && antiloop.ResultHash(h[n-1].content) == antiloop.ResultHash(h[n-2].content):
			// Compared as the chain compares client results: without the
			// lines that only name the run (Codex's chunk ID and wall
			// time, Qwen Code's PGID), which differ at every run.
			out[i] = ClientJudgement{Status: trace.ToolBlocked, Earlier: ids,
				Reason: "not passed on: the conversation already holds this call's result twice in a row, unchanged (" + strings.Join(ids[n-2:], ", ") + ")"}
		case n >= maxPolls:
			out[i] = ClientJudgement{Status: trace.ToolBlocked, Earlier: ids,
				Reason: "not passed on: this call already ran " + strconv.Itoa(n) + " times in this conversation (antiloop.max_polls)"}
		}
	}
	return out
}

// Identities key client-tool calls by tool name: a call's identity
// fills in its schema's defaults and drops null optional fields.
type Identities map[string]func([]byte) ([]byte, error)

// ClientIdentities are the identities of the client's tools.
func ClientIdentities(clientTools []node.Tool) Identities {
	out := make(Identities, len(clientTools))
	for _, t := range clientTools {
		out[t.Name] = tools.NewClientIdentity(t.Name, t.Parameters)
	}
	return out
}

// Hash is call c's identity, hashed; false when its arguments do not
// parse.
func (idf Identities) Hash(c node.ToolCall) (uint64, bool) {
	f, ok := idf[c.Name]
	if !ok {
		f = tools.NewClientIdentity(c.Name, nil)
	}
	b, err := f([]byte(c.Arguments))
	if err != nil {
		return 0, false
	}
	return antiloop.Hash(b), true
}

// ClientFileTool reports whether a client tool works on the client's files:
// one of its arguments names a path (path, file_path, filePath,
// absolute_path, dir_path, notebook_path, paths, directory, filename) or a
// shell command, which reads and writes them as well (Qwen Code's
// run_shell_command, Claude Code's Bash, Codex CLI's shell).
func ClientFileTool(t node.Tool) bool {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(t.Parameters, &s) != nil {
		return false
	}
	for k := range s.Properties {
		k = strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(k))
		switch {
		case strings.HasSuffix(k, "path"), strings.HasSuffix(k, "paths"),
			k == "directory", k == "dir", k == "filename", k == "command", k == "cmd":
			return true
		}
	}
	return false
}

// ClientError reads a client's tool result as a failure when it says so.
// OpenAI's tool messages carry no error flag, so the text tells: agent
// frameworks (LangChain's ToolMessage, the AI SDK) write a failed tool as
// text that starts with "Error", and so does the Anthropic front for a
// tool_result with is_error; Claude Code wraps its failures in
// <tool_use_error> (what a router hands on of them); Qwen Code's tool
// message for arguments its validator refused is the validator's text
// alone, "params must have required property 'file_path'" or
// "params/limit must be integer" (SchemaValidator.validate, Ajv's
// errorsText with dataVar "params", in the bundle of @qwen-code/qwen-code
// 0.24.4, web/testdata/agents/npm; on its Anthropic wire it sets is_error).
func ClientError(res string) bool {
	t := strings.TrimSpace(res)
	switch {
	case len(t) >= 5 && strings.EqualFold(t[:5], "error"),
		strings.HasPrefix(t, "<tool_use_error>"),
		strings.HasPrefix(t, "params must "), strings.HasPrefix(t, "params/") && strings.Contains(t, " must "),
		strings.HasPrefix(t, "Value of params must be an object"):
		return true
	}
	return false
}
