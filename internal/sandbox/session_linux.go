package sandbox

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"corral"
)

// Session is one running sandbox that commands are exec'd into: one init,
// one cgroup, one set of namespaces, for as long as the session lasts. The
// session's limits bound all its commands together; a command's own wall
// time and output are bounded by whoever execs it.
type Session struct {
	cmd     *exec.Cmd
	cg      cgroup
	limits  Limits
	start   time.Time
	ctl     *net.UnixConn
	ready   chan error    // the init's first reply
	replies chan struct{} // closed when the last reply is read

	sendMu sync.Mutex

	mu        sync.Mutex
	violation corral.Violation
	procs     map[uint64]*Proc
	next      uint64
	ended     bool

	done chan struct{} // closed once the init is reaped and the cgroup removed
	err  error
}

// Proc is one command exec'd into a session.
type Proc struct {
	id      uint64
	s       *Session
	started chan struct{} // closed when the init has started it (or failed to)
	exited  chan struct{}
	code    int
	signal  string
}

// StartSession validates spec and starts its sandbox. The session runs until
// End, until a limit of the session is crossed, or until this process dies.
func StartSession(cfg Config, spec SessionSpec) (*Session, error) {
	spec, err := ValidateSession(spec)
	if err != nil {
		return nil, err
	}
	if !cfg.Probed {
		if err := Available(); err != nil {
			return nil, err
		}
	}
	cfg.defaults()
	if cfg.HostUID == 0 || cfg.HostGID == 0 {
		return nil, invalid("the sandbox user must not be root on the host")
	}
	// On the host, before anything of the sandbox runs: the workspace is
	// bound by its path, or opened here as a mount, idmapped to keep its
	// owner (idmap_linux.go).
	ws, err := openWorkspace(spec.Workspace, spec.Mode == ReadWrite, cfg.HostUID, cfg.HostGID, cfg.InitPath)
	if err != nil {
		return nil, err
	}
	if ws != nil {
		defer ws.Close() // the init has its own copy once it started
	}
	cgLimits := spec.Limits
	cgLimits.Pids += initReserve
	cg, err := newCgroup(corral.NewID("sbx"), cgLimits)
	if err != nil {
		return nil, corral.Errorf(corral.EUNAVAIL, "sandbox: %v", err)
	}
	s := &Session{cg: cg, limits: spec.Limits, procs: map[uint64]*Proc{}, ready: make(chan error, 1), replies: make(chan struct{}), done: make(chan struct{})}
	if err := s.spawn(cfg, spec, ws); err != nil {
		cg.kill()
		cg.remove()
		return nil, err
	}
	go s.watch(cfg.Poll)
	return s, nil
}

// spawn starts the init. ws, when not nil, is the workspace's detached
// mount, passed as fdWorkspace.
func (s *Session) spawn(cfg Config, spec SessionSpec, ws *os.File) error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return corral.Internal("sandbox control socket", err)
	}
	// Room for the largest request in one message.
	unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_SNDBUF, 2*maxRequest)
	ours, theirs := os.NewFile(uintptr(fds[0]), "ctl"), os.NewFile(uintptr(fds[1]), "ctl-init")
	defer theirs.Close()
	c, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return corral.Internal("sandbox control socket", err)
	}
	s.ctl = c.(*net.UnixConn)
	var ps [2]pipe // spec, go
	for i := range ps {
		if ps[i], err = newPipe(); err != nil {
			s.ctl.Close()
			return corral.Internal("sandbox pipes", err)
		}
	}
	specP, goP := ps[0], ps[1]
	defer func() {
		for _, p := range ps {
			p.r.Close()
			p.w.Close()
		}
	}()
	extra := []*os.File{specP.r, goP.r, theirs}
	if ws != nil {
		extra = append(extra, ws)
	}
	s.cmd = &exec.Cmd{
		Path:       cfg.InitPath,
		Args:       []string{"corral-sandbox", InitArg},
		Env:        []string{"GOMAXPROCS=1"}, // the init's own: nothing of the server's
		ExtraFiles: extra,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID |
				syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP,
			UidMappings:                []syscall.SysProcIDMap{{ContainerID: insideUID, HostID: cfg.HostUID, Size: 1}},
			GidMappings:                []syscall.SysProcIDMap{{ContainerID: insideGID, HostID: cfg.HostGID, Size: 1}},
			GidMappingsEnableSetgroups: false,
			// The init runs as the sandbox's user from the start. An execve
			// by a non-root user clears capabilities, so the few the init
			// needs to build the root (mounts, pivot_root, the hostname,
			// loopback) travel as ambient capabilities, valid only inside
			// its own user namespace; it drops them before any command.
			Credential:  &syscall.Credential{Uid: insideUID, Gid: insideGID, NoSetGroups: true},
			AmbientCaps: []uintptr{capSysAdmin, capNetAdmin, capSetpcap},
			Pdeathsig:   syscall.SIGKILL,
			Setsid:      true,
		},
	}
	if fd, ok := s.cg.intoFD(); ok {
		s.cmd.SysProcAttr.UseCgroupFD = true
		s.cmd.SysProcAttr.CgroupFD = fd
	}
	s.start = time.Now()
	if err := s.cmd.Start(); err != nil {
		s.ctl.Close()
		return corral.Errorf(corral.EUNAVAIL, "sandbox: start init: %v", err)
	}
	specP.r.Close()
	goP.r.Close()
	theirs.Close()
	go s.read()
	go s.wait()
	fail := func(e error) error {
		s.cmd.Process.Kill()
		<-s.done
		return e
	}
	// The init builds its root while it is moved into its cgroup (on
	// cgroup v1 the move can take milliseconds); it serves commands only
	// after the go byte.
	filter, err := seccompProgram()
	if err != nil {
		return fail(corral.Internal("sandbox", err))
	}
	cs := childSpec{Workspace: spec.Workspace, ReadWrite: spec.Mode == ReadWrite, Mounted: ws != nil, Limits: spec.Limits, Seccomp: filter, Tools: spec.Tools}
	if err := json.NewEncoder(specP.w).Encode(cs); err != nil {
		return fail(corral.Internal("sandbox: send spec", err))
	}
	specP.w.Close()
	if _, ok := s.cg.intoFD(); !ok {
		if err := s.cg.add(s.cmd.Process.Pid); err != nil {
			return fail(corral.Errorf(corral.EUNAVAIL, "sandbox: enter cgroup: %v", err))
		}
	}
	if _, err := goP.w.Write([]byte{1}); err != nil {
		return fail(corral.Internal("sandbox: release init", err))
	}
	goP.w.Close()
	if err := <-s.ready; err != nil {
		return fail(err)
	}
	return nil
}

