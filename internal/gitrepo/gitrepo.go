// Package gitrepo runs Debian's git binary safely on behalf of Corral:
// clones into a directory, commits applied change sets, pushes branches
// and reads the history.
//
// git runs as a child of the server, which holds secrets (model keys) in
// its environment: every git process gets a whitelisted environment
// instead of the server's, no system or global configuration, no prompt,
// and only the https transport. A credential never appears in argv (a
// process listing shows argv to every user) nor in an environment (a Go
// string, which nothing can wipe): git asks a credential helper for it,
// and the helper reads it from a pipe this process fills from a byte
// slice and wipes (see credentialPipe).
package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"corral"
	"corral/internal/egress"
)

// DefaultMaxBytes is the default clone size limit.
const DefaultMaxBytes = 2 << 30

// TreeLimits bound the tree a clone checks out: the server's import caps
// (the node sets them), so that a clone writes no more files, directories
// or bytes into a workspace than an import may. They are counted from
// git's own listing of the tree before a file of it is written. A zero
// field is no bound.
type TreeLimits struct {
	MaxFiles int64 // blobs: regular files and symbolic links
	MaxDirs  int64 // trees, and submodules (each checks out as an empty directory)
	MaxBytes int64 // the blobs' sizes together
}

// Identity is a person (or Corral) as git records them.
type Identity struct {
	Name, Email string
}

// Config holds how git is run.
type Config struct {
	// Git is the git binary; default "git" on PATH.
	Git string
	// CAFile, when set, is the only CA trusted for https (GIT_SSL_CAINFO):
	// a git server with a private CA (serve --git-ca-file), or a test's own
	// TLS server. There is no switch that allows plain http.
	CAFile string
	// MaxBytes bounds a clone's size on disk; default DefaultMaxBytes.
	MaxBytes int64
	// Tree bounds the tree a clone checks out (zero fields: no bound).
	Tree TreeLimits
	// Committer is who commits; default Corral <corral@localhost>.
	Committer Identity
	// Egress is where a clone or push may connect: public addresses, and
	// the private ranges it allows (serve --egress-allow-private). A
	// remote's name is resolved once, before git runs, and git connects to
	// that address (http.curloptResolve): no second lookup can move it.
	Egress egress.Policy
}

