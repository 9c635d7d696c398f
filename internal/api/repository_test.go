package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"corral"

	"corral/internal/api"
	"corral/internal/egress"
	"corral/internal/gittest"
	"corral/internal/modeltest"
	"corral/internal/poll"
	"corral/internal/secrets/secrettest"
)

const (
	gitUser   = "alice"
	gitSecret = "ghp_repo-test-SECRET-5f3e2d1c"
)

// addCredential adds c's credential for the server's host, to be used
// for repositories (URLs or patterns; none: the server's repository).
func (c *client) addCredential(s *gittest.Server, name, secret string, repositories ...string) string {
	c.e.t.Helper()
	u, _ := url.Parse(s.URL())
	if repositories == nil {
		repositories = []string{s.URL()}
	}
	var got struct {
		ID string `json:"id"`
	}
	c.do("POST", "/api/credentials", map[string]any{"name": name, "host": u.Host, "username": gitUser, "secret": secret, "repositories": repositories}).
		want(http.StatusCreated).decode(&got)
	return got.ID
}

// clone starts a clone and waits until it is no longer cloning.
func (c *client) clone(agentID string, body map[string]string) api.RepositoryView {
	c.e.t.Helper()
	var r api.RepositoryView
	c.do("PUT", "/api/agents/"+agentID+"/repository", body).want(http.StatusAccepted).decode(&r)
	if r.Status != "cloning" || r.URL != body["url"] {
		c.e.t.Fatalf("PUT repository = %+v, want cloning %s", r, body["url"])
	}
	waitFor(c.e.t, "the clone to end", func() bool {
		c.do("GET", "/api/agents/"+agentID+"/repository", nil).want(http.StatusOK).decode(&r)
		return r.Status != "cloning"
	})
	return r
}

