package pgtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	"corral/internal/poll"
)

// dirPrefix names the servers' directories, for the sweep of those a
// killed binary left.
const dirPrefix = "corral-pgtest-"

// Bounds on the slow steps, none of them a timing assertion: initdb and
// the server's start take about a second together.
const (
	initdbTimeout = 2 * time.Minute
	readyTimeout  = 30 * time.Second
	pingTimeout   = 5 * time.Second
	stopTimeout   = 10 * time.Second
	// bindAttempts is how many free ports are tried: another process
	// can take the one picked between its check and the server's bind.
	bindAttempts = 5
)

// errBind is a server that could not listen on the port it was given.
var errBind = errors.New("could not bind its port")

// shmDir is the machine's tmpfs, and minShm the room it must have left
// to hold a server: its directory is some 40 MB, and each database 8 MB
// more while a test holds it.
const (
	shmDir = "/dev/shm"
	minShm = 1 << 30
)

// baseDir returns where the server's directory goes: in memory when
// there is room, else under os.TempDir(). On a disk that fsync=off
// does not make fast enough (a VM's ext4 /tmp, mounted with discard)
// a database took 100-350 ms to make and drop, and the server 1.2-1.4 s
// to start; on tmpfs 12-20 ms, and 0.5 s.
func baseDir() string {
	var st unix.Statfs_t
	if err := unix.Statfs(shmDir, &st); err == nil && st.Type == unix.TMPFS_MAGIC && st.Bavail*uint64(st.Bsize) >= minShm {
		return shmDir
	}
	return os.TempDir()
}

// startServer initializes a data directory and starts a server on it.
func startServer() (*server, error) {
	initdb, postgres, err := findPrograms(debianRoot)
	if err != nil {
		return nil, err
	}
	cred := runAs()
	for _, base := range []string{shmDir, os.TempDir()} {
		sweep(base)
	}
	dir, err := os.MkdirTemp(baseDir(), dirPrefix)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	// The sweep removes the directory once this binary is gone.
	if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
		if err := searchable(filepath.Dir(dir), cred.Uid, cred.Gid); err != nil {
			return nil, err
		}
	}
	s := &server{dir: dir, password: rand.Text(), programs: filepath.Dir(postgres)}
	if err := s.initdb(initdb, cred); err != nil {
		return nil, err
	}
	for range bindAttempts {
		if err = s.launch(postgres, cred); !errors.Is(err, errBind) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// initdb makes the data directory, with the superuser and its password
// and password authentication for everyone, local sockets included.
func (s *server) initdb(initdb string, cred *syscall.Credential) error {
	// The password goes through a file, not the command line, which any
	// user on the machine can read in /proc.
	pwfile := filepath.Join(s.dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(s.password+"\n"), 0o600); err != nil {
		return err
	}
	defer os.Remove(pwfile)
	if cred != nil {
		if err := os.Chown(pwfile, int(cred.Uid), int(cred.Gid)); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), initdbTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, initdb,
		"-D", filepath.Join(s.dir, "data"),
		"-U", superuser,
		"--pwfile="+pwfile,
		"--auth=scram-sha-256",
		"--encoding=UTF8",
		"--locale=C.UTF-8",
		"--no-sync",
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	s.prepare(cmd, cred)
	if err := spawn(cmd); err != nil {
		return fmt.Errorf("start %s: %w", initdb, err)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("%s: %w; its output ends:\n%s", initdb, err, tail(out.Bytes()))
	}
	return nil
}

// launch starts postgres on a free port and waits until it takes
// connections. It returns errBind when another process took the port
// first, for the caller to try another.
func (s *server) launch(postgres string, cred *syscall.Credential) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	logPath := filepath.Join(s.dir, "postgres.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close() // the server writes to its own copy
	cmd := exec.Command(postgres,
		"-D", filepath.Join(s.dir, "data"),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "port="+strconv.Itoa(port),
		"-c", "unix_socket_directories="+s.dir,
		// A test's database lives as long as the test: nothing needs to
		// survive a crash, and these make writes as fast as memory.
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		// Tests in parallel, each with a pool of its own.
		"-c", "max_connections=200",
		"-c", "shared_buffers=32MB",
		// Deterministic times whatever the machine's zone.
		"-c", "TimeZone=UTC",
		"-c", "logging_collector=off",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	s.prepare(cmd, cred)
	if err := spawn(cmd); err != nil {
		return fmt.Errorf("start %s: %w", postgres, err)
	}
	s.port, s.cmd, s.exited = port, cmd, make(chan struct{})
	exited := s.exited
	// Whatever answers on the port when this server could not bind it
	// may hold a connection attempt until its timeout: the server's
	// exit ends the attempt at once.
	running, stopped := context.WithCancel(context.Background())
	go func() {
		s.waited = cmd.Wait()
		close(exited)
		stopped()
	}()

	var lastErr error
	ready := poll.Eventually(readyTimeout, func() bool {
		select {
		case <-exited:
			return true
		default:
		}
		lastErr = s.ping(running)
		return lastErr == nil
	})
	select {
	case <-exited:
		log, _ := os.ReadFile(logPath)
		if bytes.Contains(log, []byte("could not bind")) {
			return fmt.Errorf("%s on port %d: %w; its log ends:\n%s", postgres, port, errBind, tail(log))
		}
		return fmt.Errorf("%s exited (%v) before it took connections; its log ends:\n%s", postgres, s.waited, tail(log))
	default:
	}
	if !ready {
		s.kill()
		log, _ := os.ReadFile(logPath)
		return fmt.Errorf("%s took no connection within %v (the last attempt: %v); its log ends:\n%s", postgres, readyTimeout, lastErr, tail(log))
	}
	return nil
}

// prepare sets what initdb and postgres share: who they run as, where,
// with which environment, and how they end with this binary.
func (s *server) prepare(cmd *exec.Cmd, cred *syscall.Credential) {
	// A directory the server's user may enter, which the test's working
	// directory need not be (nobody cannot enter /root).
	cmd.Dir = s.dir
	// Nothing of the caller's PG* variables or locale: English messages
	// (the bind check reads them) and a data directory made the same
	// way everywhere.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C"}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: cred,
		// A binary killed (go test's timeout, a crash) takes its server
		// with it. The signal is sent when the thread that started the
		// child ends: see spawn.
		Pdeathsig: syscall.SIGKILL,
		// Out of the terminal's process group: a ^C reaches the test
		// binary only, whose end then ends the server, rather than both
		// at once with the tests seeing their server go first.
		Setpgid: true,
	}
}

// ping connects to the maintenance database and reads the server's
// version.
func (s *server) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	c, err := pgx.Connect(ctx, s.url("postgres"))
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	return c.QueryRow(ctx, "SHOW server_version").Scan(&s.version)
}

