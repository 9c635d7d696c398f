package runner

import (
	"corral"
	"corral/internal/fanout"
)

// Event and Output are the run events watchers receive (see
// corral.RunEvent).
type (
	Event  = corral.RunEvent
	Output = corral.RunOutput
)

// hub fans a run's events out to this process's watchers (fanout.Hub)
// and passes each on to its relay, when it has one.
type hub struct {
	*fanout.Hub
	relay Relay // nil: none
}

func newHub(relay Relay) *hub { return &hub{Hub: fanout.New(), relay: relay} }

func (h *hub) subscribe(runID string) (<-chan Event, func()) { return h.Subscribe(runID) }

// publish sends e to every watcher of runID without ever blocking the run.
func (h *hub) publish(runID string, e Event) {
	if h.relay != nil {
		h.relay.Event(runID, e)
	}
	h.Publish(runID, e)
}

// end lets every watcher of runID go: the run is over.
func (h *hub) end(runID string) {
	if h.relay != nil {
		h.relay.End(runID)
	}
	h.End(runID)
}