func TestRepositoryClone(t *testing.T) {
	s := gittest.New(t, gittest.Options{User: gitUser, Password: gitSecret,
		Files: map[string]string{"README.md": "hello\n", ".gitignore": "*.o\n"}})
	e := newEnv(t, envOptions{gitCA: s.CAFile})
	owner := e.signup("owner@example.com", "Olive Owner")
	other := e.signup("other@example.com", "Other")
	good := owner.addCredential(s, "good", gitSecret)
	bad := owner.addCredential(s, "bad", "not-the-secret")
	foreign := other.addCredential(s, "theirs", gitSecret)

	t.Run("ready with the owner's credential", func(t *testing.T) {
		id := owner.createAgent("cloned")
		r := owner.clone(id, map[string]string{"url": s.URL(), "credential_id": good})
		if r.Status != "ready" || r.Head != s.Head(t, "main") || r.Ref != "main" || r.Progress != 100 {
			t.Fatalf("repository = %+v, want ready at %s on main", r, s.Head(t, "main"))
		}
		if got := owner.file(id, "README.md"); got != "hello\n" {
			t.Fatalf("README.md = %q", got)
		}
		if got := owner.file(id, ".gitignore"); got != "*.o\n" {
			t.Fatalf(".gitignore = %q", got)
		}
		owner.do("GET", "/api/agents/"+id+"/files?path=.git/config", nil).want(http.StatusBadRequest)
		// A second clone into the same (now full) workspace is refused.
		owner.do("PUT", "/api/agents/"+id+"/repository", map[string]string{"url": s.URL()}).want(http.StatusConflict)
	})
	t.Run("anonymous when no credential is named", func(t *testing.T) {
		// other has a credential for the host and the repository, and it
		// is not picked by host: a clone without one is anonymous.
		id := other.createAgent("by host")
		if r := other.clone(id, map[string]string{"url": s.URL()}); r.Status != "failed" || !strings.Contains(r.Error, "authentication failed") {
			t.Fatalf("repository = %+v, want failed: anonymous", r)
		}
	})

	refused := []struct {
		name   string
		body   map[string]string
		status int
	}{
		{"plain http", map[string]string{"url": strings.Replace(s.URL(), "https://", "http://", 1)}, http.StatusBadRequest},
		{"userinfo in the URL", map[string]string{"url": strings.Replace(s.URL(), "https://", "https://"+gitUser+":"+gitSecret+"@", 1)}, http.StatusBadRequest},
		{"ssh", map[string]string{"url": "ssh://git@example.com/r.git"}, http.StatusBadRequest},
		{"another person's credential", map[string]string{"url": s.URL(), "credential_id": foreign}, http.StatusNotFound},
		{"an option as ref", map[string]string{"url": s.URL(), "ref": "--upload-pack=touch /tmp/pwned"}, http.StatusBadRequest},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			id := owner.createAgent("refused " + tt.name)
			owner.do("PUT", "/api/agents/"+id+"/repository", tt.body).want(tt.status)
			owner.do("GET", "/api/agents/"+id+"/repository", nil).want(http.StatusNotFound)
		})
	}

	failed := []struct {
		name, cred, ref, url, want string
	}{
		{"wrong credential", bad, "", s.URL(), "authentication failed"},
		{"ref not found", good, "no-such-branch", s.URL(), "ref not found"},
		{"host unreachable", "", "", "https://127.0.0.1:1/repo.git", "could not be reached"},
	}
	for _, tt := range failed {
		t.Run(tt.name, func(t *testing.T) {
			id := owner.createAgent("failed " + tt.name)
			body := map[string]string{"url": tt.url}
			if tt.cred != "" {
				body["credential_id"] = tt.cred
			}
			if tt.ref != "" {
				body["ref"] = tt.ref
			}
			r := owner.clone(id, body)
			if r.Status != "failed" || !strings.Contains(r.Error, tt.want) {
				t.Fatalf("repository = %+v, want failed saying %q", r, tt.want)
			}
			// Nothing on disk: the workspace is empty and no partial clone remains.
			if ents, _ := os.ReadDir(filepath.Join(e.dataDir, "workspaces", id)); len(ents) != 0 {
				t.Fatalf("a failed clone left %d entries in the workspace", len(ents))
			}
			if _, err := os.Stat(filepath.Join(e.dataDir, "clones", id)); !os.IsNotExist(err) {
				t.Fatalf("a failed clone left its directory (%v)", err)
			}
			// A failed clone may be tried again.
			owner.do("PUT", "/api/agents/"+id+"/repository", map[string]string{"url": s.URL(), "credential_id": good}).want(http.StatusAccepted)
			waitFor(t, "the retry", func() bool {
				var r api.RepositoryView
				owner.do("GET", "/api/agents/"+id+"/repository", nil).want(http.StatusOK).decode(&r)
				if r.Status == "failed" {
					t.Fatalf("the retry failed: %+v", r)
				}
				return r.Status == "ready"
			})
		})
	}
	e.noSecretInAnswers(t, gitSecret)
}

// noSecretInAnswers fails if any answer the env gave holds secret.
func (e *env) noSecretInAnswers(t *testing.T, secret string) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.bodies) == 0 {
		t.Fatal("no answers recorded")
	}
	for _, b := range e.bodies {
		if bytes.Contains(b, []byte(secret)) {
			t.Fatalf("an answer carries the git credential: %s", b)
		}
	}
}

