package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"corral/internal/kerneltest"
	"corral/internal/modeltest"
	"corral/internal/poll"
	"corral/internal/sandbox"
	"corral/internal/supervisor"
)

// httpClient is one signed-in person talking to a real server.
type httpClient struct {
	t    testing.TB
	base string
	c    *http.Client
}

func (c *httpClient) do(method, path string, body any, want int, out any) {
	c.t.Helper()
	var r *strings.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = strings.NewReader(string(b))
	} else {
		r = strings.NewReader("")
	}
	req, _ := http.NewRequest(method, c.base+"/api"+path, r)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.c.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	if res.StatusCode != want {
		var e map[string]any
		json.NewDecoder(res.Body).Decode(&e)
		c.t.Fatalf("%s %s = %d %v, want %d", method, path, res.StatusCode, e, want)
	}
	if out != nil {
		if err := json.NewDecoder(res.Body).Decode(out); err != nil {
			c.t.Fatal(err)
		}
	}
}

type runAnswer struct {
	ID          string  `json:"id"`
	Status      string  `json:"status"`
	Reason      string  `json:"reason"`
	ChangeSetID *string `json:"change_set_id"`
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

// send posts content to the agent and returns its run once it has ended.
func (c *httpClient) send(agentID, content string) runAnswer {
	c.t.Helper()
	var posted struct{ Run runAnswer }
	c.do("POST", "/agents/"+agentID+"/messages", map[string]string{"content": content}, http.StatusAccepted, &posted)
	var r runAnswer
	poll.Until(c.t, "the run to end", func() bool {
		c.do("GET", "/runs/"+posted.Run.ID, nil, http.StatusOK, &r)
		return r.Status != "admitted" && r.Status != "running"
	})
	return r
}

// nodesReady waits until control (as c, an admin) lists n nodes, all
// ready: a node logs "connected to control" once its side of the relay is
// up, a moment before control has taken the connection.
func (c *httpClient) nodesReady(n int) {
	c.t.Helper()
	poll.Until(c.t, "control to see its nodes ready", func() bool {
		var nodes struct{ Items []struct{ Status string } }
		c.do("GET", "/nodes", nil, http.StatusOK, &nodes)
		ready := 0
		for _, it := range nodes.Items {
			if it.Status == "ready" {
				ready++
			}
		}
		return ready == n
	})
}

// signedIn signs a new person up on srv and creates an agent.
func signedIn(t testing.TB, srv *server) (*httpClient, string) {
	jar, _ := cookiejar.New(nil)
	c := &httpClient{t: t, base: srv.base, c: &http.Client{Jar: jar}}
	c.do("POST", "/auth/signup", map[string]string{"email": "a@example.com", "name": "A", "password": "correct horse battery"}, http.StatusCreated, nil)
	var agent struct{ ID string }
	c.do("POST", "/agents", map[string]string{"name": "worker"}, http.StatusCreated, &agent)
	return c, agent.ID
}

// crash kills the server as a crash would: no chance to clean up.
func crash(srv *server) {
	srv.cmd.Process.Signal(syscall.SIGKILL)
	srv.cmd.Wait()
}

// TestRestartMidRunReattaches kills the server (SIGKILL) while a tool
// command sleeps, writes output and a file, then exits, and starts it
// again, once while the command still runs and once after it ended: the
// run's session outlived the server, the new server re-attaches, the
// command's whole output and exit code reach the model, the file is in the
// change set, the run completes with a trace that verifies, and nothing of
// the session is left once the run has ended.
func TestRestartMidRunReattaches(t *testing.T) {
	if err := sandbox.Available(); err != nil {
		kerneltest.Skip(t, "runs need the sandbox: %v", err)
	}
	for _, tc := range []struct {
		name string
		away bool // the server stays down until the command has ended
	}{{"back while the command runs", false}, {"down for longer than the command", true}} {
		t.Run(tc.name, func(t *testing.T) {
			const marker = "sleep 2.4246"
			model := modeltest.New(func(r modeltest.Request) modeltest.Reply {
				if r.Last().Role == "user" {
					return modeltest.Calls(modeltest.ShellCall("c1", "echo part1; echo begun > begun.txt; "+marker+"; echo part2; exit 5"))
				}
				return modeltest.Text("done")
			})
			defer model.Close()
			data := reachableTempDir(t)
			env := []string{"CORRAL_MODEL_BASE_URL=" + model.URL(), "CORRAL_MODEL=scripted"}
			srv := startServer(t, data, env...)
			c, agentID := signedIn(t, srv)
			var posted struct{ Run runAnswer }
			c.do("POST", "/agents/"+agentID+"/messages", map[string]string{"content": "long job"}, http.StatusAccepted, &posted)
			poll.Until(t, "the tool to run", func() bool {
				if !strings.Contains(srv.Log(), "level=ERROR") {
					return len(processesWith(marker)) > 0
				}
				t.Fatalf("the server failed:\n%s", srv.Log())
				return false
			})

			crash(srv)
			exits := filepath.Join(data, "sessions", posted.Run.ID, "cmd", "*.exit")
			if tc.away {
				poll.Until(t, "the command to end while the server is down", func() bool {
					m, _ := filepath.Glob(exits)
					return len(m) == 1
				})
			} else if len(processesWith(marker)) == 0 {
				t.Fatal("the command died with the server")
			}

			srv = startServer(t, data, env...)
			c.base = srv.base
			var run runAnswer
			poll.Until(t, "the run to end", func() bool {
				c.do("GET", "/runs/"+posted.Run.ID, nil, http.StatusOK, &run)
				return run.Status != "admitted" && run.Status != "running"
			})
			if run.Status != "completed" || run.ChangeSetID == nil {
				t.Fatalf("after restart the run is %+v, want completed with a change set\n%s", run, srv.Log())
			}
			if !strings.Contains(srv.Log(), "re-attached") {
				t.Fatalf("the server did not log the re-attachment:\n%s", srv.Log())
			}
			reqs := model.Requests()
			if len(reqs) != 2 {
				t.Fatalf("model calls = %d, want 2", len(reqs))
			}
			tool := reqs[1].Last()
			if tool.Role != "tool" || !strings.Contains(tool.Content, `"exit_code":5`) || !strings.Contains(tool.Content, `part1\npart2\n`) {
				t.Fatalf("the model got %s %q, want the whole output and exit 5", tool.Role, tool.Content)
			}
			var cs struct{ Entries []struct{ Path string } }
			c.do("GET", "/changes/"+*run.ChangeSetID, nil, http.StatusOK, &cs)
			if len(cs.Entries) != 1 || cs.Entries[0].Path != "begun.txt" {
				t.Fatalf("the change set = %+v, want begun.txt", cs)
			}
			var trace struct{ Items []struct{ Type string } }
			c.do("GET", "/runs/"+run.ID+"/trace", nil, http.StatusOK, &trace)
			var types []string
			for _, e := range trace.Items {
				types = append(types, e.Type)
			}
			if got := strings.Join(types, " "); !strings.Contains(got, "tool_call reattached tool_call tool_result") || !strings.HasSuffix(got, "ended") {
				t.Fatalf("trace = %s", got)
			}
			crash(srv) // the data lock: verify reads the database alone
			if code, out := verifyTraces(t, data); code != 0 {
				t.Fatalf("trace verify = %d %s", code, out)
			}
			if procs := processesWith(marker); len(procs) != 0 {
				t.Fatalf("processes left after the run: %v", procs)
			}
			if procs := processesWith(supervisor.Arg + " " + data); len(procs) != 0 {
				t.Fatalf("supervisors left after the run: %v", procs)
			}
			if _, err := os.Stat(filepath.Join(data, "sessions", run.ID)); !os.IsNotExist(err) {
				t.Fatalf("the session's directory is left: %v", err)
			}
			if m := mountsUnder(filepath.Join(data, "sessions")); len(m) != 0 {
				t.Fatalf("mounts left: %v", m)
			}
		})
	}
}

// mountsUnder lists the mount points under dir.
func mountsUnder(dir string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var found []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir) {
			found = append(found, f[4])
		}
	}
	return found
}