func (c Config) withDefaults() Config {
	if c.Git == "" {
		c.Git = "git"
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Committer.Name == "" {
		c.Committer = Identity{Name: "Corral", Email: "corral@localhost"}
	}
	return c
}

// CommitterIdentity is who commits (Config.Committer or its default): also
// the author of a change whose person is gone.
func (c Config) CommitterIdentity() Identity { return c.withDefaults().Committer }

// Auth is a credential for one git process: username and secret, sent as
// HTTP basic authentication. A nil *Auth is anonymous.
type Auth struct {
	Username string
	Secret   []byte
}

// remote is what a git process that talks to a remote needs: the
// credential, and the address its host was resolved to.
type remote struct {
	auth    *Auth
	resolve string // host:port:address, for http.curloptResolve; "" for an address
}

// remote resolves u's host under the egress policy, for one git process
// that talks to it with auth: EFORBIDDEN for a refused destination, the
// uniform network failure for a name that does not resolve.
func (c Config) remote(ctx context.Context, u *url.URL, auth *Auth) (*remote, error) {
	addr, err := c.Egress.Resolve(ctx, u.Hostname())
	if corral.ErrorCode(err) == corral.EUNAVAIL {
		return nil, &corral.Error{Code: corral.EUNAVAIL, Op: "git", Err: err, Message: msgUnreachable}
	}
	if err != nil {
		return nil, err
	}
	r := &remote{auth: auth}
	if _, err := netip.ParseAddr(u.Hostname()); err != nil {
		port := u.Port()
		if port == "" {
			port = "443"
		}
		a := addr.String()
		if addr.Is6() {
			a = "[" + a + "]"
		}
		r.resolve = u.Hostname() + ":" + port + ":" + a
	}
	return r, nil
}

// msgUnreachable is what every failure to reach a remote answers, whatever
// its cause (no such name, refused, timed out, a TLS certificate not
// trusted, something else than a git server listening): one message, so
// that answers cannot map which ports of a host are open. A certificate
// git does not trust gets no message of its own, though it is the one
// cause an operator can fix with a flag: it would tell that a TLS server
// listens on the port, where a closed one does not. So the one message
// names the flag.
const msgUnreachable = "the repository could not be reached over https: its host did not answer as a trusted git server " +
	"(unreachable, refused, not git, or its TLS certificate is not trusted: if it is signed by a private CA, " +
	"start the server with --git-ca-file (CORRAL_GIT_CA_FILE))"

// credentialHelper is git's credential helper for a process with a
// credential: it answers git's "get" with what the pipe at file
// descriptor 3 holds (see credentialPipe), once, and ignores "store" and
// "erase".
const credentialHelper = `!f() { test "$1" = get && cat <&3; }; f`

// command builds one git process: whitelisted environment, an empty HOME,
// no configuration but what it sets here. auth, when set, reaches git
// through credentialHelper, from a pipe given to this process alone. The
// cleanup removes the temporary HOME and closes the pipe.
func (c Config) command(ctx context.Context, dir string, rem *remote, args ...string) (*exec.Cmd, func(), error) {
	var auth *Auth
	if rem != nil {
		auth = rem.auth
	}
	home, err := os.MkdirTemp("", "corral-git-home-")
	if err != nil {
		return nil, nil, corral.Internal("git", err)
	}
	var cred *os.File
	cleanup := func() {
		os.RemoveAll(home)
		if cred != nil {
			cred.Close()
		}
	}
	cfg := [][2]string{
		{"protocol.allow", "never"},
		{"protocol.https.allow", "always"},
		{"credential.helper", ""},
		// The workspace belongs to the sandbox's user, git runs as the
		// server's: without this, git refuses it as of dubious ownership.
		{"safe.directory", "*"},
		// Nothing from a repository runs: no hooks, no fsmonitor.
		{"core.hooksPath", "/dev/null"},
		{"core.fsmonitor", "false"},
		{"http.followRedirects", "false"},
	}
	if auth != nil {
		if cred, err = credentialPipe(auth); err != nil {
			cleanup()
			return nil, nil, err
		}
		cfg = append(cfg, [2]string{"credential.helper", credentialHelper})
	}
	if rem != nil && rem.resolve != "" {
		cfg = append(cfg, [2]string{"http.curloptResolve", rem.resolve})
	}
	env := []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + home,
		"LANG=C", "LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=/bin/false",
		"SSH_ASKPASS=/bin/false",
		"GIT_CONFIG_COUNT=" + strconv.Itoa(len(cfg)),
	}
	for i, kv := range cfg {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, kv[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, kv[1]))
	}
	if c.CAFile != "" {
		env = append(env, "GIT_SSL_CAINFO="+c.CAFile)
	}
	cmd := exec.CommandContext(ctx, c.Git, args...)
	cmd.Env = env
	cmd.Dir = dir
	if cred != nil {
		cmd.ExtraFiles = []*os.File{cred} // descriptor 3, inherited by git's helpers
	}
	// git runs helpers (git-remote-https, index-pack) that outlive a
	// killed git and hold its pipes: the whole process group goes.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	return cmd, cleanup, nil
}

// credentialPipe returns the read end of a pipe that holds auth as git's
// credential protocol has it ("username=...", "password=..."), written
// before git starts (a pipe holds 64 KiB; a credential is at most a few)
// and closed, so the helper reads it to its end. The text is built in one
// slice of its exact size, never grown (a grown slice would leave a copy
// behind), and wiped once written: what stays is in the kernel's pipe
// until git reads it.
func credentialPipe(a *Auth) (*os.File, error) {
	if strings.ContainsAny(a.Username, "\x00\n") || bytes.ContainsAny(a.Secret, "\x00\n") {
		return nil, corral.Errorf(corral.EINVALID, "a credential must not hold a NUL or a line break")
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, corral.Internal("git credential", err)
	}
	defer w.Close()
	text := make([]byte, 0, len("username=\npassword=\n")+len(a.Username)+len(a.Secret))
	text = append(text, "username="...)
	text = append(text, a.Username...)
	text = append(text, "\npassword="...)
	text = append(text, a.Secret...)
	text = append(text, '\n')
	_, err = w.Write(text)
	clear(text)
	if err != nil {
		r.Close()
		return nil, corral.Internal("git credential", err)
	}
	return r, nil
}