// TestRepositoryRunApprovePush: an agent run changes two files and adds a
// dotfile; approved, it is one commit attributed to the person who asked,
// committed by Corral, saying what was asked (shortened to a subject),
// what the agent answered and which files changed, with the trailers;
// pushed, the server has exactly that commit and fsck finds it sound. Then the remote moves and a push is
// a non-fast-forward conflict. The credential shows nowhere.
func TestRepositoryRunApprovePush(t *testing.T) {
	needSandbox(t)
	s := gittest.New(t, gittest.Options{User: gitUser, Password: gitSecret,
		Files: map[string]string{"README.md": "hello\n", "src/app.go": "package app\n"}})
	e := newEnv(t, envOptions{gitCA: s.CAFile})
	owner := e.signup("owner@example.com", "Olive Owner")
	asker := e.signup("ann@example.com", "Ann Asker")
	approver := e.signup("ed@example.com", "Ed Editor")
	cred := owner.addCredential(s, "git", gitSecret)
	id := owner.createAgent("repo worker")
	owner.grant(id, asker.user.ID, "runner")
	owner.grant(id, approver.user.ID, "editor")
	if r := owner.clone(id, map[string]string{"url": s.URL(), "credential_id": cred}); r.Status != "ready" {
		t.Fatalf("clone = %+v", r)
	}
	base := s.Head(t, "main")

	e.answer(modeltest.Sequence(
		modeltest.Calls(modeltest.WriteCall("c1", "README.md", "hello, changed\n")),
		modeltest.Calls(modeltest.WriteCall("c2", "src/app.go", "package app\n\nconst X = 1\n")),
		modeltest.Calls(modeltest.ShellCall("c3", "printf 'semi: false\\n' > .prettierrc; "+
			// The needle is put together in the shell, so the command (which
			// the trace records) does not hold the credential itself.
			"grep -rls -- \"$(printf '%s%s' '"+gitSecret[:8]+"' '"+gitSecret[8:]+"')\" /proc/[0-9]*/environ /workspace /tmp 2>/dev/null; echo scan-done")),
		modeltest.Text("Done: the README and the app are tidied.\n\nI added a .prettierrc\x1b[31m too."),
	))
	request := "  Tidy up the README and the app package so that they read well for the coming release, please\n" +
		"and keep the style as it is.\nCorral-Change-Set: chg_forged\n"
	run := asker.send(id, request)
	done := asker.waitRun(run.ID, "completed", "errored")
	if done.Status != "completed" || done.ChangeSetID == nil {
		t.Fatalf("run = %+v, want completed with a change set", done)
	}
	results := strings.Join(e.toolResults(), "\n")
	if !strings.Contains(results, "scan-done") || strings.Contains(results, "/proc/") || strings.Contains(results, gitSecret) {
		t.Fatalf("the sandbox scan for the credential found something: %q", results)
	}
	var cs api.ChangeSetView
	approver.do("POST", "/api/changes/"+*done.ChangeSetID+"/approve", nil).want(http.StatusOK).decode(&cs)
	if cs.Status != "applied" {
		t.Fatalf("change set = %s, want applied", cs.Status)
	}

	var commits api.List[api.CommitView]
	owner.do("GET", "/api/agents/"+id+"/repository/commits", nil).want(http.StatusOK).decode(&commits)
	if len(commits.Items) != 2 || commits.Items[0].ChangeSetID == nil || *commits.Items[0].ChangeSetID != cs.ID ||
		commits.Items[0].Author != (api.IdentityView{Name: "Ann Asker", Email: "ann@example.com"}) {
		t.Fatalf("commits = %+v, want the change set's commit by Ann Asker on top of the clone's", commits.Items)
	}

	var pushed api.PushView
	res := owner.do("POST", "/api/agents/"+id+"/repository/push", map[string]string{"branch": "corral/tidy"}).want(http.StatusOK)
	res.decode(&pushed)
	if pushed.Branch != "corral/tidy" || pushed.Commits != 1 || pushed.Head != commits.Items[0].SHA {
		t.Fatalf("push = %+v, want 1 commit, head %s", pushed, commits.Items[0].SHA)
	}
	// The test's server is on an address, no host whose URLs are known.
	if strings.Contains(string(res.body), "pull_request_url") {
		t.Errorf("push = %s, want no pull_request_url for %s", res.body, s.URL())
	}
	log := s.Log(t, "corral/tidy")
	if len(log) != 2 || log[1].SHA != base {
		t.Fatalf("server log = %+v, want exactly one new commit on %s", log, base)
	}
	c := log[0]
	if c.AuthorName != "Ann Asker" || c.AuthorEmail != "ann@example.com" || c.CommitterName != "Corral" || c.CommitterEmail != "corral@localhost" {
		t.Errorf("commit author %s <%s>, committer %s <%s>; want Ann Asker and Corral", c.AuthorName, c.AuthorEmail, c.CommitterName, c.CommitterEmail)
	}
	for _, trailer := range []string{"Corral-Run: " + run.ID, "Corral-Change-Set: " + cs.ID, "Approved-By: Ed Editor <ed@example.com>"} {
		if !strings.Contains(c.Message, "\n"+trailer+"\n") {
			t.Errorf("commit message %q lacks the trailer %q", c.Message, trailer)
		}
	}
	// The request's first line, cut to 72 characters; the answer, its
	// escape character dropped; the files; the trailers.
	want := "Tidy up the README and the app package so that they read well for the…\n\n" +
		"Done: the README and the app are tidied.\n\nI added a .prettierrc[31m too.\n\n" +
		"Files:\n  added    .prettierrc\n  modified README.md\n  modified src/app.go\n\n" +
		"Corral-Run: " + run.ID + "\nCorral-Change-Set: " + cs.ID + "\nApproved-By: Ed Editor <ed@example.com>\n"
	if strings.TrimRight(c.Message, "\n") != strings.TrimRight(want, "\n") {
		t.Errorf("commit message =\n%s\nwant\n%s", c.Message, want)
	}
	files := s.Files(t, "corral/tidy")
	if !slices.Contains(files, ".prettierrc") || s.Show(t, "corral/tidy", "README.md") != "hello, changed\n" || s.Show(t, "corral/tidy", "src/app.go") != "package app\n\nconst X = 1\n" {
		t.Errorf("server tree = %v, want the two changed files and .prettierrc", files)
	}
	s.Fsck(t)
	var repo api.RepositoryView
	owner.do("GET", "/api/agents/"+id+"/repository", nil).want(http.StatusOK).decode(&repo)
	if repo.LastPush == nil || repo.LastPush.Branch != "corral/tidy" || repo.LastPush.Head != pushed.Head || repo.LastPush.By.ID != owner.user.ID {
		t.Errorf("last push = %+v", repo.LastPush)
	}
	if found := secrettest.Find([]any{e.repos, e.decisions, e.stages, e.runner, e.creds, e.api}, []byte(gitSecret)); len(found) > 0 {
		t.Errorf("after the push, the credential is still reachable from the server: %v", found)
	}

	// The remote moves; an upload (committed as its uploader) then cannot
	// be pushed as a fast-forward.
	moved := s.Advance(t, "corral/tidy", "theirs.txt", "someone else\n")
	owner.do("PUT", "/api/agents/"+id+"/files?path=notes.txt", "mine\n").want(http.StatusOK)
	owner.do("GET", "/api/agents/"+id+"/repository/commits", nil).want(http.StatusOK).decode(&commits)
	if len(commits.Items) != 3 || commits.Items[0].Author.Name != "Olive Owner" || !strings.HasPrefix(commits.Items[0].Message, "Upload notes.txt") {
		t.Fatalf("after an upload, commits = %+v", commits.Items)
	}
	res = owner.do("POST", "/api/agents/"+id+"/repository/push", map[string]string{"branch": "corral/tidy"}).want(http.StatusConflict)
	if !strings.Contains(string(res.body), moved) {
		t.Fatalf("non-fast-forward answer %s does not name the remote's head %s", res.body, moved)
	}
	if s.Head(t, "corral/tidy") != moved {
		t.Fatal("a refused push moved the remote")
	}
	asker.do("POST", "/api/agents/"+id+"/repository/push", map[string]string{"branch": "x"}).want(http.StatusForbidden)
	// Not a branch name, or one that would say something else in the
	// push's refspec (a tag, a forced push): refused, and no ref is made.
	for _, b := range []string{"bad..name", "refs/tags/x", "+main", "refs/heads/other", "HEAD"} {
		owner.do("POST", "/api/agents/"+id+"/repository/push", map[string]string{"branch": b}).want(http.StatusBadRequest)
	}
	if refs := gittest.Git(t, s.Bare, "for-each-ref", "--format=%(refname)"); strings.Contains(refs, "refs/tags/") || strings.Contains(refs, "+main") || strings.Contains(refs, "other") {
		t.Fatalf("a refused push made a ref:\n%s", refs)
	}

	// The agent's own chain: the clone, the push and the refused push (the
	// 403 and the 400 were refused before any push was tried).
	var agentTrace api.List[api.TraceView]
	asker.do("GET", "/api/agents/"+id+"/trace", nil).want(http.StatusOK).decode(&agentTrace)
	verify(t, id, agentTrace.Items)
	var types []string
	for _, ev := range agentTrace.Items {
		types = append(types, ev.Type)
		if bytes.Contains(ev.Data, []byte(gitSecret)) {
			t.Fatalf("agent trace event %d holds the credential", ev.Seq)
		}
	}
	if !slices.Equal(types, []string{"cloned", "pushed", "push_refused"}) {
		t.Fatalf("agent trace = %v, want cloned, pushed, push_refused", types)
	}
	var pushedEv, refusedEv struct {
		Branch, Head, By, Code, Error string
		Commits                       int
	}
	json.Unmarshal(agentTrace.Items[1].Data, &pushedEv)
	json.Unmarshal(agentTrace.Items[2].Data, &refusedEv)
	if pushedEv.Branch != "corral/tidy" || pushedEv.Head != pushed.Head || pushedEv.Commits != 1 || pushedEv.By != owner.user.ID {
		t.Errorf("pushed event = %s", agentTrace.Items[1].Data)
	}
	if refusedEv.Code != "conflict" || !strings.Contains(refusedEv.Error, moved) {
		t.Errorf("push_refused event = %s, want the conflict naming %s", agentTrace.Items[2].Data, moved)
	}
	e.signup("stranger@example.com", "Stranger").do("GET", "/api/agents/"+id+"/trace", nil).want(http.StatusNotFound)

	e.noSecretInAnswers(t, gitSecret)
	for _, ev := range owner.trace(run.ID) {
		if bytes.Contains(ev.Data, []byte(gitSecret)) {
			t.Fatalf("trace event %d holds the credential", ev.Seq)
		}
	}
}

