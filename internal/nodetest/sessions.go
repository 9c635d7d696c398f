package nodetest

// The cases of corral.Sessions: a run's session from start to end, its
// commands, their output and signals, its terminal; and the calls about a
// session that is not there, which need no sandbox.

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"corral"
	"corral/internal/kerneltest"
	"corral/internal/sandbox"
)

var env = []string{"PATH=/usr/bin:/bin"}

// start stages a tree for the run and starts its session on it, where the
// sandbox can run.
func start(t *testing.T, s Subject, run string) {
	t.Helper()
	if err := sandbox.Available(); err != nil {
		kerneltest.Skip(t, "sessions need the sandbox: %v", err)
	}
	stage(t, s.Trees, "agt_"+run, "chg_"+run)
	if err := s.Sessions.StartSession(acting, corral.SessionSpec{ID: run, StageID: "chg_" + run, Wall: 10 * time.Minute}); err != nil {
		t.Fatalf("StartSession: %v", err)
	}
}

// execIn starts a command in the run's session.
func execIn(t *testing.T, ss corral.Sessions, run, id, script string, timeout time.Duration) {
	t.Helper()
	if err := ss.Exec(acting, run, corral.Command{ID: id, Argv: []string{"/bin/sh", "-c", script}, Env: env, Timeout: timeout}); err != nil {
		t.Fatalf("Exec(%s): %v", id, err)
	}
}

// outputUntilExit reads a command's output to its exit.
func outputUntilExit(t *testing.T, ss corral.Sessions, run, cmd string) (string, *corral.CommandExit) {
	t.Helper()
	var out []byte
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		o, err := ss.Output(acting, run, cmd, int64(len(out)), true)
		if err != nil {
			t.Fatalf("Output(%s): %v", cmd, err)
		}
		out = append(out, o.Data...)
		if o.Exit != nil {
			return string(out), o.Exit
		}
	}
	t.Fatalf("command %s did not end; output %q", cmd, out)
	return "", nil
}

// testNoSession: the calls about a session that never started.
func testNoSession(t *testing.T, newSubject NewSubject) {
	ss := newSubject(t, Setup{}).Sessions
	const run = "run_none"
	_, err := ss.Session(acting, run)
	wantCode(t, "Session", err, corral.ENOTFOUND)
	_, err = ss.Session(acting, "../x")
	wantCode(t, "Session of a bad id", err, corral.EINVALID)
	wantCode(t, "Exec", ss.Exec(acting, run, corral.Command{ID: "c1", Argv: []string{"/bin/true"}}), corral.EUNAVAIL)
	wantCode(t, "Signal", ss.Signal(acting, run, "c1", "TERM"), corral.EUNAVAIL)
	_, err = ss.Output(acting, run, "c1", 0, false)
	wantCode(t, "Output", err, corral.ENOTFOUND)
	_, err = ss.Terminal(acting, run, 80, 24)
	wantCode(t, "Terminal", err, corral.EUNAVAIL)
	wantCode(t, "EndSession", ss.EndSession(acting, run), "")
}

// testAccess: the calls that act in a sandbox, made for nobody or for a
// viewer, are refused where the node replays the access decision
// (Caps.ReplaysAccess), and taken as they come where it does not (the
// session is not there: EUNAVAIL). Those that only read are taken either
// way.
func testAccess(t *testing.T, newSubject NewSubject) {
	s := newSubject(t, Setup{})
	ss := s.Sessions
	const run = "run_none"
	acted := corral.EUNAVAIL
	if s.Caps.ReplaysAccess {
		acted = corral.EFORBIDDEN
	}
	viewer := corral.WithActor(context.Background(), corral.Actor{UserID: "usr_v", AgentID: "agt_suite", Level: corral.LevelViewer})
	for name, ctx := range map[string]context.Context{"for nobody": context.Background(), "for a viewer": viewer} {
		wantCode(t, "Exec "+name, ss.Exec(ctx, run, corral.Command{ID: "c1", Argv: []string{"/bin/true"}}), acted)
		_, err := ss.Terminal(ctx, run, 80, 24)
		wantCode(t, "Terminal "+name, err, acted)
		err = ss.StartSession(ctx, corral.SessionSpec{ID: run, StageID: "chg_none"})
		if s.Caps.ReplaysAccess {
			wantCode(t, "StartSession "+name, err, corral.EFORBIDDEN)
		} else if corral.ErrorCode(err) == corral.EFORBIDDEN {
			t.Fatalf("StartSession %s = %v: refused where the node takes the call as it comes", name, err)
		}
		_, err = ss.Session(ctx, run)
		wantCode(t, "Session "+name, err, corral.ENOTFOUND)
	}
}

