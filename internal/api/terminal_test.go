package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"corral/internal/api"
	"corral/internal/modeltest"
	"corral/internal/poll"
)

// termConn is one browser's terminal.
type termConn struct {
	t      *testing.T
	c      *websocket.Conn
	screen strings.Builder
}

func (c *client) terminal(runID string) (*termConn, *http.Response, error) {
	c.e.t.Helper()
	url := "ws" + strings.TrimPrefix(c.e.srv.URL, "http") + "/api/runs/" + runID + "/terminal"
	h := http.Header{}
	if c.bearer != "" {
		h.Set("Authorization", "Bearer "+c.bearer)
	} else {
		h.Set("Cookie", api.CookieName+"="+c.cookie)
	}
	h.Set("Origin", c.e.srv.URL)
	ws, res, err := websocket.Dial(context.Background(), url, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		return nil, res, err
	}
	tc := &termConn{t: c.e.t.(*testing.T), c: ws}
	c.e.t.Cleanup(func() { ws.CloseNow() })
	return tc, res, nil
}

func (tc *termConn) typeIn(s string) {
	tc.t.Helper()
	if err := tc.c.Write(context.Background(), websocket.MessageBinary, []byte(s)); err != nil {
		tc.t.Fatalf("typing %q: %v", s, err)
	}
}

// until reads the screen until it holds want; it returns the read error
// that ended the screen first, if one did.
func (tc *termConn) until(want string) error {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	for !strings.Contains(tc.screen.String(), want) {
		typ, b, err := tc.c.Read(ctx)
		if err != nil {
			return err
		}
		if typ == websocket.MessageBinary {
			tc.screen.Write(b)
		}
	}
	return nil
}

func (tc *termConn) see(want string) {
	tc.t.Helper()
	if err := tc.until(want); err != nil {
		tc.t.Fatalf("waiting for %q on the terminal: %v; screen so far %q", want, err, tc.screen.String())
	}
}

// closed reads until the connection closes and returns its close code.
func (tc *termConn) closed() websocket.StatusCode {
	tc.t.Helper()
	err := tc.until("\x00never\x00")
	var ce websocket.CloseError
	if !errors.As(err, &ce) {
		tc.t.Fatalf("the terminal ended with %v, not a close frame", err)
	}
	return ce.Code
}

