package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"corral"
)

// Config is how this server runs sandboxes.
type Config struct {
	// HostUID and HostGID are the host identity of the sandbox's user. Zero
	// picks the default: 65534 (nobody) when the server runs as root, the
	// server's own identity otherwise. Never 0: the sandbox must not be
	// root on the host.
	HostUID, HostGID int
	// InitPath is the binary re-executed as the sandbox's init; it must
	// call Init when its first argument is InitArg. Default: this binary.
	InitPath string
	// Grace is how long Stop waits after SIGTERM before it kills. Default 5s.
	Grace time.Duration
	// Poll is the watchdog's period. Default 20ms.
	Poll time.Duration
}

func (c *Config) defaults() {
	if c.HostUID == 0 {
		c.HostUID = os.Geteuid()
		if c.HostUID == 0 {
			c.HostUID = 65534
		}
	}
	if c.HostGID == 0 {
		c.HostGID = os.Getegid()
		if c.HostGID == 0 {
			c.HostGID = 65534
		}
	}
	if c.InitPath == "" {
		c.InitPath = "/proc/self/exe"
	}
	if c.Grace == 0 {
		c.Grace = 5 * time.Second
	}
	if c.Poll == 0 {
		c.Poll = 20 * time.Millisecond
	}
}

// Capabilities the init holds, inside its user namespace only, until the
// root is built.
const (
	capSetpcap  = 8
	capNetAdmin = 12
	capSysAdmin = 21
)

// initReserve is how many processes and threads the init itself may use on
// top of the spec's pids limit (the Go runtime's threads).
const initReserve = 8

// Sandbox is one running command.
type Sandbox struct {
	cmd    *exec.Cmd
	cg     cgroup
	limits Limits
	start  time.Time
	status *bufio.Reader

	mu        sync.Mutex
	violation string // the first limit crossed
	out       outputLimit

	copying sync.WaitGroup
	done    chan struct{} // closed when the sandbox has ended and is cleaned up
	result  Result
	err     error
}

// Available reports whether this machine can run sandboxes, naming every
// missing kernel feature. Start refuses to run without them: there is no
// weaker mode.
func Available() error { return available() }

var available = sync.OnceValue(func() error {
	var missing []string
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err != nil || strings.TrimSpace(string(b)) == "0" {
		missing = append(missing, "user namespaces (/proc/sys/user/max_user_namespaces is 0 or unreadable)")
	}
	if abi, err := landlockABI(); err != nil || abi < 1 {
		missing = append(missing, fmt.Sprintf("Landlock (ABI %d: %v)", abi, err))
	}
	if err := seccompAvailable(); err != nil {
		missing = append(missing, "seccomp filters: "+err.Error())
	}
	if err := probeCgroups(); err != nil {
		missing = append(missing, "cgroups: "+err.Error())
	}
	if len(missing) > 0 {
		return corral.Errorf(corral.EUNAVAIL, "sandbox unavailable on this machine: missing %s", strings.Join(missing, "; "))
	}
	return nil
})

// Run runs a command to its end and returns how it ended.
func Run(cfg Config, spec Spec, stdin io.Reader, stdout, stderr io.Writer) (Result, error) {
	s, err := Start(cfg, spec, stdin, stdout, stderr)
	if err != nil {
		return Result{}, err
	}
	return s.Wait()
}

// Start validates spec, starts the command in a new sandbox and returns
// once the command runs. stdin may be nil (empty input); stdout and stderr
// receive the output up to the output limit.
func Start(cfg Config, spec Spec, stdin io.Reader, stdout, stderr io.Writer) (*Sandbox, error) {
	spec, err := Validate(spec)
	if err != nil {
		return nil, err
	}
	if err := Available(); err != nil {
		return nil, err
	}
	cfg.defaults()
	if cfg.HostUID == 0 || cfg.HostGID == 0 {
		return nil, invalid("the sandbox user must not be root on the host")
	}
	if err := reachable(spec.Workspace, spec.Mode == ReadWrite, cfg.HostUID, cfg.HostGID); err != nil {
		return nil, err
	}

	cgLimits := spec.Limits
	cgLimits.Pids += initReserve
	cg, err := newCgroup(corral.NewID("sbx"), cgLimits)
	if err != nil {
		return nil, corral.Errorf(corral.EUNAVAIL, "sandbox: %v", err)
	}
	s := &Sandbox{cg: cg, limits: spec.Limits, done: make(chan struct{})}
	s.out.max = spec.Limits.Output
	if err := s.spawn(cfg, spec, stdin, stdout, stderr); err != nil {
		cg.kill()
		cg.remove()
		return nil, err
	}
	go s.watch(cfg.Poll)
	go s.wait()
	return s, nil
}