// testSession: a run's session from start to end: its commands run once
// each, their output is read from any offset to their exit, a signal or a
// command's own timeout ends one, and an ended session is gone.
func testSession(t *testing.T, newSubject NewSubject) {
	s := newSubject(t, Setup{})
	ss := s.Sessions
	const run = "run_life"
	start(t, s, run)
	err := ss.StartSession(acting, corral.SessionSpec{ID: run, StageID: "chg_" + run, Wall: time.Minute})
	wantCode(t, "StartSession of a running session", err, corral.ECONFLICT)
	if st, err := ss.Session(acting, run); err != nil || st != (corral.SessionState{ID: run, Running: true}) {
		t.Fatalf("Session = %+v, %v; want running", st, err)
	}

	execIn(t, ss, run, "c1", "echo hello; echo to-stderr >&2; exit 3", 0)
	out, exit := outputUntilExit(t, ss, run, "c1")
	if out != "hello\nto-stderr\n" || exit.Code != 3 || exit.Signal != "" || exit.Violation != "" || exit.Output != int64(len(out)) {
		t.Fatalf("c1 wrote %q and exited %+v; want both lines and 3", out, exit)
	}
	if o, err := ss.Output(acting, run, "c1", 6, false); err != nil || string(o.Data) != "to-stderr\n" || o.Exit == nil {
		t.Fatalf("Output(c1) from 6 = %q, %+v, %v; want the rest and the exit", o.Data, o.Exit, err)
	}
	// The same id again runs nothing: its output is the first one's.
	execIn(t, ss, run, "c1", "echo again", 0)
	if again, _ := outputUntilExit(t, ss, run, "c1"); again != out {
		t.Fatalf("c1 exec'd twice wrote %q, want the first run's %q only", again, out)
	}
	_, err = ss.Output(acting, run, "c_none", 0, false)
	wantCode(t, "Output of a command never run", err, corral.ENOTFOUND)
	_, err = ss.Output(acting, run, "c1", -1, false)
	wantCode(t, "Output from a negative offset", err, corral.EINVALID)

	execIn(t, ss, run, "c2", "exec sleep 600", 0)
	wantCode(t, "Signal of no signal", ss.Signal(acting, run, "c2", "STOP"), corral.EINVALID)
	wantCode(t, "Signal of a command never run", ss.Signal(acting, run, "c_none", "TERM"), corral.EINVALID)
	wantCode(t, "Signal of a command that has ended", ss.Signal(acting, run, "c1", "KILL"), corral.EINVALID)
	if err := ss.Signal(acting, run, "c2", "TERM"); err != nil {
		t.Fatal(err)
	}
	if _, exit := outputUntilExit(t, ss, run, "c2"); exit.Code != 128+15 || !strings.HasSuffix(exit.Signal, "TERM") {
		t.Fatalf("c2 exited %+v, want by TERM", exit)
	}
	execIn(t, ss, run, "c3", "exec sleep 600", 100*time.Millisecond)
	if _, exit := outputUntilExit(t, ss, run, "c3"); exit.Violation != corral.ViolationTimeout {
		t.Fatalf("c3 exited %+v, want ended by its timeout", exit)
	}

	if err := ss.EndSession(acting, run); err != nil {
		t.Fatal(err)
	}
	_, err = ss.Session(acting, run)
	wantCode(t, "Session after EndSession", err, corral.ENOTFOUND)
	wantCode(t, "Exec after EndSession", ss.Exec(acting, run, corral.Command{ID: "c4", Argv: []string{"/bin/true"}}), corral.EUNAVAIL)
	wantCode(t, "EndSession again", ss.EndSession(acting, run), "")
}

// testOutputCancelled: a caller that stops waiting for output (a browser
// gone) has its call return with its context's error.
func testOutputCancelled(t *testing.T, newSubject NewSubject) {
	s := newSubject(t, Setup{})
	const run = "run_wait"
	start(t, s, run)
	execIn(t, s.Sessions, run, "c1", "exec sleep 600", 0)
	ctx, cancel := context.WithCancel(acting)
	done := make(chan error, 1)
	go func() {
		_, err := s.Sessions.Output(ctx, run, "c1", 0, true)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the cancelled Output returned %v, want context.Canceled", err)
		}
	case <-time.After(patience):
		t.Fatal("the cancelled Output did not return")
	}
}

// testTerminal: a session's shell: typing, resizing; closing detaches
// this viewer only, so a second one finds the same shell; the shell's
// exit is io.EOF.
func testTerminal(t *testing.T, newSubject NewSubject) {
	s := newSubject(t, Setup{})
	const run = "run_term"
	start(t, s, run)
	term, err := s.Sessions.Terminal(acting, run, 80, 24)
	if err != nil {
		t.Fatal(err)
	}
	sc := NewScreen(t, term)
	// The quotes keep what is typed, which the terminal echoes, from
	// reading as what the shell writes.
	sc.Type("echo h''i\n")
	sc.See("hi\r\n")
	if err := term.Resize(120, 40); err != nil {
		t.Fatal(err)
	}
	// The shell polls for the new size: once, under load, a node.Local's
	// shell ran a stty typed just after Resize returned and read the old
	// size (the resize reached it later).
	sc.Type("until [ \"$(stty size)\" = '40 120' ]; do sleep 0.01; done; echo resized-$((6*7))\n")
	sc.See("resized-42")
	// A program that sets a size of its own is overruled by the viewer's
	// (readline does, as each prompt starts: a resize landing in its
	// read-then-write was undone, and the shell ran on at the old size).
	// (What the program itself reads of its size depends on when the
	// supervisor reads the output before it: only what follows is sure.)
	sc.Type("stty rows 10 cols 20; echo small-$((2+3))\n")
	sc.See("small-5")
	sc.Type("echo back-$(stty size)\n")
	sc.See("back-40 120")
	wantCode(t, "Resize(0, 40)", term.Resize(0, 40), corral.EINVALID)
	// Seen run before the viewer goes: the supervisor drops what a viewer
	// typed and it has not read yet when the viewer detaches.
	sc.Type("X=still-; echo set-$((1+1))\n")
	sc.See("set-2")
	if err := term.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := s.Sessions.Terminal(acting, run, 80, 24)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	sc = NewScreen(t, again)
	sc.Type("echo ${X}here\n")
	sc.See("still-here")
	sc.Type("exit\n")
	if err := sc.Until("\x00never\x00"); err != io.EOF {
		t.Fatalf("the shell exited, and Read returned %v, want io.EOF; screen %q", err, sc.String())
	}
}