func TestRunTerminal(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	bob := e.signup("bob@example.com", "Bob")
	carol := e.signup("carol@example.com", "Carol")
	id := owner.createAgent("worker")
	owner.grant(id, bob.user.ID, "editor")
	owner.grant(id, carol.user.ID, "runner")
	e.answer(modeltest.Sequence(modeltest.Calls(modeltest.ShellCall("c1", "echo from-the-agent > /tmp/note; sleep 600"))))
	run := owner.send(id, "work while we watch")
	waitFor(t, "the tool to run", func() bool {
		for _, ev := range owner.trace(run.ID) {
			if ev.Type == "tool_call" {
				return true
			}
		}
		return false
	})

	// A runner may not open it; the answer comes before any upgrade.
	if _, res, err := carol.terminal(run.ID); err == nil || res == nil || res.StatusCode != http.StatusForbidden {
		t.Fatalf("a runner's terminal: %v %v, want 403", err, res)
	}

	term, _, err := owner.terminal(run.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The same session as the agent's commands: its /tmp.
	term.typeIn("cat /tmp/note; stty size\n")
	term.see("from-the-agent")
	term.see("24 80")
	b, _ := json.Marshal(map[string]any{"type": "resize", "cols": 120, "rows": 40})
	term.c.Write(context.Background(), websocket.MessageText, b)
	term.typeIn("stty size\n")
	term.see("40 120")

	// A second viewer joins late: the screen so far first, then both see
	// what is typed.
	late, _, err := bob.terminal(run.ID)
	if err != nil {
		t.Fatal(err)
	}
	late.see("from-the-agent")
	late.typeIn("echo $((40+2))\n")
	late.see("42")
	term.see("42")

	// Bob's grant goes: his terminal is closed with 4403, the owner's stays.
	owner.do("DELETE", "/api/agents/"+id+"/grants/"+bob.user.ID, nil).want(http.StatusNoContent)
	if code := late.closed(); code != 4403 {
		t.Fatalf("a revoked viewer's terminal closed with %d, want 4403", code)
	}
	term.typeIn("echo still-here\n")
	term.see("still-here")

	// The run ends: the terminal closes with 4404.
	owner.do("POST", "/api/runs/"+run.ID+"/kill", nil).want(http.StatusAccepted)
	if code := term.closed(); code != 4404 {
		t.Fatalf("the terminal of a run that ended closed with %d, want 4404", code)
	}
	waitFor(t, "the run to end", func() bool { return owner.run(run.ID).Status == "killed" })
	if _, res, err := owner.terminal(run.ID); err == nil || res == nil || res.StatusCode != http.StatusConflict {
		t.Fatalf("an ended run's terminal: %v %v, want 409", err, res)
	}

	// The trace says who opened and closed it, with byte counts.
	var opened, closed []map[string]any
	both := func() bool {
		opened, closed = nil, nil
		for _, ev := range owner.trace(run.ID) {
			var d map[string]any
			json.Unmarshal(ev.Data, &d)
			switch ev.Type {
			case "terminal_opened":
				opened = append(opened, d)
			case "terminal_closed":
				closed = append(closed, d)
			}
		}
		return len(opened) == 2 && len(closed) == 2
	}
	if !poll.Eventually(patience, both) {
		t.Fatalf("terminal events: opened %v closed %v", opened, closed)
	}
	if opened[0]["user_id"] != owner.user.ID || opened[1]["user_id"] != bob.user.ID {
		t.Fatalf("terminal_opened = %v", opened)
	}
	for _, d := range closed {
		if d["bytes_in"].(float64) <= 0 || d["bytes_out"].(float64) <= 0 {
			t.Fatalf("terminal_closed without byte counts: %v", d)
		}
	}
	verify(t, run.ID, owner.trace(run.ID))
}

// TestTerminalRun: a run with no model, started to give a person a shell
// in the agent's sandbox; what they change becomes a change set for
// review when they stop it.
func TestTerminalRun(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	runnerUser := e.signup("runner@example.com", "Runner")
	id := owner.createAgent("worker")
	owner.grant(id, runnerUser.user.ID, "runner")
	runnerUser.do("POST", "/api/agents/"+id+"/terminal", nil).want(http.StatusForbidden)

	var started struct{ Run api.RunView }
	owner.do("POST", "/api/agents/"+id+"/terminal", nil).want(http.StatusCreated).decode(&started)
	run := started.Run
	if run.Driver != "terminal" || run.MessageID != "" {
		t.Fatalf("terminal run = %+v", run)
	}
	waitFor(t, "the run to start", func() bool { return owner.run(run.ID).Status == "running" })
	// One run at a time: a message now is refused as busy.
	owner.do("POST", "/api/agents/"+id+"/messages", map[string]string{"content": "hello"}).want(http.StatusUnprocessableEntity)

	term, _, err := owner.terminal(run.ID)
	if err != nil {
		t.Fatal(err)
	}
	term.typeIn("echo by-hand > made.txt && echo wrote-$((1+1))\n")
	term.see("wrote-2")
	owner.do("POST", "/api/runs/"+run.ID+"/stop", nil).want(http.StatusAccepted)
	if code := term.closed(); code != 4404 {
		t.Fatalf("the stopped run's terminal closed with %d, want 4404", code)
	}
	var done api.RunView
	waitFor(t, "the run to end", func() bool { done = owner.run(run.ID); return done.Status == "cancelled" })
	if done.ChangeSetID == nil {
		t.Fatalf("the terminal run's changes were not proposed: %+v", done)
	}
	var cs struct {
		Status  string
		Entries []struct{ Path string }
	}
	owner.do("GET", "/api/changes/"+*done.ChangeSetID, nil).want(http.StatusOK).decode(&cs)
	if cs.Status != "pending" || len(cs.Entries) != 1 || cs.Entries[0].Path != "made.txt" {
		t.Fatalf("change set = %+v, want made.txt pending review", cs)
	}
	var types []string
	for _, ev := range owner.trace(run.ID) {
		types = append(types, ev.Type)
	}
	if got := strings.Join(types, " "); !strings.HasPrefix(got, "admitted started terminal_opened") || !strings.HasSuffix(got, "ended") {
		t.Fatalf("trace = %s", got)
	}
	if len(e.model.Requests()) != 0 {
		t.Fatalf("a terminal run called the model")
	}
}

// TestTerminalBackpressure: a browser that reads nothing holds the shell
// up, not the server's memory. The shell writes 64 MiB to the terminal
// while the viewer reads nothing: the writer ends up blocked in the tty
// (wchan wait_woken), having written a fraction of it, and the server's
// heap has not grown by anything like what was written. Then the viewer
// reads, and everything arrives.
func TestTerminalBackpressure(t *testing.T) {
	slow(t)
	needSandbox(t)
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("worker")
	var started struct{ Run api.RunView }
	owner.do("POST", "/api/agents/"+id+"/terminal", nil).want(http.StatusCreated).decode(&started)
	waitFor(t, "the run to start", func() bool { return owner.run(started.Run.ID).Status == "running" })
	term, _, err := owner.terminal(started.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	term.typeIn("stty -echo; echo ready-$((1+1))\n")
	term.see("ready-2")
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	const flood = 64 << 20
	term.typeIn(fmt.Sprintf("yes 0123456789abcdef | head -c %d; echo; echo end-$((2+2))\n", flood))
	// The writer on the terminal is head; find it and wait until it is
	// blocked on the tty and writes no more.
	pid := 0
	var wchar, last int64 = 0, -1
	deadline := time.Now().Add(patience)
	for {
		if pid == 0 {
			pid = processOf(fmt.Sprintf("head\x00-c\x00%d", flood))
		}
		if pid != 0 {
			wchan, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", pid))
			wchar = ioWritten(pid)
			if string(wchan) == "wait_woken" && wchar == last {
				break
			}
			last = wchar
		}
		if time.Now().After(deadline) {
			t.Fatalf("the terminal's writer never blocked (pid %d, %d bytes written): something holds its output", pid, wchar)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var during runtime.MemStats
	runtime.ReadMemStats(&during)
	if wchar >= flood/2 {
		t.Fatalf("the writer got %d of %d bytes out with nobody reading", wchar, flood)
	}
	if grew := int64(during.HeapInuse) - int64(before.HeapInuse); grew > 16<<20 {
		t.Fatalf("the server's heap grew by %d bytes while the terminal was not read", grew)
	}
	t.Logf("blocked after %d bytes; heap %d -> %d", wchar, before.HeapInuse, during.HeapInuse)
	// Reading again lets everything through; the screen is not kept here.
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	var total int64
	var tail []byte
	for !strings.Contains(string(tail), "end-4") {
		typ, b, err := term.c.Read(ctx)
		if err != nil {
			t.Fatalf("after %d bytes: %v", total, err)
		}
		if typ == websocket.MessageBinary {
			total += int64(len(b))
			tail = append(tail, b...)
			if len(tail) > 64 {
				tail = tail[len(tail)-64:]
			}
		}
	}
	if total < flood {
		t.Fatalf("the viewer got %d bytes, want the whole %d", total, flood)
	}
}

// processOf is the host pid of the process whose command line is cmdline
// (arguments separated by NULs), 0 if none.
func processOf(cmdline string) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		if b, err := os.ReadFile(d); err == nil && strings.TrimRight(string(b), "\x00") == cmdline {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
			return pid
		}
	}
	return 0
}

// ioWritten is the bytes a process has written (wchar of /proc/PID/io).
func ioWritten(pid int) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
