// Package trace is the record of what the chain did for one request: the
// Trace (the public "chain" field of responses, and the document GET
// /v1/chain/traces/{id} answers with), its statuses, the events that
// report it as it is written, the view a response carries (capped, without
// prompts) and the stored document.
//
// It lives apart from the engine because its readers are not the engine:
// web encodes it and lists it, proxy eval stores it, the cockpit reads its
// JSON, and none of them needs the engine's workings to do so. Its JSON
// shape is a contract with clients and the cockpit. It imports only the
// node layer's message vocabulary and tools' truncation (for Args);
// package chain fills it in, and names its types too (chain.Trace), since
// the engine's API is written in them.
package trace

import (
	"encoding/json"
	"strings"
	"time"

	"chainproxy/chain/node"
	"chainproxy/tools"
)

// Modes of a request.
const (
	ModeSimple    = "simple"
	ModeReflexive = "reflexive"
)

// Stage statuses in a trace.
const (
	StageOK                  = "ok"
	StageStoppedRepeat       = "stopped_repeat"
	StageStoppedBudget       = "stopped_budget"
	StageStoppedFormatErrors = "stopped_format_errors"
	StageSkippedOffline      = "skipped_offline"
	StageFailed              = "failed"
	// StageDegenerate: the stage answered, but emptily, in a repetition
	// loop, or by copying an earlier stage's answer (see the stage's error).
	StageDegenerate = "degenerate"
)

// StageSkippedContext is the status of a stage whose node's window cannot
// take even the parts of the prompt always kept (instructions, the user's
// question, the latest turn): the next stage goes on without it.
const StageSkippedContext = "skipped_context"

// StageStoppedNoProgress is the status of a stage stopped after several
// turns in a row whose calls all failed, were refused or repeats, or
// returned nothing.
const StageStoppedNoProgress = "stopped_no_progress"

// StageAwaitingClient is the status of a stage that called the client's
// tools: the response ends there and the chain resumes in that stage when
// the client sends the results back.
const StageAwaitingClient = "awaiting_client"

// Tool call statuses in a trace.
const (
	ToolOK        = "ok"
	ToolError     = "error"
	ToolDuplicate = "duplicate"
	ToolCached    = "cached"
	ToolBlocked   = "blocked"
)

// ToolClient is the status of a client tool call passed back to the client
// and not yet answered.
const ToolClient = "client"

// Trace is what the chain did for one request: the public "chain" field of
// responses. Its JSON shape is a contract with clients and the cockpit.
type Trace struct {
	Mode    string       `json:"mode"`
	Reasons []string     `json:"reasons"`
	Turns   int          `json:"turns"`
	Stages  []StageTrace `json:"stages"`
}

// StageTrace is one stage of a Trace.
type StageTrace struct {
	Node   string `json:"node"`
	Model  string `json:"model"`
	Turns  int    `json:"turns"`
	Status string `json:"status"`
	// StartMS is when the stage started, in milliseconds from the start of
	// the request that ran it: with DurationMS, its place on a timeline.
	StartMS    int64      `json:"start_ms"`
	DurationMS int64      `json:"duration_ms"`
	Usage      node.Usage `json:"usage"`
	ToolsUsed  []ToolUse  `json:"tools_used"`
	// Calls are the stage's model calls, in order: where its time went.
	Calls []ModelCall `json:"calls,omitempty"`
	// Context says how the stage's prompts were fitted to its node's
	// window; nil when the window is unknown and nothing was measured.
	Context *ContextTrace `json:"context,omitempty"`
	// Tools says how the stage's tools were fitted to its node's window:
	// how many were offered, which were withheld and why, which
	// find_tools found (package chain, toolfit.go).
	ToolFit *ToolsTrace `json:"tool_fit,omitempty"`
	// Output is the text the stage produced: OL1's notes, M1's synthesis,
	// the answering stage's answer.
	Output string `json:"output"`
	// Reasoning is the node's thinking text, when it gives one.
	Reasoning string `json:"reasoning,omitempty"`
	// Cut says what a response left out of Output and Reasoning (see
	// Trace.Capped); the stored trace has them whole.
	Cut string `json:"cut,omitempty"`
	// Error says why a stage failed or was skipped.
	Error string `json:"error,omitempty"`
	// FinishReason is why the upstream ended the stage's last model call
	// ("stop", "length", "tool_calls", "content_filter"): only the
	// answering stage's reaches the client's finish_reason, so an earlier
	// stage cut at its token limit shows here.
	FinishReason string `json:"finish_reason,omitempty"`
}