// TestRepositoryCloneStoppedByShutdown: a clone in flight when the server
// stops is failed, saying so, and leaves nothing on disk; a row a stopped
// process left cloning is failed at start-up.
func TestRepositoryCloneStoppedByShutdown(t *testing.T) {
	hold := make(chan struct{})
	arrived := make(chan struct{}, 100)
	s := gittest.New(t, gittest.Options{Before: func(*http.Request) {
		arrived <- struct{}{}
		<-hold
	}})
	t.Cleanup(func() { close(hold) }) // before the server closes: it waits for its handlers
	e := newEnv(t, envOptions{gitCA: s.CAFile})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("stopped")
	owner.do("PUT", "/api/agents/"+id+"/repository", map[string]string{"url": s.URL()}).want(http.StatusAccepted)
	<-arrived // git is talking to the server
	e.repos.Close()
	var r api.RepositoryView
	owner.do("GET", "/api/agents/"+id+"/repository", nil).want(http.StatusOK).decode(&r)
	if r.Status != "failed" || r.Error != "the server stopped during the clone" {
		t.Fatalf("after shutdown, repository = %+v", r)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.dataDir, "workspaces", id)); len(ents) != 0 {
		t.Fatalf("a stopped clone left %d entries in the workspace", len(ents))
	}
	if _, err := os.Stat(filepath.Join(e.dataDir, "clones", id)); !os.IsNotExist(err) {
		t.Fatalf("a stopped clone left its directory (%v)", err)
	}

	// A process killed mid-clone leaves the row cloning and a partial
	// directory: the next start fails the one and its node removes the
	// other.
	other := owner.createAgent("killed")
	if err := e.db.CreateRepository(context.Background(), corral.Repository{AgentID: other, URL: s.URL(), Status: corral.RepoCloning, CreatedBy: owner.user.ID}); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(e.dataDir, "clones", other, "partial"), "x")
	e.restart()
	if n := e.app.FailedClones; n != 1 {
		t.Fatalf("the restart failed %d clones, want 1", n)
	}
	owner.do("GET", "/api/agents/"+other+"/repository", nil).want(http.StatusOK).decode(&r)
	if r.Status != "failed" || r.Error != "the server stopped during the clone" {
		t.Fatalf("after a restart, repository = %+v", r)
	}
	if _, err := os.Stat(filepath.Join(e.dataDir, "clones", other)); !os.IsNotExist(err) {
		t.Fatalf("the partial clone is still there (%v)", err)
	}
}