// run runs git in dir and returns its standard output; a failure carries
// the end of its standard error for the log.
func (c Config) run(ctx context.Context, dir string, rem *remote, stdin io.Reader, extraEnv []string, args ...string) ([]byte, error) {
	cmd, cleanup, err := c.command(ctx, dir, rem, args...)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.Stdin = stdin
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &tail{max: 8 << 10, buf: &stderr}
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return nil, noGit(err)
		}
		return out.Bytes(), &gitError{args: args[0], stderr: stderr.String(), err: err}
	}
	return out.Bytes(), nil
}

// noGit is the answer when the git binary is missing.
func noGit(err error) error {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return &corral.Error{Code: corral.EUNAVAIL, Op: "git", Err: err,
			Message: "git is not installed on the server (make run installs Debian's git)"}
	}
	return corral.Internal("git", err)
}

// gitError is a failed git command, for the log: its standard error never
// holds a credential (it is in no URL and no argument).
type gitError struct {
	args   string
	stderr string
	err    error
}

func (e *gitError) Error() string {
	return fmt.Sprintf("git %s: %v: %s", e.args, e.err, strings.TrimSpace(e.stderr))
}
func (e *gitError) Unwrap() error { return e.err }

// classify turns a failed network operation into the error a person reads.
// It reads git's own messages (the only account git gives of why).
func classify(op string, err error) error {
	var ge *gitError
	if !errors.As(err, &ge) {
		var ce *corral.Error
		if errors.As(err, &ce) {
			return err // already answered (noGit)
		}
		return corral.Internal(op, err)
	}
	s := ge.stderr
	wrap := func(code, msg string) error { return &corral.Error{Code: code, Message: msg, Op: op, Err: err} }
	switch {
	case strings.Contains(s, "Authentication failed"), strings.Contains(s, "The requested URL returned error: 401"),
		strings.Contains(s, "The requested URL returned error: 403"), strings.Contains(s, "could not read Username"):
		return wrap(corral.EINVALID, "authentication failed: the remote refused the credential (or asked for one)")
	case strings.Contains(s, "Could not resolve host"), strings.Contains(s, "Failed to connect"),
		strings.Contains(s, "Connection refused"), strings.Contains(s, "Connection timed out"),
		strings.Contains(s, "Couldn't connect"), strings.Contains(s, "SSL certificate problem"),
		strings.Contains(s, "server certificate verification failed"):
		return wrap(corral.EUNAVAIL, msgUnreachable)
	case refusedPath(s):
		return wrap(corral.EINVALID, msgRefusedPath)
	case strings.Contains(s, "not found in upstream"), strings.Contains(s, "couldn't find remote ref"):
		return wrap(corral.ENOTFOUND, "ref not found on the remote")
	case strings.Contains(s, "not found"), strings.Contains(s, "returned error: 404"), strings.Contains(s, "does not appear to be a git repository"):
		return wrap(corral.ENOTFOUND, "no repository at that URL")
	}
	return wrap(corral.EUNAVAIL, msgUnreachable)
}

// msgRefusedPath answers a tree git refused to check out (GIT~1, a .git
// look-alike, a name no filesystem should take): the repository's doing,
// not the network's. The path is not repeated: it is the remote's text.
const msgRefusedPath = "the repository holds a path git refuses to check out (such as GIT~1 or another spelling of .git): nothing was cloned"

// refusedPath says whether git's standard error tells of a path it refused.
func refusedPath(stderr string) bool {
	return strings.Contains(stderr, "error: invalid path '") || strings.Contains(stderr, "unable to checkout working tree")
}

// classifyCheckout turns a failed checkout of a fresh clone into the error
// a person reads: a path git refused, or an internal error (the network
// is not involved).
func classifyCheckout(err error) error {
	var ge *gitError
	switch {
	case errors.As(err, &ge) && refusedPath(ge.stderr):
		return &corral.Error{Code: corral.EINVALID, Message: msgRefusedPath, Op: "git checkout", Err: err}
	case errors.As(err, new(*corral.Error)):
		return err
	}
	return corral.Internal("git checkout", err)
}

// tail keeps the last max bytes written to it.
type tail struct {
	max int
	buf *bytes.Buffer
}

func (t *tail) Write(p []byte) (int, error) {
	t.buf.Write(p)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}
