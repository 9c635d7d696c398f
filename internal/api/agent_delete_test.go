package api_test

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"corral/internal/modeltest"
)

// TestDeleteAgentLeavesNothingOnDisk: deleting an agent with a file in
// its workspace and a change set waiting for review removes its
// workspace and the change set's staged tree, mount and all, from the
// node's disk; another agent's stay.
func TestDeleteAgentLeavesNothingOnDisk(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	gone, kept := owner.createAgent("gone"), owner.createAgent("kept")
	for _, id := range []string{gone, kept} {
		owner.do("PUT", "/api/agents/"+id+"/files?path=notes.txt", "mine\n").want(http.StatusOK)
	}
	e.answer(modeltest.Sequence(modeltest.Calls(modeltest.WriteCall("c1", "made.txt", "by the run\n")), modeltest.Text("done")))
	run := owner.send(gone, "make a file")
	done := owner.waitRun(run.ID, "completed")
	if done.ChangeSetID == nil {
		t.Fatalf("run = %+v, want a change set waiting", done)
	}
	stage := filepath.Join(e.dataDir, "stages", *done.ChangeSetID)
	if _, err := os.Stat(filepath.Join(stage, "tree", "made.txt")); err != nil {
		t.Fatalf("the change set's staged tree: %v", err)
	}
	owner.do("DELETE", "/api/agents/"+gone, nil).want(http.StatusNoContent)
	for _, p := range []string{stage, filepath.Join(e.dataDir, "workspaces", gone)} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still on disk after the agent's deletion (%v)", p, err)
		}
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(stage)) {
		t.Errorf("the staged tree is still mounted at %s", stage)
	}
	if _, err := os.Stat(filepath.Join(e.dataDir, "workspaces", kept, "notes.txt")); err != nil {
		t.Errorf("the other agent's workspace: %v", err)
	}
}