// BenchmarkClone compares a clone through Corral (PUT, then polling until
// ready) with git clone of the same URL in the same run: see the
// corral/git ratio. Each runs in a child process of its own under GNU time,
// for its peak RSS (Corral's side: the server and the git it starts).
// CORRAL_BENCH_CLONE_FILES and CORRAL_BENCH_CLONE_BYTES (bytes of each
// file) size the repository (default 200 files of 16 KiB); the issue's
// figure is 50,000 files of 10,000 bytes.
func BenchmarkClone(b *testing.B) {
	files, size := envInt(b, "CORRAL_BENCH_CLONE_FILES", 200), envInt(b, "CORRAL_BENCH_CLONE_BYTES", 16<<10)
	s := gittest.New(b, gittest.Options{User: gitUser, Password: gitSecret, GenerateFiles: files, GenerateBytes: size})
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	var corralTime, gitTime time.Duration
	var corralRSS, serverRSS, gitRSS int64
	for b.Loop() {
		// Each side starts with nothing left to write back of the other.
		syscall.Sync()
		child := measured(self, "-test.run=^TestBenchCloneChild$", "-test.count=1")
		child.Env = append(os.Environ(), benchCloneEnv+"="+s.URL(), benchCloneCAEnv+"="+s.CAFile)
		out, err := child.CombinedOutput()
		if err != nil {
			b.Fatalf("clone child: %v\n%s", err, out)
		}
		d, ok := childTime(string(out))
		if !ok {
			b.Fatalf("clone child said no time:\n%s", out)
		}
		corralTime += d
		corralRSS = max(corralRSS, maxRSS(child, string(out)))
		for _, line := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(line, "server-hwm-kb "); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				serverRSS = max(serverRSS, n)
			}
		}

		dst := filepath.Join(b.TempDir(), "c")
		cmd := measured("git", "-c", "http.extraHeader=Authorization: Basic "+base64.StdEncoding.EncodeToString([]byte(gitUser+":"+gitSecret)),
			"clone", "-q", s.URL(), dst)
		cmd.Env = append(os.Environ(), "GIT_SSL_CAINFO="+s.CAFile, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		syscall.Sync()
		start := time.Now()
		out, err = cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("git clone: %v: %s", err, out)
		}
		gitTime += time.Since(start)
		gitRSS = max(gitRSS, maxRSS(cmd, string(out)))
		os.RemoveAll(dst)
	}
	n := float64(b.N)
	b.ReportMetric(corralTime.Seconds()/n, "corral-s")
	b.ReportMetric(gitTime.Seconds()/n, "git-s")
	b.ReportMetric(float64(corralTime)/float64(gitTime), "corral/git")
	b.ReportMetric(float64(corralRSS)/1024, "corral-maxrss-MiB")
	b.ReportMetric(float64(serverRSS)/1024, "server-hwm-MiB")
	b.ReportMetric(float64(gitRSS)/1024, "git-maxrss-MiB")
}

