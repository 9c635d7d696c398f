package runner

import (
	"sync"

	"corral"
)

// Event and Output are the run events watchers receive (see
// corral.RunEvent).
type (
	Event  = corral.RunEvent
	Output = corral.RunOutput
)

// subscriberBuffer is how many events a slow watcher may fall behind
// before it is cut off; it then reloads the trace and carries on.
const subscriberBuffer = 256

// hub fans a run's events out to its watchers.
type hub struct {
	mu   sync.Mutex
	subs map[string]map[*subscriber]struct{}
}

type subscriber struct {
	ch     chan Event
	closed bool
}

func newHub() *hub { return &hub{subs: map[string]map[*subscriber]struct{}{}} }

// subscribe registers a watcher of runID. The channel closes when the run
// ends, when the watcher falls too far behind, or when cancel is called.
func (h *hub) subscribe(runID string) (<-chan Event, func()) {
	s := &subscriber{ch: make(chan Event, subscriberBuffer)}
	h.mu.Lock()
	if h.subs[runID] == nil {
		h.subs[runID] = map[*subscriber]struct{}{}
	}
	h.subs[runID][s] = struct{}{}
	h.mu.Unlock()
	return s.ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.drop(runID, s)
	}
}

// drop closes one watcher; h.mu is held.
func (h *hub) drop(runID string, s *subscriber) {
	if s.closed {
		return
	}
	s.closed = true
	close(s.ch)
	delete(h.subs[runID], s)
	if len(h.subs[runID]) == 0 {
		delete(h.subs, runID)
	}
}

// publish sends e to every watcher of runID without ever blocking the run.
func (h *hub) publish(runID string, e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[runID] {
		select {
		case s.ch <- e:
		default:
			h.drop(runID, s)
		}
	}
}

// end closes every watcher of runID: the run is over.
func (h *hub) end(runID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[runID] {
		h.drop(runID, s)
	}
}
