package runner

// Runs that go on, or end, outside their loop: a pause on the budget and
// the resume when it is raised, a stop or kill of a paused run, and the
// reconciliation of what a stopped server left behind.

import (
	"context"
	"fmt"

	"corral"
	"corral/internal/trace"
)

// pause parks a run whose agent's budget could not hold its next call,
// one that needed need tokens left. Its stage and checkpoint stay;
// raising the budget resumes it (Resume).
func (r *Runner) pause(ctx context.Context, run corral.Run, agent corral.Agent, need int64) {
	// The agent and the trace first, so whoever sees the run paused sees
	// the agent paused and the trace ending in the pause.
	if _, err := r.store.SetAgentState(ctx, run.AgentID, corral.StatePaused, corral.StateActive); err != nil {
		r.cfg.Log.Error("pausing the agent", "agent", run.AgentID, "err", err)
	}
	if now, err := r.store.Agent(ctx, run.AgentID, ""); err == nil {
		agent = now
	}
	r.record(ctx, run.ID, trace.Paused, map[string]any{"budget_tokens": agent.Budget.Tokens, "budget_used": agent.Budget.Used, "budget_needed": need})
	from := run.Status
	run.Status = corral.RunPaused
	run.Reason = fmt.Sprintf("the agent's token budget cannot hold the next model call: it may take up to %d tokens, and %d of %d are left; raise the budget to go on",
		need, max(0, agent.Budget.Left()), agent.Budget.Tokens)
	if err := r.store.UpdateRun(ctx, run, from); err != nil {
		r.cfg.Log.Error("run's pause not recorded", "run", run.ID, "err", err)
		return
	}
	// The budget may have been raised between the check and the pause:
	// enough for the call refused, or the run would pause again at once.
	if err := r.resume(ctx, run.AgentID, need); err != nil {
		r.cfg.Log.Error("resuming", "agent", run.AgentID, "err", err)
	}
}

// Resume continues the paused runs of an agent whose budget allows it
// again, each from its checkpoint. It is safe to call at any time: a run
// is resumed at most once.
func (r *Runner) Resume(ctx context.Context, agentID string) error {
	return r.resume(ctx, agentID, 1)
}

// resume is Resume when a call needs need tokens left.
func (r *Runner) resume(ctx context.Context, agentID string, need int64) error {
	agent, err := r.store.Agent(ctx, agentID, "")
	if err != nil {
		return err
	}
	if agent.Budget.Tokens > 0 && agent.Budget.Left() < need {
		return nil
	}
	if agent.State == corral.StatePaused {
		if _, err := r.store.SetAgentState(ctx, agentID, corral.StateActive, corral.StatePaused); err != nil {
			return err
		}
	} else if agent.State != corral.StateActive {
		return nil
	}
	paused, err := r.store.RunsIn(ctx, corral.RunPaused)
	if err != nil {
		return err
	}
	for _, run := range paused {
		if run.AgentID == agentID {
			r.takeUp(ctx, run)
		}
	}
	return nil
}

// takeUp continues a paused run whose agent may go on, unless a child of
// it is still paused, and then its parent, paused by its pause, and so up
// the tree.
func (r *Runner) takeUp(ctx context.Context, run corral.Run) {
	if r.pausedChild(ctx, run) != "" {
		return
	}
	run.Status, run.Reason = corral.RunRunning, ""
	if err := r.store.UpdateRun(ctx, run, corral.RunPaused); err != nil {
		return // stopped, killed or resumed by someone else meanwhile
	}
	if a := r.track(run); a != nil {
		go r.execute(a, nil, false)
	}
	if run.ParentRunID != "" {
		r.resumeRun(ctx, run.ParentRunID)
	}
}

// endPaused ends a paused run on request. Its staged changes become a
// change set for review.
func (r *Runner) endPaused(ctx context.Context, runID string, status corral.RunStatus, reason string) error {
	run, err := r.store.Run(ctx, runID)
	if err != nil {
		return err
	}
	if run.Status != corral.RunPaused {
		if corral.RunActive(run.Status) {
			// Between states (being resumed or started): ask the loop.
			if a := r.lookup(runID); a != nil {
				if status == corral.RunKilled {
					r.killActive(a)
				} else {
					r.stopActive(a)
				}
				return nil
			}
		}
		return corral.Errorf(corral.ECONFLICT, "the run has already ended (%s)", run.Status)
	}
	run.Status, run.Reason, run.EndedAt = status, reason, r.cfg.Now().UTC()
	if err := r.store.UpdateRun(ctx, run, corral.RunPaused); err != nil {
		return err
	}
	r.proposeStaged(ctx, &run)
	r.ended(ctx, run, nil)
	return nil
}

