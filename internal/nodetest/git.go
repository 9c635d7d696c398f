package nodetest

import (
	"net/netip"
	"testing"

	"corral"
	"corral/internal/egress"
	"corral/internal/gitrepo"
	"corral/internal/gittest"
)

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
	if log, err := tr.Log(acting, "agt_norepo", 10); err != nil || len(log) != 0 {
		t.Fatalf("Log of a workspace that is no repository = %+v, %v; want none", log, err)
	}
}
