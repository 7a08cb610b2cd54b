package chain

import (
	"strconv"
	"strings"

	"chainproxy/antiloop"
	"chainproxy/tools"
)

// ClientJudgement is the anti-loop's verdict on one call to a client tool.
type ClientJudgement struct {
	// Status is ToolOK (pass it on), ToolDuplicate (the same call is
	// earlier in the batch) or ToolBlocked (a loop: do not pass it on).
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
// JudgeClientCalls keys them.
func ClientHistoryOf(msgs []Message, clientTools []Tool) ClientHistory {
	results := map[string]string{}
	for _, m := range msgs {
		if m.Role == "tool" && m.ToolCallID != "" {
			results[m.ToolCallID] = m.Content
		}
	}
	idf := clientIdentities(clientTools)
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
			if sig, ok := idf.hash(c); ok {
				out[sig] = append(out[sig], clientResult{id: c.ID, content: res})
			}
		}
	}
	return out
}

// JudgeClientCalls applies the anti-loop to a batch of calls the client
// will execute. Client tools are volatile: a call already made runs again
// while its result changes, and is a loop when its last two results were
// the same, or once it ran maxPolls times. Identities fill in the tool
// schema's defaults and drop null optional fields, as for server tools.
// Calls whose arguments do not parse are passed on: the client's own
// validation answers them.
func JudgeClientCalls(calls []ToolCall, clientTools []Tool, history ClientHistory, maxPolls int) []ClientJudgement {
	idf := clientIdentities(clientTools)
	out := make([]ClientJudgement, len(calls))
	first := map[uint64]string{}
	for i, c := range calls {
		out[i].Status = ToolOK
		sig, ok := idf.hash(c)
		if !ok {
			continue
		}
		if id, dup := first[sig]; dup {
			out[i] = ClientJudgement{Status: ToolDuplicate, Reason: "not passed on: same call as " + id + " earlier in this response"}
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
			out[i] = ClientJudgement{Status: ToolBlocked, Earlier: ids,
				Reason: "not passed on: the conversation already holds this call's result twice in a row, unchanged (" + strings.Join(ids[n-2:], ", ") + ")"}
		case n >= maxPolls:
			out[i] = ClientJudgement{Status: ToolBlocked, Earlier: ids,
				Reason: "not passed on: this call already ran " + strconv.Itoa(n) + " times in this conversation (antiloop.max_polls)"}
		}
	}
	return out
}

// identities keys client-tool calls by tool name.
type identities map[string]func([]byte) ([]byte, error)

func clientIdentities(clientTools []Tool) identities {
	out := make(identities, len(clientTools))
	for _, t := range clientTools {
		out[t.Name] = tools.NewClientIdentity(t.Name, t.Parameters)
	}
	return out
}

func (idf identities) hash(c ToolCall) (uint64, bool) {
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
