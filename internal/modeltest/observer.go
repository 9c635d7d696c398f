package modeltest

import (
	"sync"

	"corral"
)

// Observer is a corral.ModelObserver that keeps what it is told, for tests
// of what the gateway tells the metrics. It is safe for concurrent use.
type Observer struct {
	mu      sync.Mutex
	calls   []corral.ModelCallStats
	refused int
}

func (o *Observer) ModelCall(c corral.ModelCallStats) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, c)
}

func (o *Observer) BudgetRefused() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refused++
}

// Calls returns the calls told so far, each with Took set to 0 once it
// was checked to be positive (a call takes some time; how long is not
// for a test to compare), and how many the budget refused.
func (o *Observer) Calls() ([]corral.ModelCallStats, int, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := append([]corral.ModelCallStats(nil), o.calls...)
	timed := true
	for i := range out {
		timed = timed && out[i].Took > 0
		out[i].Took = 0
	}
	return out, o.refused, timed
}
