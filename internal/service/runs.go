package service

import (
	"context"
	"time"

	"corral"
	"corral/internal/access"
	"corral/internal/trace"
)

// RunEvent is one live event of a run as Watch hands it on, and TraceEvent
// one event of a run's trace.
type (
	RunEvent   = corral.RunEvent
	TraceEvent = corral.TraceEvent
)

// RunStore is what the run use cases need from storage.
type RunStore interface {
	corral.RunStore
	trace.Store
	PendingDiskStore
	Agent(ctx context.Context, id, userID string) (corral.Agent, error)
}

// Engine executes admitted runs: the runner.
type Engine interface {
	Start(run corral.Run, msg corral.Message, ev corral.Admission)
	Stop(ctx context.Context, runID string) error
	Kill(ctx context.Context, runID string) error
	Feed
	// Note records an event in a run's trace.
	Note(ctx context.Context, runID, typ string, data any)
}

// Feed is where runs' live events come from: the engine, on the control
// that drives them, or the events another control publishes
// (runfeed.Feed). A subscription's channel closes when the run ends or
// when events may have been missed: the watcher reads the store again.
type Feed interface {
	Subscribe(runID string) (<-chan corral.RunEvent, func())
	OutputSoFar(runID string) (corral.RunOutput, bool)
}

// Ready says whether runs can happen at all: a model provider is
// configured and the sandbox works. Its error says what to fix.
type Ready func() error

// Terminals opens a viewer on a run's session's shell: the half of the
// machine that holds sessions (corral.Sessions) that terminals need.
type Terminals interface {
	Terminal(ctx context.Context, sessionID string, cols, rows int) (corral.Terminal, error)
}

// Runs is messages that start runs, and everything done to runs.
type Runs struct {
	store     RunStore
	admission *Admissions
	engine    Engine
	feed      Feed
	terminals Terminals // nil: no terminals
	cfg       Config
}

// RunsDeps is what the run use cases are built on: storage, admission,
// the engine that executes admitted runs, and where runs' sessions are
// (nil: this server opens no terminals).
type RunsDeps struct {
	Store     RunStore
	Admission *Admissions
	Engine    Engine
	// Feed is where Watch gets live events; nil: the engine. A control
	// that drives no runs (a standby) watches what the one that does
	// publishes.
	Feed      Feed
	Terminals Terminals
}

// NewRuns returns the run use cases.
func NewRuns(d RunsDeps, cfg Config) *Runs {
	cfg.defaults()
	feed := d.Feed
	if feed == nil && d.Engine != nil {
		feed = d.Engine
	}
	return &Runs{store: d.Store, admission: d.Admission, engine: d.Engine, feed: feed, terminals: d.Terminals, cfg: cfg}
}

// Send adds the actor's message to the agent's thread and starts a run for
// it, if admission allows. Admission is decided from the agent's state,
// budget and runs in the same store transaction that records the run, so
// it cannot be raced; a refusal is an EADMISSION error with its Reason,
// costs no model call and no run slot, and is kept as evidence.
func (s *Runs) Send(ctx context.Context, actor corral.User, agentID, content string) (corral.Message, corral.Run, error) {
	a, err := s.load(ctx, actor, agentID, access.SendMessage)
	if err != nil {
		return corral.Message{}, corral.Run{}, err
	}
	in, err := s.admission.Admit(ctx, actor, a, content, corral.Run{TriggeredBy: &corral.UserRef{ID: actor.ID, Name: actor.Name}}, nil, refusal)
	if err != nil {
		return corral.Message{}, corral.Run{}, err
	}
	s.engine.Start(in.Run, in.Message, in.Admission)
	return in.Message, in.Run, nil
}

// DefaultPendingDiskBytes is what an agent's pending change sets may hold
// on the host's disk, for an agent that sets no limits.pending_disk_bytes:
// four runs' worth of the default disk limit (1 GiB). A change set
// usually holds kilobytes; only an agent whose runs fill their disks and
// whose proposals nobody decides reaches it.
const DefaultPendingDiskBytes = corral.DefaultPendingDiskBytes