// The repository BenchmarkClone's child clones, and the certificate of its
// server.
const (
	benchCloneEnv   = "CORRAL_BENCH_CLONE_CHILD"
	benchCloneCAEnv = "CORRAL_BENCH_CLONE_CA"
)

// TestBenchCloneChild is BenchmarkClone's child: it clones the repository
// named by CORRAL_BENCH_CLONE_CHILD through a real server, waits until the
// clone is ready and prints how long that took. It does nothing in a
// normal test run.
func TestBenchCloneChild(t *testing.T) {
	repo := os.Getenv(benchCloneEnv)
	if repo == "" {
		t.Skip("run by BenchmarkClone only")
	}
	e := newEnv(t, envOptions{gitCA: os.Getenv(benchCloneCAEnv)})
	owner := e.signup("owner@example.com", "Owner")
	u, _ := url.Parse(repo)
	var cred struct {
		ID string `json:"id"`
	}
	owner.do("POST", "/api/credentials", map[string]any{"name": "git", "host": u.Host, "username": gitUser, "secret": gitSecret, "repositories": []string{repo}}).
		want(http.StatusCreated).decode(&cred)
	id := owner.createAgent("bench")
	start := time.Now()
	owner.do("PUT", "/api/agents/"+id+"/repository", map[string]string{"url": repo, "credential_id": cred.ID}).want(http.StatusAccepted)
	poll.Within(t, 30*time.Minute, "the clone", func() bool {
		var r api.RepositoryView
		owner.do("GET", "/api/agents/"+id+"/repository", nil).want(http.StatusOK).decode(&r)
		if r.Status == "failed" {
			t.Fatalf("clone failed: %s", r.Error)
		}
		return r.Status == "ready"
	})
	fmt.Printf("child-time-ns %d\n", time.Since(start).Nanoseconds())
	// The server's own peak, without the git it ran (GNU time's figure is
	// the larger of the two).
	if status, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				fmt.Printf("server-hwm-kb %s\n", strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			}
		}
	}
}