// ToolUse is one tool call of a stage.
type ToolUse struct {
	Name string `json:"name"`
	// Args are the call's arguments: the JSON object when they parsed, else
	// the raw text as a JSON string.
	Args       json.RawMessage `json:"args"`
	Status     string          `json:"status"`
	Result     string          `json:"result"`
	StartMS    int64           `json:"start_ms"`
	DurationMS int64           `json:"duration_ms"`
	// Client marks a call of one of the client's tools: its duration is
	// the round trip to the client, from the response that passed it to
	// the request that brought its result.
	Client bool `json:"client,omitempty"`
}

// ModelCall is one call to a stage's node: the time it waited for a slot
// (admission), the time the node took, and what it reported.
type ModelCall struct {
	// Turn is the stage's turn the call belongs to; the final tool-less
	// call of a stopped stage has the number of the stage's last turn.
	Turn int `json:"turn"`
	// StartMS is when the call asked for a slot, in milliseconds from the
	// start of the request; QueueMS is how long it waited for one, and
	// DurationMS how long the node took once it had one.
	StartMS    int64 `json:"start_ms"`
	QueueMS    int64 `json:"queue_ms"`
	DurationMS int64 `json:"duration_ms"`
	// LoadMS and GenerationMS split DurationMS when the node says where
	// its time went (Ollama's load_duration, node.Chunk.Load): LoadMS is
	// how long the node took to have the model ready (a load, and the
	// wait for the models it evicted), GenerationMS the rest. Both are
	// omitted when the node says nothing (OpenAI-compatible servers).
	LoadMS       *int64     `json:"load_ms,omitempty"`
	GenerationMS *int64     `json:"generation_ms,omitempty"`
	Usage        node.Usage `json:"usage"`
	FinishReason string     `json:"finish_reason,omitempty"`
	// Error says why the call failed, when it did.
	Error string `json:"error,omitempty"`
	// Cut says why the proxy ended the call before the node finished:
	// its content and reasoning reached nodes[].max_output_bytes.
	Cut string `json:"cut,omitempty"`
	// Kind is "summary" for a summarizer call made to fit the stage's
	// prompt, on Node; empty for the stage's own turns.
	Kind string `json:"kind,omitempty"`
	Node string `json:"node,omitempty"`
	// Messages are the messages the call sent, capped and with secrets
	// redacted; only the stored trace (GET /v1/chain/traces/{id}) has them.
	Messages []PromptMessage `json:"messages,omitempty"`
	// sent and marks are the messages as sent and their fitting marks,
	// turned into Messages only for the stored trace (WithPrompts): most
	// traces go to a client that never reads them.
	sent  []node.Message
	marks []string
}

// SplitLoad sets LoadMS and GenerationMS from the load the node reported
// (node.Chunk.Load), once DurationMS is set; nothing when it reported none.
// The load is bounded by the call's duration, which the proxy measured
// around it: the two add up to DurationMS.
func (c *ModelCall) SplitLoad(load time.Duration) {
	if load <= 0 {
		return
	}
	l := min(load.Milliseconds(), c.DurationMS)
	g := c.DurationMS - l
	c.LoadMS, c.GenerationMS = &l, &g
}

// LoadedModel reports whether the call loaded its model: its node reported
// a load of node.LoadThreshold or more. The trace's load is what counts
// model loads everywhere (chainproxy_model_loads_total, eval's
// model_loads), so that they agree.
func (c *ModelCall) LoadedModel() bool {
	return c.LoadMS != nil && *c.LoadMS >= node.LoadThreshold.Milliseconds()
}

// Ready is when the model of call c, a call that loaded it (LoadedModel),
// was ready, for a request that started at start: the load ended after
// the call's wait for a slot. Calls that waited for one load together
// have the same Ready, which is how a load is counted once
// (node.LoadLedger).
func (c *ModelCall) Ready(start time.Time) time.Time {
	return start.Add(time.Duration(c.StartMS+c.QueueMS+*c.LoadMS) * time.Millisecond)
}

// KeepPrompt records the messages call c sent and their fitting marks
// (nil when none was fitted), for the stored trace's Messages
// (Trace.WithPrompts).
func (c *ModelCall) KeepPrompt(sent []node.Message, marks []string) {
	c.sent, c.marks = sent, marks
}

