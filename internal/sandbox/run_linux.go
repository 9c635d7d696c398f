package sandbox

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
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
	// Probed says the machine was found able to run sandboxes (Available)
	// by the process that asks for this one: a session's supervisor,
	// started by a server that checked, skips probing again (a probe
	// cgroup made and removed per session). Nothing weaker runs for it:
	// without a kernel feature the init refuses to start the command.
	Probed bool
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

// Sandbox is one command running in a session of its own: the session
// ends when the command does, and everything the command left with it.
type Sandbox struct {
	sess  *Session
	proc  *Proc
	start time.Time
	out   outputLimit

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
	sess, err := StartSession(cfg, spec.session())
	if err != nil {
		return nil, err
	}
	s := &Sandbox{sess: sess, start: sess.start, done: make(chan struct{})}
	s.out.max = spec.Limits.Output
	var ps [3]pipe // stdin, stdout, stderr
	for i := range ps {
		if ps[i], err = newPipe(); err != nil {
			sess.End()
			sess.Wait()
			return nil, corral.Internal("sandbox pipes", err)
		}
	}
	in, outP, errP := ps[0], ps[1], ps[2]
	cmdIn := in.r
	if f, ok := stdin.(*os.File); ok {
		// A file (a terminal, say) is handed over as it is, not copied.
		cmdIn, stdin = f, nil
	}
	s.proc, err = sess.Exec(Command{Argv: spec.Command, Env: spec.Env, Dir: spec.Dir}, cmdIn, outP.w, errP.w)
	// The command's ends now belong to the command.
	in.r.Close()
	outP.w.Close()
	errP.w.Close()
	if err != nil {
		in.w.Close()
		outP.r.Close()
		errP.r.Close()
		sess.End()
		sess.Wait()
		return nil, err
	}
	go func() {
		if stdin != nil {
			io.Copy(in.w, stdin)
		}
		in.w.Close()
	}()
	s.copying.Add(2)
	go s.copy(outP.r, stdout)
	go s.copy(errP.r, stderr)
	go s.wait()
	return s, nil
}

// pipes are the parent's and the command's ends of one pipe.
type pipe struct{ r, w *os.File }

func newPipe() (pipe, error) {
	r, w, err := os.Pipe()
	return pipe{r, w}, err
}

// outputLimit counts the bytes of both streams together and serialises
// writes to the caller's writers.
type outputLimit struct {
	mu       sync.Mutex
	n, max   int64
	exceeded bool
}

// OutputMarker is what follows output cut at a limit of %d bytes.
const OutputMarker = "\n[corral: output limit of %d bytes reached; the rest was discarded]\n"

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
					fmt.Fprintf(w, OutputMarker, s.out.max)
				}
			}
			s.out.mu.Unlock()
			if first {
				s.sess.end(ViolationOutput)
			}
		}
		if err != nil {
			return
		}
	}
}

// Kill ends the sandbox at once: every process dies.
func (s *Sandbox) Kill() { s.sess.End() }

// Stop asks every process to end (SIGTERM) and kills what is left after
// grace (5s when grace is 0).
func (s *Sandbox) Stop(grace time.Duration) { s.sess.Stop(grace) }

// Done is closed when the sandbox has ended.
func (s *Sandbox) Done() <-chan struct{} { return s.done }

// Wait waits for the sandbox to end and returns how the command ended.
func (s *Sandbox) Wait() (Result, error) {
	<-s.done
	return s.result, s.err
}

// wait waits for the command, ends its session (killing whatever the
// command left), and records the result.
func (s *Sandbox) wait() {
	defer close(s.done)
	select {
	case <-s.proc.Done():
		s.sess.End()
	case <-s.sess.Done():
	}
	s.err = s.sess.Wait()
	end := time.Now()
	s.copying.Wait()
	code, sig := s.proc.Exit()
	r := Result{Duration: end.Sub(s.start), ExitCode: code, Signal: sig, Violation: s.sess.Violation()}
	s.out.mu.Lock()
	r.Output = s.out.n
	s.out.mu.Unlock()
	s.result = r
}

// reachable reports whether the sandbox's user can reach dir along its
// path, every parent searchable by it: then the init, running as that user,
// can bind it by its path. A workspace it cannot reach is opened by the
// server instead (see openWorkspace).
func reachable(dir string, uid, gid int) (bool, error) {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return false, invalid("workspace: %v", err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		perm := fi.Mode().Perm()
		var ok bool
		switch {
		case int(st.Uid) == uid:
			ok = perm&0o100 != 0
		case int(st.Gid) == gid:
			ok = perm&0o010 != 0
		default:
			ok = perm&0o001 != 0
		}
		if !ok {
			return false, nil
		}
		if p == "/" {
			return true, nil
		}
	}
}