// TestCredentialBoundToRepositories: the attack as it was written: an
// editor of one agent points it at the owner's other private repository on
// the same host with the owner's credential, to read it and push to it.
// The credential names only the agent's repository: the clone is refused
// (403) for the editor and the owner alike, and nothing is fetched; the
// agent's own repository clones, and once the owner takes it off the
// credential's list, a push with it is refused too.
func TestCredentialBoundToRepositories(t *testing.T) {
	s := gittest.New(t, gittest.Options{User: gitUser, Password: gitSecret})
	private, privateBare := s.AddRepository(t, "private.git", map[string]string{"plans.md": "the owner's private plans\n"})
	e := newEnv(t, envOptions{gitCA: s.CAFile})
	owner := e.signup("owner@example.com", "Olive Owner")
	editor := e.signup("ed@example.com", "Ed Editor")
	cred := owner.addCredential(s, "repo only", gitSecret, s.URL())
	id := owner.createAgent("shared")
	owner.grant(id, editor.user.ID, "editor")

	before := len(s.Requests())
	for _, who := range []*client{editor, owner} {
		res := who.do("PUT", "/api/agents/"+id+"/repository", map[string]string{"url": private, "credential_id": cred})
		if res.status != http.StatusForbidden || !strings.Contains(string(res.body), "may not be used for") {
			t.Fatalf("a clone of the other repository with the credential = %d %s, want 403", res.status, res.body)
		}
	}
	// Without the credential it is anonymous, and the server says no.
	if r := editor.clone(id, map[string]string{"url": private}); r.Status != "failed" || !strings.Contains(r.Error, "authentication failed") {
		t.Fatalf("an anonymous clone of the private repository = %+v, want failed", r)
	}
	for _, r := range s.Requests()[before:] {
		if r.Header.Get("Authorization") != "" || strings.Contains(r.URL.RawQuery+r.Header.Get("Authorization"), gitSecret) {
			t.Fatalf("the credential reached the server for %s", r.URL)
		}
	}
	// Patterns: host/owner/* names every repository of that path.
	wide := owner.addCredential(s, "wide", gitSecret, s.URL()[:strings.LastIndex(s.URL(), "/")]+"/*")
	other := owner.createAgent("other")
	if r := owner.clone(other, map[string]string{"url": private, "credential_id": wide}); r.Status != "ready" {
		t.Fatalf("a clone under a pattern that names it = %+v, want ready", r)
	}

	// The agent's own repository clones with it; a push goes only there.
	if r := editor.clone(id, map[string]string{"url": s.URL(), "credential_id": cred}); r.Status != "ready" {
		t.Fatalf("the agent's repository = %+v, want ready", r)
	}
	privateHead := gittest.Git(t, privateBare, "rev-parse", "HEAD")
	owner.do("PUT", "/api/agents/"+id+"/files?path=notes.md", "notes\n").want(http.StatusOK)
	// A push that names no branch goes to the one the repository suggests.
	var repo api.RepositoryView
	editor.do("GET", "/api/agents/"+id+"/repository", nil).want(http.StatusOK).decode(&repo)
	if want := "corral/shared-" + strings.TrimPrefix(id, "agt_")[:6]; repo.SuggestedBranch != want {
		t.Fatalf("suggested branch = %q, want %q", repo.SuggestedBranch, want)
	}
	var pushed api.PushView
	editor.do("POST", "/api/agents/"+id+"/repository/push", map[string]string{}).want(http.StatusOK).decode(&pushed)
	if pushed.Branch != repo.SuggestedBranch || pushed.PullRequestURL != "" {
		t.Fatalf("a push naming no branch = %+v, want it on %s, with no pull request link", pushed, repo.SuggestedBranch)
	}
	if s.Head(t, repo.SuggestedBranch) != pushed.Head || gittest.Git(t, privateBare, "rev-parse", "HEAD") != privateHead {
		t.Fatal("the push did not land on the agent's repository alone")
	}
	// Taken off the list, the credential pushes no more, for anyone.
	owner.do("PATCH", "/api/credentials/"+cred, map[string]any{"repositories": []string{}}).want(http.StatusOK)
	res := owner.do("POST", "/api/agents/"+id+"/repository/push", map[string]string{"branch": "corral/more"})
	if res.status != http.StatusForbidden {
		t.Fatalf("a push with a credential that no longer names the repository = %d %s, want 403", res.status, res.body)
	}
}

