// Package runner is Corral's agent loop. A run sends the agent's
// instructions and the conversation to the model through the gateway, runs
// each tool call the model makes as a command of the run's session (one
// sandbox on the run's staged tree for the whole run, on corral.Sessions),
// and feeds the results back until the model answers without tools or
// something ends the run: a stop or kill, a sandbox limit, the run's time,
// its turn limit, or the agent's token budget (which pauses it instead).
//
// After every model turn the conversation is checkpointed in the store, so
// a paused run resumes where it was, a run whose session outlived a
// restart is re-attached and goes on (its commands are found again by
// their ids), and one whose session did not leaves a conversation the next
// message continues. Every step is recorded in the
// run's hash-chained trace and published to live watchers. When a run ends,
// what it changed becomes a change set; only a completed run's ordinary
// changes may be applied without a person.
//
// Admission and authorization are not decided here: the service admits a
// run and checks the caller before it asks the runner for anything.
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"corral"
	"corral/internal/telemetry"
	"corral/internal/trace"
)

// Store is what runs need from storage.
type Store interface {
	corral.RunStore
	corral.MessageStore
	trace.Store
	// Agent loads an agent; the runner passes no user and ignores Access.
	Agent(ctx context.Context, id, userID string) (corral.Agent, error)
}

// Model makes model calls: the gateway.
type Model interface {
	Complete(ctx context.Context, req corral.ModelRequest, m corral.Meter) (corral.ModelResponse, error)
	// ModelName is the model an agent set to model calls: the server's
	// default when it names none.
	ModelName(model string) string
}

// Workspaces stages runs' trees, by the run's stage id, and turns them
// into change sets (service.Stages).
type Workspaces interface {
	Begin(ctx context.Context, agent corral.Agent, id string) error
	// Reopen opens a stage left by a paused run or an earlier process;
	// ENOTFOUND when there is none.
	Reopen(ctx context.Context, agentID, id string) error
	// Finish records the stage's changes as change set id; auto false
	// makes every entry wait for a person whatever the agent's policy.
	Finish(ctx context.Context, agent corral.Agent, runID, id string, auto bool) (corral.ChangeSet, error)
	Discard(ctx context.Context, id string) error
}

// Config holds the runner's settings.
type Config struct {
	// Grace is how long a stopped tool command has between SIGTERM and
	// SIGKILL. Default 5s.
	Grace time.Duration
	// MaxTurns bounds the model calls of one run. Default 50.
	MaxTurns int
	// RunTimeout bounds a run whose agent sets no run_timeout_s. It counts
	// from each start or resume. Default corral.DefaultRunTimeoutS (30
	// minutes), which the API shows as an agent's default.
	RunTimeout time.Duration
	// QuarantineAfter violations within QuarantineWindow quarantine the
	// agent. Defaults 3 and 1 hour.
	QuarantineAfter  int
	QuarantineWindow time.Duration
	// HistoryBytes bounds how much of earlier runs' conversation a new run
	// sends. Default 256 KiB.
	HistoryBytes int
	// EgressCA is the certificate (PEM) of the CA the egress proxy
	// terminates HTTPS with: each agent run's session then reaches the
	// proxy, its commands are given it, and they trust the CA. Nil: this
	// server has no egress proxy, and runs reach nothing but the gateway.
	EgressCA []byte
	// Ended, when set, is told of each run that ends, before its last
	// trace event is written (the egress proxy closes the run's
	// connections and records what they moved). It may be told twice.
	Ended func(runID string)
	// Finished, when set, is told each run's final status once, as its
	// end is recorded (the server's metrics count them).
	Finished func(corral.RunStatus)
	Now      func() time.Time
	Log      *slog.Logger
}