// read takes the init's replies until it ends: its end of the socket
// closes only when it dies, so every reply it sent is read first.
func (s *Session) read() {
	defer close(s.replies)
	defer s.ctl.Close()
	buf := make([]byte, 4096)
	first := true
	for {
		n, err := s.ctl.Read(buf)
		if err != nil || n == 0 {
			break
		}
		var r reply
		if json.Unmarshal(buf[:n], &r) != nil {
			continue
		}
		if first {
			first = false
			switch r.Op {
			case "ready":
				s.ready <- nil
			default:
				s.ready <- corral.Errorf(corral.EUNAVAIL, "sandbox: %s", r.Error)
			}
			continue
		}
		s.mu.Lock()
		p := s.procs[r.ID]
		s.mu.Unlock()
		if p == nil {
			continue
		}
		switch r.Op {
		case "started":
			closeOnce(p.started)
		case "exit":
			closeOnce(p.started)
			s.mu.Lock()
			delete(s.procs, r.ID)
			s.mu.Unlock()
			p.code, p.signal = r.Code, r.Signal
			close(p.exited)
		}
	}
	if first {
		s.ready <- corral.Errorf(corral.EUNAVAIL, "sandbox: the init ended before it was ready")
	}
	// The init is gone, and with it every process of the sandbox: what
	// still counts as running was killed.
	s.mu.Lock()
	s.ended = true
	procs := s.procs
	s.procs = map[uint64]*Proc{}
	s.mu.Unlock()
	for _, p := range procs {
		closeOnce(p.started)
		p.code, p.signal = 128+int(syscall.SIGKILL), "SIGKILL"
		close(p.exited)
	}
}

func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}

// Exec starts a command in the session with the given descriptors (the
// session keeps none of them) and returns once it runs.
func (s *Session) Exec(c Command, stdin, stdout, stderr *os.File) (*Proc, error) {
	if c.Dir == "" {
		c.Dir = insideWorkspace
	}
	for _, check := range commandChecks {
		if err := check.run(&c); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return nil, corral.Errorf(corral.EUNAVAIL, "sandbox: the session has ended")
	}
	s.next++
	p := &Proc{id: s.next, s: s, started: make(chan struct{}), exited: make(chan struct{})}
	s.procs[p.id] = p
	s.mu.Unlock()
	b, _ := json.Marshal(request{Op: "exec", ID: p.id, Argv: c.Argv, Env: c.Env, Dir: c.Dir, TTY: c.TTY})
	if len(b) > maxRequest {
		s.forget(p)
		return nil, invalid("the command and its environment are over %d bytes", maxRequest)
	}
	rights := unix.UnixRights(int(stdin.Fd()), int(stdout.Fd()), int(stderr.Fd()))
	s.sendMu.Lock()
	_, _, err := s.ctl.WriteMsgUnix(b, rights, nil)
	s.sendMu.Unlock()
	if err != nil {
		s.forget(p)
		return nil, corral.Errorf(corral.EUNAVAIL, "sandbox: the session has ended")
	}
	<-p.started
	return p, nil
}

func (s *Session) forget(p *Proc) {
	s.mu.Lock()
	delete(s.procs, p.id)
	s.mu.Unlock()
}

