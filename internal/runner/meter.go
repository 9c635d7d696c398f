package runner

import (
	"context"

	"corral"
	"corral/internal/trace"
)

// errBudget is the meter's refusal: the agent's budget cannot hold the
// next call (a budgetRefused says how much it needed).
var errBudget = corral.Errorf(corral.EADMISSION, "the agent's token budget cannot hold the next model call: the run pauses until its owner raises the budget")

// budgetRefused is errBudget for a call that needed need tokens left.
type budgetRefused struct{ need int64 }

func (e budgetRefused) Error() string        { return errBudget.Error() }
func (e budgetRefused) Is(target error) bool { return target == errBudget }
func (e budgetRefused) Unwrap() error        { return errBudget }

// meter reserves each model call's ceiling on the agent's budget before
// the call is sent and settles it on the provider's usage, on the run and
// the agent (corral.Meter).
type meter struct {
	r       *Runner
	runID   string
	agentID string
}

func (m *meter) Reserve(ctx context.Context, model string, ceiling int64) (corral.Settle, error) {
	h, err := m.r.reserve(ctx, m.agentID, m.runID, model, ceiling)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, u corral.Tokens, reported bool) error {
		_, err := h.settle(ctx, u, reported, nil)
		return err
	}, nil
}

// hold is one call's reservation.
type hold struct {
	r       *Runner
	runID   string
	id      string
	ceiling int64
}

// reserve holds ceiling tokens of the agent's budget for one call of run
// runID to model: a budgetRefused when the agent is paused or its budget
// cannot hold it.
func (r *Runner) reserve(ctx context.Context, agentID, runID, model string, ceiling int64) (*hold, error) {
	a, err := r.store.Agent(ctx, agentID, "")
	if err != nil {
		return nil, err
	}
	if a.State == corral.StatePaused {
		return nil, budgetRefused{need: 1}
	}
	res, err := r.store.Reserve(ctx, corral.Hold{AgentID: agentID, RunID: runID, Model: model, Tokens: ceiling})
	if corral.ErrorCode(err) == corral.EADMISSION {
		r.record(ctx, runID, trace.GatewayNote, map[string]any{
			"budget_refused": ceiling, "budget_tokens": a.Budget.Tokens, "budget_used": a.Budget.Used,
		})
		return nil, budgetRefused{need: ceiling}
	}
	if err != nil {
		return nil, err
	}
	return &hold{r: r, runID: runID, id: res.ID, ceiling: ceiling}, nil
}

// settle meters the call at what its provider reported, or at its
// ceiling when that is missing or impossible (corral.Charge), and traces
// it with extra (the CLI call's facts). A call that got no answer
// (reported, no tokens) leaves no usage event.
func (h *hold) settle(ctx context.Context, u corral.Tokens, reported bool, extra map[string]any) (corral.Budget, error) {
	ctx = context.WithoutCancel(ctx)
	t, asReported := corral.Charge(u, reported, h.ceiling)
	b, err := h.r.store.Settle(ctx, h.id, t, h.r.cfg.Now())
	if t == (corral.Tokens{}) && extra == nil {
		return b, err
	}
	data := map[string]any{"input": t.Input, "output": t.Output, "budget_used": b.Used, "budget_tokens": b.Tokens}
	if !asReported {
		// What the provider said, when it said anything, for whoever
		// reads the trace: the call is metered at its ceiling.
		data["metered_at_ceiling"] = h.ceiling
		if reported {
			data["reported_input"], data["reported_output"] = u.Input, u.Output
		}
	}
	for k, v := range extra {
		data[k] = v
	}
	h.r.record(ctx, h.runID, trace.Usage, data)
	return b, err
}