// ToolsTrace says how a stage's tools were fitted to its node's window:
// set when they did not fit their share whole (compacted, some withheld).
type ToolsTrace struct {
	// Offered is how many tools the stage's last call was offered
	// (find_tools not counted), of Of.
	Offered int `json:"offered"`
	Of      int `json:"of"`
	// Compact: the offered tools' schemas were compacted.
	Compact bool `json:"compact,omitempty"`
	// Withheld names the tools not offered; Reason says why, with the
	// figures.
	Withheld []string `json:"withheld,omitempty"`
	Reason   string   `json:"reason,omitempty"`
	// Found names the tools find_tools found, offered from the next turn.
	Found []string `json:"found,omitempty"`
}

// PromptMessage is one message a model call sent, as the node received it.
type PromptMessage struct {
	Role       string           `json:"role"`
	Content    string           `json:"content"`
	Name       string           `json:"name,omitempty"`
	ToolCallID string           `json:"tool_call_id,omitempty"`
	ToolCalls  []PromptToolCall `json:"tool_calls,omitempty"`
	// Fit marks a message the context fitting made or changed: "summary"
	// (older turns folded), "shortened" (a tool result cut in the
	// middle), "earlier_questions" (the list of the user's earlier
	// questions), "omitted" (the marker for dropped turns).
	Fit string `json:"fit,omitempty"`
}

// PromptToolCall is a tool call inside a PromptMessage.
type PromptToolCall struct {
	ID        string `json:"id,omitempty"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Fitting marks on PromptMessage.Fit.
const (
	FitSummary          = "summary"
	FitShortened        = "shortened"
	FitEarlierQuestions = "earlier_questions"
	FitOmitted          = "omitted"
)

// ContextTrace is how a stage's prompts were fitted to its node's window.
type ContextTrace struct {
	// Window is the node's context window in tokens.
	Window int `json:"window"`
	// EstimatedTokens is the proxy's estimate of the largest prompt the
	// stage sent; ReportedTokens is what the node reported for it.
	EstimatedTokens int `json:"estimated_tokens"`
	ReportedTokens  int `json:"reported_tokens,omitempty"`
	// Overflow is true when a reported prompt reached the window: the
	// upstream may have cut it anyway.
	Overflow bool            `json:"overflow,omitempty"`
	Actions  []ContextAction `json:"actions,omitempty"`
}

// ContextAction is one thing the fitting did to a prompt.
type ContextAction struct {
	// Action is "shortened" (a tool result), "summarized" (turns folded
	// into a summary), "reused" (a cached summary), "dropped" (turns left
	// out), "images_dropped" (an earlier turn's images left out) or
	// "refit" (fitted again after the node refused the prompt).
	Action    string `json:"action"`
	FromTurn  int    `json:"from_turn,omitempty"`
	ToTurn    int    `json:"to_turn,omitempty"`
	SummaryID string `json:"summary_id,omitempty"`
	Detail    string `json:"detail,omitempty"`
}

// Usage is the sum of the stages' token usage.
func (t *Trace) Usage() node.Usage {
	var u node.Usage
	for _, s := range t.Stages {
		u = u.Add(s.Usage)
	}
	return u
}

// ToolsUsed lists every tool call of every stage, in order.
func (t *Trace) ToolsUsed() []ToolUse {
	out := []ToolUse{}
	for _, s := range t.Stages {
		out = append(out, s.ToolsUsed...)
	}
	return out
}

// LoopStops counts the stages a guard against loops stopped: a repeated
// call, no progress, malformed calls, or a degenerate answer.
func (t *Trace) LoopStops() int {
	n := 0
	for _, st := range t.Stages {
		switch st.Status {
		case StageStoppedRepeat, StageStoppedNoProgress, StageStoppedFormatErrors, StageDegenerate:
			n++
		}
	}
	return n
}

// Args is the trace form of a call's arguments (ToolUse.Args): the object
// when it parses, else the raw text as a JSON string, so a malformed call
// is still shown. Arguments longer than limit (when positive) are kept as
// a string cut at limit bytes, with a note of their size: a trace holds no
// more of a call than of its result.
func Args(args string, limit int) json.RawMessage {
	if strings.TrimSpace(args) == "" {
		return json.RawMessage("{}")
	}
	if limit > 0 && len(args) > limit {
		b, _ := json.Marshal(tools.Truncate(args, limit))
		return b
	}
	if json.Valid([]byte(args)) {
		return json.RawMessage(args)
	}
	b, _ := json.Marshal(args)
	return b
}
