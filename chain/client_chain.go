package chain

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"chainproxy/antiloop"
	"chainproxy/chain/judge"
	"chainproxy/tools"
)

// clientPassed is the trace's result of a call passed to the client.
const clientPassed = "passed to the client to run; its result comes with the next request"

// pendingCall is a client tool call passed back to the client. Use is its
// index in the stage's ToolsUsed, updated when the result comes back.
type pendingCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Args string `json:"args"`
	Use  int    `json:"use"`
	Sig  uint64 `json:"sig"`
}

// clientNames is the set of the request's client tool names, made once.
func (r *run) clientNames() map[string]bool {
	if r.client == nil {
		r.client = make(map[string]bool, len(r.req.ClientTools))
		for _, t := range r.req.ClientTools {
			r.client[t.Name] = true
		}
	}
	return r.client
}

// stageTools is what a stage with tools is offered: the server tools and,
// in the reflexive chain, the client's tools beside them, less the server
// tools they hide (hiddenTools). tool_choice "none" keeps the client's
// tools out; "required" and a named function bind one model's answer,
// which in the chain no stage gives alone, so they offer the tools as
// "auto" does. In simple mode the client's tools replace the server's
// (clientTurns).
func (r *run) stageTools() []Tool {
	if r.clientOnly {
		return r.req.ClientTools
	}
	if !r.offersClientTools() {
		return r.tv.specs
	}
	hidden := r.hiddenTools()
	out := make([]Tool, 0, len(r.tv.specs)+len(r.req.ClientTools))
	for _, t := range r.tv.specs {
		if !hidden[t.Name] {
			out = append(out, t)
		}
	}
	return append(out, r.req.ClientTools...)
}

// offersClientTools reports whether the stages with tools are offered the
// client's tools beside the server's: in the reflexive chain, unless
// tool_choice is "none".
func (r *run) offersClientTools() bool {
	return r.trace.Mode == ModeReflexive && len(r.req.ClientTools) > 0 && r.req.ToolChoice.Mode != "none"
}

// hiddenTools is the set of server tools the request's client tools keep
// from the chain's stages, made once: each one a client tool of the same
// name replaces and, once a client tool works on files (judge.ClientFileTool),
// every built-in file tool, unless tools.file_tools_with_client_tools.
// The client's tools work on the client's machine, the built-ins on the
// proxy's tools.root: a stage offered both lists one folder and reads
// another, and answers from the two mixed. A hidden tool is not offered,
// and a call to it is refused as one to an unknown tool (hiddenCall).
func (r *run) hiddenTools() map[string]bool {
	if r.hidden != nil || !r.offersClientTools() {
		return r.hidden
	}
	client := r.clientNames()
	files := !r.e.cfg.Tools.FileToolsWithClientTools && slices.ContainsFunc(r.req.ClientTools, judge.ClientFileTool)
	r.hidden = make(map[string]bool, len(r.tv.names))
	for _, n := range r.tv.names {
		if client[n] || files && builtinFileTool(n) {
			r.hidden[n] = true
		}
	}
	return r.hidden
}

// hiddenCall reports whether a call of the chain names a server tool the
// client's tools hide: it is not run, whatever the model knows of it.
func (r *run) hiddenCall(name string) bool {
	return r.hiddenTools()[name] && !r.clientNames()[name]
}

// builtinFileTool reports whether name is one of the built-in file tools,
// which work on tools.root. No HTTP tool may take their names, and MCP
// tools are prefixed.
func builtinFileTool(name string) bool {
	return name == tools.ListDir || name == tools.ReadFile || name == tools.SearchFiles
}

// offeredNames names the tools a stage with tools is offered, for its
// prompt.
func (r *run) offeredNames() []string {
	if !r.offersClientTools() {
		return r.tv.names
	}
	offered := r.stageTools()
	names := make([]string, len(offered))
	for i, t := range offered {
		names[i] = t.Name
	}
	return names
}

