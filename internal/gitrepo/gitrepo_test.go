package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"corral"
	"corral/internal/egress"
	"corral/internal/gittest"
)

const (
	testUser   = "alice"
	testSecret = "ghp_test-SECRET-0123456789"
)

func server(t *testing.T, opt gittest.Options) (*gittest.Server, Config) {
	t.Helper()
	if opt.User == "" {
		opt.User, opt.Password = testUser, testSecret
	}
	s := gittest.New(t, opt)
	return s, Config{CAFile: s.CAFile, Egress: loopback}
}

// loopback lets tests reach their git servers on 127.0.0.1.
var loopback = egress.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

func auth() *Auth { return &Auth{Username: testUser, Secret: []byte(testSecret)} }

// TestCommandEnvironment: git never inherits the server's environment, and
// the credential is in the environment of the one process, never in argv.
func TestCommandEnvironment(t *testing.T) {
	t.Setenv("CORRAL_MODEL_KEY", "sk-server-secret")
	cmd, cleanup, err := Config{}.command(context.Background(), "", &remote{auth: auth()}, "ls-remote", "--", "https://example.com/r.git")
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	for _, a := range cmd.Args {
		if strings.Contains(a, testSecret) || strings.Contains(a, "Authorization") {
			t.Fatalf("argv %q carries the credential", cmd.Args)
		}
	}
	var helper bool
	for _, kv := range cmd.Env {
		if strings.Contains(kv, "sk-server-secret") {
			t.Fatalf("git's environment inherits the server's: %q", kv)
		}
		if strings.Contains(kv, testSecret) || strings.Contains(kv, "Authorization") {
			t.Fatalf("git's environment carries the credential: %q", kv)
		}
		helper = helper || strings.HasPrefix(kv, "GIT_CONFIG_VALUE_") && strings.HasSuffix(kv, "="+credentialHelper)
	}
	if !helper || len(cmd.ExtraFiles) != 1 {
		t.Fatalf("no credential helper and pipe for git: %q, %d files", cmd.Env, len(cmd.ExtraFiles))
	}
	// The pipe holds the credential as git's helper protocol has it.
	got, err := io.ReadAll(cmd.ExtraFiles[0])
	if err != nil || string(got) != "username="+auth().Username+"\npassword="+testSecret+"\n" {
		t.Fatalf("the pipe holds %q, %v", got, err)
	}
	for _, want := range []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0", "LANG=C"} {
		if !slices.Contains(cmd.Env, want) {
			t.Errorf("git's environment lacks %s", want)
		}
	}
	anon, cleanup2, _ := Config{}.command(context.Background(), "", nil, "status")
	defer cleanup2()
	for _, kv := range anon.Env {
		if strings.Contains(kv, "Authorization") || strings.Contains(kv, credentialHelper) {
			t.Fatalf("an anonymous command carries %q", kv)
		}
	}
	if len(anon.ExtraFiles) != 0 {
		t.Fatalf("an anonymous command gets a credential pipe")
	}
}

func TestClone(t *testing.T) {
	s, cfg := server(t, gittest.Options{Files: map[string]string{"README.md": "hello\n", ".gitignore": "*.o\n", "src/main.go": "package main\n"}})
	tests := []struct {
		name   string
		url    string
		ref    string
		auth   *Auth
		code   string
		substr string
	}{
		{"with credential", s.URL(), "", auth(), "", ""},
		{"with branch", s.URL(), "main", auth(), "", ""},
		{"wrong credential", s.URL(), "", &Auth{Username: testUser, Secret: []byte("wrong")}, corral.EINVALID, "authentication failed"},
		{"anonymous to a private repository", s.URL(), "", nil, corral.EINVALID, "authentication failed"},
		{"ref not found", s.URL(), "no-such-branch", auth(), corral.ENOTFOUND, "ref not found"},
		{"no repository", strings.TrimSuffix(s.URL(), gittest.Name) + "other.git", "", auth(), corral.ENOTFOUND, "no repository"},
		{"unreachable host", "https://127.0.0.1:1/repo.git", "", auth(), corral.EUNAVAIL, "could not be reached"},
		{"bad ref", s.URL(), "--upload-pack=touch /tmp/x", auth(), corral.EINVALID, "ref"},
		{"plain http", "http://127.0.0.1/repo.git", "", auth(), corral.EINVALID, "https://"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "clone")
			var seen []int
			err := cfg.Clone(context.Background(), tt.url, tt.ref, tt.auth, dir, func(p int) { seen = append(seen, p) })
			if tt.code == "" {
				if err != nil {
					t.Fatalf("Clone: %v", err)
				}
				for _, f := range []string{"README.md", ".gitignore", "src/main.go", ".git/HEAD"} {
					if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
						t.Errorf("after the clone: %v", err)
					}
				}
				if len(seen) == 0 || seen[len(seen)-1] != 100 {
					t.Errorf("progress = %v, want it to end at 100", seen)
				}
				return
			}
			if corral.ErrorCode(err) != tt.code || !strings.Contains(corral.ErrorMessage(err), tt.substr) {
				t.Fatalf("Clone = %v (%s), want %s with %q", err, corral.ErrorCode(err), tt.code, tt.substr)
			}
			if strings.Contains(err.Error(), testSecret) {
				t.Fatalf("the error carries the credential: %v", err)
			}
			if _, serr := os.Stat(dir); !errors.Is(serr, fs.ErrNotExist) {
				t.Fatalf("a failed clone left %s on disk (%v)", dir, serr)
			}
		})
	}
}

