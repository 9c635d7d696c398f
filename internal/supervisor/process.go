package supervisor

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"corral"
	"corral/internal/sandbox"
	"corral/internal/sanitize"
)

// fdStatus is the descriptor on which a starting supervisor says "ok" or
// "error ...", once, to the server that started it.
const fdStatus = 3

// maxLine bounds one request: an exec's stdin (8 MiB) in base64, and more.
const maxLine = 16 << 20

// Main is the supervisor process: args is its session directory. It
// returns the process's exit status.
func Main(args []string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	status := os.NewFile(fdStatus, "status")
	fail := func(err error) int {
		log.Error("supervisor not started", "err", err)
		// The whole error, causes too: it goes to the server's log only.
		fmt.Fprintf(status, "error %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		return 1
	}
	if len(args) != 1 {
		return fail(errors.New("usage: " + Arg + " DIR"))
	}
	var cfg Config
	if err := json.NewDecoder(io.LimitReader(os.Stdin, 1<<20)).Decode(&cfg); err != nil {
		return fail(fmt.Errorf("read config: %w", err))
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 10 * time.Minute
	}
	s, err := start(args[0], cfg, log)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(status, "ok\n")
	status.Close()
	s.serve()
	return 0
}

type supervisor struct {
	dir  string
	cfg  Config
	log  *slog.Logger
	sess *sandbox.Session
	ln   *net.UnixListener

	mu       sync.Mutex
	state    State
	cmds     map[string]*command
	term     *terminal // the session's terminal, if its shell runs
	conns    map[*conn]struct{}
	grace    *time.Timer
	finished sync.WaitGroup // commands whose exit is not recorded yet
}

// command is one exec'd command and its log.
type command struct {
	id   string
	proc *sandbox.Proc
	log  *os.File
	max  int64

	mu        sync.Mutex
	kept      int64
	total     int64
	violation corral.Violation // this command's own limit that ended it
}

type conn struct {
	c   net.Conn
	mu  sync.Mutex
	raw bool // the connection is a terminal's now: no more messages
}

func (c *conn) send(m message) {
	b, _ := json.Marshal(m)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.raw {
		return
	}
	c.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.c.Write(append(b, '\n')); err != nil {
		c.c.Close() // a server that does not read is a server gone
	}
}

func start(dir string, cfg Config, log *slog.Logger) (*supervisor, error) {
	if err := os.MkdirAll(dir+"/cmd", 0o700); err != nil {
		return nil, err
	}
	sess, err := sandbox.StartSession(cfg.Sandbox, cfg.Session)
	if err != nil {
		return nil, err
	}
	// Bound by its name in the session's directory, the supervisor's
	// working directory: the whole path may be longer than a socket
	// address holds.
	if err := os.Chdir(dir); err != nil {
		sess.End()
		sess.Wait()
		return nil, err
	}
	os.Remove(sockPath(dir))
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Base(sockPath(dir)), Net: "unix"})
	if err != nil {
		sess.End()
		sess.Wait()
		return nil, err
	}
	if err := os.Chmod(sockPath(dir), 0o600); err != nil {
		ln.Close()
		sess.End()
		sess.Wait()
		return nil, err
	}
	s := &supervisor{dir: dir, cfg: cfg, log: log, sess: sess, ln: ln,
		state: State{PID: os.Getpid(), State: StateRunning, StartedAt: time.Now().UTC()},
		cmds:  map[string]*command{}, conns: map[*conn]struct{}{}}
	for _, g := range []*Gateway{cfg.Gateway, cfg.Egress} {
		if g == nil {
			continue
		}
		if err := s.serveGateway(*g); err != nil {
			ln.Close()
			sess.End()
			sess.Wait()
			return nil, err
		}
	}
	if err := writeJSON(statePath(dir), s.state); err != nil {
		ln.Close()
		sess.End()
		sess.Wait()
		return nil, err
	}
	return s, nil
}

// serve accepts the server until the session ends, then records how.
func (s *supervisor) serve() {
	s.mu.Lock()
	s.grace = time.AfterFunc(s.cfg.Grace, s.abandon)
	s.mu.Unlock()
	go s.accept()
	<-s.sess.Done()
	s.finished.Wait()
	s.mu.Lock()
	s.grace.Stop()
	if s.state.State == StateRunning {
		s.state.State = StateEnded
	}
	s.state.Violation = s.sess.Violation()
	s.state.EndedAt = time.Now().UTC()
	st := s.state
	conns := s.conns
	s.mu.Unlock()
	// No new connection once the state says the session ended: whoever
	// reads an ended state finds no supervisor to dial.
	s.ln.Close()
	os.Remove(sockPath(s.dir))
	if err := writeJSON(statePath(s.dir), st); err != nil {
		s.log.Error("state not recorded", "err", err)
	}
	for c := range conns {
		c.send(message{Event: "ended", State: &st})
		c.c.Close()
	}
	s.log.Info("session ended", "state", st.State, "violation", st.Violation)
}

