package main

import (
	"context"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/internal/kerneltest"
	"corral/internal/modeltest"
	"corral/internal/poll"
	"corral/internal/sandbox"
)

// TestSecondServerOnOneDataDirectory starts a server, gives it a run that
// is still working, and starts a second server on the same data directory,
// once on another port and once on the first one's: each exits at once
// with a clear error, having touched nothing, and the first server's run
// completes and its trace verifies.
func TestSecondServerOnOneDataDirectory(t *testing.T) {
	if err := sandbox.Available(); err != nil {
		kerneltest.Skip(t, "runs need the sandbox: %v", err)
	}
	hold := make(chan struct{})
	model := modeltest.New(modeltest.Sequence(
		modeltest.Calls(modeltest.WriteCall("c1", "work.txt", "half done\n")),
		modeltest.Reply{Content: "all done", Block: hold},
	))
	defer model.Close()
	data := reachableTempDir(t)
	srv := startServer(t, data, "CORRAL_MODEL_BASE_URL="+model.URL(), "CORRAL_MODEL=scripted")

	jar, _ := cookiejar.New(nil)
	c := &httpClient{t: t, base: srv.base, c: &http.Client{Jar: jar}}
	c.do("POST", "/auth/signup", map[string]string{"email": "a@example.com", "name": "A", "password": "correct horse battery"}, http.StatusCreated, nil)
	var agent struct{ ID string }
	c.do("POST", "/agents", map[string]string{"name": "worker"}, http.StatusCreated, &agent)
	var posted struct{ Run runAnswer }
	c.do("POST", "/agents/"+agent.ID+"/messages", map[string]string{"content": "work"}, http.StatusAccepted, &posted)
	poll.Until(t, "the run's second model call", func() bool { return len(model.Requests()) >= 2 })
	stages, _ := filepath.Glob(filepath.Join(data, "stages", "*"))
	if len(stages) != 1 {
		t.Fatalf("stages = %v, want the running run's", stages)
	}
	dbBefore := fileState(t, filepath.Join(data, "corral.db")) + fileState(t, filepath.Join(data, "corral.db-wal"))

	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.base, "http://"))
	for _, addr := range []string{"127.0.0.1:0", "127.0.0.1:" + port} {
		t.Run("addr "+addr, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // liveness bound
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "serve", "--addr", addr, "--data", data)
			cmd.Env = append(os.Environ(), "CORRAL_TEST_AS_MAIN=1")
			out, err := cmd.CombinedOutput()
			if err == nil || ctx.Err() != nil {
				t.Fatalf("the second server did not exit with an error (err %v, ctx %v):\n%s", err, ctx.Err(), out)
			}
			want := "another corral serve (pid " + strconv.Itoa(srv.cmd.Process.Pid) + ") is using " + data
			if !strings.Contains(string(out), want) {
				t.Fatalf("the second server said:\n%s\nwant it to say %q", out, want)
			}
			if strings.Contains(string(out), "reconcil") || strings.Contains(string(out), "serving") {
				t.Fatalf("the second server went on after the refusal:\n%s", out)
			}
		})
	}
	if got := fileState(t, filepath.Join(data, "corral.db")) + fileState(t, filepath.Join(data, "corral.db-wal")); got != dbBefore {
		t.Fatalf("the database changed while the run was held: %s, was %s", got, dbBefore)
	}
	var run runAnswer
	c.do("GET", "/runs/"+posted.Run.ID, nil, http.StatusOK, &run)
	if run.Status != "running" {
		t.Fatalf("the first server's run is %s after the second server tried, want running", run.Status)
	}
	close(hold)
	poll.Until(t, "the run to end", func() bool {
		c.do("GET", "/runs/"+posted.Run.ID, nil, http.StatusOK, &run)
		return run.Status != "running"
	})
	if run.Status != "completed" || run.ChangeSetID == nil {
		t.Fatalf("run = %+v, want completed with its change set", run)
	}
	if code, out := verifyTraces(t, data); code != 0 || !strings.HasPrefix(out, "ok: ") {
		t.Fatalf("trace verify = %d %s", code, out)
	}
}

// fileState names a file's size and modification time.
func fileState(t *testing.T, name string) string {
	t.Helper()
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return strconv.FormatInt(fi.Size(), 10) + "@" + fi.ModTime().Format(time.RFC3339Nano)
}