// pipes are the parent's and the init's ends of one pipe.
type pipe struct{ r, w *os.File }

func newPipe() (pipe, error) {
	r, w, err := os.Pipe()
	return pipe{r, w}, err
}

func (s *Sandbox) spawn(cfg Config, spec Spec, stdin io.Reader, stdout, stderr io.Writer) (err error) {
	var ps [5]pipe // spec, go, status, stdout, stderr
	for i := range ps {
		if ps[i], err = newPipe(); err != nil {
			return corral.Internal("sandbox pipes", err)
		}
	}
	defer func() {
		for _, p := range ps {
			if p.r != nil {
				p.r.Close()
			}
			p.w.Close()
		}
	}()
	specP, goP, statusP, outP, errP := ps[0], ps[1], ps[2], ps[3], ps[4]

	s.cmd = &exec.Cmd{
		Path:       cfg.InitPath,
		Args:       []string{"corral-sandbox", InitArg},
		Env:        []string{"GOMAXPROCS=1"}, // the init's own: nothing of the server's
		Stdin:      stdin,
		Stdout:     outP.w,
		Stderr:     errP.w,
		ExtraFiles: []*os.File{specP.r, goP.r, statusP.w},
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
			// its own user namespace; it drops them before the command.
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
		return corral.Errorf(corral.EUNAVAIL, "sandbox: start init: %v", err)
	}
	// The init's ends now belong to the init.
	for _, f := range []*os.File{specP.r, goP.r, statusP.w, outP.w, errP.w} {
		f.Close()
	}
	fail := func(e error) error {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		return e
	}
	// The init builds its root while it is moved into its cgroup (on
	// cgroup v1 the move can take milliseconds); it starts the command only
	// after the go byte.
	cs := childSpec{Workspace: spec.Workspace, ReadWrite: spec.Mode == ReadWrite, Env: spec.Env, Argv: spec.Command, Dir: spec.Dir, Limits: spec.Limits}
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

	s.status = bufio.NewReader(statusP.r)
	line, _ := s.status.ReadString('\n')
	switch {
	case line == "ok\n":
	case strings.HasPrefix(line, "error "):
		return fail(corral.Errorf(corral.EUNAVAIL, "sandbox: %s", strings.TrimSpace(strings.TrimPrefix(line, "error "))))
	default:
		return fail(corral.Errorf(corral.EUNAVAIL, "sandbox: the init ended before starting the command"))
	}
	s.copying.Add(2)
	go s.copy(outP.r, stdout)
	go s.copy(errP.r, stderr)
	// Kept: the status reader and the output readers belong to s now.
	ps[2].r, ps[3].r, ps[4].r = nil, nil, nil
	return nil
}

// outputLimit counts the bytes of both streams together and serialises
// writes to the caller's writers.
type outputLimit struct {
	mu       sync.Mutex
	n, max   int64
	exceeded bool
}

const outputMarker = "\n[corral: output limit of %d bytes reached; the rest was discarded]\n"

func (s *Sandbox) copy(r *os.File, w io.Writer) {
	defer s.copying.Done()
	defer r.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			s.out.mu.Lock()
			keep := int64(n)
			if room := s.out.max - s.out.n; keep > room {
				keep = max(room, 0)
			}
			s.out.n += int64(n)
			if w != nil && keep > 0 {
				w.Write(buf[:keep])
			}
			first := keep < int64(n) && !s.out.exceeded
			if first {
				s.out.exceeded = true
				if w != nil {
					fmt.Fprintf(w, outputMarker, s.out.max)
				}
			}
			s.out.mu.Unlock()
			if first {
				s.end(ViolationOutput)
			}
		}
		if err != nil {
			return
		}
	}
}