// Signal sends sig to the command's process group: the command and what it
// started, unless they left the group.
func (p *Proc) Signal(sig syscall.Signal) error {
	b, _ := json.Marshal(request{Op: "signal", ID: p.id, Signal: int(sig)})
	p.s.sendMu.Lock()
	defer p.s.sendMu.Unlock()
	_, err := p.s.ctl.Write(b)
	return err
}

// Done is closed when the command has ended.
func (p *Proc) Done() <-chan struct{} { return p.exited }

// Exit is how the command ended: its exit status (128+n for signal n) and
// the signal's name. Valid once Done is closed.
func (p *Proc) Exit() (int, string) {
	<-p.exited
	return p.code, p.signal
}

// idlePoll is the watchdog's longest period: it backs off towards it while
// the session uses no CPU, and is back at Config.Poll as soon as it does.
const idlePoll = 500 * time.Millisecond

// watch ends the session when it crosses a limit the kernel does not end it
// for by itself: wall time (a timer), CPU time, the process limit, and
// memory (the kernel kills one process; the session ends with it). An idle
// session is looked at less often: a process that starts spinning is seen
// within idlePoll, then every poll, so an idle session costs little.
func (s *Session) watch(poll time.Duration) {
	wall := time.AfterFunc(s.limits.Wall-time.Since(s.start), func() {
		if !s.Ended() { // not a session that has just ended by itself
			s.end(ViolationTimeout)
		}
	})
	defer wall.Stop()
	period := poll
	t := time.NewTimer(period)
	defer t.Stop()
	last := time.Duration(-1)
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		u, err := s.cg.usage()
		if err != nil {
			t.Reset(period)
			continue // the cgroup goes away as the session ends
		}
		switch {
		case u.OOMKills > 0:
			s.end(ViolationMemory)
			return
		case u.PidsMax > 0:
			s.end(ViolationPids)
			return
		case u.CPU > s.limits.CPU:
			s.end(ViolationCPU)
			return
		}
		if u.CPU == last {
			period = min(period*2, max(idlePoll, poll))
		} else {
			period = poll
		}
		last = u.CPU
		t.Reset(period)
	}
}

// end kills the whole session at once, recording why. Killing the init is
// enough: the kernel then kills every process in its PID namespace.
func (s *Session) end(violation corral.Violation) {
	s.mu.Lock()
	if s.violation == "" {
		s.violation = violation
	}
	s.mu.Unlock()
	s.cmd.Process.Signal(syscall.SIGKILL)
}

// End kills the session at once: every process in it dies.
func (s *Session) End() { s.end("") }

// Stop asks every process of the session to end (SIGTERM) and kills what is
// left after grace.
func (s *Session) Stop(grace time.Duration) {
	if grace <= 0 {
		grace = 5 * time.Second
	}
	// On the control socket: the init is deaf to signals (see
	// defaultSignals).
	b, _ := json.Marshal(request{Op: "terminate"})
	s.sendMu.Lock()
	s.ctl.Write(b)
	s.sendMu.Unlock()
	go func() {
		select {
		case <-s.done:
		case <-time.After(grace):
			s.End()
		}
	}()
}

// Ended reports whether the session's init is gone: what runs in it now
// is dead or dying.
func (s *Session) Ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// Violation is the limit of the session that ended it, "" if none did (yet).
func (s *Session) Violation() corral.Violation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.violation
}

// Check reads the session's cgroup now, as the watchdog's next look would:
// a kernel limit that has ended a process (the memory limit's OOM kill, the
// pids limit) ends the session with that violation at once, so a command
// the kernel killed is never reported without the limit that killed it.
// It returns the session's violation, "" for none.
func (s *Session) Check() corral.Violation {
	if u, err := s.cg.usage(); err == nil {
		switch {
		case u.OOMKills > 0:
			s.end(ViolationMemory)
		case u.PidsMax > 0:
			s.end(ViolationPids)
		}
	}
	return s.Violation()
}

// Done is closed when the session has ended and is cleaned up.
func (s *Session) Done() <-chan struct{} { return s.done }

// Wait waits for the session to end. Its error is a failure to clean up.
func (s *Session) Wait() error {
	<-s.done
	return s.err
}

// wait reaps the init, makes sure nothing of the sandbox is left, and
// records the last limit the kernel enforced.
func (s *Session) wait() {
	defer close(s.done)
	s.cmd.Wait()
	<-s.replies
	// A limit the kernel enforced may have ended a process before the
	// watchdog looked: the last reading decides.
	if u, err := s.cg.usage(); err == nil {
		s.mu.Lock()
		switch {
		case s.violation != "":
		case u.OOMKills > 0:
			s.violation = ViolationMemory
		case u.PidsMax > 0:
			s.violation = ViolationPids
		}
		s.mu.Unlock()
	}
	kerr := s.cg.kill()
	rerr := s.cg.remove()
	if err := errors.Join(kerr, rerr); err != nil {
		s.err = corral.Internal("sandbox cleanup", err)
	}
}