// TestCloneRefusedPath: a repository whose tree holds a path git refuses
// to check out (GIT~1, a short name of .git on NTFS) is refused saying so,
// not as a network failure, and leaves nothing on disk.
func TestCloneRefusedPath(t *testing.T) {
	s, cfg := server(t, gittest.Options{Files: map[string]string{"README.md": "hello\n"}})
	work := filepath.Join(t.TempDir(), "work")
	gittest.Git(t, filepath.Dir(work), "clone", "-q", s.Bare, work)
	if err := os.MkdirAll(filepath.Join(work, "GIT~1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "GIT~1", "config"), []byte("[core]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, work, "-c", "core.protectNTFS=false", "add", ".")
	gittest.Git(t, work, "-c", "core.protectNTFS=false", "commit", "-q", "--no-gpg-sign", "-m", "a path git refuses")
	gittest.Git(t, work, "push", "-q", "origin", "HEAD:"+s.Branch())

	dir := filepath.Join(t.TempDir(), "clone")
	err := cfg.Clone(context.Background(), s.URL(), "", auth(), dir, nil)
	if corral.ErrorCode(err) != corral.EINVALID || !strings.Contains(corral.ErrorMessage(err), "refuses to check out") {
		t.Fatalf("Clone = %v (%s), want invalid: a path git refuses", err, corral.ErrorCode(err))
	}
	if _, serr := os.Stat(dir); !errors.Is(serr, fs.ErrNotExist) {
		t.Fatalf("a refused clone left %s on disk (%v)", dir, serr)
	}
}

func TestCloneTooLarge(t *testing.T) {
	s, cfg := server(t, gittest.Options{GenerateFiles: 20, GenerateBytes: 64 << 10})
	cfg.MaxBytes = 256 << 10
	dir := filepath.Join(t.TempDir(), "clone")
	err := cfg.Clone(context.Background(), s.URL(), "", auth(), dir, nil)
	if corral.ErrorCode(err) != corral.ETOOLARGE || !strings.Contains(corral.ErrorMessage(err), "too large") {
		t.Fatalf("Clone = %v, want %s saying too large", err, corral.ETOOLARGE)
	}
	if _, serr := os.Stat(dir); !errors.Is(serr, fs.ErrNotExist) {
		t.Fatalf("a refused clone left %s on disk (%v)", dir, serr)
	}
}

// TestCloneTreeCheckedFirst: the tree is held to the limits before it is
// checked out. This repository also holds a path checkout refuses
// (GIT~1): the answer is the limit's, so checkout never ran.
func TestCloneTreeCheckedFirst(t *testing.T) {
	s, cfg := server(t, gittest.Options{Files: map[string]string{"README.md": "hello\n"}})
	work := filepath.Join(t.TempDir(), "work")
	gittest.Git(t, filepath.Dir(work), "clone", "-q", s.Bare, work)
	if err := os.MkdirAll(filepath.Join(work, "GIT~1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "GIT~1", "config"), []byte("[core]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, work, "-c", "core.protectNTFS=false", "add", ".")
	gittest.Git(t, work, "-c", "core.protectNTFS=false", "commit", "-q", "--no-gpg-sign", "-m", "a path git refuses")
	gittest.Git(t, work, "push", "-q", "origin", "HEAD:"+s.Branch())

	cfg.Tree = TreeLimits{MaxFiles: 1}
	dir := filepath.Join(t.TempDir(), "clone")
	err := cfg.Clone(context.Background(), s.URL(), "", auth(), dir, nil)
	if corral.ErrorCode(err) != corral.ETOOLARGE || !strings.Contains(corral.ErrorMessage(err), "more than 1 files") {
		t.Fatalf("Clone = %v (%s), want %s: the file limit, before checkout", err, corral.ErrorCode(err), corral.ETOOLARGE)
	}
	if _, serr := os.Stat(dir); !errors.Is(serr, fs.ErrNotExist) {
		t.Fatalf("a refused clone left %s on disk (%v)", dir, serr)
	}
}

// TestTreeLimitsCheck reads listings as git ls-tree -r -t -l -z writes
// them: blobs are files, trees and submodules directories, paths of any
// length are skipped, and a listing that is not git's is an internal error.
func TestTreeLimitsCheck(t *testing.T) {
	const oid = "45b983be36b73c0788dc9cbcb76cbb80fc7bb057"
	rec := func(mode, typ, size, path string) string {
		return mode + " " + typ + " " + oid + " " + size + "\t" + path + "\x00"
	}
	dir := rec("040000", "tree", "      -", "d")
	file := rec("100644", "blob", "    100", "d/f")
	link := rec("120000", "blob", "      3", "d/l")
	sub := rec("160000", "commit", "      -", "sub")
	long := rec("100644", "blob", "      1", strings.Repeat("n", 10000))
	tests := []struct {
		name    string
		lim     TreeLimits
		listing string
		code    string
		substr  string
	}{
		{"within", TreeLimits{MaxFiles: 2, MaxDirs: 2, MaxBytes: 103}, dir + file + link + sub, "", ""},
		{"no limits", TreeLimits{}, dir + file + link + sub, "", ""},
		{"empty", TreeLimits{MaxFiles: 1}, "", "", ""},
		{"files", TreeLimits{MaxFiles: 1}, dir + file + link, corral.ETOOLARGE, "more than 1 files (--import-max-files)"},
		{"a submodule is a directory", TreeLimits{MaxDirs: 1}, dir + sub, corral.ETOOLARGE, "more than 1 directories (--import-max-dirs)"},
		{"bytes", TreeLimits{MaxBytes: 102}, file + link, corral.ETOOLARGE, "more than 102 bytes (--import-max-bytes)"},
		{"a long path is skipped", TreeLimits{MaxFiles: 2}, long + long + long, corral.ETOOLARGE, "more than 2 files"},
		{"not a listing", TreeLimits{MaxFiles: 1}, "hello\tworld\x00", corral.EINTERNAL, ""},
		{"cut off", TreeLimits{MaxFiles: 5}, file + "100644 blob " + oid, corral.EINTERNAL, ""},
		{"path cut off", TreeLimits{MaxFiles: 5}, strings.TrimSuffix(file, "\x00"), corral.EINTERNAL, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.lim.check(strings.NewReader(tt.listing))
			if corral.ErrorCode(err) != tt.code || !strings.Contains(corral.ErrorMessage(err), tt.substr) {
				t.Fatalf("check = %v (%s), want %q with %q", err, corral.ErrorCode(err), tt.code, tt.substr)
			}
		})
	}
}

// TestCommitAndPush: one commit per call, attributed as asked, with only
// the named paths; a push lands it on the server, and a push after the
// remote moved is a non-fast-forward conflict naming the remote's head.
func TestCommitAndPush(t *testing.T) {
	s, cfg := server(t, gittest.Options{})
	dir := filepath.Join(t.TempDir(), "clone")
	ctx := context.Background()
	if err := cfg.Clone(ctx, s.URL(), "", auth(), dir, nil); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"a.txt": "A\n", ".env.example": "X=1\n", "left-out.txt": "not named\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	msg := "Apply change set chg_1 of run run_1\n\nCorral-Run: run_1\nCorral-Change-Set: chg_1\nApproved-By: Bob <bob@example.com>\n"
	sha, err := cfg.Commit(ctx, dir, Identity{Name: "Ann Asker", Email: "ann@example.com"}, msg, []string{"a.txt", ".env.example", "*"})
	if err != nil || sha == "" {
		t.Fatalf("Commit = %q, %v", sha, err)
	}
	if again, err := cfg.Commit(ctx, dir, Identity{Name: "Ann", Email: "ann@example.com"}, "nothing", []string{"a.txt"}); err != nil || again != "" {
		t.Fatalf("a commit with nothing staged = %q, %v; want none", again, err)
	}
	res, err := cfg.Push(ctx, dir, s.URL(), "feature/one", auth())
	if err != nil {
		t.Fatalf("Push: %v", err)
	}
	if res.Head != sha || res.Commits != 1 {
		t.Fatalf("Push = %+v, want head %s and 1 commit", res, sha)
	}
	log := s.Log(t, "feature/one")
	if len(log) != 2 {
		t.Fatalf("server log has %d commits, want 2", len(log))
	}
	got := log[0]
	if got.AuthorName != "Ann Asker" || got.AuthorEmail != "ann@example.com" || got.CommitterName != "Corral" || got.CommitterEmail != "corral@localhost" {
		t.Errorf("commit = %+v, want author Ann Asker, committer Corral", got)
	}
	if got.Message != msg {
		t.Errorf("message = %q, want %q", got.Message, msg)
	}
	files := s.Files(t, "feature/one")
	if !slices.Contains(files, ".env.example") || !slices.Contains(files, "a.txt") || slices.Contains(files, "left-out.txt") {
		t.Errorf("server tree = %v, want a.txt and .env.example, not left-out.txt (a literal \"*\" pathspec must not glob)", files)
	}
	s.Fsck(t)

	commits, err := cfg.Log(ctx, dir, 100)
	if err != nil || len(commits) != 2 || !strings.Contains(commits[0].Message, "\nCorral-Change-Set: chg_1\n") {
		t.Fatalf("Log = %+v, %v", commits, err)
	}

	// Pushing again with nothing new pushes nothing.
	if res, err := cfg.Push(ctx, dir, s.URL(), "feature/one", auth()); err != nil || res.Commits != 0 {
		t.Fatalf("second Push = %+v, %v; want 0 commits", res, err)
	}

	moved := s.Advance(t, "feature/one", "theirs.txt", "theirs\n")
	os.WriteFile(filepath.Join(dir, "b.txt"), []byte("B\n"), 0o644)
	if _, err := cfg.Commit(ctx, dir, Identity{Name: "Ann", Email: "ann@example.com"}, "b", []string{"b.txt"}); err != nil {
		t.Fatal(err)
	}
	_, err = cfg.Push(ctx, dir, s.URL(), "feature/one", auth())
	if corral.ErrorCode(err) != corral.ECONFLICT || !strings.Contains(corral.ErrorMessage(err), moved) {
		t.Fatalf("Push after the remote moved = %v, want %s naming %s", err, corral.ECONFLICT, moved)
	}
	if s.Head(t, "feature/one") != moved {
		t.Fatalf("a refused push changed the remote")
	}

	// A directory deleted with its files is committed by its path.
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "sub", "f.txt"), []byte("f\n"), 0o644)
	if _, err := cfg.Commit(ctx, dir, Identity{Name: "Ann", Email: "ann@example.com"}, "add sub", []string{"sub/f.txt"}); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(dir, "sub"))
	if sha, err := cfg.Commit(ctx, dir, Identity{Name: "Ann", Email: "ann@example.com"}, "delete sub", []string{"sub"}); err != nil || sha == "" {
		t.Fatalf("committing a deleted directory = %q, %v; want a commit", sha, err)
	}

	if _, err := cfg.Push(ctx, dir, s.URL(), "bad..branch", auth()); corral.ErrorCode(err) != corral.EINVALID {
		t.Fatalf("Push to bad..branch = %v, want %s", err, corral.EINVALID)
	}
	if _, err := cfg.Push(ctx, dir, s.URL(), "x", &Auth{Username: testUser, Secret: []byte("nope")}); corral.ErrorCode(err) != corral.EINVALID {
		t.Fatalf("Push with a wrong credential = %v, want %s", err, corral.EINVALID)
	}
	for _, r := range s.Requests() {
		if bytes.Contains([]byte(r.URL.String()), []byte(testSecret)) {
			t.Fatalf("the credential reached the server in a URL: %s", r.URL)
		}
	}
}

func TestNoGitSaysSo(t *testing.T) {
	err := Config{Git: "/nonexistent/git", Egress: loopback}.Clone(context.Background(), "https://127.0.0.1:1/r.git", "", nil, filepath.Join(t.TempDir(), "c"), nil)
	if corral.ErrorCode(err) != corral.EUNAVAIL || !strings.Contains(corral.ErrorMessage(err), "git is not installed") {
		t.Fatalf("Clone without git = %v, want %s saying git is not installed", err, corral.EUNAVAIL)
	}
}