// watch ends the sandbox when it crosses a limit the kernel does not end it
// for by itself: wall time, CPU time, the process limit, and memory (the
// kernel kills one process; the run ends with it).
func (s *Sandbox) watch(poll time.Duration) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		if time.Since(s.start) > s.limits.Wall {
			s.end(ViolationTimeout)
			return
		}
		u, err := s.cg.usage()
		if err != nil {
			continue // the cgroup goes away as the sandbox ends
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
	}
}

// end kills the whole sandbox at once, recording why. Killing the init is
// enough: the kernel then kills every process in its PID namespace.
func (s *Sandbox) end(violation string) {
	s.mu.Lock()
	if s.violation == "" {
		s.violation = violation
	}
	s.mu.Unlock()
	s.cmd.Process.Signal(syscall.SIGKILL)
}

// Kill ends the sandbox at once: every process dies.
func (s *Sandbox) Kill() { s.end("") }

// Stop asks every process to end (SIGTERM) and kills what is left after
// grace (Config.Grace when grace is 0).
func (s *Sandbox) Stop(grace time.Duration) {
	if grace <= 0 {
		grace = 5 * time.Second
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	go func() {
		select {
		case <-s.done:
		case <-time.After(grace):
			s.Kill()
		}
	}()
}

// Done is closed when the sandbox has ended.
func (s *Sandbox) Done() <-chan struct{} { return s.done }

// Wait waits for the sandbox to end and returns how the command ended.
func (s *Sandbox) Wait() (Result, error) {
	<-s.done
	return s.result, s.err
}

// wait reaps the init, makes sure nothing of the sandbox is left, and
// records the result.
func (s *Sandbox) wait() {
	defer close(s.done)
	s.cmd.Wait()
	end := time.Now()
	s.copying.Wait()
	r := Result{Duration: end.Sub(s.start), ExitCode: 128 + int(syscall.SIGKILL), Signal: "SIGKILL"}
	if line, _ := s.status.ReadString('\n'); strings.HasPrefix(line, "exit ") {
		f := strings.Fields(line)
		if len(f) == 3 {
			if code, err := strconv.Atoi(f[1]); err == nil {
				r.ExitCode, r.Signal = code, f[2]
				if r.Signal == "-" {
					r.Signal = ""
				}
			}
		}
	}
	// A limit the kernel enforced may have ended the command before the
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
	s.mu.Lock()
	r.Violation = s.violation
	s.mu.Unlock()
	s.out.mu.Lock()
	r.Output = s.out.n
	s.out.mu.Unlock()
	s.result = r
	if err := errors.Join(kerr, rerr); err != nil {
		s.err = corral.Internal("sandbox cleanup", err)
	}
}

// reachable checks, before anything starts, that the sandbox's user can
// reach the workspace (and write to it in read-write mode), so that a
// permission problem is a clear error rather than a failed bind inside.
func reachable(dir string, write bool, uid, gid int) error {
	can := func(path string, want os.FileMode) (bool, error) {
		fi, err := os.Stat(path)
		if err != nil {
			return false, err
		}
		st := fi.Sys().(*syscall.Stat_t)
		perm := fi.Mode().Perm()
		switch {
		case int(st.Uid) == uid:
			return perm&(want<<6) == want<<6, nil
		case int(st.Gid) == gid:
			return perm&(want<<3) == want<<3, nil
		default:
			return perm&want == want, nil
		}
	}
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		ok, err := can(p, 0o1)
		if err != nil {
			return invalid("workspace: %v", err)
		}
		if !ok {
			return invalid("workspace %s is not reachable by the sandbox user (uid %d): %s is not searchable by it", dir, uid, p)
		}
		if p == "/" {
			break
		}
	}
	want := os.FileMode(0o5)
	if write {
		want = 0o7
	}
	ok, err := can(dir, want)
	if err != nil {
		return invalid("workspace: %v", err)
	}
	if !ok {
		verb := "readable"
		if write {
			verb = "writable"
		}
		return invalid("workspace %s is not %s by the sandbox user (uid %d): chown or chmod it", dir, verb, uid)
	}
	return nil
}
