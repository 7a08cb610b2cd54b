package chain

import "chainproxy/chain/trace"

// The trace's vocabulary, declared in package trace with the views and the
// stored document made of it, named here too because the engine's API
// (Result, Failure, the events of Run) is written in it.
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
	// Event is a step of a run, reported as it happens (trace.Event).
	Event = trace.Event
	// Paused is a chain that waited for its client's tools (trace.Paused).
	Paused = trace.Paused
)

// Event kinds, in the order a run emits them.
const (
	EventClassified = trace.EventClassified
	EventStageStart = trace.EventStageStart
	EventTurn       = trace.EventTurn
	EventTool       = trace.EventTool
	EventStageEnd   = trace.EventStageEnd
	EventDelta      = trace.EventDelta
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
