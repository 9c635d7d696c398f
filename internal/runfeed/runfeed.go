// Package runfeed carries runs' live events between controls that share
// a PostgreSQL store, so that a run's event stream may be held on any of
// them. The control that drives runs publishes what its runner publishes
// to its own watchers (Publisher): that a trace event was stored, a
// piece of a running command's output, a piece of the model's text, a
// run's end, each as a notification (NOTIFY). Every other control's Feed
// listens and hands them to its watchers, reading the trace events
// themselves from the store: a notification is a wake-up carrying ids,
// never the record. A Feed whose listening connection broke has its
// watchers read the store again, so a missed notification costs a
// re-read, never an event.
//
// Output and model text are not stored: they are carried in the
// notifications themselves, as best effort (a publisher that falls far
// behind drops them, never a trace event's notice or a run's end).
package runfeed

import (
	"encoding/json"

	"corral"
	"corral/internal/trace"
)

// Channel is the notification channel runs' events travel on.
const Channel = "corral_runs"

// headBytes is how much of a running command's output a Feed keeps for
// a watcher who joins while it runs: as much as the runner keeps.
const headBytes = 32 << 10

// A note is one notification: what happened to run R.
type note struct {
	Kind string `json:"k"` // "t" trace event stored, "o" output, "d" model text, "e" run ended
	Run  string `json:"r"`
	Seq  int64  `json:"s,omitempty"` // "t": the event's number
	Type string `json:"y,omitempty"` // "t": the event's type
	Call string `json:"c,omitempty"` // "o": the tool call whose output this is
	// Offset is where Text starts in the call's output ("o").
	Offset int    `json:"o,omitempty"`
	Text   []byte `json:"x,omitempty"` // "o", "d": bytes, as they came (base64 in JSON)
}

const (
	kindTrace  = "t"
	kindOutput = "o"
	kindDelta  = "d"
	kindEnd    = "e"
)

// noteOf is the note for a runner event; false for an event carrying
// nothing.
func noteOf(runID string, e corral.RunEvent) (note, bool) {
	switch {
	case e.Trace != nil:
		return note{Kind: kindTrace, Run: runID, Seq: e.Trace.Seq, Type: e.Trace.Type}, true
	case e.Output != nil && e.Output.Text != "":
		return note{Kind: kindOutput, Run: runID, Call: e.Output.ToolCallID, Offset: e.Output.Offset, Text: []byte(e.Output.Text)}, true
	case e.Delta != "":
		return note{Kind: kindDelta, Run: runID, Text: []byte(e.Delta)}, true
	}
	return note{}, false
}

// endsOutput says whether a trace event of this type starts or ends a
// command, so that the output kept for joiners is no longer its.
func endsOutput(typ string) bool {
	return typ == trace.ToolCall || typ == trace.ToolResult || typ == trace.Ended || typ == trace.Reattached
}

func (n note) encode() (string, error) {
	b, err := json.Marshal(n)
	return string(b), err
}

func decode(payload string) (note, error) {
	var n note
	err := json.Unmarshal([]byte(payload), &n)
	return n, err
}
