package main

import (
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"corral/internal/kerneltest"
	"corral/internal/modeltest"
	"corral/internal/sandbox"
)

// httpClient is one signed-in person talking to a real server.
type httpClient struct {
	t    *testing.T
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

// waitFor polls cond; the bound is for liveness, not a timing assertion.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRestartMidRunReconciles kills the server in the middle of a run, as a
// crash would, and starts it again: the run's processes are gone, the run
// is reconciled with a trace event saying so, its staged work is kept as a
// change set, and the next message continues the conversation.
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

	jar, _ := cookiejar.New(nil)
	c := &httpClient{t: t, base: srv.base, c: &http.Client{Jar: jar}}
	c.do("POST", "/auth/signup", map[string]string{"email": "a@example.com", "name": "A", "password": "correct horse battery"}, http.StatusCreated, nil)
	var agent struct{ ID string }
	c.do("POST", "/agents", map[string]string{"name": "worker"}, http.StatusCreated, &agent)
	var posted struct{ Run runAnswer }
	c.do("POST", "/agents/"+agent.ID+"/messages", map[string]string{"content": "long job"}, http.StatusAccepted, &posted)
	waitFor(t, "the tool to run", func() bool { return len(processesWith(marker)) > 0 })

	// A crash: no chance to clean up.
	srv.cmd.Process.Signal(syscall.SIGKILL)
	srv.cmd.Wait()
	waitFor(t, "the sandbox to die with the server", func() bool { return len(processesWith(marker)) == 0 })

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
	c.do("POST", "/agents/"+agent.ID+"/messages", map[string]string{"content": "go on"}, http.StatusAccepted, &posted)
	waitFor(t, "the next run", func() bool {
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
