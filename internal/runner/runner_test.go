package runner_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"corral"
	"corral/internal/gateway"
	"corral/internal/kerneltest"
	"corral/internal/modeltest"
	"corral/internal/node"
	"corral/internal/poll"
	"corral/internal/runner"
	"corral/internal/sandbox"
	"corral/internal/service"
	"corral/internal/store"
	"corral/internal/supervisor"
	"corral/internal/trace"
)

// patience bounds how long a test waits for a run to reach a state. It is
// a liveness bound, not a timing assertion: runs take milliseconds here.
const patience = 2 * time.Minute

// harness is what a runner works with, all real but the model: SQLite in a
// temp dir, staged workspaces, the sandbox, and the gateway talking to the
// fake provider.
type harness struct {
	t        testing.TB
	db       *store.DB
	stages   *service.Stages
	sessions *node.Local
	dataDir  string
	model    *modeltest.Provider
	gateway  *gateway.Gateway
	owner    corral.User
}

// newHarness skips where the sandbox cannot run; the fake model answers
// with script.
func newHarness(t testing.TB, script modeltest.Script) *harness {
	t.Helper()
	if err := sandbox.Available(); err != nil {
		kerneltest.Skip(t, "runs need the sandbox: %v", err)
	}
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "corral.db"))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { db.Close() })

	dataDir := t.TempDir()
	// The sandbox's user must reach staged trees under it; t.TempDir
	// makes its parent private.
	if err := os.Chmod(filepath.Dir(dataDir), 0o711); err != nil {
		t.Fatal(err)
	}
	// Pending change sets keep their staged trees mounted; the mounts must
	// go before the temp dir does.
	t.Cleanup(func() { unmountStages(dataDir) })
	sessions, err := node.New(node.Config{Data: dataDir, UID: sandboxUID(), GID: sandboxUID()})
	if err != nil {
		t.Fatal(err)
	}
	stages := newStages(db, sessions)
	// Runs cut off by the end of a test leave their sessions running, as
	// for a restart: they end before the stages are unmounted.
	t.Cleanup(func() {
		sessions.EndAll(context.Background())
		sessions.Close()
	})

	model := modeltest.New(script)
	t.Cleanup(model.Close)
	gw, err := gateway.New(gateway.Config{BaseURL: model.URL(), APIKey: "sk-test", Model: "test-model"})
	if err != nil {
		t.Fatal(err)
	}
	owner, err := db.CreateUser(ctx, corral.NewUser{Email: "owner@example.com", Name: "Owner", PasswordHash: "$argon2id$fake"})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, db: db, stages: stages, sessions: sessions, dataDir: dataDir, model: model, gateway: gw, owner: owner}
}

// sandboxUID owns workspaces: the sandbox's host user when the tests run
// as root, else nobody changes owners.
func sandboxUID() int {
	if os.Geteuid() == 0 {
		return 65534
	}
	return 0
}

// newRunner returns a runner over store and model, closed when the test
// ends.
func (h *harness) newRunner(store runner.Store, model runner.Model, cfg runner.Config) *runner.Runner {
	r := runner.New(runner.Deps{Store: store, Model: model, Workspaces: h.stages, Node: h.sessions}, cfg)
	h.t.Cleanup(r.Close)
	return r
}

// agent creates an active agent of the owner with limits and the default
// policy (read-write, changes reviewed).
func (h *harness) agent(limits corral.Limits) corral.Agent {
	h.t.Helper()
	a := corral.Agent{
		ID: corral.NewID("agt"), Name: "agent", Model: "test-model",
		Owner:  corral.UserRef{ID: h.owner.ID, Name: h.owner.Name},
		Policy: corral.Policy{FS: corral.DefaultFS, Changes: corral.DefaultChanges, Network: corral.NetworkNone},
		Limits: limits, State: corral.StateActive,
	}
	if err := h.db.CreateAgent(context.Background(), a); err != nil {
		h.t.Fatalf("CreateAgent: %v", err)
	}
	return a
}

