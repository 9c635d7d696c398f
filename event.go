package corral

import (
	"encoding/json"
	"time"
)

// TraceEvent is one entry of a hash-chained trace (see internal/trace):
// a run's, or an agent's own chain, named by RunID.
type TraceEvent struct {
	RunID    string
	Seq      int64 // 1, 2, 3, ... within the chain
	At       time.Time
	Type     string
	Data     json.RawMessage // the event's content, as recorded
	PrevHash string          // hex SHA-256 of the previous event; "" for the first
	Hash     string          // hex SHA-256 of this event
}

// RunEvent is what a watcher of a run receives: one of a trace event as
// stored, a piece of the model's text as it streams (Delta), or a piece of
// a tool's output as the command writes it (Output). Deltas and output are
// never stored: the whole message and the tool's result follow as trace
// events.
type RunEvent struct {
	Trace  *TraceEvent
	Delta  string
	Output *RunOutput
}

// RunOutput is a piece of a running tool's output: Text starts Offset bytes
// into it.
type RunOutput struct {
	ToolCallID string
	Offset     int
	Text       string
}