// Admit is the admission policy: "" to admit, or the first reason to
// refuse, checked in the order of the Reason* constants. It is pure, so
// the store can call it inside its transaction. disk holds the server's
// bounds on pending change sets (zero fields: the defaults).
func Admit(f corral.AdmissionFacts, promptBytes, defaultMaxPrompt int64, disk PendingDiskBounds) string {
	a := f.Agent
	disk.defaults()
	maxPrompt := a.Limits.MaxPromptBytes
	if maxPrompt == 0 {
		maxPrompt = defaultMaxPrompt
	}
	maxPending := a.Limits.PendingDiskBytes
	if maxPending == 0 {
		maxPending = DefaultPendingDiskBytes
	}
	switch {
	case a.State == corral.StateQuarantined:
		return corral.ReasonQuarantined
	case a.State == corral.StatePaused:
		return corral.ReasonPaused
	case promptBytes > maxPrompt:
		return corral.ReasonPromptTooLarge
	case a.Budget.Spent():
		return corral.ReasonBudgetExhausted
	case f.PendingDiskBytes >= maxPending:
		return corral.ReasonDiskQuota
	case f.OwnerPendingDiskBytes >= disk.PerUser:
		return corral.ReasonPendingDiskUser
	case f.ServerPendingDiskBytes >= disk.Total:
		return corral.ReasonPendingDiskServer
	case a.Limits.MaxRuns > 0 && f.RunsAdmitted >= a.Limits.MaxRuns:
		return corral.ReasonRunLimit
	case f.ActiveRuns > 0:
		return corral.ReasonBusy
	}
	return ""
}

// refusal says in words why a message was not admitted.
func refusal(ev corral.Admission) string {
	switch ev.Reason {
	case corral.ReasonQuarantined:
		return "the agent is quarantined after repeated limit violations; its owner can release it"
	case corral.ReasonPaused:
		return "the agent is paused: its token budget is spent; its owner can raise it"
	case corral.ReasonPromptTooLarge:
		return "the message is larger than the agent's prompt limit"
	case corral.ReasonBudgetExhausted:
		return "the agent has used its whole token budget"
	case corral.ReasonDiskQuota:
		return "the agent's change sets waiting for review hold as much disk as its limit allows; approve or reject some first"
	case corral.ReasonPendingDiskUser:
		return "the change sets waiting for review of all the owner's agents hold as much disk as the server allows one person"
	case corral.ReasonPendingDiskServer:
		return "the change sets waiting for review on this server hold as much disk as it allows"
	case corral.ReasonRunLimit:
		return "the agent has had as many runs as its limit allows"
	case corral.ReasonBusy:
		return "a run of this agent is still going: wait for it, or stop it"
	}
	return "the message was not admitted"
}

// load reads the agent with the actor's level, fresh, and applies the
// policy.
func (s *Runs) load(ctx context.Context, actor corral.User, agentID string, action access.Action) (corral.Agent, error) {
	return loadAgent(ctx, s.store, actor, agentID, action)
}

// loadRun reads a run and checks the actor's access to its agent. A run of
// an agent the actor may not see is not found, like a missing one.
func (s *Runs) loadRun(ctx context.Context, actor corral.User, runID string, action access.Action) (corral.Run, error) {
	run, _, err := s.loadRunAgent(ctx, actor, runID, action)
	return run, err
}

// loadRunAgent is loadRun with the run's agent, as actor has it.
func (s *Runs) loadRunAgent(ctx context.Context, actor corral.User, runID string, action access.Action) (corral.Run, corral.Agent, error) {
	run, err := s.store.Run(ctx, runID)
	if err != nil {
		return corral.Run{}, corral.Agent{}, err
	}
	a, err := s.store.Agent(ctx, run.AgentID, actor.ID)
	if err != nil {
		if corral.ErrorCode(err) == corral.ENOTFOUND {
			return corral.Run{}, corral.Agent{}, corral.NotFound("run")
		}
		return corral.Run{}, corral.Agent{}, err
	}
	if action == access.StopOwnRun && (run.TriggeredBy == nil || run.TriggeredBy.ID != actor.ID) {
		action = access.StopAnyRun
	}
	return run, a, access.Check(a.Access, action).Err("run", action)
}