// clientToolReasons says, for the trace, which client tools the chain
// offers and which server tools they hide.
func (r *run) clientToolReasons() []string {
	if len(r.req.ClientTools) == 0 {
		return nil
	}
	if r.req.ToolChoice.Mode == "none" {
		return []string{"client tools not offered: tool_choice none"}
	}
	names := make([]string, len(r.req.ClientTools))
	for i, t := range r.req.ClientTools {
		names[i] = t.Name
	}
	out := []string{"client tools offered to the stages with tools: " + strings.Join(names, ", ")}
	client, hidden := r.clientNames(), r.hiddenTools()
	var files []string
	for _, n := range r.tv.names {
		switch {
		case client[n]:
			out = append(out, "client tool "+n+" replaces the server tool "+n+" for this request")
		case hidden[n]:
			files = append(files, n)
		}
	}
	if len(files) > 0 {
		// Named whole, the replaced one included: the family goes together.
		var all []string
		for _, n := range r.tv.names {
			if builtinFileTool(n) {
				all = append(all, n)
			}
		}
		out = append(out, "the client's tools work on its own files: the server's file tools "+strings.Join(all, ", ")+" are not offered (tools.file_tools_with_client_tools)")
	}
	return out
}

// hasClientCalls reports whether a turn of the reflexive chain asked for a
// client tool.
func (r *run) hasClientCalls(calls []ToolCall) bool {
	if !r.offersClientTools() {
		return false
	}
	client := r.clientNames()
	for _, c := range calls {
		if client[c.Name] {
			return true
		}
	}
	return false
}

// clientSeen is what a stage knows of one client call identity: how many
// results came back for it, and the hash of the last one.
type clientSeen struct {
	Runs int    `json:"runs"`
	Hash uint64 `json:"hash"`
}

