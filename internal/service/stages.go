package service

import (
	"context"
	"time"

	"corral"
)

// Stages turn runs into change sets: a run's staged tree, made when it
// starts, measured when it ends. In auto mode the ordinary entries are
// applied at once, as a decision would.
type Stages struct {
	store     ChangeStore
	trees     corral.Trees
	decisions *Decisions
	ttl       time.Duration
	cfg       Config
}

// NewStages returns the stages of runs over the node's trees. ttl is how
// long a change set waits for a decision; 0 for 7 days.
func NewStages(store ChangeStore, trees corral.Trees, decisions *Decisions, ttl time.Duration, cfg Config) *Stages {
	cfg.defaults()
	if ttl == 0 {
		ttl = 7 * 24 * time.Hour
	}
	return &Stages{store: store, trees: trees, decisions: decisions, ttl: ttl, cfg: cfg}
}

// Begin stages the agent's workspace for a run under id, which the change
// set made from it will carry. The caller (the runner) has already decided
// the run may happen.
func (c *Stages) Begin(ctx context.Context, agent corral.Agent, id string) error {
	return c.trees.Stage(ctx, corral.StageSpec{
		ID: id, AgentID: agent.ID, Secrets: agent.Policy.Secrets,
		DiskBytes: agent.Limits.DiskBytes, DiskInodes: agent.Limits.DiskInodes,
	})
}

// Reopen opens the staged tree id of an agent left by an earlier process
// or by a paused run. ENOTFOUND when there is none.
func (c *Stages) Reopen(ctx context.Context, agentID, id string) error {
	return c.trees.ReopenStage(ctx, agentID, id)
}

// Discard removes a staged tree that will not become a change set.
func (c *Stages) Discard(ctx context.Context, id string) error {
	return c.trees.DiscardStage(ctx, id)
}

// Finish records what a staged run changed, as Corral measures it, as the
// change set id. When auto is true and the agent's policy is auto, ordinary
// entries are applied at once; otherwise (review policy, or a run that did
// not complete) every entry waits for a person. Protected entries are
// always denied. Each text entry's diff is made now and kept with the
// change set, so it stays readable after the decision. It returns a change
// set with an empty ID when the run changed nothing. The stage is removed
// unless the change set waits.
func (c *Stages) Finish(ctx context.Context, agent corral.Agent, runID, id string, auto bool) (corral.ChangeSet, error) {
	m, err := c.trees.Manifest(ctx, agent.ID, id, corral.ClassPolicy{Protected: agent.Policy.Protected, Risky: agent.Policy.Risky})
	if err != nil {
		return corral.ChangeSet{}, err
	}
	if len(m.Entries) == 0 {
		return corral.ChangeSet{}, c.trees.DiscardStage(ctx, id)
	}
	mode := agent.Policy.Changes
	if !auto {
		mode = corral.ChangesReview
	}
	now := c.cfg.Now().UTC()
	cs := corral.ChangeSet{
		ID: id, AgentID: agent.ID, RunID: runID, Mode: mode,
		CreatedAt: now, ExpiresAt: now.Add(c.ttl), DiskBytes: m.DiskBytes,
	}
	for _, e := range m.Entries {
		e.State = corral.EntryPending
		if e.Class == corral.ClassProtected {
			e.State = corral.EntryDenied
		}
		cs.Entries = append(cs.Entries, e)
	}
	if mode == corral.ChangesAuto {
		var picked []int
		for i, e := range cs.Entries {
			if e.State == corral.EntryPending && e.Class == corral.ClassOrdinary {
				picked = append(picked, i)
			}
		}
		// What could not be applied (a conflict, a failure) waits for a
		// person: nothing is lost and nothing is applied half.
		unlock := c.decisions.repos.lock(agent.ID)
		err := c.decisions.apply(ctx, &cs, picked)
		unlock()
		if err != nil && corral.ErrorCode(err) != corral.ECONFLICT {
			c.cfg.Log.Warn("auto-apply failed; the change set waits for review", "change_set", cs.ID, "err", err)
		}
	}
	cs.Status = settle(cs)
	if err := c.store.CreateChangeSet(ctx, cs); err != nil {
		c.decisions.closeStage(cs)
		return corral.ChangeSet{}, err
	}
	if cs.Status != corral.ChangePending {
		c.decisions.closeStage(cs)
	}
	return cs, nil
}

// settle derives a decided change set's status from its entries: pending
// while any entry is; then applied if anything was; conflicted, rejected
// or denied (only protected entries) if nothing was.
func settle(cs corral.ChangeSet) corral.ChangeStatus {
	seen := map[corral.EntryState]bool{}
	for _, e := range cs.Entries {
		seen[e.State] = true
	}
	switch {
	case seen[corral.EntryPending]:
		return corral.ChangePending
	case seen[corral.EntryApplied]:
		return corral.ChangeApplied
	case seen[corral.EntryConflicted]:
		return corral.ChangeConflicted
	case seen[corral.EntryRejected]:
		return corral.ChangeRejected
	default:
		return corral.ChangeDenied
	}
}