// admit records a message and its run the way service.Runs.Send does,
// admitting whatever the facts.
func (h *harness) admit(agent corral.Agent, content string) (corral.Run, corral.Message, corral.Admission) {
	h.t.Helper()
	now := time.Now().UTC()
	by := &corral.UserRef{ID: h.owner.ID, Name: h.owner.Name}
	run := corral.Run{
		ID: corral.NewID("run"), AgentID: agent.ID, Status: corral.RunAdmitted,
		TriggeredBy: by, CreatedAt: now, StageID: corral.NewID("chg"),
	}
	msg := corral.Message{
		ID: corral.NewID("msg"), AgentID: agent.ID, Role: corral.RoleUser, Content: content,
		Author: by, RunID: run.ID, CreatedAt: now,
	}
	run.MessageID = msg.ID
	ev := corral.Admission{ID: corral.NewID("adm"), AgentID: agent.ID, UserID: h.owner.ID, PromptBytes: int64(len(content)), At: now}
	decided, err := h.db.Admit(context.Background(), msg, run, ev, func(corral.AdmissionFacts) string { return "" })
	if err != nil {
		h.t.Fatalf("Admit: %v", err)
	}
	if decided.RunID != run.ID || decided.Reason != "" {
		h.t.Fatalf("Admit = run %q, reason %q; want %s admitted", decided.RunID, decided.Reason, run.ID)
	}
	return run, msg, decided
}

// start admits a run of agent for content and hands it to r.
func (h *harness) start(r *runner.Runner, agent corral.Agent, content string) corral.Run {
	h.t.Helper()
	run, msg, ev := h.admit(agent, content)
	r.Start(run, msg, ev)
	return run
}

// waitRun waits until the run has ended and returns it as stored.
func (h *harness) waitRun(id string) corral.Run {
	h.t.Helper()
	var run corral.Run
	ended := func() bool {
		var err error
		if run, err = h.db.Run(context.Background(), id); err != nil {
			h.t.Fatalf("Run(%s): %v", id, err)
		}
		return !corral.RunActive(run.Status)
	}
	if !poll.Eventually(patience, ended) {
		h.t.Fatalf("run %s is still %s after %v", id, run.Status, patience)
	}
	return run
}

// processesWith lists the processes whose command line contains s.
func processesWith(s string) []string {
	var found []string
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), s) {
			found = append(found, d)
		}
	}
	return found
}

// writeThenAnswer is a model that writes hello.txt, then answers.
func writeThenAnswer(req modeltest.Request) modeltest.Reply {
	if req.Last().Role == "tool" {
		return modeltest.Text("Wrote hello.txt.")
	}
	return modeltest.Calls(modeltest.WriteCall("c1", "hello.txt", "hello\n"))
}

// traceStore is the real store with trace writes counted and, when broken,
// refused.
type traceStore struct {
	*store.DB
	broken   bool
	attempts atomic.Int64
}

func (s *traceStore) AppendTrace(ctx context.Context, e trace.Event) error {
	s.attempts.Add(1)
	if s.broken {
		return errors.New("trace store is broken")
	}
	return s.DB.AppendTrace(ctx, e)
}

