package api_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"corral/internal/api"
	"corral/internal/gittest"
	"corral/internal/modeltest"
)

// TestRepositorySync: against a real git server, a workspace behind its
// branch is fast-forwarded; a sync is refused while a run is active, and
// names a change set that waits; an approved change set's commit is rebased onto a
// commit that landed upstream meanwhile and then pushes as a
// fast-forward; a commit that conflicts with upstream's is refused naming
// its path, the workspace's head and files as they were; each is traced
// in the agent's own chain.
func TestRepositorySync(t *testing.T) {
	needSandbox(t)
	s := gittest.New(t, gittest.Options{User: gitUser, Password: gitSecret,
		Files: map[string]string{"README.md": "hello\n", "src/app.go": "package app\n"}})
	e := newEnv(t, envOptions{gitCA: s.CAFile})
	owner := e.signup("owner@example.com", "Olive Owner")
	runner := e.signup("ann@example.com", "Ann Asker")
	cred := owner.addCredential(s, "git", gitSecret)
	id := owner.createAgent("repo worker")
	owner.grant(id, runner.user.ID, "runner")
	if r := owner.clone(id, map[string]string{"url": s.URL(), "credential_id": cred}); r.Status != "ready" {
		t.Fatalf("clone = %+v", r)
	}
	path := "/api/agents/" + id + "/repository/sync"
	sync := func() api.SyncView {
		t.Helper()
		var v api.SyncView
		owner.do("POST", path, nil).want(http.StatusOK).decode(&v)
		return v
	}
	head := func() string {
		t.Helper()
		var commits api.List[api.CommitView]
		owner.do("GET", "/api/agents/"+id+"/repository/commits", nil).want(http.StatusOK).decode(&commits)
		return commits.Items[0].SHA
	}
	file := func(p string) string {
		t.Helper()
		var f api.FileView
		owner.do("GET", "/api/agents/"+id+"/files?path="+p, nil).want(http.StatusOK).decode(&f)
		if f.Content == nil {
			t.Fatalf("%s has no content: %+v", p, f)
		}
		return *f.Content
	}

	// Fast-forward.
	up := s.Advance(t, "main", "theirs.txt", "theirs\n")
	if v := sync(); v.Status != "fast_forward" || !v.FastForward || v.Head != up || v.Upstream != up || v.Rebased != 0 {
		t.Fatalf("sync behind upstream = %+v, want a fast-forward to %s", v, up)
	}
	if head() != up || file("theirs.txt") != "theirs\n" {
		t.Fatalf("after the fast-forward the workspace is at %s, want %s with theirs.txt", head(), up)
	}
	var repo api.RepositoryView
	owner.do("GET", "/api/agents/"+id+"/repository", nil).want(http.StatusOK).decode(&repo)
	if repo.Head != up {
		t.Errorf("repository head = %s, want %s", repo.Head, up)
	}
	if v := sync(); v.Status != "up_to_date" || v.Head != up {
		t.Fatalf("sync again = %+v, want up to date", v)
	}
	runner.do("POST", path, nil).want(http.StatusForbidden)

	// Refused while a run is active, then while its change set waits.
	release := make(chan struct{})
	e.answer(modeltest.Sequence(
		modeltest.Reply{ToolCalls: []modeltest.ToolCall{modeltest.WriteCall("c1", "README.md", "hello, changed\n")}, Block: release},
		modeltest.Text("done"),
	))
	run := runner.send(id, "change the readme")
	runner.waitRun(run.ID, "running")
	res := owner.do("POST", path, nil).want(http.StatusConflict)
	if !strings.Contains(string(res.body), run.ID) {
		t.Fatalf("sync during a run = %s, want it to name run %s", res.body, run.ID)
	}
	close(release)
	done := runner.waitRun(run.ID, "completed", "errored")
	if done.Status != "completed" || done.ChangeSetID == nil {
		t.Fatalf("run = %+v, want completed with a change set", done)
	}
	// A pending change set does not stop a sync: it is named, and stays
	// pending (TestSyncRechecksPendingChangeSet decides one after).
	if v := sync(); v.Status != "up_to_date" || !slices.Equal(v.Pending, []string{*done.ChangeSetID}) {
		t.Fatalf("sync with a pending change set = %+v, want up to date naming %s as pending", v, *done.ChangeSetID)
	}
	if head() != up {
		t.Fatal("an up-to-date sync moved the workspace")
	}

	// Rebase: the approved set's commit goes on top of upstream's.
	owner.do("POST", "/api/changes/"+*done.ChangeSetID+"/approve", nil).want(http.StatusOK)
	up = s.Advance(t, "main", "src/other.go", "package app\n\nconst Y = 2\n")
	v := sync()
	if v.Status != "rebased" || v.FastForward || v.Rebased != 1 || v.Upstream != up {
		t.Fatalf("sync with a commit of its own = %+v, want one commit rebased onto %s", v, up)
	}
	var commits api.List[api.CommitView]
	owner.do("GET", "/api/agents/"+id+"/repository/commits", nil).want(http.StatusOK).decode(&commits)
	top := commits.Items[0]
	if top.SHA != v.Head || commits.Items[1].SHA != up || top.ChangeSetID == nil || *top.ChangeSetID != *done.ChangeSetID ||
		top.Author != (api.IdentityView{Name: "Ann Asker", Email: "ann@example.com"}) {
		t.Fatalf("commits after the rebase = %+v, want the change set's commit by Ann on top of %s", commits.Items[:2], up)
	}
	if file("README.md") != "hello, changed\n" || file("src/other.go") != "package app\n\nconst Y = 2\n" {
		t.Fatal("after the rebase the workspace lacks one side's change")
	}
	var pushed api.PushView
	owner.do("POST", "/api/agents/"+id+"/repository/push", map[string]string{"branch": "main"}).want(http.StatusOK).decode(&pushed)
	if pushed.Head != v.Head || pushed.Commits != 1 || s.Head(t, "main") != v.Head {
		t.Fatalf("push after the rebase = %+v, want a fast-forward to %s", pushed, v.Head)
	}
	s.Fsck(t)

	// Conflict: both sides change README.md's line.
	owner.do("PUT", "/api/agents/"+id+"/files?path=README.md", "hello, mine\n").want(http.StatusOK)
	before := head()
	s.Advance(t, "main", "README.md", "hello, theirs\n")
	res = owner.do("POST", path, nil).want(http.StatusConflict)
	var body struct {
		Error struct{ Code, Message, Reason string }
	}
	json.Unmarshal(res.body, &body)
	if !strings.Contains(body.Error.Message, `"README.md"`) {
		t.Fatalf("the refused sync = %s, want it to name README.md", res.body)
	}
	if head() != before || file("README.md") != "hello, mine\n" {
		t.Fatalf("after a refused sync the workspace is at %s with README.md %q, want %s as it was", head(), file("README.md"), before)
	}

	var agentTrace api.List[api.TraceView]
	owner.do("GET", "/api/agents/"+id+"/trace", nil).want(http.StatusOK).decode(&agentTrace)
	verify(t, id, agentTrace.Items)
	var types []string
	for _, ev := range agentTrace.Items {
		types = append(types, ev.Type)
	}
	want := []string{"cloned", "synced", "synced", "sync_refused", "synced", "synced", "pushed", "sync_refused"}
	if !slices.Equal(types, want) {
		t.Fatalf("agent trace = %v, want %v", types, want)
	}
	e.noSecretInAnswers(t, gitSecret)
}

