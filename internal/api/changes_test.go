package api_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral"
	"corral/internal/api"
)

// propose stages the agent's workspace as a run would, lets edit change the
// staged tree directly, and finishes: the change set Corral measured.
func (e *env) propose(t *testing.T, agentID string, edit func(tree string)) corral.ChangeSet {
	t.Helper()
	ctx := context.Background()
	a, err := e.db.Agent(ctx, agentID, "")
	if err != nil {
		t.Fatal(err)
	}
	id := corral.NewID("chg")
	if err := e.stages.Begin(ctx, a, id); err != nil {
		t.Fatal(err)
	}
	// The node's layout: DATA/stages/<id>/tree is what a sandbox binds.
	edit(filepath.Join(e.dataDir, "stages", id, "tree"))
	cs, err := e.stages.Finish(ctx, a, "", id, true)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestChangeSetReviewFlow(t *testing.T) {
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	viewer := e.signup("viewer@example.com", "Viewer")
	editor := e.signup("editor@example.com", "Editor")
	stranger := e.signup("stranger@example.com", "Stranger")
	id := owner.createAgent("reviewed")
	owner.grant(id, viewer.user.ID, "viewer")
	owner.grant(id, editor.user.ID, "editor")

	// An upload seeds the persistent workspace, including a secret.
	owner.do("PUT", "/api/agents/"+id+"/files?path=main.go", "package main\n\nfunc main() {}\n").want(http.StatusOK)
	owner.do("PUT", "/api/agents/"+id+"/files?path=go.mod", "module x\n").want(http.StatusOK)
	write(t, filepath.Join(e.dataDir, "workspaces", id, ".env"), "API_KEY=secret\n")
	viewer.do("PUT", "/api/agents/"+id+"/files?path=x.txt", "no").want(http.StatusForbidden)

	cs := e.propose(t, id, func(tree string) {
		if _, err := os.Lstat(filepath.Join(tree, ".env")); !os.IsNotExist(err) {
			t.Errorf("the staged tree has .env (%v): secrets must be absent", err)
		}
		write(t, filepath.Join(tree, "main.go"), "package main\n\nfunc main() { println(\"hi\") }\n")
		write(t, filepath.Join(tree, "docs/readme.md"), "# docs\n")
		os.Remove(filepath.Join(tree, "go.mod"))
		os.Symlink("/etc/passwd", filepath.Join(tree, "passwd"))
	})
	if cs.Status != corral.ChangePending {
		t.Fatalf("review-mode change set is %s, want pending", cs.Status)
	}
	path := "/api/changes/" + cs.ID

	var got api.ChangeSetView
	viewer.do("GET", path, nil).want(http.StatusOK).decode(&got)
	classes := map[string]string{}
	for _, en := range got.Entries {
		classes[en.Path+" "+en.Op] = en.Class + "/" + en.State
	}
	want := map[string]string{
		"main.go modify":        "ordinary/pending",
		"docs/readme.md create": "ordinary/pending",
		"go.mod delete":         "risky/pending",
		"passwd create":         "protected/denied",
	}
	for k, v := range want {
		if classes[k] != v {
			t.Errorf("entry %s = %q, want %q (all: %v)", k, classes[k], v, classes)
		}
	}
	var diff string
	for _, en := range got.Entries {
		if en.Path == "main.go" && en.Diff != nil {
			diff = *en.Diff
		}
	}
	if !strings.Contains(diff, "-func main() {}") || !strings.Contains(diff, "+func main() { println(\"hi\") }") {
		t.Errorf("main.go diff = %q", diff)
	}
	if strings.Contains(string(viewer.do("GET", path, nil).body), e.dataDir) {
		t.Error("a change set answer shows a server path")
	}

	var listed api.List[api.ChangeSetView]
	viewer.do("GET", "/api/agents/"+id+"/changes", nil).want(http.StatusOK).decode(&listed)
	if len(listed.Items) != 1 || listed.Items[0].ID != cs.ID {
		t.Fatalf("changes = %+v", listed.Items)
	}
	stranger.do("GET", path, nil).want(http.StatusNotFound)
	missing := stranger.do("GET", "/api/changes/chg_doesnotexist0000", nil).want(http.StatusNotFound)
	if hidden := stranger.do("GET", path, nil); string(hidden.body) != string(missing.body) {
		t.Errorf("hidden change set answers %s, missing %s", hidden.body, missing.body)
	}
	viewer.do("POST", path+"/approve", nil).want(http.StatusForbidden)
	stranger.do("POST", path+"/approve", nil).want(http.StatusNotFound)

	editor.do("POST", path+"/approve", nil).want(http.StatusOK).decode(&got)
	if got.Status != "applied" || got.DecidedBy == nil || got.DecidedBy.ID != editor.user.ID {
		t.Fatalf("approved = %+v", got)
	}
	ws := filepath.Join(e.dataDir, "workspaces", id)
	if b, _ := os.ReadFile(filepath.Join(ws, "main.go")); !strings.Contains(string(b), "println") {
		t.Errorf("main.go after approve = %q", b)
	}
	if _, err := os.Stat(filepath.Join(ws, "go.mod")); !os.IsNotExist(err) {
		t.Errorf("go.mod still there after an approved delete: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "passwd")); !os.IsNotExist(err) {
		t.Errorf("a protected symlink was applied: %v", err)
	}
	var file api.FileView
	viewer.do("GET", "/api/agents/"+id+"/files?path=docs/readme.md", nil).want(http.StatusOK).decode(&file)
	if file.Content == nil || *file.Content != "# docs\n" {
		t.Errorf("docs/readme.md = %+v", file)
	}
	editor.do("POST", path+"/approve", nil).want(http.StatusConflict)
	editor.do("POST", path+"/reject", nil).want(http.StatusConflict)
}

func TestChangeSetConflictRejectExpiry(t *testing.T) {
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("a")
	owner.do("PUT", "/api/agents/"+id+"/files?path=f.txt", "one\n").want(http.StatusOK)

	// The persistent file changes after staging: nothing is applied.
	cs := e.propose(t, id, func(tree string) { write(t, filepath.Join(tree, "f.txt"), "two\n") })
	owner.do("PUT", "/api/agents/"+id+"/files?path=f.txt", "three\n").want(http.StatusOK)
	res := owner.do("POST", "/api/changes/"+cs.ID+"/approve", nil).want(http.StatusConflict)
	if res.code() != "conflict" {
		t.Fatalf("approve after a concurrent change = %s", res.body)
	}
	var got api.ChangeSetView
	owner.do("GET", "/api/changes/"+cs.ID, nil).want(http.StatusOK).decode(&got)
	if got.Status != "conflicted" {
		t.Fatalf("status = %s, want conflicted", got.Status)
	}
	if b, _ := os.ReadFile(filepath.Join(e.dataDir, "workspaces", id, "f.txt")); string(b) != "three\n" {
		t.Fatalf("f.txt = %q after a conflicted approve, want the concurrent content", b)
	}

	cs = e.propose(t, id, func(tree string) { write(t, filepath.Join(tree, "g.txt"), "g\n") })
	owner.do("POST", "/api/changes/"+cs.ID+"/reject", nil).want(http.StatusOK).decode(&got)
	if got.Status != "rejected" || got.Entries[0].State != "rejected" {
		t.Fatalf("rejected = %+v", got)
	}
	if _, err := os.Stat(filepath.Join(e.dataDir, "workspaces", id, "g.txt")); !os.IsNotExist(err) {
		t.Fatal("a rejected change was applied")
	}

	cs = e.propose(t, id, func(tree string) { write(t, filepath.Join(tree, "h.txt"), "h\n") })
	e.clock.Advance(2 * time.Hour)
	owner.do("POST", "/api/changes/"+cs.ID+"/approve", nil).want(http.StatusConflict)
	owner.do("GET", "/api/changes/"+cs.ID, nil).want(http.StatusOK).decode(&got)
	if got.Status != "expired" {
		t.Fatalf("status after expiry = %s", got.Status)
	}
	if _, err := os.Stat(filepath.Join(e.dataDir, "workspaces", id, "h.txt")); !os.IsNotExist(err) {
		t.Fatal("an expired change was applied")
	}
	cs = e.propose(t, id, func(tree string) { write(t, filepath.Join(tree, "i.txt"), "i\n") })
	e.clock.Advance(2 * time.Hour)
	if n, err := e.decisions.ExpireDue(context.Background()); err != nil || n != 1 {
		t.Fatalf("ExpireDue = %d, %v; want 1", n, err)
	}
	if stages, _ := os.ReadDir(filepath.Join(e.dataDir, "stages")); len(stages) != 0 {
		t.Fatalf("staged trees left behind: %v", stages)
	}
}

func TestAutoModeAppliesOrdinaryOnly(t *testing.T) {
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("auto")
	owner.do("PATCH", "/api/agents/"+id, map[string]any{"policy": map[string]string{"changes": "auto"}}).want(http.StatusOK)
	cs := e.propose(t, id, func(tree string) {
		write(t, filepath.Join(tree, "notes.md"), "ordinary\n")
		write(t, filepath.Join(tree, "package.json"), "{}\n")
		write(t, filepath.Join(tree, ".git/config"), "[core]\n")
	})
	states := map[string]string{}
	for _, en := range cs.Entries {
		states[en.Path] = en.Class + "/" + string(en.State)
	}
	if states["notes.md"] != "ordinary/applied" || states["package.json"] != "risky/pending" || states[".git/config"] != "protected/denied" || cs.Status != "pending" {
		t.Fatalf("auto change set %s: %v", cs.Status, states)
	}
	ws := filepath.Join(e.dataDir, "workspaces", id)
	if b, _ := os.ReadFile(filepath.Join(ws, "notes.md")); string(b) != "ordinary\n" {
		t.Fatalf("ordinary entry not applied at once: %q", b)
	}
	if _, err := os.Stat(filepath.Join(ws, "package.json")); !os.IsNotExist(err) {
		t.Fatal("a risky entry was applied without review")
	}
	owner.do("POST", "/api/changes/"+cs.ID+"/approve", nil).want(http.StatusOK)
	if _, err := os.Stat(filepath.Join(ws, "package.json")); err != nil {
		t.Fatalf("approved risky entry missing: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, ".git")); !os.IsNotExist(err) {
		t.Fatal("a protected entry was applied")
	}
}

func TestFilesRefuseHostilePaths(t *testing.T) {
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("f")
	for _, p := range []string{"../x", "a/../../x", "/etc/passwd", "a//b", ".git/config", "CON", "a/nul.txt", "x%00y", "a./b", "%E2%80%AEevil", "GIT~1/config", "a/", "%FF"} {
		res := owner.do("PUT", "/api/agents/"+id+"/files?path="+p, "x")
		if res.status != http.StatusBadRequest {
			t.Errorf("PUT files?path=%s = %d %s, want 400", p, res.status, res.body)
		}
	}
	owner.do("PUT", "/api/agents/"+id+"/files?path=ok.txt", "fine").want(http.StatusOK)
	ws := filepath.Join(e.dataDir, "workspaces", id)
	if err := os.Symlink("/etc", filepath.Join(ws, "etc")); err != nil {
		t.Fatal(err)
	}
	res := owner.do("GET", "/api/agents/"+id+"/files?path=etc/passwd", nil)
	if res.status == http.StatusOK {
		t.Fatalf("read through a symlink out of the workspace: %s", res.body)
	}
	if res := owner.do("PUT", "/api/agents/"+id+"/files?path=etc/evil", "x"); res.status == http.StatusOK {
		t.Fatalf("write through a symlink out of the workspace: %s", res.body)
	}
	if _, err := os.Stat("/etc/evil"); !os.IsNotExist(err) {
		t.Fatal("/etc/evil exists")
	}
	var dir api.FileView
	owner.do("GET", "/api/agents/"+id+"/files?path=", nil).want(http.StatusOK).decode(&dir)
	if dir.Type != "dir" {
		t.Fatalf("root listing = %+v", dir)
	}
}

func TestAgentGlobsShapeStagingAndClasses(t *testing.T) {
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("globs")
	owner.do("PATCH", "/api/agents/"+id, map[string]any{"policy": map[string]any{
		"exclude": []string{"keys/*.pem"}, "protected": []string{"deploy/**"}, "risky": []string{"docs/**"},
	}}).want(http.StatusOK)
	owner.do("PUT", "/api/agents/"+id+"/files?path=keys/server.pem", "PRIVATE KEY").want(http.StatusOK)
	cs := e.propose(t, id, func(tree string) {
		if _, err := os.Lstat(filepath.Join(tree, "keys", "server.pem")); !os.IsNotExist(err) {
			t.Errorf("an excluded file is in the staged tree: %v", err)
		}
		write(t, filepath.Join(tree, "deploy/prod.yaml"), "replicas: 1\n")
		write(t, filepath.Join(tree, "docs/guide.md"), "# guide\n")
		write(t, filepath.Join(tree, "src/a.go"), "package src\n")
	})
	got := map[string]string{}
	for _, en := range cs.Entries {
		got[en.Path] = en.Class
	}
	want := map[string]string{"deploy/prod.yaml": "protected", "docs/guide.md": "risky", "src/a.go": "ordinary"}
	for p, c := range want {
		if got[p] != c {
			t.Errorf("%s classified %q, want %q (all: %v)", p, got[p], c, got)
		}
	}
	if _, ok := got["keys/server.pem"]; ok {
		t.Error("an excluded file shows up in the manifest")
	}
}