// abandon ends a session no server came back for. Its tree stays, for
// the server to propose for review when it comes back.
func (s *supervisor) abandon() {
	s.mu.Lock()
	if len(s.conns) > 0 {
		s.mu.Unlock()
		return
	}
	s.state.State = StateAbandoned
	s.mu.Unlock()
	s.log.Warn("no server came back within the grace period: ending the session", "grace", s.cfg.Grace)
	s.sess.End()
}

func (s *supervisor) accept() {
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			return
		}
		if !sameUser(c) {
			c.Close()
			continue
		}
		cn := &conn{c: c}
		s.mu.Lock()
		s.conns[cn] = struct{}{}
		s.grace.Stop()
		s.mu.Unlock()
		go s.handle(cn)
	}
}

// sameUser admits only a peer of the supervisor's own user (the server).
func sameUser(c *net.UnixConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var cred *unix.Ucred
	raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	return err == nil && cred != nil && int(cred.Uid) == os.Geteuid()
}

func (s *supervisor) handle(c *conn) {
	defer func() {
		c.c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		if len(s.conns) == 0 {
			s.grace.Reset(s.cfg.Grace)
		}
		s.mu.Unlock()
	}()
	br := bufio.NewReaderSize(c.c, maxFrame+5)
	for {
		line, err := readLine(br, maxLine)
		if err != nil {
			return
		}
		var m message
		if err := json.Unmarshal(line, &m); err != nil {
			c.send(message{Error: "bad request"})
			continue
		}
		if m.Op == "terminal" {
			// The connection becomes the terminal's, in frames, for good.
			t, err := s.openTerminal(m.Cols, m.Rows)
			if err != nil {
				c.send(message{Seq: m.Seq, Error: corral.ErrorMessage(err)})
				return
			}
			s.mu.Lock()
			delete(s.conns, c) // events are not for it
			s.mu.Unlock()
			// The reply and the switch at once: an event a broadcast had
			// queued for this connection comes before the reply or never.
			b, _ := jsonLine(message{Seq: m.Seq})
			c.mu.Lock()
			c.c.Write(b)
			c.raw = true
			c.mu.Unlock()
			t.attach(c.c, br)
			return
		}
		r := message{Seq: m.Seq}
		if err := s.do(m, &r); err != nil {
			r.Error = corral.ErrorMessage(err)
		}
		c.send(r)
	}
}

func (s *supervisor) do(m message, r *message) error {
	switch m.Op {
	case "exec":
		if m.Exec == nil {
			return corral.Errorf(corral.EINVALID, "exec without a command")
		}
		return s.exec(*m.Exec)
	case "signal":
		sig, ok := signals[m.Signal]
		if !ok {
			return corral.Errorf(corral.EINVALID, "unknown signal %q", m.Signal)
		}
		s.mu.Lock()
		c := s.cmds[m.ID]
		s.mu.Unlock()
		if c == nil {
			return corral.Errorf(corral.ENOTFOUND, "no command %q", m.ID)
		}
		return c.proc.Signal(sig)
	case "end":
		s.sess.End()
		return nil
	case "status":
		s.mu.Lock()
		st := s.state
		s.mu.Unlock()
		r.State = &st
		return nil
	}
	return corral.Errorf(corral.EINVALID, "unknown request %q", m.Op)
}

var signals = map[string]syscall.Signal{"TERM": syscall.SIGTERM, "KILL": syscall.SIGKILL, "INT": syscall.SIGINT, "HUP": syscall.SIGHUP}

