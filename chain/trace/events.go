package trace

// Event kinds, in the order a run emits them.
const (
	EventClassified = "classified"
	EventStageStart = "stage_start"
	EventTurn       = "turn"
	EventTool       = "tool"
	EventStageEnd   = "stage_end"
	// EventDelta carries a piece of the final answer (Content) or of its
	// hidden reasoning (Reasoning); only the answering stage emits them.
	EventDelta = "delta"
)

// Event is a step of a run, reported as it happens so that a streaming
// client can follow the chain live: the trace as it is written, which the
// engine's callback (chain.Engine.Run) and the cockpit's watcher receive.
type Event struct {
	Kind string
	// Stage is the index of the stage in the trace.
	Stage int
	Node  string
	Model string
	// Turn is the stage's turn number, from 1.
	Turn int
	// MaxTurns and Tools describe a starting stage.
	MaxTurns int
	Tools    bool
	// Own marks a client's own request (a title, tags, a summary: see
	// classify.Background), whose answer a program parses: a front adds
	// nothing of its own to it. (Beside Tools, in its padding: a larger
	// Event costs every delta of every stream a longer copy.)
	Own bool
	// Mode and Reasons describe the classification; Question is the
	// user's words the classifier judged, or a client's own request's
	// name in brackets ("" when neither: a relay, a forced mode).
	Mode     string
	Reasons  []string
	Question string
	// Paused is set on the EventClassified of a run that resumes a chain
	// paused for its client's tools: the chain as it paused. The run goes
	// on under the chain's trace id (RunRequest.TraceID), so that a
	// watcher lists the chain and its client round trips as one.
	Paused *Paused
	// ToolUse is the tool call of an EventTool.
	ToolUse *ToolUse
	// StageTrace is the finished stage of an EventStageEnd.
	StageTrace *StageTrace
	// Content and Reasoning are the text of an EventDelta.
	Content   string
	Reasoning string
}

// Paused is a chain that waited for its client's tool results, as the run
// resuming it found it.
type Paused struct {
	// Trace is the chain's trace so far: its earlier stages, and the
	// waiting one's turns and client calls. The watcher must not keep it:
	// the run goes on changing its stages.
	Trace Trace
}
