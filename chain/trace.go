package chain

import "encoding/json"

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

// Tool call statuses in a trace.
const (
	ToolOK        = "ok"
	ToolError     = "error"
	ToolDuplicate = "duplicate"
	ToolCached    = "cached"
	ToolBlocked   = "blocked"
)

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
	Node       string    `json:"node"`
	Model      string    `json:"model"`
	Turns      int       `json:"turns"`
	Status     string    `json:"status"`
	DurationMS int64     `json:"duration_ms"`
	Usage      Usage     `json:"usage"`
	ToolsUsed  []ToolUse `json:"tools_used"`
	// Error says why a stage failed or was skipped.
	Error string `json:"error,omitempty"`
}

// ToolUse is one tool call of a stage.
type ToolUse struct {
	Name string `json:"name"`
	// Args are the call's arguments: the JSON object when they parsed, else
	// the raw text as a JSON string.
	Args       json.RawMessage `json:"args"`
	Status     string          `json:"status"`
	Result     string          `json:"result"`
	DurationMS int64           `json:"duration_ms"`
}

// Usage is the sum of the stages' token usage.
func (t *Trace) Usage() Usage {
	var u Usage
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
