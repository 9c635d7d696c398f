package service_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral"
	"corral/internal/runner"
	"corral/internal/service"
	"corral/internal/store"
	"corral/internal/trace"
)

// fakeEngine hands Watch a live channel and an output snapshot the test
// controls.
type fakeEngine struct {
	ch       chan runner.Event
	snapshot runner.Output
	// snapped runs when Watch first asks for the snapshot: the end of its
	// catch-up from the store.
	snapped func()
	calls   int
}

func (f *fakeEngine) Start(corral.Run, corral.Message, corral.Admission) {}
func (f *fakeEngine) Stop(context.Context, string) error                 { return nil }
func (f *fakeEngine) Kill(context.Context, string) error                 { return nil }
func (f *fakeEngine) Note(context.Context, string, string, any)          {}
func (f *fakeEngine) Subscribe(string) (<-chan runner.Event, func())     { return f.ch, func() {} }
func (f *fakeEngine) OutputSoFar(string) (runner.Output, bool) {
	f.calls++
	if f.calls > 1 {
		return runner.Output{}, false // the command has ended by then
	}
	f.snapped()
	return f.snapshot, true
}

// TestWatchSendsEachOutputByteOnce feeds Watch a snapshot of a command's
// output and live pieces that overlap it: the watcher gets every byte
// once, in order, and a new command's output starts afresh even under a
// reused call id. A watcher resuming where an earlier stream broke (the
// API's Last-Event-ID) gets only what it did not have.
func TestWatchSendsEachOutputByteOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		from service.WatchFrom
		want string
	}{
		{"from the start", service.WatchFrom{}, "admitted tool_call out:abcdef out:gh out:ij tool_call out:new ended"},
		{"after the first command's start", service.WatchFrom{Seq: 2}, "out:abcdef out:gh out:ij tool_call out:new ended"},
		{"inside its snapshot", service.WatchFrom{Seq: 2, Output: 5}, "out:f out:gh out:ij tool_call out:new ended"},
		{"inside its live output", service.WatchFrom{Seq: 2, Output: 7}, "out:h out:ij tool_call out:new ended"},
		{"after all of it", service.WatchFrom{Seq: 2, Output: 10}, "tool_call out:new ended"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := watchOutput(t, tc.from); got != tc.want {
				t.Fatalf("watch sent %s\nwant       %s", got, tc.want)
			}
		})
	}
}

// watchOutput watches a run whose first command has written "abcdef"
// when the watcher catches up, then "ghij" live; a second command under
// the same call id writes "new"; and the run ends. It returns what the
// watcher got, resuming from from.
func watchOutput(t *testing.T, from service.WatchFrom) string {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	u, err := db.CreateUser(ctx, corral.NewUser{Email: "a@example.com", Name: "A", PasswordHash: "x"})
	if err != nil {
		t.Fatal(err)
	}
	agent := corral.Agent{ID: "agt_1", Name: "a", Owner: corral.UserRef{ID: u.ID}, State: corral.StateActive,
		Policy: corral.Policy{FS: corral.FSReadWrite, Changes: corral.ChangesReview, Network: corral.NetworkNone}}
	if err := db.CreateAgent(ctx, agent); err != nil {
		t.Fatal(err)
	}
	run := corral.Run{ID: "run_1", AgentID: agent.ID, MessageID: "msg_1", StageID: "chg_1", TriggeredBy: &corral.UserRef{ID: u.ID}}
	msg := corral.Message{ID: "msg_1", AgentID: agent.ID, Role: corral.RoleUser, Content: "go", RunID: run.ID, Author: &corral.UserRef{ID: u.ID}}
	if _, err := db.Admit(ctx, msg, run, corral.Admission{ID: "adm_1", AgentID: agent.ID, UserID: u.ID}, func(corral.AdmissionFacts) string { return "" }); err != nil {
		t.Fatal(err)
	}
	rec := trace.NewRecorder(db, nil)
	record := func(typ string) trace.Event {
		e, err := rec.Append(ctx, run.ID, typ, map[string]string{"id": "c1"})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	record(trace.Admitted)
	record(trace.ToolCall)

	out := func(offset int, text string) runner.Event {
		return runner.Event{Output: &runner.Output{ToolCallID: "c1", Offset: offset, Text: text}}
	}
	eng := &fakeEngine{ch: make(chan runner.Event, 16), snapshot: runner.Output{ToolCallID: "c1", Text: "abcdef"}}
	// What happens after the watcher caught up: live pieces, some of them
	// already in the snapshot, a second command, and the end.
	eng.snapped = func() {
		eng.ch <- out(3, "def")  // wholly in the snapshot: dropped
		eng.ch <- out(4, "efgh") // overlaps it: "gh" only
		eng.ch <- out(8, "ij")
		second := record(trace.ToolCall) // the model calls again, same id
		eng.ch <- runner.Event{Trace: &second}
		eng.ch <- out(0, "new")
		eng.ch <- out(0, "new") // a duplicate of the new command's output
		ended := record(trace.Ended)
		eng.ch <- runner.Event{Trace: &ended}
		done := run
		done.Status, done.EndedAt = corral.RunCompleted, time.Now()
		if err := db.UpdateRun(ctx, done, corral.RunAdmitted); err != nil {
			t.Fatal(err)
		}
		close(eng.ch)
	}

	runs := service.NewRuns(service.RunsDeps{Store: db, Engine: eng}, service.Config{})
	var got []string
	err = runs.Watch(ctx, u, run.ID, from, func(e runner.Event) error {
		switch {
		case e.Output != nil:
			got = append(got, "out:"+e.Output.Text)
		case e.Trace != nil:
			got = append(got, e.Trace.Type)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(got, " ")
}
