// Package gittest is a real git server for tests: a bare repository made
// by Debian's git, served over TLS by git http-backend (through
// net/http/cgi) behind HTTP basic authentication, with helpers to read
// what the server holds (its log, its tree) and check it with git fsck.
package gittest

import (
	"bytes"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// T is what the server needs of its caller: a T, or the gitserver
// command's stand-in (internal/gittest/gitserver, for the browser tests).
type T interface {
	Helper()
	TempDir() string
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Skip(args ...any)
	Cleanup(func())
}

// Options shape the repository a server starts with.
type Options struct {
	User, Password string            // basic auth; both empty: anonymous access
	Files          map[string]string // the first commit's files; default a README
	Branch         string            // the default branch; default "main"
	// GenerateFiles and GenerateBytes add that many files of that many
	// random bytes each to the first commit (benchmarks).
	GenerateFiles, GenerateBytes int
	// Before, when set, is called with every request before it is served
	// (a test holds a clone in flight by blocking in it).
	Before func(*http.Request)
}

// Server is a git server on loopback.
type Server struct {
	t      T
	srv    *httptest.Server
	root   string // GIT_PROJECT_ROOT
	Bare   string // the bare repository on disk
	CAFile string // the server's certificate, PEM, for GIT_SSL_CAINFO
	opt    Options

	mu       sync.Mutex
	requests []*http.Request // every request the server saw, for secret checks
	denied   int
}

// Name is the repository's path on the server.
const Name = "repo.git"

// New starts a server whose repository holds one commit with opt.Files.
func New(t T, opt Options) *Server {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed (make test installs it)")
	}
	if opt.Branch == "" {
		opt.Branch = "main"
	}
	if opt.Files == nil {
		opt.Files = map[string]string{"README.md": "# test repository\n"}
	}
	s := &Server{t: t, root: t.TempDir(), opt: opt}
	s.Bare = filepath.Join(s.root, Name)
	Git(t, "", "init", "-q", "--bare", "--initial-branch="+opt.Branch, s.Bare)
	Git(t, s.Bare, "config", "http.receivepack", "true")
	Git(t, s.Bare, "config", "receive.denyNonFastForwards", "false")

	work := t.TempDir()
	Git(t, "", "init", "-q", "--initial-branch="+opt.Branch, work)
	for name, content := range opt.Files {
		write(t, filepath.Join(work, name), []byte(content))
	}
	for i := 0; i < opt.GenerateFiles; i++ {
		b := make([]byte, opt.GenerateBytes)
		rand.Read(b)
		write(t, filepath.Join(work, "gen", fmt.Sprintf("d%03d", i/100), fmt.Sprintf("f%05d.bin", i)), b)
	}
	Git(t, work, "add", "-A")
	Commit(t, work, "First commit")
	Git(t, work, "push", "-q", s.Bare, "HEAD:refs/heads/"+opt.Branch)

	backend := &cgi.Handler{
		Path: gitBinary(t),
		Args: []string{"http-backend"},
		Env: []string{
			"GIT_PROJECT_ROOT=" + s.root,
			"GIT_HTTP_EXPORT_ALL=1",
			"HOME=" + t.TempDir(),
			"GIT_CONFIG_NOSYSTEM=1",
			"GIT_CONFIG_GLOBAL=/dev/null",
		},
	}
	s.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, r.Clone(r.Context()))
		s.mu.Unlock()
		if opt.Before != nil {
			opt.Before(r)
		}
		if opt.User != "" || opt.Password != "" {
			u, p, ok := r.BasicAuth()
			if !ok || u != opt.User || p != opt.Password {
				s.mu.Lock()
				s.denied++
				s.mu.Unlock()
				w.Header().Set("WWW-Authenticate", `Basic realm="gittest"`)
				http.Error(w, "authentication required", http.StatusUnauthorized)
				return
			}
			// Checked here: the backend needs nothing of it (receive-pack
			// is allowed by http.receivepack in the repository's config).
			r.Header.Del("Authorization")
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(s.srv.Close)
	s.CAFile = filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
	if err := os.WriteFile(s.CAFile, pemBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

// URL is the repository's https URL.
func (s *Server) URL() string { return s.srv.URL + "/" + Name }

// AddRepository adds another repository to the server, name (such as
// "other.git") holding one commit with files, behind the same
// authentication, and returns its URL and its bare directory.
func (s *Server) AddRepository(t T, name string, files map[string]string) (url, bare string) {
	t.Helper()
	bare = filepath.Join(s.root, name)
	Git(t, "", "init", "-q", "--bare", "--initial-branch="+s.opt.Branch, bare)
	Git(t, bare, "config", "http.receivepack", "true")
	work := t.TempDir()
	Git(t, "", "init", "-q", "--initial-branch="+s.opt.Branch, work)
	for n, content := range files {
		write(t, filepath.Join(work, n), []byte(content))
	}
	Git(t, work, "add", "-A")
	Commit(t, work, "First commit of "+name)
	Git(t, work, "push", "-q", bare, "HEAD:refs/heads/"+s.opt.Branch)
	return s.srv.URL + "/" + name, bare
}

// Branch is the repository's default branch.
func (s *Server) Branch() string { return s.opt.Branch }

// Denied is how many requests failed basic authentication.
func (s *Server) Denied() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.denied
}

// Entry is one commit as the server holds it.
type Entry struct {
	SHA                           string
	AuthorName, AuthorEmail       string
	CommitterName, CommitterEmail string
	Message                       string
}

// Log returns the commits of rev on the server, newest first.
func (s *Server) Log(t T, rev string) []Entry {
	t.Helper()
	out := Git(t, s.Bare, "log", "-z", "--format=%H%x1f%an%x1f%ae%x1f%cn%x1f%ce%x1f%B", rev, "--")
	var list []Entry
	for _, rec := range strings.Split(out, "\x00") {
		f := strings.SplitN(rec, "\x1f", 6)
		if len(f) != 6 {
			continue
		}
		list = append(list, Entry{SHA: strings.TrimSpace(f[0]), AuthorName: f[1], AuthorEmail: f[2], CommitterName: f[3], CommitterEmail: f[4], Message: f[5]})
	}
	return list
}

// Files lists the paths in rev's tree on the server.
func (s *Server) Files(t T, rev string) []string {
	t.Helper()
	return strings.Fields(Git(t, s.Bare, "ls-tree", "-r", "--name-only", rev))
}

// Show returns the content of path at rev on the server.
func (s *Server) Show(t T, rev, path string) string {
	t.Helper()
	return Git(t, s.Bare, "show", rev+":"+path)
}

// Head returns the commit a branch names on the server ("" when none).
func (s *Server) Head(t T, branch string) string {
	t.Helper()
	cmd := exec.Command("git", "rev-parse", "--verify", "-q", "refs/heads/"+branch)
	cmd.Dir = s.Bare
	out, _ := cmd.Output()
	return strings.TrimSpace(string(out))
}

// Fsck fails the test unless git fsck finds the repository sound.
func (s *Server) Fsck(t T) {
	t.Helper()
	Git(t, s.Bare, "fsck", "--strict", "--no-dangling")
}

// Advance moves branch on the server by one commit that writes path, as
// another person pushing would (straight to the bare repository).
func (s *Server) Advance(t T, branch, path, content string) string {
	t.Helper()
	work := t.TempDir()
	Git(t, "", "clone", "-q", "--branch", branch, s.Bare, work)
	write(t, filepath.Join(work, path), []byte(content))
	Git(t, work, "add", "-A")
	Commit(t, work, "Someone else's commit")
	Git(t, work, "push", "-q", "origin", "HEAD:refs/heads/"+branch)
	return s.Head(t, branch)
}

// Requests returns every request the server received.
func (s *Server) Requests() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.requests...)
}

// Git runs git in dir with a test identity and returns its output.
func Git(t T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Test Person", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=Test Person", "GIT_COMMITTER_EMAIL=test@example.com")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out.String()
}

// Commit commits what is staged in dir with message.
func Commit(t T, dir, message string) {
	t.Helper()
	Git(t, dir, "commit", "-q", "--no-gpg-sign", "-m", message)
}

func gitBinary(t T) string {
	p, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	return p
}

func write(t T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
