package nodetest

import (
	"net/netip"
	"strings"
	"testing"

	"corral"
	"corral/internal/egress"
	"corral/internal/gitrepo"
	"corral/internal/gittest"
)

// testSync: a workspace behind the remote is fast-forwarded; one with a
// commit of its own has it rebased onto the remote's, and then pushes as
// a fast-forward; one whose commit conflicts with the remote's is refused,
// its head and files as they were.
func testSync(t *testing.T, tr corral.Trees, srv *gittest.Server, agent string, auth func() *corral.GitAuth) {
	spec := func() corral.CloneSpec { return corral.CloneSpec{URL: srv.URL(), Ref: "main", Auth: auth()} }
	_, err := tr.Sync(acting, agent, corral.CloneSpec{URL: srv.URL(), Ref: "main"})
	wantCode(t, "Sync without the credential", err, corral.EINVALID)
	up := srv.Head(t, "main")
	res, err := tr.Sync(acting, agent, spec())
	if err != nil || res.Status != "fast_forward" || !res.FastForward || res.Head != up || res.Upstream != up {
		t.Fatalf("Sync behind the remote = %+v, %v; want a fast-forward to %s", res, err, up)
	}
	if got := read(t, tr, agent, "theirs.txt"); got != "theirs\n" {
		t.Fatalf("theirs.txt after the fast-forward = %q", got)
	}
	if res, err := tr.Sync(acting, agent, spec()); err != nil || res.Status != "up_to_date" || res.Head != up {
		t.Fatalf("Sync again = %+v, %v; want up to date at %s", res, err, up)
	}

	commit := &corral.CommitSpec{Message: "Add mine", Author: corral.Identity{Name: "Ada", Email: "ada@example.com"}}
	if c, err := tr.WriteFile(acting, corral.FileWrite{AgentID: agent, Path: "mine.txt", Content: []byte("mine\n"), Commit: commit}); err != nil || c.SHA == "" {
		t.Fatalf("WriteFile with a commit = %+v, %v", c, err)
	}
	up = srv.Advance(t, "main", "other.txt", "other\n")
	res, err = tr.Sync(acting, agent, spec())
	if err != nil || res.Status != "rebased" || res.FastForward || res.Rebased != 1 || res.Upstream != up || res.Head == up {
		t.Fatalf("Sync with a commit of its own = %+v, %v; want one commit rebased onto %s", res, err, up)
	}
	log, err := tr.Log(acting, agent, 2)
	if err != nil || len(log) != 2 || log[0].SHA != res.Head || log[0].Message != "Add mine" || log[0].Author.Name != "Ada" || log[1].SHA != up {
		t.Fatalf("Log after the rebase = %+v, %v; want Ada's commit on top of %s", log, err, up)
	}
	if got := read(t, tr, agent, "other.txt") + read(t, tr, agent, "mine.txt"); got != "other\nmine\n" {
		t.Fatalf("the files after the rebase = %q", got)
	}
	if pushed, err := tr.Push(acting, agent, srv.URL(), "main", auth()); err != nil || pushed.Head != res.Head || pushed.Commits != 1 {
		t.Fatalf("Push after the rebase = %+v, %v; want a fast-forward to %s", pushed, err, res.Head)
	}

	if _, err := tr.WriteFile(acting, corral.FileWrite{AgentID: agent, Path: "mine.txt", Content: []byte("mine, changed\n"), Commit: commit}); err != nil {
		t.Fatal(err)
	}
	before, _ := tr.Log(acting, agent, 1)
	srv.Advance(t, "main", "mine.txt", "theirs, changed\n")
	_, err = tr.Sync(acting, agent, spec())
	wantCode(t, "Sync of a conflicting commit", err, corral.ECONFLICT)
	if msg := corral.ErrorMessage(err); !strings.Contains(msg, `"mine.txt"`) {
		t.Fatalf("the refusal %q names no mine.txt", msg)
	}
	after, _ := tr.Log(acting, agent, 1)
	if len(after) != 1 || after[0].SHA != before[0].SHA {
		t.Fatalf("HEAD after a refused sync = %+v, want %s", after, before[0].SHA)
	}
	if got := read(t, tr, agent, "mine.txt"); got != "mine, changed\n" {
		t.Fatalf("mine.txt after a refused sync = %q", got)
	}
}