// TestRestartMidRunReconciles kills the server and the run's supervisor in
// the middle of a run, as a crash of the machine would, and starts the
// server again: the run's processes are gone, the run is reconciled with a
// trace event saying so, its staged work is kept as a change set, and the
// next message continues the conversation.
func TestRestartMidRunReconciles(t *testing.T) {
	if err := sandbox.Available(); err != nil {
		kerneltest.Skip(t, "runs need the sandbox: %v", err)
	}
	const marker = "sleep 4244"
	model := modeltest.New(func(r modeltest.Request) modeltest.Reply {
		switch last := r.Last(); {
		case last.Role == "user" && last.Content == "long job":
			return modeltest.Calls(modeltest.ShellCall("c1", "echo begun > begun.txt; "+marker))
		case last.Role == "user":
			return modeltest.Text("picking up where we were")
		}
		return modeltest.Text("done")
	})
	defer model.Close()
	data := reachableTempDir(t)
	env := []string{"CORRAL_MODEL_BASE_URL=" + model.URL(), "CORRAL_MODEL=scripted"}
	srv := startServer(t, data, env...)
	c, agentID := signedIn(t, srv)
	var posted struct{ Run runAnswer }
	c.do("POST", "/agents/"+agentID+"/messages", map[string]string{"content": "long job"}, http.StatusAccepted, &posted)
	// The shell's own command line names the marker before its echo has
	// run: wait for the file too, or a loaded machine crashes the server
	// with nothing staged (as CI once did).
	poll.Until(t, "the tool to run", func() bool {
		staged, _ := filepath.Glob(filepath.Join(data, "stages", "*", "tree", "begun.txt"))
		return len(staged) > 0 && len(processesWith(marker)) > 0
	})

	crash(srv)
	st, err := supervisor.ReadState(filepath.Join(data, "sessions", posted.Run.ID))
	if err != nil {
		t.Fatal(err)
	}
	syscall.Kill(st.PID, syscall.SIGKILL)
	poll.Until(t, "the sandbox to die with its supervisor", func() bool { return len(processesWith(marker)) == 0 })

	srv = startServer(t, data, env...)
	c.base = srv.base
	var run runAnswer
	c.do("GET", "/runs/"+posted.Run.ID, nil, http.StatusOK, &run)
	if run.Status != "reconciled" || run.ChangeSetID == nil || !strings.Contains(run.Reason, "server stopped") {
		t.Fatalf("after restart the run is %+v, want reconciled with its work as a change set", run)
	}
	if !strings.Contains(srv.Log(), "reconciled") {
		t.Fatalf("the server did not log the reconciliation:\n%s", srv.Log())
	}
	var trace struct{ Items []struct{ Type string } }
	c.do("GET", "/runs/"+run.ID+"/trace", nil, http.StatusOK, &trace)
	var types []string
	for _, e := range trace.Items {
		types = append(types, e.Type)
	}
	if got := strings.Join(types, " "); !strings.HasSuffix(got, "tool_call reconciled ended") {
		t.Fatalf("trace = %s", got)
	}
	var cs struct {
		Mode    string
		Entries []struct{ Path string }
	}
	c.do("GET", "/changes/"+*run.ChangeSetID, nil, http.StatusOK, &cs)
	if cs.Mode != "review" || len(cs.Entries) != 1 || cs.Entries[0].Path != "begun.txt" {
		t.Fatalf("the reconciled run's change set = %+v", cs)
	}

	// The next message continues the thread from the last checkpoint.
	c.do("POST", "/agents/"+agentID+"/messages", map[string]string{"content": "go on"}, http.StatusAccepted, &posted)
	poll.Until(t, "the next run", func() bool {
		c.do("GET", "/runs/"+posted.Run.ID, nil, http.StatusOK, &run)
		return run.Status != "admitted" && run.Status != "running"
	})
	if run.Status != "completed" {
		t.Fatalf("next run = %+v", run)
	}
	reqs := model.Requests()
	last := reqs[len(reqs)-1]
	var saw []string
	for _, m := range last.Messages {
		saw = append(saw, m.Role+":"+m.Content)
	}
	conv := strings.Join(saw, "\n")
	if !strings.Contains(conv, "user:long job") || !strings.Contains(conv, "tool:") || !strings.Contains(conv, "user:go on") {
		t.Fatalf("the next run did not continue the conversation:\n%s", conv)
	}
}