// proposeStaged turns what a run that ended outside its loop (paused, or
// cut off by a restart) had staged into a change set for review, and
// records it on the run, whose final status is stored already. A stage
// that cannot be reopened is removed.
func (r *Runner) proposeStaged(ctx context.Context, run *corral.Run) {
	agent, err := r.store.Agent(ctx, run.AgentID, "")
	if err != nil {
		r.cfg.Log.Error("ended run's agent not loaded", "run", run.ID, "err", err)
		return
	}
	err = r.ws.Reopen(ctx, run.AgentID, run.StageID)
	switch {
	case corral.ErrorCode(err) == corral.ENOTFOUND:
		return // it never staged anything
	case err != nil:
		r.cfg.Log.Error("ended run's stage lost", "run", run.ID, "err", err)
		r.ws.Discard(ctx, run.StageID)
		return
	}
	cs, err := r.ws.Finish(ctx, agent, run.ID, run.StageID, false)
	if err != nil {
		r.cfg.Log.Error("ended run's changes not recorded", "run", run.ID, "err", err)
		return
	}
	if cs.ID == "" {
		return
	}
	run.ChangeSetID = cs.ID
	if err := r.store.UpdateRun(ctx, *run, run.Status); err != nil {
		r.cfg.Log.Error("ended run's change set not recorded", "run", run.ID, "err", err)
	}
}

// Reconcile settles the runs a stopped server left behind. It runs at
// start-up, before anything is admitted. A running run whose session is
// still running (its supervisor outlived the server) is re-attached: its
// loop goes on from its checkpoint, and the tool commands it had started
// deliver their results, whether they finished meanwhile or still run.
// Any other run left admitted or running becomes reconciled (its session
// is gone), what it had staged becomes a change set for review, and a
// trace event says so; the next message continues from its last
// checkpoint. Paused runs whose agent may go on are resumed. It returns
// how many runs it reconciled and how many it re-attached.
func (r *Runner) Reconcile(ctx context.Context) (reconciled, reattached int, err error) {
	// The calls in flight when the server stopped were sent, and their
	// usage never came: each is metered at its ceiling, so a crash never
	// turns spent tokens into free ones.
	if n, err := r.store.SettleLeftover(ctx); err != nil {
		return 0, 0, err
	} else if n > 0 {
		r.cfg.Log.Warn("model calls in flight when the server stopped metered at their ceilings", "calls", n)
	}
	left, err := r.store.RunsIn(ctx, corral.RunAdmitted, corral.RunRunning)
	if err != nil {
		return 0, 0, err
	}
	n := 0
	// Every run that can be re-attached is first, so that a tree is taken
	// up whole: a reconciled parent then stops its re-attached children,
	// and a re-attached parent finds its children where they are.
	var gone []corral.Run
	for _, run := range left {
		if run.Status == corral.RunRunning {
			if st, err := r.node.Session(ctx, run.ID); err == nil && st.Running {
				// Reopened now, before anything is served: from here on an
				// edit to the workspace is recorded in the stage.
				if err := r.ws.Reopen(ctx, run.AgentID, run.StageID); err != nil {
					r.cfg.Log.Error("re-attached run's stage not reopened", "run", run.ID, "err", err)
				}
				if a := r.track(run); a != nil {
					reattached++
					go r.execute(a, nil, true)
				}
				continue
			}
		}
		gone = append(gone, run)
	}
	for _, run := range gone {
		// Whatever the session left (its logs, an ended supervisor's
		// state) goes.
		r.endSession(run.ID)
		from := run.Status
		run.Status, run.EndedAt = corral.RunReconciled, r.cfg.Now().UTC()
		run.Reason = "the server stopped while the run was " + string(from) + "; its session did not outlive it"
		if err := r.store.UpdateRun(ctx, run, from); err != nil {
			r.cfg.Log.Error("reconciling a run", "run", run.ID, "err", err)
			continue
		}
		n++
		r.record(ctx, run.ID, trace.Reconciled, map[string]any{"previous_status": from})
		r.proposeStaged(ctx, &run)
		r.ended(ctx, run, nil)
	}
	paused, err := r.store.RunsIn(ctx, corral.RunPaused)
	if err != nil {
		return n, reattached, err
	}
	seen := map[string]bool{}
	for _, run := range paused {
		// Open the paused run's stage now, before anything is served: from
		// here on, an edit to the workspace is recorded in it (KeepBases),
		// whether or not the run resumes at once.
		if err := r.ws.Reopen(ctx, run.AgentID, run.StageID); err != nil && corral.ErrorCode(err) != corral.ENOTFOUND {
			r.cfg.Log.Warn("paused run's stage not reopened", "run", run.ID, "err", err)
		}
		if !seen[run.AgentID] {
			seen[run.AgentID] = true
			if err := r.Resume(ctx, run.AgentID); err != nil {
				r.cfg.Log.Error("resuming after restart", "agent", run.AgentID, "err", err)
			}
		}
	}
	return n, reattached, nil
}