// List returns an agent's runs, newest first.
func (s *Runs) List(ctx context.Context, actor corral.User, agentID string) ([]corral.Run, error) {
	if _, err := s.load(ctx, actor, agentID, access.ViewRuns); err != nil {
		return nil, err
	}
	return s.store.Runs(ctx, agentID, 0)
}

// Get returns one run.
func (s *Runs) Get(ctx context.Context, actor corral.User, runID string) (corral.Run, error) {
	return s.loadRun(ctx, actor, runID, access.ViewRuns)
}

// Trace returns a run's trace.
func (s *Runs) Trace(ctx context.Context, actor corral.User, runID string) ([]trace.Event, error) {
	if _, err := s.loadRun(ctx, actor, runID, access.ViewRuns); err != nil {
		return nil, err
	}
	return s.store.Trace(ctx, runID)
}

// Stop asks a run to end at its next safe point. Runners may stop the runs
// they started; editors any run.
func (s *Runs) Stop(ctx context.Context, actor corral.User, runID string) (corral.Run, error) {
	run, err := s.loadRun(ctx, actor, runID, access.StopOwnRun)
	if err != nil {
		return corral.Run{}, err
	}
	if !corral.RunActive(run.Status) {
		return corral.Run{}, corral.Errorf(corral.ECONFLICT, "the run has already ended (%s)", run.Status)
	}
	return run, s.engine.Stop(ctx, runID)
}

// Kill ends a run at once.
func (s *Runs) Kill(ctx context.Context, actor corral.User, runID string) (corral.Run, error) {
	run, err := s.loadRun(ctx, actor, runID, access.KillRun)
	if err != nil {
		return corral.Run{}, err
	}
	if !corral.RunActive(run.Status) {
		return corral.Run{}, corral.Errorf(corral.ECONFLICT, "the run has already ended (%s)", run.Status)
	}
	return run, s.engine.Kill(ctx, runID)
}

// recheck is how often a live watch re-checks access while no event comes.
const recheck = 2 * time.Second

// WatchFrom is where a watch resumes: after trace event Seq and, of the
// output of the tool call running as of that event, after its first
// Output bytes. The zero value is the start.
type WatchFrom struct {
	Seq    int64
	Output int
}

// Watch streams a run's trace to emit: the events so far after from (the
// zero value: all of them; a client resuming after a broken stream names
// where it got to), then each new one as it happens, until the run ends
// or ctx is done. Access is checked
// afresh before every event and every few seconds, so a watcher whose
// access is revoked is cut off on the next one (the error says so).
func (s *Runs) Watch(ctx context.Context, actor corral.User, runID string, from WatchFrom, emit func(corral.RunEvent) error) error {
	if _, err := s.loadRun(ctx, actor, runID, access.ViewRuns); err != nil {
		return err
	}
	last := max(from.Seq, 0)
	sent := map[string]int{} // bytes of each tool call's output sent
	// Output bytes the client already has of the command running as of
	// from.Seq: that command's output is the first to come before a new
	// tool_call event (each command, a re-attached one too, starts with
	// one, and its offsets count from there).
	resumed := max(from.Output, 0)
	send := func(e corral.RunEvent) error {
		if e.Trace != nil && e.Trace.Seq <= last {
			return nil
		}
		if o := e.Output; o != nil {
			// A snapshot and live pieces may overlap: send each byte once.
			done := max(sent[o.ToolCallID], resumed)
			if o.Offset+len(o.Text) <= done {
				return nil
			}
			if o.Offset < done {
				o = &corral.RunOutput{ToolCallID: o.ToolCallID, Offset: done, Text: o.Text[done-o.Offset:]}
				e = corral.RunEvent{Output: o}
			}
			sent[o.ToolCallID] = o.Offset + len(o.Text)
		}
		if _, err := s.loadRun(ctx, actor, runID, access.ViewRuns); err != nil {
			return err
		}
		if err := emit(e); err != nil {
			return err
		}
		if e.Trace != nil {
			last = e.Trace.Seq
			if e.Trace.Type == trace.ToolCall {
				// A new command: its output counts from zero, even if the
				// model reused a call id.
				clear(sent)
				resumed = 0
			}
		}
		return nil
	}
	tick := time.NewTicker(recheck)
	defer tick.Stop()
	for {
		// Subscribe before reading, so nothing falls between the two.
		ch, cancel := s.feed.Subscribe(runID)
		done, err := s.catchUp(ctx, runID, send)
		if err != nil || done {
			cancel()
			return err
		}
		err = s.follow(ctx, ch, tick.C, send, func() error {
			_, err := s.loadRun(ctx, actor, runID, access.ViewRuns)
			return err
		})
		cancel()
		if err != nil {
			return err
		}
		// The channel closed: the run ended, or this watcher fell behind.
		// Catch up from the store and go on if the run is still going.
	}
}