// TestRestartKeepsTheTerminal: a terminal's shell lives in the run's
// session, so it outlives the server; re-opened after a restart, it shows
// the screen so far and goes on.
func TestRestartKeepsTheTerminal(t *testing.T) {
	if err := sandbox.Available(); err != nil {
		kerneltest.Skip(t, "runs need the sandbox: %v", err)
	}
	const marker = "sleep 4249"
	model := modeltest.New(func(r modeltest.Request) modeltest.Reply {
		return modeltest.Calls(modeltest.ShellCall("c1", marker))
	})
	defer model.Close()
	data := reachableTempDir(t)
	env := []string{"CORRAL_MODEL_BASE_URL=" + model.URL(), "CORRAL_MODEL=scripted"}
	srv := startServer(t, data, env...)
	c, agentID := signedIn(t, srv)
	var posted struct{ Run runAnswer }
	c.do("POST", "/agents/"+agentID+"/messages", map[string]string{"content": "wait"}, http.StatusAccepted, &posted)
	poll.Until(t, "the tool to run", func() bool { return len(processesWith(marker)) > 0 })

	open := func() *websocket.Conn {
		u, _ := url.Parse(c.base)
		h := http.Header{}
		for _, k := range c.c.Jar.Cookies(u) {
			h.Add("Cookie", k.Name+"="+k.Value)
		}
		h.Set("Origin", c.base)
		ws, _, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(c.base, "http")+"/api/runs/"+posted.Run.ID+"/terminal", &websocket.DialOptions{HTTPHeader: h})
		if err != nil {
			t.Fatal(err)
		}
		return ws
	}
	see := func(ws *websocket.Conn, screen *strings.Builder, want string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for !strings.Contains(screen.String(), want) {
			_, b, err := ws.Read(ctx)
			if err != nil {
				t.Fatalf("waiting for %q: %v; screen %q", want, err, screen.String())
			}
			screen.Write(b)
		}
	}
	ws := open()
	var before strings.Builder
	ws.Write(context.Background(), websocket.MessageBinary, []byte("echo $$ > /tmp/shell.pid; echo before-the-$((6*7))\n"))
	see(ws, &before, "before-the-42")

	crash(srv)
	srv = startServer(t, data, env...)
	c.base = srv.base
	ws = open()
	defer ws.CloseNow()
	var after strings.Builder
	see(ws, &after, "before-the-42") // the screen so far
	ws.Write(context.Background(), websocket.MessageBinary, []byte("[ $$ = $(cat /tmp/shell.pid) ] && echo same-$((1+1))-shell\n"))
	see(ws, &after, "same-2-shell")
	c.do("POST", "/runs/"+posted.Run.ID+"/kill", nil, http.StatusAccepted, nil)
}
