package runner

import (
	"context"

	"corral"
	"corral/internal/gateway"
	"corral/internal/trace"
)

// errBudget is the meter's refusal: the agent's budget is spent.
var errBudget = corral.Errorf(corral.EADMISSION, "the agent's token budget is spent: the run pauses until its owner raises the budget")

// meter checks an agent's budget before each model call and records each
// call's usage, as the provider reported it, on the run and the agent.
type meter struct {
	r       *Runner
	runID   string
	agentID string
}

func (m *meter) Check(ctx context.Context) error {
	a, err := m.r.store.Agent(ctx, m.agentID, "")
	if err != nil {
		return err
	}
	if a.Budget.Spent() || a.State == corral.StatePaused {
		return errBudget
	}
	return nil
}

func (m *meter) Record(ctx context.Context, u gateway.Usage) error {
	ctx = context.WithoutCancel(ctx)
	b, err := m.r.store.AddUsage(ctx, m.runID, corral.Tokens{Input: u.Input, Output: u.Output})
	m.r.record(ctx, m.runID, trace.Usage, map[string]int64{
		"input": u.Input, "output": u.Output, "budget_used": b.Used, "budget_tokens": b.Tokens,
	})
	return err
}