// exec starts a command; one already started under that id is left alone,
// so a server that re-sends a command after a crash starts it once.
func (s *supervisor) exec(e Exec) error {
	if err := sanitize.CommandID(e.ID); err != nil {
		return err
	}
	if e.OutputMax <= 0 {
		e.OutputMax = 1 << 20
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmds[e.ID] != nil {
		return nil
	}
	if _, err := os.Stat(exitPath(s.dir, e.ID)); err == nil {
		return nil
	}
	log, err := os.OpenFile(outPath(s.dir, e.ID), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return corral.Internal("command log", err)
	}
	out, err := newPipe()
	if err != nil {
		log.Close()
		return corral.Internal("command pipes", err)
	}
	in, err := newPipe()
	if err != nil {
		log.Close()
		out.close()
		return corral.Internal("command pipes", err)
	}
	proc, err := s.sess.Exec(sandbox.Command{Argv: e.Argv, Env: e.Env, Dir: e.Dir}, in.r, out.w, out.w)
	in.r.Close()
	out.w.Close()
	if err != nil {
		log.Close()
		os.Remove(outPath(s.dir, e.ID))
		in.w.Close()
		out.r.Close()
		return err
	}
	go func() {
		in.w.Write(e.Stdin)
		in.w.Close()
	}()
	c := &command{id: e.ID, proc: proc, log: log, max: e.OutputMax}
	s.cmds[e.ID] = c
	s.finished.Add(1)
	go s.run(c, out.r, e.Timeout)
	return nil
}

type pipe struct{ r, w *os.File }

func newPipe() (pipe, error) {
	r, w, err := os.Pipe()
	return pipe{r, w}, err
}

func (p pipe) close() { p.r.Close(); p.w.Close() }

// run copies a command's output to its log until the command ends, then
// records its exit. What is still in the pipe when the command ends is its
// own output and is kept; what processes it left in the background write
// later is read and discarded, so they never block on a full pipe.
func (s *supervisor) run(c *command, r *os.File, timeout time.Duration) {
	defer s.finished.Done()
	if timeout > 0 {
		t := time.AfterFunc(timeout, func() { c.kill(sandbox.ViolationTimeout) })
		defer t.Stop()
	}
	drained := make(chan struct{})
	go s.copy(c, r, drained)
	<-c.proc.Done()
	r.SetReadDeadline(time.Now()) // the copier drains what is left, then reports
	<-drained
	code, sig := c.proc.Exit()
	c.mu.Lock()
	ex := Exit{Code: code, Signal: sig, Violation: c.violation, Output: c.total, Kept: c.kept}
	c.mu.Unlock()
	if ex.Violation == "" {
		// Not only what the watchdog saw: the kernel may have killed the
		// command for the session's limit since its last look.
		ex.Violation = s.sess.Check()
	}
	c.log.Close() // no fsync: see writeJSON
	if err := writeJSON(exitPath(s.dir, c.id), ex); err != nil {
		s.log.Error("exit not recorded", "id", c.id, "err", err)
	}
	s.mu.Lock()
	delete(s.cmds, c.id)
	s.mu.Unlock()
	s.broadcast(message{Event: "exit", ID: c.id, Exit: &ex})
}

// broadcast sends an event to every attached server, outside s.mu.
func (s *supervisor) broadcast(m message) {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for cn := range s.conns {
		conns = append(conns, cn)
	}
	s.mu.Unlock()
	for _, cn := range conns {
		cn.send(m)
	}
}

// kill ends a command for crossing one of its own limits.
func (c *command) kill(violation corral.Violation) {
	c.mu.Lock()
	if c.violation == "" {
		c.violation = violation
	}
	c.mu.Unlock()
	c.proc.Signal(syscall.SIGKILL)
}

// copy writes the command's output to its log, up to its cap. When the
// command has ended (run sets a past read deadline), it reads exactly what
// the pipe still holds (FIONREAD: the command's last writes are all in
// there), reports, and discards the rest until every writer is gone.
func (s *supervisor) copy(c *command, r *os.File, drained chan<- struct{}) {
	defer r.Close()
	buf := make([]byte, 32<<10)
	reported := false
	report := func() {
		if !reported {
			reported = true
			close(drained)
		}
	}
	defer report()
	for {
		n, err := r.Read(buf)
		if n > 0 {
			s.keep(c, buf[:n])
		}
		if errors.Is(err, os.ErrDeadlineExceeded) && !reported {
			r.SetReadDeadline(time.Time{})
			for {
				left := pending(r)
				if left <= 0 {
					break
				}
				n, err := r.Read(buf[:min(left, len(buf))])
				if n > 0 {
					s.keep(c, buf[:n])
				}
				if err != nil {
					break
				}
			}
			report()
			io.Copy(io.Discard, r)
			return
		}
		if err != nil {
			return
		}
	}
}

// pending is how many bytes a pipe holds.
func pending(f *os.File) int {
	raw, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	raw.Control(func(fd uintptr) {
		n, err = unix.IoctlGetInt(int(fd), unix.TIOCINQ) // FIONREAD
	})
	if err != nil {
		return 0
	}
	return n
}

// keep appends output to the command's log up to its cap; the first byte
// past the cap ends the command.
func (s *supervisor) keep(c *command, p []byte) {
	c.mu.Lock()
	keep := int64(len(p))
	if room := c.max - c.kept; keep > room {
		keep = max(room, 0)
	}
	over := keep < int64(len(p)) && c.violation == "" && c.total+int64(len(p)) > c.max
	c.total += int64(len(p))
	if keep > 0 {
		if _, err := c.log.Write(p[:keep]); err != nil {
			s.log.Error("command log not written", "id", c.id, "err", err)
		}
		c.kept += keep
	}
	if over {
		n, _ := fmt.Fprintf(c.log, sandbox.OutputMarker, c.max)
		c.kept += int64(n)
	}
	size := c.kept
	c.mu.Unlock()
	if over {
		c.kill(sandbox.ViolationOutput)
	}
	if keep > 0 || over {
		s.broadcast(message{Event: "output", ID: c.id, Size: size})
	}
}