// stop shuts the server down and removes its directory.
func (s *server) stop() error {
	s.closeAdmin()
	// Fast shutdown: sessions are ended, not waited for.
	if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-s.exited:
	case <-time.After(stopTimeout):
		s.kill()
	}
	return os.RemoveAll(s.dir)
}

// kill ends the server and its sessions at once and waits for it.
func (s *server) kill() {
	// The whole group: the postmaster's children are in it (Setpgid).
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
}

// runAs returns who initdb and postgres run as: nobody when this binary
// is root, as both refuse root; nil, this binary's user, otherwise.
func runAs() *syscall.Credential {
	if os.Geteuid() != 0 {
		return nil
	}
	// Debian's nobody and nogroup, when the lookup fails.
	cred := &syscall.Credential{Uid: 65534, Gid: 65534}
	if u, err := user.Lookup("nobody"); err == nil {
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 == nil && err2 == nil {
			cred.Uid, cred.Gid = uint32(uid), uint32(gid)
		}
	}
	// Groups is empty: root's supplementary groups are dropped.
	return cred
}

// searchable checks that uid (with gid) may pass through dir and every
// directory above it to reach the server's directory: a TMPDIR under
// /root would be refused by initdb with a less helpful message.
func searchable(dir string, uid, gid uint32) error {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("stat %s: no owner", d)
		}
		perm := fi.Mode().Perm()
		var x os.FileMode = 0o001
		switch {
		case st.Uid == uid:
			x = 0o100
		case st.Gid == gid:
			x = 0o010
		}
		if perm&x == 0 {
			return fmt.Errorf("PostgreSQL runs as uid %d, which cannot enter %s: set TMPDIR to a directory it can reach, such as /tmp", uid, d)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// freePort returns a port on 127.0.0.1 that nothing listened on a
// moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the last lines of a log, for an error message.
func tail(log []byte) string {
	lines := strings.Split(strings.TrimRight(string(log), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}
