package gateway

import (
	"context"
	"time"

	"corral"
)

// reserve asks m for a call's ceiling, and tells the observer when the
// budget refused it.
func (g *Gateway) reserve(ctx context.Context, m corral.Meter, model string, ceiling int64) (corral.Settle, error) {
	settle, err := m.Reserve(ctx, model, ceiling)
	if corral.ErrorCode(err) == corral.EADMISSION {
		g.observer.BudgetRefused()
	}
	return settle, err
}

// observe tells the observer how a call that began at start ended, by
// its last try: the provider's usage only when it reported it, as it is
// metered (result.metered).
func (g *Gateway) observe(op, model string, r result, start time.Time) {
	c := corral.ModelCallStats{Operation: op, Model: model, Took: time.Since(start), Usage: r.usage, Reported: r.metered}
	status := 0
	if r.exchange != nil && r.exchange.responded {
		status = r.exchange.status
	}
	c.Failure = corral.ModelFailure(status, r.err)
	if c.Failure == "" && (r.malformed || !r.metered) {
		c.Failure = "_OTHER" // answered, but not with a reply Corral can take
	}
	g.observer.ModelCall(c)
}

// unobserved is the observer of a gateway given none.
type unobserved struct{}

func (unobserved) ModelCall(corral.ModelCallStats) {}
func (unobserved) BudgetRefused()                  {}
