package main

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"corral/internal/kerneltest"
	"corral/internal/modeltest"
	"corral/internal/sandbox"
	"corral/internal/toolstest"
)

// TestRelativeData starts the server as `make run` and the README do: from
// a working directory, with a relative --data (./data; ./node-1 for a
// node), for each role: one process doing everything, and control with a
// sandbox node. An agent's run completes with its change set (a relative
// path handed to the supervisor, which starts in "/", made every run
// fail), and nothing is written outside the data directories: not in the
// working directory, not at the root of the filesystem, and nothing left
// in the temporary directory.
func TestRelativeData(t *testing.T) {
	if err := sandbox.Available(); err != nil {
		kerneltest.Skip(t, "runs need the sandbox: %v", err)
	}
	for _, split := range []bool{false, true} {
		name := map[bool]string{false: "one process", true: "control and a node"}[split]
		t.Run(name, func(t *testing.T) {
			work := reachableTempDir(t)
			t.Cleanup(func() { // after the processes end, before the directory goes
				for _, d := range []string{"data", "node-1"} {
					endSessions(filepath.Join(work, d))
					unmountStages(filepath.Join(work, d))
				}
			})
			tmp := filepath.Join(work, "tmp")
			if err := os.Mkdir(tmp, 0o755); err != nil {
				t.Fatal(err)
			}
			rootBefore := dirNames(t, "/")
			model := modeltest.New(func(r modeltest.Request) modeltest.Reply {
				if r.Last().Role == "user" {
					return modeltest.Calls(modeltest.ShellCall("c1", "echo relative > made.txt && echo done"))
				}
				return modeltest.Text("made.txt is made")
			})
			defer model.Close()

			env := []string{"CORRAL_TEST_AS_MAIN=1", "TMPDIR=" + tmp, "CORRAL_MODEL_BASE_URL=" + model.URL(), "CORRAL_MODEL=scripted"}
			if split {
				env = append(env, "CORRAL_ROLE=control")
			}
			ctl := startIn(t, work, env, "serve", "--addr", "127.0.0.1:0", "--data", "./data")
			logs := ctl.Log
			if split {
				token := cmdIn(t, work, "node", "token", "--data", "./data")
				cmd := exec.Command(os.Args[0], "serve", "--role", "sandbox", "--control", ctl.base, "--data", "./node-1", "--node-name", "node-1")
				cmd.Dir = work
				cmd.Env = append(os.Environ(), "CORRAL_TEST_AS_MAIN=1", "TMPDIR="+tmp, "CORRAL_JOIN="+token)
				if tools := toolstest.Dir(); tools != "" {
					cmd.Args = append(cmd.Args, "--tools-dir", tools)
				}
				node := startProcess(t, cmd, "the node never connected", func(line string) bool {
					return strings.Contains(line, "connected to control")
				})
				logs = func() string { return "control:\n" + ctl.Log() + "\nnode:\n" + node.Log() }
			}

			c, agentID := signedIn(t, ctl)
			if split {
				c.nodesReady(1)
			}
			r := c.send(agentID, "make a file")
			// What the run left on the filesystem first: a run that failed
			// because of where it wrote fails here too.
			want := []string{"data", "tmp"}
			if split {
				want = []string{"data", "node-1", "tmp"}
			}
			if got := dirNames(t, work); !slices.Equal(got, want) {
				t.Errorf("the working directory holds %q, want %q", got, want)
			}
			if got := dirNames(t, tmp); len(got) > 0 {
				t.Errorf("the temporary directory holds %q after the run", got)
			}
			if got := dirNames(t, "/"); !slices.Equal(got, rootBefore) {
				t.Errorf("the filesystem's root changed during the run: %q, was %q", got, rootBefore)
			}
			// (Where a relative path went before, even if that place was
			// there already.)
			if stray, _ := filepath.Glob("/*/sessions/" + r.ID); len(stray) > 0 {
				t.Errorf("the run's session is outside the data directory: %q", stray)
			}

			if r.Status != "completed" || r.ChangeSetID == nil {
				t.Fatalf("run = %+v\n%s", r, logs())
			}
			var cs struct{ Entries []struct{ Path string } }
			c.do("GET", "/changes/"+*r.ChangeSetID, nil, http.StatusOK, &cs)
			if len(cs.Entries) != 1 || cs.Entries[0].Path != "made.txt" {
				t.Fatalf("change set = %+v", cs)
			}
		})
	}
}

// startIn starts corral with args in dir, with env added, and returns once
// it says it is serving.
func startIn(t *testing.T, dir string, env []string, args ...string) *server {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	return startServing(t, cmd)
}

// cmdIn runs corral with args in dir and returns what it printed.
func cmdIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CORRAL_TEST_AS_MAIN=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("corral %s: %v\n%s", strings.Join(args, " "), err, stderrOf(err))
	}
	return strings.TrimSpace(string(out))
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// dirNames lists the names in dir, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestServePathsAbsolute: every path serve hands on (to the supervisor, to
// git, to the CLIs) is made absolute once, at start.
func TestServePathsAbsolute(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("not checked here"), 0o600); err != nil {
		t.Fatal(err)
	}
	relCA, err := filepath.Rel(wd, ca)
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseServe([]string{"--data", "./data", "--tools-dir", "build/tools", "--git-ca-file", relCA}, io.Discard, noenv)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"data": filepath.Join(wd, "data"), "tools": filepath.Join(wd, "build/tools"), "ca": ca}
	got := map[string]string{"data": c.Data, "tools": c.ToolsDir, "ca": c.GitCAFile}
	for k := range want {
		if got[k] != want[k] {
			t.Errorf("%s = %q, want %q", k, got[k], want[k])
		}
	}
}