// clientBatch handles a turn whose calls include client tools, the turn's
// assistant message being the last of s.msgs. The server calls run first;
// the client calls that pass the format and batch checks are left in
// s.awaiting for the client. Client tools are volatile (the weather
// changes), and follow the anti-loop's rule for them (judge.ClientCalls in
// simple mode): calls are known by their identity (schema defaults filled
// in, null optional fields dropped); a call the stage already made in an
// earlier round trip goes to the client again, and stops the stage as a
// repeat only if its result comes back the same (clientResults); one that
// already ran antiloop.max_polls times in the stage is refused. A duplicate
// within the batch is dropped from the assistant message (the client would
// run it twice); a refused call gets a tool message saying why, so the
// conversation stays well-formed. A turn in which nothing went to the
// client or ran counts toward stopped_no_progress (progress).
func (r *run) clientBatch(ctx context.Context, s *stage, calls []ToolCall) error {
	client := r.clientNames()
	at := len(s.msgs) - 1 // the turn's assistant message
	var server []ToolCall
	for _, c := range calls {
		if !client[c.Name] {
			server = append(server, c)
		}
	}
	if len(server) > 0 {
		results, err := r.execBatch(ctx, s, server)
		if err != nil {
			return err
		}
		s.msgs = append(s.msgs, results...)
	}
	asked := &s.msgs[at]
	first := len(s.st.ToolsUsed) // the turn's client calls
	kept := asked.ToolCalls[:0:0]
	firstOf := map[uint64]bool{}
	idf := judge.ClientIdentities(r.req.ClientTools)
	var blocked []Message
	for _, c := range asked.ToolCalls {
		if !client[c.Name] {
			kept = append(kept, c)
			continue
		}
		u := ToolUse{Name: c.Name, Args: r.traceArgs(c.Arguments), Client: true, StartMS: time.Since(r.t0).Milliseconds()}
		sig, ok := idf.Hash(c)
		switch {
		case s.stop != "":
			u.Status, u.Result = ToolBlocked, "not passed to the client: the stage stopped ("+s.stop+")"
		case r.e.cfg.Tools.MaxArgsBytes > 0 && len(c.Arguments) > r.e.cfg.Tools.MaxArgsBytes:
			u.Status, u.Result = ToolError, argsTooLong(c.Name, r.e.cfg.Tools.MaxArgsBytes)
			s.fmtErrs++
			if s.fmtErrs >= r.e.cfg.Antiloop.MaxFormatErrors {
				s.stop = StageStoppedFormatErrors
			}
		case !ok:
			u.Status, u.Result = ToolError, "error: the arguments are not valid JSON. Call "+c.Name+" again with a JSON object that matches its schema."
			s.fmtErrs++
			if s.fmtErrs >= r.e.cfg.Antiloop.MaxFormatErrors {
				s.stop = StageStoppedFormatErrors
			}
		case firstOf[sig]:
			u.Status, u.Result = ToolDuplicate, "not passed to the client: same call twice in one turn"
		case s.clientRes[sig].Runs >= r.e.cfg.Antiloop.MaxPolls:
			s.fmtErrs = 0
			u.Status, u.Result = ToolBlocked, pollsNote(s.clientRes[sig].Runs)
		case r.req.ClientCallID != "" && len(s.awaiting) > 0:
			// The client can run one call a turn (RunRequest.ClientCallID):
			// the model is told to ask again, rather than left waiting for a
			// result that cannot come.
			s.fmtErrs = 0
			u.Status, u.Result = ToolBlocked, "not passed to the client: it takes one call a turn; call "+c.Name+" again after this turn's result"
		default:
			s.fmtErrs = 0
			firstOf[sig] = true
			u.Status, u.Result = ToolClient, clientPassed
			c.ID = cmp.Or(r.req.ClientCallID, newCallID())
			s.awaiting = append(s.awaiting, pendingCall{ID: c.ID, Name: c.Name, Args: c.Arguments, Use: len(s.st.ToolsUsed), Sig: sig})
		}
		switch u.Status {
		case ToolClient:
			kept = append(kept, c)
		case ToolDuplicate:
		default:
			kept = append(kept, c)
			blocked = append(blocked, Message{Role: "tool", ToolCallID: c.ID, Name: c.Name, Content: u.Result})
			s.evidence = append(s.evidence, evidence{name: c.Name, args: string(u.Args), status: u.Status, result: u.Result})
		}
		s.st.ToolsUsed = append(s.st.ToolsUsed, u)
		if s.span != nil {
			now := time.Now()
			r.toolSpan(s, c.ID, &u, now, now)
		}
		tu := u
		if err := r.emit(Event{Kind: EventTool, Stage: s.idx, Node: s.node.Name, Turn: s.st.Turns, ToolUse: &tu}); err != nil {
			return err
		}
	}
	asked.ToolCalls = kept
	s.msgs = append(s.msgs, blocked...)
	if s.stop != "" && len(s.awaiting) > 0 {
		// A later call of the batch stopped the stage: none goes out.
		for _, p := range s.awaiting {
			u := &s.st.ToolsUsed[p.Use]
			u.Status, u.Result = ToolBlocked, "not passed to the client: the stage stopped ("+s.stop+")"
			s.msgs = append(s.msgs, Message{Role: "tool", ToolCallID: p.ID, Name: p.Name, Content: u.Result})
		}
		s.awaiting = nil
	}
	if len(server) == 0 && len(s.awaiting) == 0 {
		// Nothing went to the client and nothing ran: the turn is over, and
		// counts toward stopped_no_progress as a turn of refused server
		// calls does, so that a model asking again and again for a call
		// refused past max_polls stops after three turns, not at its budget.
		// A turn with server calls was counted by execBatch.
		progress(s, s.st.ToolsUsed[first:])
	}
	r.trace.Stages[s.idx] = s.st
	return nil
}