// TestCloneRefusesInternalTargets: the attack as it was written used
// clone errors as a port scanner of the server's own loopback ("git
// failed talking to the remote" for an open port, "unreachable" for a
// closed one). A server that allows no private range refuses both alike,
// before git connects, and says how an operator would allow one.
func TestCloneRefusesInternalTargets(t *testing.T) {
	s := gittest.New(t, gittest.Options{})
	e := newEnv(t, envOptions{gitCA: s.CAFile, egress: &egress.Policy{}})
	owner := e.signup("owner@example.com", "Owner")
	before := len(s.Requests())
	var msgs []string
	for i, url := range []string{s.URL(), "https://127.0.0.1:1/repo.git", "https://169.254.169.254/latest.git", "https://localhost:22/x.git"} {
		id := owner.createAgent(fmt.Sprintf("scan %d", i))
		r := owner.clone(id, map[string]string{"url": url})
		if r.Status != "failed" || !strings.Contains(r.Error, "--egress-allow-private") {
			t.Fatalf("a clone of %s = %+v, want failed naming --egress-allow-private", url, r)
		}
		msgs = append(msgs, r.Error)
	}
	if n := len(s.Requests()) - before; n != 0 {
		t.Fatalf("%d requests reached the git server on loopback", n)
	}
	// The open port and the closed one answer alike.
	if msgs[0] != msgs[1] {
		t.Fatalf("an open and a closed port answer differently: %q, %q", msgs[0], msgs[1])
	}
}

// TestRepositoryAutoModeCommitSaysWhat: in auto mode the change set is
// applied as the run ends, and its commit still carries the run's answer:
// the answer joins the thread before the change set is applied.
func TestRepositoryAutoModeCommitSaysWhat(t *testing.T) {
	needSandbox(t)
	s := gittest.New(t, gittest.Options{User: gitUser, Password: gitSecret})
	e := newEnv(t, envOptions{gitCA: s.CAFile})
	owner := e.signup("owner@example.com", "Olive Owner")
	cred := owner.addCredential(s, "git", gitSecret)
	id := owner.createAgent("auto worker")
	if r := owner.clone(id, map[string]string{"url": s.URL(), "credential_id": cred}); r.Status != "ready" {
		t.Fatalf("clone = %+v", r)
	}
	owner.do("PATCH", "/api/agents/"+id, map[string]any{"policy": map[string]string{"changes": "auto"}}).want(http.StatusOK)
	e.answer(modeltest.Sequence(
		modeltest.Calls(modeltest.WriteCall("c1", "notes.md", "notes\n")),
		modeltest.Text("Wrote the notes."),
	))
	run := owner.send(id, "Write the notes")
	if done := owner.waitRun(run.ID, "completed", "errored"); done.Status != "completed" {
		t.Fatalf("run = %+v, want completed", done)
	}
	var commits api.List[api.CommitView]
	owner.do("GET", "/api/agents/"+id+"/repository/commits", nil).want(http.StatusOK).decode(&commits)
	want := "Write the notes\n\nWrote the notes.\n\nFiles:\n  added    notes.md\n\nCorral-Run: " + run.ID
	if len(commits.Items) != 2 || !strings.HasPrefix(commits.Items[0].Message, want) ||
		!strings.Contains(commits.Items[0].Message, "\nApproved-By: Corral (auto mode)") {
		t.Fatalf("commits = %+v, want the auto-applied change set's commit starting %q", commits.Items, want)
	}
}