// TestSyncRechecksPendingChangeSet: a change set staged before a sync is
// checked against the new base when it is decided: the file upstream
// changed under it is conflicted, named, and not applied; the workspace
// keeps upstream's version.
func TestSyncRechecksPendingChangeSet(t *testing.T) {
	needSandbox(t)
	s := gittest.New(t, gittest.Options{User: gitUser, Password: gitSecret,
		Files: map[string]string{"README.md": "hello\n", "notes.txt": "notes\n"}})
	e := newEnv(t, envOptions{gitCA: s.CAFile})
	owner := e.signup("owner@example.com", "Olive Owner")
	cred := owner.addCredential(s, "git", gitSecret)
	id := owner.createAgent("repo worker")
	if r := owner.clone(id, map[string]string{"url": s.URL(), "credential_id": cred}); r.Status != "ready" {
		t.Fatalf("clone = %+v", r)
	}
	e.answer(modeltest.Sequence(
		modeltest.Reply{ToolCalls: []modeltest.ToolCall{
			modeltest.WriteCall("c1", "README.md", "hello, mine\n"),
			modeltest.WriteCall("c2", "notes.txt", "notes, mine\n"),
		}},
		modeltest.Text("done"),
	))
	done := owner.waitRun(owner.send(id, "change both").ID, "completed", "errored")
	if done.ChangeSetID == nil {
		t.Fatalf("run = %+v, want a change set", done)
	}
	up := s.Advance(t, "main", "README.md", "hello, theirs\n")
	var v api.SyncView
	owner.do("POST", "/api/agents/"+id+"/repository/sync", nil).want(http.StatusOK).decode(&v)
	if v.Status != "fast_forward" || v.Head != up || !slices.Equal(v.Pending, []string{*done.ChangeSetID}) {
		t.Fatalf("sync = %+v, want a fast-forward to %s naming the pending set", v, up)
	}
	res := owner.do("POST", "/api/changes/"+*done.ChangeSetID+"/approve", nil).want(http.StatusConflict)
	if !strings.Contains(string(res.body), "README.md") {
		t.Fatalf("approving the set after the sync = %s, want README.md named", res.body)
	}
	var cs api.ChangeSetView
	owner.do("GET", "/api/changes/"+*done.ChangeSetID, nil).want(http.StatusOK).decode(&cs)
	states := map[string]string{}
	for _, en := range cs.Entries {
		states[en.Path] = en.State
	}
	if states["README.md"] != "conflicted" {
		t.Errorf("entries after the approval = %v, want README.md conflicted", states)
	}
	var f api.FileView
	owner.do("GET", "/api/agents/"+id+"/files?path=README.md", nil).want(http.StatusOK).decode(&f)
	if f.Content == nil || *f.Content != "hello, theirs\n" {
		t.Errorf("README.md after the refused apply = %v, want upstream's", f.Content)
	}
}