// catchUp sends the stored events not sent yet and reports whether the
// run has ended.
func (s *Runs) catchUp(ctx context.Context, runID string, send func(corral.RunEvent) error) (bool, error) {
	run, err := s.store.Run(ctx, runID)
	if err != nil {
		return false, err
	}
	events, err := s.store.Trace(ctx, runID)
	if err != nil {
		return false, err
	}
	for i := range events {
		if err := send(corral.RunEvent{Trace: &events[i]}); err != nil {
			return false, err
		}
	}
	// What the running tool wrote before this watcher subscribed.
	if o, ok := s.feed.OutputSoFar(runID); ok && o.Text != "" {
		if err := send(corral.RunEvent{Output: &o}); err != nil {
			return false, err
		}
	}
	// The status was read before the trace, and a run's last event is
	// written before its final status: a run that had ended then has its
	// whole trace in what was sent.
	return !corral.RunActive(run.Status), nil
}

func (s *Runs) follow(ctx context.Context, ch <-chan corral.RunEvent, tick <-chan time.Time, send func(corral.RunEvent) error, check func() error) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick:
			if err := check(); err != nil {
				return err
			}
		case e, ok := <-ch:
			if !ok {
				return nil
			}
			if err := send(e); err != nil {
				return err
			}
		}
	}
}

// Tree returns the delegation tree below a run, the run included, oldest
// first: each run of it the actor may view, and only where the actor may
// view every run between it and the one asked for, so a run the actor may
// not see hides what it started too.
func (s *Runs) Tree(ctx context.Context, actor corral.User, runID string) ([]corral.Run, error) {
	top, err := s.loadRun(ctx, actor, runID, access.ViewRuns)
	if err != nil {
		return nil, err
	}
	all, err := s.store.TreeRuns(ctx, top.Root())
	if err != nil {
		return nil, err
	}
	may := map[string]bool{top.AgentID: true} // by agent: the actor's view, read once
	in := map[string]bool{top.ID: true}
	out := []corral.Run{top}
	for _, r := range all { // oldest first: a parent comes before its children
		if r.ID == top.ID || !in[r.ParentRunID] {
			continue
		}
		ok, seen := may[r.AgentID]
		if !seen {
			a, err := s.store.Agent(ctx, r.AgentID, actor.ID)
			switch {
			case err == nil:
				ok = access.Check(a.Access, access.ViewRuns) == access.Allow
			case corral.ErrorCode(err) == corral.ENOTFOUND:
			default:
				return nil, err
			}
			may[r.AgentID] = ok
		}
		if ok {
			in[r.ID] = true
			out = append(out, r)
		}
	}
	return out, nil
}
