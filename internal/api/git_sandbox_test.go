package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"corral"
	"corral/internal/gittest"
	"corral/internal/modeltest"
)

// gitProbe edits a file of the clone, then asks git inside the sandbox what
// changed: each command's status is printed after it, and its errors go to
// the output the model reads.
const gitProbe = `printf 'hello, changed\n' > README.md; ` +
	`git status --short 2>&1; echo "status=$?"; ` +
	`git diff --stat 2>&1; echo "diff=$?"; ` +
	`git log --format='log: %s' 2>&1; echo "log=$?"`

// TestGitInSandbox: on a cloned workspace, whose .git stays the server's
// (runs read it, never write it) while its tree is the sandbox user's, git
// inside a run works for every driver: the builtin loop's shell tool and
// each agent CLI's own. Without safe.directory in the session's
// environment, git refuses the workspace as of "dubious ownership".
func TestGitInSandbox(t *testing.T) {
	needSandbox(t)
	s := gittest.New(t, gittest.Options{Files: map[string]string{"README.md": "hello\n"}})
	cases := append([]cliCase{{driver: corral.DriverBuiltin, tool: "shell", args: func(cmd string) map[string]string {
		return map[string]string{"command": cmd}
	}}}, cliCases...)
	for _, tc := range cases {
		t.Run(tc.driver, func(t *testing.T) {
			if tc.driver != corral.DriverBuiltin {
				slow(t)
				needTools(t, tc.driver)
			}
			e := newEnv(t, envOptions{gitCA: s.CAFile})
			owner := e.signup("owner@example.com", "Owner")
			id := owner.createAgent("git-" + tc.driver)
			owner.do("PATCH", "/api/agents/"+id, map[string]any{"driver": tc.driver}).want(http.StatusOK)
			if r := owner.clone(id, map[string]string{"url": s.URL()}); r.Status != "ready" {
				t.Fatalf("clone = %+v", r)
			}

			var mu sync.Mutex
			var out string
			e.answer(func(r modeltest.Request) modeltest.Reply {
				if res := r.LastToolResults(); len(res) > 0 {
					mu.Lock()
					out = res[len(res)-1].Content
					mu.Unlock()
					return modeltest.Text("git works")
				}
				if !contains(r.Tools, tc.tool) {
					return modeltest.Text("Git") // a CLI's side request (a title)
				}
				args, _ := json.Marshal(tc.args(gitProbe))
				return modeltest.Calls(modeltest.ToolCall{ID: "call_git", Name: tc.tool, Arguments: string(args)})
			})
			run := owner.send(id, "What does git say?")
			done := owner.waitRun(run.ID, "completed", "errored", "killed", "cancelled", "paused")
			if done.Status != "completed" {
				t.Fatalf("run %s: %s (%s)\ntrace: %s", run.ID, done.Status, done.Reason, brief(owner.trace(run.ID)))
			}
			mu.Lock()
			got := out
			mu.Unlock()
			var missing []string
			for _, want := range []string{"M README.md", "status=0", "README.md | 2", "diff=0", "log: First commit", "log=0"} {
				if !strings.Contains(got, want) {
					missing = append(missing, want)
				}
			}
			if len(missing) > 0 || strings.Contains(got, "dubious") {
				t.Errorf("git inside the run: %q missing from its output:\n%.1500s", missing, got)
			}
		})
	}
}