// testGit: a workspace that is a repository, from a real git server
// behind a password: cloned only into an empty workspace, its history
// read, a person's write committed, a fast-forward pushed, and a push the
// remote moved under refused.
func testGit(t *testing.T, newSubject NewSubject) {
	const user, password = "corral", "s3cret-password"
	srv := gittest.New(t, gittest.Options{User: user, Password: password, Files: map[string]string{"README.md": "# hello\n"}})
	loopback := egress.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	tr := newSubject(t, Setup{Git: gitrepo.Config{CAFile: srv.CAFile, Egress: loopback}}).Trees
	auth := func() *corral.GitAuth { return &corral.GitAuth{Username: user, Secret: []byte(password)} }
	const agent = "agt_git"

	if err := tr.CanClone(acting, agent); err != nil {
		t.Fatalf("CanClone of an empty workspace: %v", err)
	}
	_, err := tr.Clone(acting, agent, corral.CloneSpec{URL: "http://127.0.0.1/repo.git"}, nil)
	wantCode(t, "Clone of a URL that is not https", err, corral.EINVALID)
	_, err = tr.Clone(acting, agent, corral.CloneSpec{URL: srv.URL()}, nil)
	wantCode(t, "Clone without the credential", err, corral.EINVALID)
	res, err := tr.Clone(acting, agent, corral.CloneSpec{URL: srv.URL(), Auth: auth()}, nil)
	if err != nil || res.Head != srv.Head(t, "main") || res.Branch != "main" {
		t.Fatalf("Clone = %+v, %v; want main at %s", res, err, srv.Head(t, "main"))
	}
	if got := read(t, tr, agent, "README.md"); got != "# hello\n" {
		t.Fatalf("the cloned README.md = %q", got)
	}
	wantCode(t, "CanClone of a cloned workspace", tr.CanClone(acting, agent), corral.ECONFLICT)
	_, err = tr.Clone(acting, agent, corral.CloneSpec{URL: srv.URL(), Auth: auth()}, nil)
	wantCode(t, "Clone into a workspace that is not empty", err, corral.ECONFLICT)

	commit := &corral.CommitSpec{Message: "Add notes", Author: corral.Identity{Name: "Ada", Email: "ada@example.com"}}
	c, err := tr.WriteFile(acting, corral.FileWrite{AgentID: agent, Path: "notes.txt", Content: []byte("notes\n"), Commit: commit})
	if err != nil || !c.Made || c.Failed || c.SHA == "" {
		t.Fatalf("WriteFile with a commit = %+v, %v; want a commit made", c, err)
	}
	log, err := tr.Log(acting, agent, 10)
	if err != nil || len(log) != 2 || log[0].SHA != c.SHA || log[1].SHA != res.Head {
		t.Fatalf("Log = %+v, %v; want the new commit, then the cloned one", log, err)
	}
	if again, err := tr.Commit(acting, agent, corral.CommitSpec{Message: "Nothing", Paths: []string{"notes.txt"}}); err != nil || again.SHA != "" || again.Failed {
		t.Fatalf("Commit of nothing new = %+v, %v; want no commit", again, err)
	}

	pushed, err := tr.Push(acting, agent, srv.URL(), "main", auth())
	if err != nil || pushed.Head != c.SHA || pushed.Commits != 1 || srv.Head(t, "main") != c.SHA {
		t.Fatalf("Push = %+v, %v; want main at %s, one commit", pushed, err, c.SHA)
	}
	srv.Advance(t, "main", "theirs.txt", "theirs\n")
	_, err = tr.Push(acting, agent, srv.URL(), "main", auth())
	wantCode(t, "Push behind the remote", err, corral.ECONFLICT)
	testSync(t, tr, srv, agent, auth)
	if log, err := tr.Log(acting, "agt_norepo", 10); err != nil || len(log) != 0 {
		t.Fatalf("Log of a workspace that is no repository = %+v, %v; want none", log, err)
	}
}