func (c *Config) defaults() {
	if c.Grace == 0 {
		c.Grace = 5 * time.Second
	}
	if c.MaxTurns == 0 {
		c.MaxTurns = 50
	}
	if c.RunTimeout == 0 {
		c.RunTimeout = corral.DefaultRunTimeoutS * time.Second
	}
	if c.QuarantineAfter == 0 {
		c.QuarantineAfter = 3
	}
	if c.QuarantineWindow == 0 {
		c.QuarantineWindow = time.Hour
	}
	if c.HistoryBytes == 0 {
		c.HistoryBytes = 256 << 10
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
}

// Runner executes runs. It is safe for concurrent use.
type Runner struct {
	store Store
	model Model
	ws    Workspaces
	node  corral.Sessions
	cfg   Config
	rec   *trace.Recorder
	hub   *hub

	base     context.Context // cancelled by Close
	shutdown context.CancelFunc
	wg       sync.WaitGroup

	mu     sync.Mutex
	active map[string]*active // by run id

	deleg Delegator // nil: runs are offered no delegation tools
	docs  Retriever // nil: runs are offered no search_documents, and nothing is retrieved
	trees treeBudgets

	tracer *telemetry.Tracer // the runs' spans (spans.go)

	traceFailures atomic.Int64
}

// active is a run whose loop is going.
type active struct {
	run    corral.Run
	ctx    context.Context // carries span, when there is one
	cancel context.CancelFunc
	span   *telemetry.Run // nil: tracing is off

	mu       sync.Mutex
	stopping bool
	stopped  chan struct{} // closed by the first stop: ends a model call's wait to retry
	killed   bool
	// violation: why the run was killed, when a limit outside the sandbox
	// killed it (the egress proxy's caps), in words for viewers.
	violation       corral.Violation
	violationReason string
	// egressEvents counts the egress events recorded, by type (see
	// maxEgressEvents).
	egressEvents map[string]int
	cmdID        string  // the tool command running now in the run's session, if any
	callID       string  // its tool call
	out          *output // and its output so far
	// budgetNeed: the gateway refused one of the run's CLI's model calls
	// for the agent's budget, one that needed this many tokens left; the
	// run pauses when its CLI has ended.
	budgetNeed int64
	// treeSpent: it refused one for the tree's token cap (why, in words);
	// the run ends when its CLI has.
	treeSpent string
	// tools are the spans of the tool calls running now, by the key they
	// run as.
	tools map[string]*telemetry.Tool
}

func (a *active) setOutput(callID string, out *output) {
	a.mu.Lock()
	a.callID, a.out = callID, out
	a.mu.Unlock()
}

// OutputSoFar returns the output the running tool of a run has written so
// far (its first 32 KiB), for a watcher who joins while it runs: live
// Output events carry only what comes after they subscribe.
func (r *Runner) OutputSoFar(runID string) (Output, bool) {
	a := r.lookup(runID)
	if a == nil {
		return Output{}, false
	}
	a.mu.Lock()
	callID, out := a.callID, a.out
	a.mu.Unlock()
	if out == nil {
		return Output{}, false
	}
	return Output{ToolCallID: callID, Text: out.head()}, true
}

// Deps is what a Runner is built on.
type Deps struct {
	Store Store
	Model Model
	// Workspaces stages runs' trees and makes their change sets
	// (service.Stages).
	Workspaces Workspaces
	// Node is where runs' sessions are started.
	Node corral.Sessions
	// Delegator serves the delegation tools (service.Delegation); nil:
	// runs are offered none.
	Delegator Delegator
	// Retriever serves search_documents and retrieves for each run's
	// message (service.Documents); nil: runs are offered no
	// search_documents, and nothing is retrieved.
	Retriever Retriever
	// Tracer makes the runs' spans (nil: none).
	Tracer *telemetry.Tracer
	// Relay passes runs' events on to other controls (runfeed.Publisher;
	// nil: none).
	Relay Relay
}

// Relay passes runs' events on beyond this process: each event the
// runner publishes to its watchers, and each run's end once its final
// status is stored. Neither may block.
type Relay interface {
	Event(runID string, e Event)
	End(runID string)
}

// New returns a Runner over d.
func New(d Deps, cfg Config) *Runner {
	cfg.defaults()
	base, cancel := context.WithCancel(context.Background())
	return &Runner{
		store: d.Store, model: d.Model, ws: d.Workspaces, node: d.Node, cfg: cfg,
		deleg: d.Delegator, docs: d.Retriever, tracer: d.Tracer,
		rec:  trace.NewRecorder(d.Store, cfg.Now),
		hub:  newHub(d.Relay),
		base: base, shutdown: cancel,
		active: map[string]*active{},
	}
}

// Close stops every run's loop without deciding its outcome and waits for
// them, exactly as a crash would: the runs stay running in the store and
// their sessions go on, for the next start-up to re-attach to (Reconcile).
func (r *Runner) Close() {
	r.shutdown()
	r.wg.Wait()
}

// Note records an event of a run's trace that happened outside its loop
// (a terminal opened or closed), on the runner's recorder, so that the
// chain stays one: a terminal may close just after its run has ended.
func (r *Runner) Note(ctx context.Context, runID, typ string, data any) {
	r.record(ctx, runID, typ, data)
}

// TraceFailures counts trace events that could not be written. A failed
// write is logged and counted; it never changes how a run ends.
func (r *Runner) TraceFailures() int64 { return r.traceFailures.Load() }

// Subscribe returns the live events of a run; see hub.subscribe.
func (r *Runner) Subscribe(runID string) (<-chan Event, func()) { return r.hub.subscribe(runID) }

// track registers a run's loop; nil when it is already going or the
// runner is closing.
func (r *Runner) track(run corral.Run) *active {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.active[run.ID] != nil || r.base.Err() != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(r.base)
	ctx, span := r.startSpan(ctx, run, r.active[run.ParentRunID])
	a := &active{run: run, ctx: ctx, cancel: cancel, span: span, stopped: make(chan struct{})}
	r.active[run.ID] = a
	r.wg.Add(1)
	return a
}

// untrack forgets a run's loop: from now on Stop and Kill find it in the
// store. The loop's goroutine still counts for Close until execute returns.
func (r *Runner) untrack(a *active) {
	r.mu.Lock()
	delete(r.active, a.run.ID)
	r.mu.Unlock()
	a.cancel()
}

// Start runs an admitted run in the background. msg is the message that
// started it; ev the admission evidence, recorded as the trace's first
// event.
func (r *Runner) Start(run corral.Run, msg corral.Message, ev corral.Admission) {
	a := r.track(run)
	if a == nil {
		return
	}
	go func() {
		r.record(a.ctx, run.ID, trace.Admitted, map[string]any{
			"message_id":    msg.ID,
			"prompt_bytes":  ev.PromptBytes,
			"runs_admitted": ev.RunsAdmitted,
			"active_runs":   ev.ActiveRuns,
			"tokens_used":   ev.TokensUsed,
			"tokens_budget": ev.TokensBudget,
			// What pending change sets held on disk: the agent's, those of
			// all its owner's agents, and every agent's.
			"pending_disk_bytes":        ev.PendingDiskBytes,
			"owner_pending_disk_bytes":  ev.OwnerPendingDiskBytes,
			"server_pending_disk_bytes": ev.ServerPendingDiskBytes,
		})
		r.execute(a, &msg, false)
	}()
}

// Stop asks a run to end at its next safe point: before a model call or a
// tool call. The tool command running now, if any, gets SIGTERM and, after
// the grace period, SIGKILL. A paused run ends at once.
func (r *Runner) Stop(ctx context.Context, runID string) error {
	if a := r.lookup(runID); a != nil {
		r.stopActive(a)
		return nil
	}
	return r.endPaused(ctx, runID, corral.RunCancelled, "stopped on request while paused")
}

// Kill ends a run at once: its model call is abandoned and every process
// of its sandbox dies.
func (r *Runner) Kill(ctx context.Context, runID string) error {
	if a := r.lookup(runID); a != nil {
		r.killActive(a)
		return nil
	}
	return r.endPaused(ctx, runID, corral.RunKilled, "killed on request while paused")
}

func (r *Runner) lookup(runID string) *active {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.active[runID]
}

// outcome is how a loop ended.
type outcome struct {
	status    corral.RunStatus // a final Run* status, or RunPaused
	reason    string
	violation corral.Violation
	answer    string // the model's final text, for the thread
	shutdown  bool   // the server is stopping: leave the run for reconciliation
	// waitingFor: with status RunPaused, the delegated run whose pause
	// paused this one (its agent's budget is not spent).
	waitingFor string
	// need: with status RunPaused on the budget, what the refused call
	// needed left to go out.
	need int64
}

// execute runs a's loop from its start (msg non-nil) or from its
// checkpoint (a resumed or re-attached run, msg nil), and records how it
// ended. A re-attached run's session is still running from before.
func (r *Runner) execute(a *active, msg *corral.Message, reattach bool) {
	defer r.wg.Done() // Close waits for the end to be recorded, not only the loop
	out, agent, staged := r.loop(a, msg, reattach)
	if !out.shutdown && r.cfg.Ended != nil {
		// While the run is still tracked: what its egress moved is
		// recorded now, before its end; nothing of it after.
		r.cfg.Ended(a.run.ID)
	}
	r.untrack(a)
	ctx := context.WithoutCancel(a.ctx)
	switch {
	case out.shutdown:
		// The stage and the session stay: the next start-up re-attaches
		// or reconciles.
	case out.status == corral.RunPaused && out.waitingFor != "":
		r.endSession(a.run.ID)
		r.pauseWaiting(ctx, a.run, out.waitingFor)
	case out.status == corral.RunPaused:
		r.endSession(a.run.ID)
		r.pause(ctx, a.run, agent, out.need)
	default:
		// Nothing runs any more when the manifest is taken.
		r.endSession(a.run.ID)
		r.end(ctx, a.run, agent, staged, out)
	}
	r.endSpan(a, agent, out)
}

// loop prepares the run and drives the conversation. It returns the
// agent, and whether the run has a stage.
func (r *Runner) loop(a *active, msg *corral.Message, reattach bool) (outcome, corral.Agent, bool) {
	switch a.run.Driver {
	case "":
	case corral.DriverTerminal:
		return r.terminalLoop(a, reattach)
	default:
		return r.cliLoop(a, msg, reattach)
	}
	ctx, run := a.ctx, &a.run
	agent, err := r.store.Agent(ctx, run.AgentID, "")
	if err != nil {
		return r.failed(a, "the agent could not be loaded", err), agent, false
	}

	var conv conversation
	var pending []corral.ToolCall // a re-attached run's calls without results
	at := 0                       // and the index of their message
	if msg != nil {
		if out, ok := r.begin(a, agent); !ok {
			return out, agent, false
		}
		_, prior, err := r.store.LastCheckpoint(ctx, agent.ID)
		if err != nil {
			return r.failed(a, "the conversation could not be loaded", err), agent, true
		}
		if conv, err = decodeConversation(prior); err != nil {
			r.cfg.Log.Error("earlier conversation unreadable; starting afresh", "agent", agent.ID, "err", err)
			conv = nil
		}
		// The model reads the message with what was retrieved for it; the
		// thread keeps it as written.
		content := r.withDocuments(a, msg.Content)
		conv = append(conv.repair().trim(r.cfg.HistoryBytes), corral.ModelMessage{Role: "user", Content: content})
	} else {
		if out, ok := r.again(a, agent, reattach); !ok {
			return out, agent, false
		}
		b, err := r.store.Checkpoint(ctx, run.ID)
		if err == nil {
			conv, err = decodeConversation(b)
		}
		if err != nil {
			return r.failed(a, "the run's conversation could not be loaded", err), agent, true
		}
		if i, open := conv.open(); open {
			// The server stopped while these ran (their commands are in the
			// session, finished or not, under the same ids), or the run
			// paused while a delegated run it waited for was paused (that
			// call finds the same child again).
			pending, at = conv[i].ToolCalls, i
		} else {
			conv = conv.repair()
		}
	}
	if err := r.checkpoint(ctx, run.ID, conv); err != nil {
		return r.failed(a, "the conversation could not be saved", err), agent, true
	}

	timeout := r.cfg.RunTimeout
	if agent.Limits.RunTimeoutS > 0 {
		timeout = time.Duration(agent.Limits.RunTimeoutS) * time.Second
	}
	deadline := time.Now().Add(timeout)
	runCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if !reattach {
		spec := sessionSpec(*run, agent, timeout)
		spec.Egress = r.cfg.EgressCA != nil
		if err := r.node.StartSession(r.as(ctx, *run), spec); err != nil {
			return r.failed(a, "the sandbox could not be started: "+safeMessage(err), err), agent, true
		}
		if err := r.installCA(a); err != nil {
			return r.failed(a, "the egress proxy's CA could not be installed in the sandbox", err), agent, true
		}
	}
	if pending != nil {
		var out outcome
		var done bool
		if conv, out, done = r.calls(a, agent, conv, at, pending, runCtx, deadline); done {
			return out, agent, true
		}
	}
	system := corral.ModelMessage{Role: "system", Content: systemPrompt(agent)}
	m := &meter{r: r, runID: run.ID, agentID: agent.ID}

	for turn := 0; ; turn++ {
		if out, done := r.interrupted(a, runCtx); done {
			return out, agent, true
		}
		if turn == r.cfg.MaxTurns {
			return outcome{status: corral.RunErrored, reason: fmt.Sprintf("the run reached its limit of %d model calls", r.cfg.MaxTurns)}, agent, true
		}
		if !r.mayGoOn(a) {
			return revoked, agent, true
		}
		req := corral.ModelRequest{
			Model:    agent.Model,
			Messages: append([]corral.ModelMessage{system}, conv...),
			Tools:    r.offered(),
			OnDelta: func(d corral.ModelDelta) {
				r.hub.publish(run.ID, Event{Delta: d.Content})
			},
			OnRetry: func(rt corral.ModelRetry) {
				r.record(ctx, run.ID, trace.Retry, map[string]any{
					"attempt": rt.Attempt, "status": rt.Status, "wait_ms": rt.Wait.Milliseconds(), "message": rt.Message,
				})
			},
			Interrupt: a.stopped,
		}
		release, err := r.reserveTree(runCtx, *run, requestSize(req))
		if err != nil {
			if out, done := r.interrupted(a, runCtx); done {
				return out, agent, true
			}
			var spent errTreeSpent
			if errors.As(err, &spent) {
				return outcome{status: corral.RunErrored, reason: spent.Error()}, agent, true
			}
			return r.failed(a, "the tree's token cap could not be checked", err), agent, true
		}
		resp, err := r.model.Complete(runCtx, req, m)
		release()
		if refused := (budgetRefused{}); errors.As(err, &refused) {
			return outcome{status: corral.RunPaused, need: refused.need}, agent, true
		}
		if err != nil {
			if out, done := r.interrupted(a, runCtx); done {
				return out, agent, true
			}
			return r.failed(a, "the model call failed: "+safeMessage(err), err), agent, true
		}
		conv = append(conv, resp.Message)
		r.record(ctx, run.ID, trace.Message, messageData(resp))
		if err := r.checkpoint(ctx, run.ID, conv); err != nil {
			return r.failed(a, "the conversation could not be saved", err), agent, true
		}
		if len(resp.Message.ToolCalls) == 0 {
			return outcome{status: corral.RunCompleted, reason: "the model answered", answer: resp.Message.Content}, agent, true
		}
		var out outcome
		var done bool
		if conv, out, done = r.calls(a, agent, conv, len(conv)-1, resp.Message.ToolCalls, runCtx, deadline); done {
			return out, agent, true
		}
	}
}

// begin starts an admitted run: running in the store, started in the
// trace, its workspace staged. ok false ends the loop with out (a run
// stopped, killed or reconciled before it started is left as it is).
func (r *Runner) begin(a *active, agent corral.Agent) (out outcome, ok bool) {
	ctx, run := a.ctx, &a.run
	run.Status, run.StartedAt = corral.RunRunning, r.cfg.Now().UTC()
	if err := r.store.UpdateRun(ctx, *run, corral.RunAdmitted); err != nil {
		r.cfg.Log.Warn("run not started", "run", run.ID, "err", err)
		return outcome{shutdown: true}, false
	}
	data := map[string]any{"model": agent.Model, "fs": agent.Policy.FS, "changes": agent.Policy.Changes}
	if run.Driver != "" {
		data["driver"] = run.Driver
	}
	r.record(ctx, run.ID, trace.Started, data)
	if err := r.ws.Begin(ctx, agent, run.StageID); err != nil {
		return r.failed(a, "the workspace could not be staged: "+safeMessage(err), err), false
	}
	return outcome{}, true
}

// again takes up a resumed or re-attached run: its trace says which, and
// its staged workspace is reopened.
func (r *Runner) again(a *active, agent corral.Agent, reattach bool) (out outcome, ok bool) {
	ctx, run := a.ctx, &a.run
	if reattach {
		r.record(ctx, run.ID, trace.Reattached, map[string]any{})
	} else {
		r.record(ctx, run.ID, trace.Resumed, map[string]any{"budget_tokens": agent.Budget.Tokens, "budget_used": agent.Budget.Used})
	}
	if err := r.ws.Reopen(ctx, agent.ID, run.StageID); err != nil {
		return r.failed(a, "the run's staged workspace could not be reopened", err), false
	}
	return outcome{}, true
}

// interrupted reports whether the run must end now, and how: killed,
// stopped, out of time, or the server stopping.
func (r *Runner) interrupted(a *active, runCtx context.Context) (outcome, bool) {
	stopping, killed := a.state()
	switch {
	case killed:
		a.mu.Lock()
		v, why := a.violation, a.violationReason
		a.mu.Unlock()
		if v != "" {
			return outcome{status: corral.RunErrored, violation: v, reason: why}, true
		}
		return outcome{status: corral.RunKilled, reason: "killed on request"}, true
	case r.base.Err() != nil:
		return outcome{shutdown: true}, true
	case stopping:
		return outcome{status: corral.RunCancelled, reason: "stopped on request"}, true
	case runCtx.Err() != nil:
		return outcome{status: corral.RunErrored, violation: corral.ViolationTimeout, reason: "the run ran out of time"}, true
	}
	return outcome{}, false
}

// failed is the outcome of a failure of Corral or the provider. The cause
// goes to the log; reason is what viewers see.
func (r *Runner) failed(a *active, reason string, err error) outcome {
	if out, done := r.interrupted(a, a.ctx); done {
		return out
	}
	r.cfg.Log.Error("run failed", "run", a.run.ID, "reason", reason, "err", err)
	return outcome{status: corral.RunErrored, reason: reason}
}

// safeMessage is the part of an error a viewer may read: the message of a
// *corral.Error, which never holds a secret, and nothing of other errors.
func safeMessage(err error) string {
	var e *corral.Error
	if errors.As(err, &e) && e.Message != "" {
		return e.Message
	}
	return "internal error"
}

func systemPrompt(a corral.Agent) string {
	const base = "You are a coding agent working in a sandbox. Your workspace is /workspace, " +
		"which is also the working directory. Use the tools to inspect and change it. " +
		"There is no network. Your changes are proposals that a person may review."
	prompt := base
	if a.Policy.FS == corral.FSReadOnly {
		prompt += " The workspace is read-only for you: writes will fail."
	}
	if a.Instructions != "" {
		prompt += "\n\n" + a.Instructions
	}
	return prompt
}

func messageData(resp corral.ModelResponse) map[string]any {
	calls := make([]map[string]string, 0, len(resp.Message.ToolCalls))
	for _, tc := range resp.Message.ToolCalls {
		calls = append(calls, map[string]string{"id": tc.ID, "name": tc.Name})
	}
	return map[string]any{"role": "assistant", "content": resp.Message.Content, "tool_calls": calls, "model": resp.Model}
}

// checkpoint saves the conversation so far.
func (r *Runner) checkpoint(ctx context.Context, runID string, conv conversation) error {
	b, err := conv.encode()
	if err != nil {
		return err
	}
	return r.store.SaveCheckpoint(context.WithoutCancel(ctx), runID, b)
}

// record appends a trace event and publishes it. A failure is logged and
// counted, never returned: the trace must not decide a run's outcome.
func (r *Runner) record(ctx context.Context, runID, typ string, data any) {
	e, err := r.rec.Append(context.WithoutCancel(ctx), runID, typ, data)
	if err != nil {
		r.traceFailures.Add(1)
		r.cfg.Log.Error("trace event not written", "run", runID, "type", typ, "err", err)
		return
	}
	r.hub.publish(runID, Event{Trace: &e})
}

// end records how a run ended: its changes become a change set, the
// model's answer joins the thread, and repeated violations quarantine the
// agent.
func (r *Runner) end(ctx context.Context, run corral.Run, agent corral.Agent, staged bool, out outcome) {
	// The answer first: a change set applied at once (auto mode) is
	// committed with it.
	if out.answer != "" {
		m := corral.Message{ID: corral.NewID("msg"), AgentID: run.AgentID, Role: corral.RoleAssistant,
			Content: out.answer, RunID: run.ID, CreatedAt: r.cfg.Now().UTC()}
		if r.docs != nil {
			m.Sources = r.sources(ctx, run.ID)
		}
		if err := r.store.AddMessage(ctx, m); err != nil {
			r.cfg.Log.Error("answer not added to the thread", "run", run.ID, "err", err)
		}
	}
	if staged {
		// A delegated run's changes always wait for a person: the person
		// who started the tree did not ask for them.
		auto := out.status == corral.RunCompleted && run.Depth == 0
		cs, err := r.ws.Finish(ctx, agent, run.ID, run.StageID, auto)
		if err != nil {
			r.cfg.Log.Error("run's changes not recorded", "run", run.ID, "err", err)
			if out.status == corral.RunCompleted {
				out.status, out.reason = corral.RunErrored, "the run's changes could not be recorded"
			}
		}
		run.ChangeSetID = cs.ID
	}
	from := run.Status
	run.Status, run.Reason, run.Violation, run.EndedAt = out.status, out.reason, out.violation, r.cfg.Now().UTC()
	if out.violation != "" {
		r.quarantine(ctx, run)
	}
	// The last event is written before the final status, so whoever reads
	// a final status finds the whole trace.
	r.ended(ctx, run, func() {
		if err := r.store.UpdateRun(ctx, run, from); err != nil {
			r.cfg.Log.Error("run's end not recorded", "run", run.ID, "err", err)
		}
	})
}

// ended writes the last trace event of a run, then calls settle (which
// stores the final status; nil when it is stored already), then lets the
// run's watchers go.
func (r *Runner) ended(ctx context.Context, run corral.Run, settle func()) {
	if r.cfg.Ended != nil {
		r.cfg.Ended(run.ID)
	}
	tokens := run.Tokens
	if stored, err := r.store.Run(ctx, run.ID); err == nil {
		tokens = stored.Tokens
	}
	r.record(ctx, run.ID, trace.Ended, map[string]any{
		"status": run.Status, "reason": run.Reason, "violation": run.Violation,
		"change_set_id": run.ChangeSetID,
		"tokens":        map[string]int64{"input": tokens.Input, "output": tokens.Output},
	})
	if settle != nil {
		settle()
	}
	r.rec.Forget(run.ID)
	r.hub.end(run.ID)
	if r.cfg.Finished != nil {
		r.cfg.Finished(run.Status)
	}
	r.afterEnd(ctx, run)
}

// quarantine quarantines the agent when it has had QuarantineAfter
// violations within the window, counting run's, which is not stored as
// ended yet.
func (r *Runner) quarantine(ctx context.Context, run corral.Run) {
	n, err := r.store.CountViolations(ctx, run.AgentID, r.cfg.Now().Add(-r.cfg.QuarantineWindow))
	if err != nil {
		r.cfg.Log.Error("counting violations", "agent", run.AgentID, "err", err)
		return
	}
	n++
	if n < int64(r.cfg.QuarantineAfter) {
		return
	}
	ok, err := r.store.SetAgentState(ctx, run.AgentID, corral.StateQuarantined, corral.StateActive, corral.StatePaused)
	if err != nil {
		r.cfg.Log.Error("quarantining", "agent", run.AgentID, "err", err)
		return
	}
	if ok {
		r.cfg.Log.Warn("agent quarantined", "agent", run.AgentID, "violations", n)
		r.record(ctx, run.ID, trace.Quarantined, map[string]any{
			"violations": n, "window_s": int64(r.cfg.QuarantineWindow / time.Second),
		})
	}
}
