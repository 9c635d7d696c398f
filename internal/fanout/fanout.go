// Package fanout hands runs' live events to their watchers: each
// watcher has a buffered channel, and one that falls too far behind is
// let go (its channel closed) rather than ever block the run, as is
// every watcher of a run when it ends. A watcher let go reads the
// stored trace again and subscribes anew. The runner fans out the runs
// it drives; a standby's feed (internal/runfeed) the runs another
// control drives.
package fanout

import (
	"sync"

	"corral"
)

// Buffer is how many events a slow watcher may fall behind before it
// is let go.
const Buffer = 256

// Hub is the watchers of each run. The zero value is not ready: use New.
type Hub struct {
	mu   sync.Mutex
	subs map[string]map[*watcher]struct{}
}

type watcher struct {
	ch     chan corral.RunEvent
	closed bool
}

// New returns a Hub with no watchers.
func New() *Hub { return &Hub{subs: map[string]map[*watcher]struct{}{}} }

// Subscribe registers a watcher of runID. The channel closes when the
// run ends, when the watcher falls too far behind, or when cancel is
// called.
func (h *Hub) Subscribe(runID string) (<-chan corral.RunEvent, func()) {
	w := &watcher{ch: make(chan corral.RunEvent, Buffer)}
	h.mu.Lock()
	if h.subs[runID] == nil {
		h.subs[runID] = map[*watcher]struct{}{}
	}
	h.subs[runID][w] = struct{}{}
	h.mu.Unlock()
	return w.ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.drop(runID, w)
	}
}

// Watched says whether runID has a watcher.
func (h *Hub) Watched(runID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[runID]) > 0
}

// Publish sends e to every watcher of runID without ever blocking.
func (h *Hub) Publish(runID string, e corral.RunEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.subs[runID] {
		select {
		case w.ch <- e:
		default:
			h.drop(runID, w)
		}
	}
}

// End lets every watcher of runID go.
func (h *Hub) End(runID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.subs[runID] {
		h.drop(runID, w)
	}
}

// EndAll lets every watcher of every run go.
func (h *Hub) EndAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for runID, ws := range h.subs {
		for w := range ws {
			h.drop(runID, w)
		}
	}
}

// drop closes one watcher; h.mu is held.
func (h *Hub) drop(runID string, w *watcher) {
	if w.closed {
		return
	}
	w.closed = true
	close(w.ch)
	delete(h.subs[runID], w)
	if len(h.subs[runID]) == 0 {
		delete(h.subs, runID)
	}
}