// clientResults feeds the results the client sent back (the tool messages
// of its follow-up) to the resumed stage. A call the client did not answer
// gets an error result rather than a malformed conversation.
func (r *run) clientResults(s *stage, pending []pendingCall, msgs []Message) error {
	sent := map[string]string{}
	for _, m := range msgs {
		if m.Role == "tool" {
			sent[m.ToolCallID] = m.Content
		}
	}
	cfg := r.e.cfg.Tools
	for _, p := range pending {
		res, ok := sent[p.ID]
		if !ok {
			res = "error: the client sent no result for this call"
		}
		u := &s.st.ToolsUsed[p.Use]
		u.Status = ToolOK
		// The round trip: from the call passed to the client to its
		// result, in the chain's first request's time (resume).
		u.DurationMS = time.Since(r.t0).Milliseconds() - u.StartMS
		if judge.ClientError(res) || r.missesRequired(p) {
			u.Status = ToolError
		}
		if s.clientRes == nil {
			s.clientRes = map[uint64]clientSeen{}
		}
		// Hashed without the lines that only name the run (Codex's chunk ID
		// and wall time, Qwen Code's PGID): two runs that found the same
		// thing are the same result.
		h := antiloop.ResultHash(res)
		prev, ok := s.clientRes[p.Sig]
		if ok && prev.Hash == h && s.stop == "" {
			// The same call gave the same result again: the stage learns
			// nothing more from it, and stops as on a server repeat.
			s.stop = StageStoppedRepeat
			res += "\n\n[the same call returned the same result before in this stage; the stage stops here]"
		}
		s.clientRes[p.Sig] = clientSeen{Runs: prev.Runs + 1, Hash: h}
		if u.Status == ToolOK && !emptyResult(res) {
			// A result is progress: the refused turns before it do not
			// add up with those after it.
			s.idle = 0
		}
		model := tools.Truncate(res, cfg.MaxResultBytes)
		u.Result = tools.Truncate(res, cfg.TraceResultBytes)
		s.msgs = append(s.msgs, Message{Role: "tool", ToolCallID: p.ID, Name: p.Name, Content: model})
		s.evidence = append(s.evidence, evidence{name: p.Name, args: string(u.Args), status: u.Status, result: model})
		if s.span != nil {
			r.toolSpan(s, p.ID, u, r.t0.Add(time.Duration(u.StartMS)*time.Millisecond), time.Now())
		}
		tu := *u
		if err := r.emit(Event{Kind: EventTool, Stage: s.idx, Node: s.node.Name, Turn: s.st.Turns, ToolUse: &tu}); err != nil {
			return err
		}
	}
	r.trace.Stages[s.idx] = s.st
	return nil
}

// missesRequired reports whether a call passed to the client lacked an
// argument its tool's schema requires: whatever the client's text says,
// no client ran it.
func (r *run) missesRequired(p pendingCall) bool {
	i := slices.IndexFunc(r.req.ClientTools, func(t Tool) bool { return t.Name == p.Name })
	if i < 0 {
		return false
	}
	var schema struct {
		Required []string `json:"required"`
	}
	var args map[string]json.RawMessage
	if json.Unmarshal(r.req.ClientTools[i].Parameters, &schema) != nil || len(schema.Required) == 0 || json.Unmarshal([]byte(p.Args), &args) != nil {
		return false
	}
	for _, k := range schema.Required {
		if _, ok := args[k]; !ok {
			return true
		}
	}
	return false
}

// newCallID issues the ID of a client call, unless the caller names it
// (RunRequest.ClientCallID). The proxy issues its own rather than passing
// the upstream's: Ollama's and the text-call IDs repeat across requests,
// and the ID is what finds the chain to resume.
func newCallID() string {
	var b [12]byte
	rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}

// awaitingResult ends the response at stage s, which waits for the client's
// tool results: the stage is marked awaiting_client, what resumption needs
// is saved, and the answer is the client's tool calls.
func (r *run) awaitingResult(ctx context.Context, s *stage, done []*stage, cfgIdx int) (*Result, error) {
	s.st.Status = StageAwaitingClient
	s.st.DurationMS = time.Since(s.started).Milliseconds()
	r.trace.Stages[s.idx] = s.st
	r.endStageSpan(s)
	st := s.st
	if err := r.emit(Event{Kind: EventStageEnd, Stage: s.idx, Node: s.node.Name, Model: s.node.Model, StageTrace: &st}); err != nil {
		return nil, err
	}
	r.save(ctx, s, done, cfgIdx)
	msg := Message{Role: "assistant"}
	for _, p := range s.awaiting {
		msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: p.ID, Name: p.Name, Arguments: p.Args})
	}
	if s.answers && r.streamed {
		// The answering stage's text of this turn already reached the client.
		msg.Content = s.msgs[len(s.msgs)-1-r.toolMessagesAfter(s)].Content
	}
	return &Result{Message: msg, FinishReason: "tool_calls", Trace: r.trace, Upstream: r.upstream}, nil
}

// toolMessagesAfter counts the tool messages that end s.msgs, after the
// turn's assistant message.
func (r *run) toolMessagesAfter(s *stage) int {
	n := 0
	for i := len(s.msgs) - 1; i >= 0 && s.msgs[i].Role == "tool"; i-- {
		n++
	}
	return n
}
