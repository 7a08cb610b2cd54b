package chain

import "chainproxy/chain/trace"

// The trace's vocabulary, declared in package trace with the views and the
// stored document made of it, named here too because the engine's API
// (Result, Failure, Event) is written in it.
type (
	// Trace is what the chain did for one request (trace.Trace).
	Trace = trace.Trace
	// StageTrace is one stage of a Trace (trace.StageTrace).
	StageTrace = trace.StageTrace
	// ToolUse is one tool call of a stage (trace.ToolUse).
	ToolUse = trace.ToolUse
	// ModelCall is one call to a stage's node (trace.ModelCall).
	ModelCall = trace.ModelCall
	// ContextTrace is how a stage's prompts were fitted (trace.ContextTrace).
	ContextTrace = trace.ContextTrace
	// ContextAction is one thing the fitting did (trace.ContextAction).
	ContextAction = trace.ContextAction
	// ToolsTrace is how a stage's tools were fitted (trace.ToolsTrace).
	ToolsTrace = trace.ToolsTrace
)

// Modes of a request.
const (
	ModeSimple    = trace.ModeSimple
	ModeReflexive = trace.ModeReflexive
)

// Stage statuses in a trace (see package trace for each one's meaning).
const (
	StageOK                  = trace.StageOK
	StageStoppedRepeat       = trace.StageStoppedRepeat
	StageStoppedBudget       = trace.StageStoppedBudget
	StageStoppedFormatErrors = trace.StageStoppedFormatErrors
	StageStoppedNoProgress   = trace.StageStoppedNoProgress
	StageSkippedOffline      = trace.StageSkippedOffline
	StageSkippedContext      = trace.StageSkippedContext
	StageFailed              = trace.StageFailed
	StageDegenerate          = trace.StageDegenerate
	StageAwaitingClient      = trace.StageAwaitingClient
)

// Tool call statuses in a trace.
const (
	ToolOK        = trace.ToolOK
	ToolError     = trace.ToolError
	ToolDuplicate = trace.ToolDuplicate
	ToolCached    = trace.ToolCached
	ToolBlocked   = trace.ToolBlocked
	ToolClient    = trace.ToolClient
)