func TestTraceFailureNeverFailsARun(t *testing.T) {
	// A run that writes a file and answers records these events.
	wantTypes := []string{"admitted", "started", "usage", "message", "tool_call", "tool_result", "usage", "message", "ended"}
	tests := []struct {
		name         string
		broken       bool
		wantStored   int
		wantFailures int64
	}{
		// The healthy case shows what the broken one must still do, and
		// that the count of events attempted is exact.
		{"trace works", false, len(wantTypes), 0},
		{"trace fails", true, 0, int64(len(wantTypes))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			h := newHarness(t, writeThenAnswer)
			store := &traceStore{DB: h.db, broken: tt.broken}
			r := h.newRunner(store, h.gateway, runner.Config{})
			agent := h.agent(corral.Limits{})
			run := h.start(r, agent, "write hello")

			done := h.waitRun(run.ID)
			if done.Status != corral.RunCompleted || done.ChangeSetID == "" || done.Violation != "" {
				t.Fatalf("run = %s (%s), change set %q, violation %q; want completed with a change set",
					done.Status, done.Reason, done.ChangeSetID, done.Violation)
			}
			wantTokens := corral.Tokens{Input: 2 * modeltest.DefaultInputTokens, Output: 2 * modeltest.DefaultOutputTokens}
			if done.Tokens != wantTokens {
				t.Errorf("run tokens = %+v, want %+v: metering must not depend on the trace", done.Tokens, wantTokens)
			}
			cs, err := h.db.ChangeSet(ctx, done.ChangeSetID)
			if err != nil {
				t.Fatalf("ChangeSet(%s): %v", done.ChangeSetID, err)
			}
			if cs.RunID != run.ID || cs.Status != corral.ChangePending || len(cs.Entries) != 1 ||
				cs.Entries[0].Path != "hello.txt" || cs.Entries[0].Op != "create" {
				t.Errorf("change set = %+v, want hello.txt created, pending review", cs)
			}
			thread, err := h.db.Messages(ctx, agent.ID, "", 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(thread) != 2 || thread[1].Role != corral.RoleAssistant || thread[1].Content != "Wrote hello.txt." || thread[1].RunID != run.ID {
				t.Errorf("thread = %+v, want the message and the run's answer", thread)
			}

			// The ended event is written before the final status, so every
			// attempt has been made by now.
			events, err := h.db.Trace(ctx, run.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(events) != tt.wantStored {
				t.Errorf("trace holds %d events (%s), want %d", len(events), typesOf(events), tt.wantStored)
			}
			if tt.wantStored > 0 {
				if got, want := typesOf(events), strings.Join(wantTypes, " "); got != want {
					t.Errorf("trace = %s\nwant    %s", got, want)
				}
				if err := trace.Verify(events); err != nil {
					t.Errorf("trace does not verify: %v", err)
				}
			}
			if got := store.attempts.Load(); got != int64(len(wantTypes)) {
				t.Errorf("trace writes attempted = %d, want %d", got, len(wantTypes))
			}
			if got := r.TraceFailures(); got != tt.wantFailures {
				t.Errorf("TraceFailures() = %d, want %d", got, tt.wantFailures)
			}
		})
	}
}

func typesOf(events []trace.Event) string {
	var out []string
	for _, e := range events {
		out = append(out, e.Type)
	}
	return strings.Join(out, " ")
}

func TestMaxTurns(t *testing.T) {
	tests := []struct {
		name     string
		maxTurns int
	}{
		{"one call", 1},
		{"three calls", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A model that never stops asking for tools.
			h := newHarness(t, func(modeltest.Request) modeltest.Reply {
				return modeltest.Calls(modeltest.ListCall("", "."))
			})
			r := h.newRunner(h.db, h.gateway, runner.Config{MaxTurns: tt.maxTurns})
			run := h.start(r, h.agent(corral.Limits{}), "look around forever")

			done := h.waitRun(run.ID)
			limit := fmt.Sprintf("limit of %d model calls", tt.maxTurns)
			if done.Status != corral.RunErrored || done.Violation != "" || !strings.Contains(done.Reason, limit) {
				t.Errorf("run = %s, violation %q, reason %q; want errored naming its %s", done.Status, done.Violation, done.Reason, limit)
			}
			if n := len(h.model.Requests()); n != tt.maxTurns {
				t.Errorf("model calls = %d, want %d", n, tt.maxTurns)
			}
		})
	}
}

func TestRunTimeout(t *testing.T) {
	h := newHarness(t, func(modeltest.Request) modeltest.Reply {
		return modeltest.Calls(modeltest.ShellCall("", "sleep 30"))
	})
	r := h.newRunner(h.db, h.gateway, runner.Config{})
	run := h.start(r, h.agent(corral.Limits{RunTimeoutS: 1}), "wait")

	done := h.waitRun(run.ID)
	if done.Status != corral.RunErrored || done.Violation != sandbox.ViolationTimeout {
		t.Errorf("run = %s, violation %q (%s); want errored with violation %q",
			done.Status, done.Violation, done.Reason, sandbox.ViolationTimeout)
	}
	if n := len(h.model.Requests()); n != 1 {
		t.Errorf("model calls = %d, want 1: the run's time ran out in its first tool", n)
	}
}

