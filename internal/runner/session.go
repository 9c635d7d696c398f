package runner

// The run's session, as the loop sees it: stopping and killing the tool
// command running in it, ending it, and the terminal run, whose session is
// all there is.

import (
	"context"
	"time"

	"corral"
	"corral/internal/trace"
)

// stopActive asks a's loop to end and the tool command running now to
// end: SIGTERM, then SIGKILL after the grace period.
func (r *Runner) stopActive(a *active) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.stopping {
		close(a.stopped)
	}
	a.stopping = true
	if a.cmdID != "" {
		r.terminate(a.run.ID, a.cmdID)
	}
}

// terminate sends a command SIGTERM and, after the grace period, SIGKILL
// (which finds nothing when it has ended by then).
func (r *Runner) terminate(runID, cmdID string) {
	go func() {
		r.signal(runID, cmdID, "TERM")
		select {
		case <-time.After(r.cfg.Grace):
			r.signal(runID, cmdID, "KILL")
		case <-r.base.Done():
		}
	}()
}

// signalTimeout bounds one signal's call to the node.
const signalTimeout = 30 * time.Second

// signal sends sig to a command of the run's session. What it answers is
// of no use: a command that ended meanwhile is not there to signal, and a
// session that ended took it with it.
func (r *Runner) signal(runID, cmdID, sig string) {
	ctx, cancel := context.WithTimeout(context.Background(), signalTimeout)
	defer cancel()
	r.node.Signal(ctx, runID, cmdID, sig)
}

// killActive ends a's loop at once: its model call is abandoned, its tool
// command killed (its result still recorded), and the loop's end ends the
// session with everything in it.
func (r *Runner) killActive(a *active) {
	a.mu.Lock()
	a.killed = true
	cmdID := a.cmdID
	a.mu.Unlock()
	if cmdID != "" {
		go r.signal(a.run.ID, cmdID, "KILL")
	}
	a.cancel()
}

func (a *active) state() (stopping, killed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stopping, a.killed
}

// setCommand records the tool command now running ("" for none); false
// when the run was killed meanwhile (the command is then killed). A run
// being stopped has the command terminated at once.
func (r *Runner) setCommand(a *active, cmdID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cmdID = cmdID
	if a.killed || a.ctx.Err() != nil {
		if cmdID != "" {
			r.signal(a.run.ID, cmdID, "KILL")
		}
		return false
	}
	if cmdID != "" && a.stopping {
		r.terminate(a.run.ID, cmdID)
	}
	return true
}

// endSession ends a run's session; what ran in it dies.
func (r *Runner) endSession(runID string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.node.EndSession(ctx, runID); err != nil {
		r.cfg.Log.Error("run's session not ended", "run", runID, "err", err)
	}
}

// terminalLoop drives a terminal run: its session is all there is, for the
// person at its terminal. It lasts until it is stopped or killed, its time
// runs out, or the server stops.
func (r *Runner) terminalLoop(a *active, reattach bool) (outcome, corral.Agent, bool) {
	ctx, run := a.ctx, &a.run
	agent, err := r.store.Agent(ctx, run.AgentID, "")
	if err != nil {
		return r.failed(a, "the agent could not be loaded", err), agent, false
	}
	if reattach {
		r.record(ctx, run.ID, trace.Reattached, map[string]any{})
		if err := r.ws.Reopen(ctx, agent.ID, run.StageID); err != nil {
			return r.failed(a, "the run's staged workspace could not be reopened", err), agent, false
		}
	}
	timeout := r.cfg.RunTimeout
	if agent.Limits.RunTimeoutS > 0 {
		timeout = time.Duration(agent.Limits.RunTimeoutS) * time.Second
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !reattach {
		// The tree and the session first: a terminal run that is running
		// has a terminal to open.
		if err := r.ws.Begin(ctx, agent, run.StageID); err != nil {
			return r.failed(a, "the workspace could not be staged: "+safeMessage(err), err), agent, false
		}
		if err := r.node.StartSession(r.as(ctx, *run), sessionSpec(*run, agent, timeout)); err != nil {
			return r.failed(a, "the sandbox could not be started: "+safeMessage(err), err), agent, true
		}
		run.Status, run.StartedAt = corral.RunRunning, r.cfg.Now().UTC()
		if err := r.store.UpdateRun(ctx, *run, corral.RunAdmitted); err != nil {
			// Stopped or killed before it started: nothing ran.
			r.cfg.Log.Warn("run not started", "run", run.ID, "err", err)
			r.endSession(run.ID)
			if err := r.ws.Discard(ctx, run.StageID); err != nil {
				r.cfg.Log.Error("unstarted run's stage not removed", "run", run.ID, "err", err)
			}
			return outcome{shutdown: true}, agent, false
		}
		r.record(ctx, run.ID, trace.Started, map[string]any{
			"driver": corral.DriverTerminal, "fs": agent.Policy.FS, "changes": agent.Policy.Changes,
		})
	}
	select {
	case <-a.stopped:
	case <-runCtx.Done():
	}
	out, _ := r.interrupted(a, runCtx)
	if out.violation == corral.ViolationTimeout {
		// A person's time at a terminal is not the agent's misconduct.
		out = outcome{status: corral.RunCancelled, reason: "the terminal run's time ran out"}
	}
	return out, agent, true
}
