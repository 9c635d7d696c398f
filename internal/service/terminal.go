package service

import (
	"context"
	"sync"
	"sync/atomic"

	"corral"
	"corral/internal/access"
	"corral/internal/trace"
)

// Terminal is one person's view of a run's shell. Check decides access
// again: the caller calls it before every frame it passes on, either way,
// and closes the terminal when it fails. Close records, in the run's
// trace, who closed it and the bytes that went each way.
type Terminal struct {
	corral.Terminal
	check func(ctx context.Context) error
	close func()

	in, out atomic.Int64 // bytes typed, bytes shown
}

// Check re-decides the holder's access to the run's terminal, from the
// store: a revoked grant fails on the next frame.
func (t *Terminal) Check(ctx context.Context) error { return t.check(ctx) }

func (t *Terminal) Read(p []byte) (int, error) {
	n, err := t.Terminal.Read(p)
	t.out.Add(int64(n))
	return n, err
}

func (t *Terminal) Write(p []byte) (int, error) {
	n, err := t.Terminal.Write(p)
	t.in.Add(int64(n))
	return n, err
}

// Close detaches this viewer; the shell goes on for the others.
func (t *Terminal) Close() error {
	err := t.Terminal.Close()
	t.close()
	return err
}

// Terminal opens a view of the run's shell in its session for actor, who
// needs editor access to the run's agent; the run must be active. The shell
// starts, cols × rows, if none runs.
func (s *Runs) Terminal(ctx context.Context, actor corral.User, runID string, cols, rows int) (*Terminal, error) {
	run, ag, err := s.loadRunAgent(ctx, actor, runID, access.UseTerminal)
	if err != nil {
		return nil, err
	}
	if s.terminals == nil {
		return nil, corral.Errorf(corral.EUNAVAIL, "this server runs no sessions")
	}
	if run.Status != corral.RunRunning {
		return nil, corral.Errorf(corral.ECONFLICT, "the run is %s: only a running run has a terminal", run.Status)
	}
	act := func(a corral.Agent) corral.Actor {
		return corral.Actor{UserID: actor.ID, SessionID: actor.Via, AgentID: a.ID, Level: a.Access}
	}
	conn, err := s.terminals.Terminal(corral.WithActor(ctx, act(ag)), runID, cols, rows)
	if err != nil {
		if corral.ErrorCode(err) == corral.ENOTFOUND {
			return nil, corral.Errorf(corral.ECONFLICT, "the run's session has ended")
		}
		return nil, err
	}
	s.engine.Note(ctx, runID, trace.TerminalOpened, map[string]any{"user_id": actor.ID, "user": actor.Name})
	t := &Terminal{Terminal: conn}
	t.check = func(ctx context.Context) error {
		_, ag, err := s.loadRunAgent(ctx, actor, runID, access.UseTerminal)
		if err != nil {
			return err
		}
		// A relayed terminal hands the level just read on with the frame
		// this check lets through, for the node to decide again.
		if at, ok := conn.(corral.ActingTerminal); ok {
			at.Act(act(ag))
		}
		return nil
	}
	var once sync.Once
	t.close = func() {
		once.Do(func() {
			s.engine.Note(context.WithoutCancel(ctx), runID, trace.TerminalClosed, map[string]any{
				"user_id": actor.ID, "user": actor.Name, "bytes_in": t.in.Load(), "bytes_out": t.out.Load(),
			})
		})
	}
	return t, nil
}

// StartTerminal admits a terminal run on the agent for actor (editor or
// more): a run with no model and no message, its staged tree and session
// like any run's, whose terminal is opened as any run's is (Terminal). It
// goes on until it is stopped or killed, or its time runs out; what it
// changed then becomes a change set for review. Admission is a message's,
// with no prompt.
func (s *Runs) StartTerminal(ctx context.Context, actor corral.User, agentID string) (corral.Run, error) {
	a, err := s.load(ctx, actor, agentID, access.UseTerminal)
	if err != nil {
		return corral.Run{}, err
	}
	if s.terminals == nil {
		return corral.Run{}, corral.Errorf(corral.EUNAVAIL, "this server runs no sessions")
	}
	now := s.cfg.Now().UTC()
	run := corral.Run{
		ID: corral.NewID("run"), AgentID: agentID, Status: corral.RunAdmitted, Driver: corral.DriverTerminal,
		TriggeredBy: &corral.UserRef{ID: actor.ID, Name: actor.Name}, CreatedAt: now,
		StageID: corral.NewID("chg"),
	}
	ev := corral.Admission{ID: corral.NewID("adm"), AgentID: agentID, UserID: actor.ID, At: now}
	decided, err := s.admission.store.Admit(ctx, corral.Message{}, run, ev, func(f corral.AdmissionFacts) string {
		return Admit(f, 0, DefaultMaxPrompt, s.cfg.PendingDisk)
	})
	if err != nil {
		return corral.Run{}, err
	}
	if decided.Reason != "" {
		return corral.Run{}, s.admission.refused(ctx, actor, a, decided, refusal)
	}
	s.engine.Start(run, corral.Message{}, decided)
	return run, nil
}