// TestCloseLeavesRunsToReattach: a closing runner (a server stopping, or
// dying) leaves its runs' sessions running; the next one re-attaches, the
// command's whole output and exit reach the model, and the run completes.
func TestCloseLeavesRunsToReattach(t *testing.T) {
	ctx := context.Background()
	const marker = "sleep 1.4245"
	h := newHarness(t, func(req modeltest.Request) modeltest.Reply {
		if req.Last().Role == "tool" {
			return modeltest.Text("done")
		}
		return modeltest.Calls(modeltest.ShellCall("c1", "echo started; echo s > s.txt; "+marker+"; echo finished; exit 3"))
	})
	first := runner.New(runner.Deps{Store: h.db, Model: h.gateway, Workspaces: h.stages, Node: h.sessions}, runner.Config{})
	agent := h.agent(corral.Limits{})
	run := h.start(first, agent, "work long")
	h.waitProcess(run.ID, marker)

	first.Close()
	left, err := h.db.Run(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if left.Status != corral.RunRunning || !left.EndedAt.IsZero() {
		t.Fatalf("after Close, run = %s (%s), want still running", left.Status, left.Reason)
	}

	second := h.newRunner(h.db, h.gateway, runner.Config{})
	n, back, err := second.Reconcile(ctx)
	if err != nil || n != 0 || back != 1 {
		t.Fatalf("Reconcile = %d reconciled, %d re-attached, %v; want 0, 1, nil", n, back, err)
	}
	done := h.waitRun(run.ID)
	if done.Status != corral.RunCompleted {
		t.Fatalf("re-attached run = %s (%s), want completed", done.Status, done.Reason)
	}
	reqs := h.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model calls = %d, want 2", len(reqs))
	}
	tool := reqs[1].Last()
	if tool.Role != "tool" || !strings.Contains(tool.Content, `"exit_code":3`) || !strings.Contains(tool.Content, `started\nfinished\n`) {
		t.Fatalf("the model got %s %q, want the whole output and exit 3", tool.Role, tool.Content)
	}
	cs, err := h.db.ChangeSet(ctx, done.ChangeSetID)
	if err != nil || len(cs.Entries) != 1 || cs.Entries[0].Path != "s.txt" {
		t.Fatalf("change set = %+v, %v; want s.txt", cs, err)
	}
	events, err := h.db.Trace(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := trace.Verify(events); err != nil {
		t.Errorf("trace does not verify: %v", err)
	}
	if got := typesOf(events); !strings.Contains(got, "tool_call reattached tool_call tool_result usage message ended") {
		t.Errorf("trace = %s, want the re-attachment between the tool's call and its result", got)
	}
	if procs := processesWith(marker); len(procs) != 0 {
		t.Fatalf("processes left after the run: %v", procs)
	}
}

// TestReconcileWhenTheSessionIsGone: when the supervisor died with the
// server, nothing is left to attach to: the run is reconciled, its staged
// work kept for review.
func TestReconcileWhenTheSessionIsGone(t *testing.T) {
	ctx := context.Background()
	const marker = "sleep 4245"
	h := newHarness(t, func(req modeltest.Request) modeltest.Reply {
		if req.Last().Role == "tool" {
			return modeltest.Text("done")
		}
		return modeltest.Calls(modeltest.ShellCall("c1", "echo started > s.txt; "+marker))
	})
	first := runner.New(runner.Deps{Store: h.db, Model: h.gateway, Workspaces: h.stages, Node: h.sessions}, runner.Config{})
	agent := h.agent(corral.Limits{})
	run := h.start(first, agent, "work long")
	h.waitProcess(run.ID, marker)
	first.Close()
	h.killSupervisor(run.ID)
	if !poll.Eventually(patience, func() bool { return len(processesWith(marker)) == 0 }) {
		t.Fatalf("the session outlived its supervisor: %v", processesWith(marker))
	}

	second := h.newRunner(h.db, h.gateway, runner.Config{})
	n, back, err := second.Reconcile(ctx)
	if err != nil || n != 1 || back != 0 {
		t.Fatalf("Reconcile = %d reconciled, %d re-attached, %v; want 1, 0, nil", n, back, err)
	}
	done, err := h.db.Run(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != corral.RunReconciled || done.EndedAt.IsZero() {
		t.Fatalf("after Reconcile, run = %s (%s), want reconciled", done.Status, done.Reason)
	}
	// What it had staged waits for a person.
	cs, err := h.db.ChangeSet(ctx, done.ChangeSetID)
	if err != nil {
		t.Fatalf("reconciled run's change set %q: %v", done.ChangeSetID, err)
	}
	if cs.Status != corral.ChangePending || cs.Mode != corral.ChangesReview || len(cs.Entries) != 1 || cs.Entries[0].Path != "s.txt" {
		t.Errorf("reconciled run's change set = %+v, want s.txt pending review", cs)
	}
	events, err := h.db.Trace(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := trace.Verify(events); err != nil {
		t.Errorf("trace does not verify: %v", err)
	}
	if got := typesOf(events); !strings.HasSuffix(got, "tool_call reconciled ended") {
		t.Errorf("trace = %s, want it to end with the tool's call, then reconciled and ended", got)
	}
	if n, back, err := second.Reconcile(ctx); err != nil || n != 0 || back != 0 {
		t.Errorf("second Reconcile = %d, %d, %v; want 0, 0, nil", n, back, err)
	}
	if _, err := os.Stat(filepath.Join(h.dataDir, "sessions", run.ID)); !os.IsNotExist(err) {
		t.Errorf("the gone session's directory is still there: %v", err)
	}
}

// waitProcess waits until a process of the run with marker in its command
// line runs.
func (h *harness) waitProcess(runID, marker string) {
	h.t.Helper()
	poll.Within(h.t, patience, fmt.Sprintf("%q to start", marker), func() bool {
		if len(processesWith(marker)) > 0 {
			return true
		}
		if got, err := h.db.Run(context.Background(), runID); err == nil && !corral.RunActive(got.Status) {
			h.t.Fatalf("run ended %s (%s) before its tool was seen running", got.Status, got.Reason)
		}
		return false
	})
}

// killSupervisor kills the supervisor of a run's session, as a crash of the
// whole machine's processes would.
func (h *harness) killSupervisor(runID string) {
	h.t.Helper()
	st, err := supervisor.ReadState(filepath.Join(h.dataDir, "sessions", runID))
	if err != nil {
		h.t.Fatal(err)
	}
	if err := syscall.Kill(st.PID, syscall.SIGKILL); err != nil {
		h.t.Fatal(err)
	}
}

// TestBackgroundProcessesLiveUntilTheRunEnds: what one tool call leaves
// running is there for the next, in the same sandbox, and gone once the
// run has ended.
func TestBackgroundProcessesLiveUntilTheRunEnds(t *testing.T) {
	const marker = "sleep 4248"
	h := newHarness(t, modeltest.Sequence(
		modeltest.Calls(modeltest.ShellCall("c1", marker+" >/dev/null 2>&1 & echo $! > /tmp/bg.pid; echo started")),
		modeltest.Calls(modeltest.ShellCall("c2", "kill -0 $(cat /tmp/bg.pid) && echo still-running")),
		modeltest.Text("done"),
	))
	r := h.newRunner(h.db, h.gateway, runner.Config{})
	run := h.start(r, h.agent(corral.Limits{}), "start a server, then check on it")
	done := h.waitRun(run.ID)
	if done.Status != corral.RunCompleted {
		t.Fatalf("run = %s (%s)", done.Status, done.Reason)
	}
	reqs := h.model.Requests()
	if got := reqs[2].Last().Content; !strings.Contains(got, "still-running") {
		t.Fatalf("the second tool call did not find the first one's background process: %s", got)
	}
	if procs := processesWith(marker); len(procs) != 0 {
		t.Fatalf("the background process outlived its run: %v", procs)
	}
}

// TestReconcileMetersCallsInFlight: a model call in flight when the
// server stopped was sent, and its usage never came: the next start
// meters it at the ceiling it reserved, so a crash frees no tokens.
func TestReconcileMetersCallsInFlight(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, modeltest.Sequence())
	agent := h.agent(corral.Limits{})
	if _, err := h.db.Reserve(ctx, corral.Hold{AgentID: agent.ID, Tokens: 4321}); err != nil {
		t.Fatal(err)
	}
	r := h.newRunner(h.db, h.gateway, runner.Config{})
	if _, _, err := r.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := h.db.Agent(ctx, agent.ID, "")
	if err != nil || got.Budget.Used != 4321 || got.Budget.Reserved != 0 {
		t.Fatalf("budget after Reconcile = %+v, %v; want the call in flight used at its ceiling", got.Budget, err)
	}
}

// newStages are the stages of runs over trees, as the server builds them
// (without git repositories).
func newStages(db service.ChangeStore, trees corral.Trees) *service.Stages {
	repos := service.NewRepositories(db, trees, nil, service.Config{})
	return service.NewStages(db, trees, service.NewDecisions(db, trees, repos, service.Config{}), time.Hour, service.Config{})
}
