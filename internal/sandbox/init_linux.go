package sandbox

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"corral"

	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/psx"
)

// The file descriptors the parent hands to the init, after stdin, stdout
// and stderr.
const (
	fdSpec = 3 // the childSpec, as JSON, then EOF
	fdGo   = 4 // one byte once the init is inside its cgroup: commands may start
	fdCtl  = 5 // a SOCK_SEQPACKET socket: the parent's requests, the init's replies
	// fdWorkspace is the workspace as a detached mount, when childSpec's
	// Mounted says so: opened (and idmapped) by the parent, attached by the
	// init.
	fdWorkspace = 6
)

// childSpec is what the init needs: built by the parent from a validated
// spec, and nothing else of the server crosses. Commands come later, one
// request each, on the control socket.
type childSpec struct {
	Workspace string // host path of the workspace
	ReadWrite bool   // bind the workspace writable
	Mounted   bool   // the workspace is the mount at fdWorkspace, not bound by its path
	Limits    Limits
	Seccomp   []byte // the filter to install (seccompProgram)
	Tools     string // host path of the tools, bound read-only at corral.ToolsDir; "" for none
}

// Init is the sandbox's init: the binary re-executed by Start inside new
// namespaces. It builds the root, confines itself, runs the command and
// reaps until the command ends. It never returns.
func Init() {
	// The whole init runs on this one thread: privileges it drops on this
	// thread alone (the bounding set) reach the command, because the
	// command is forked from here and a fork copies the forking thread.
	runtime.LockOSThread()
	err := initMain()
	if err != nil {
		sendReply(reply{Op: "error", Error: strings.ReplaceAll(err.Error(), "\n", " ")})
		os.Exit(125)
	}
	os.Exit(0)
}

func initMain() error {
	// Descriptors the server held without close-on-exec came along into
	// this process: none may reach the command (Landlock checks opens, not
	// descriptors already open).
	if err := unix.CloseRange(fdCtl+1, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("close inherited descriptors: %w", err)
	}
	syscall.CloseOnExec(fdCtl)
	// Not dumpable: the command, though it runs as the same user, cannot
	// read the init's memory or descriptors through /proc/1, nor trace it.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("set not dumpable: %w", err)
	}
	// Signals the command could send the init to crash it (the Go runtime
	// dumps and exits on these) get the default action, which the kernel
	// drops for a PID namespace's init.
	if err := defaultSignals(); err != nil {
		return fmt.Errorf("signals: %w", err)
	}
	var spec childSpec
	specFile := os.NewFile(fdSpec, "spec")
	if err := json.NewDecoder(specFile).Decode(&spec); err != nil {
		return fmt.Errorf("read spec: %w", err)
	}
	specFile.Close()
	if err := buildRoot(spec); err != nil {
		return fmt.Errorf("build root: %w", err)
	}
	if err := unix.Sethostname([]byte(insideHostname)); err != nil {
		return fmt.Errorf("hostname: %w", err)
	}
	if err := loopbackUp(); err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	if err := setRlimits(spec.Limits); err != nil {
		return fmt.Errorf("rlimits: %w", err)
	}
	if err := dropPrivileges(); err != nil {
		return fmt.Errorf("drop privileges: %w", err)
	}
	rules := fsRules{
		ReadOnlyDirs:   []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/proc"},
		ReadWriteDirs:  []string{"/tmp"},
		ReadOnlyFiles:  []string{"/dev/random", "/dev/urandom"},
		ReadWriteFiles: []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty"},
	}
	if spec.ReadWrite {
		rules.ReadWriteDirs = append(rules.ReadWriteDirs, insideWorkspace)
	} else {
		rules.ReadOnlyDirs = append(rules.ReadOnlyDirs, insideWorkspace)
	}
	if spec.Tools != "" {
		rules.ReadOnlyDirs = append(rules.ReadOnlyDirs, corral.ToolsDir)
	}
	if err := applyLandlock(rules); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	if err := applySeccomp(spec.Seccomp); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	// Everything above is the init's own, trusted work, done while the
	// parent moves it into its cgroup; nothing untrusted runs before the
	// parent says the move is done.
	goFile := os.NewFile(fdGo, "go")
	if _, err := goFile.Read(make([]byte, 1)); err != nil {
		return fmt.Errorf("wait for the parent: %w", err)
	}
	goFile.Close()
	return serve()
}

// lookPath finds name in the PATH of the command's environment, inside the
// sandbox's root.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	p := "/usr/local/bin:/usr/bin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			p = v
		}
	}
	for _, dir := range filepath.SplitList(p) {
		if dir == "" {
			dir = "."
		}
		f := filepath.Join(dir, name)
		if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return f, nil
		}
	}
	return "", os.ErrNotExist
}

// dropPrivileges leaves the init, and so the command, without any
// capability, as the unprivileged user. Capabilities themselves are cleared
// on every thread of the process. The bounding set (which only limits what
// an execve could gain) is emptied on the init's locked thread, the one that
// forks the command: one system call per capability on every thread would
// cost milliseconds per sandbox, for threads that never exec.
//
// A system call on every thread costs a stop of the world and a signal to
// each thread, about 70 µs here: only capset takes one. The ambient set goes
// with it (the kernel keeps no capability ambient that is not both permitted
// and inheritable), and the user and group ids are the sandbox's on every
// thread from the init's execve on (Start's Credential), so they are checked
// rather than set again.
func dropPrivileges() error {
	last := lastCap() // once: a file of /proc read per capability cost 0.4 ms
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop bounding capability %d: %w", c, err)
		}
	}
	// Here explicitly, on the thread the commands are forked from; capset
	// below clears the other threads' ambient sets.
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	if r, e, s := unix.Getresuid(); r != insideUID || e != insideUID || s != insideUID {
		return fmt.Errorf("the init runs as uid %d/%d/%d, not %d", r, e, s, insideUID)
	}
	if r, e, s := unix.Getresgid(); r != insideGID || e != insideGID || s != insideGID {
		return fmt.Errorf("the init runs as gid %d/%d/%d, not %d", r, e, s, insideGID)
	}
	// On the heap, which does not move, and kept alive across the call.
	hdr := &unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := new([2]unix.CapUserData) // all zero: no capability at all
	_, _, errno := psx.Syscall3(unix.SYS_CAPSET, uintptr(unsafe.Pointer(hdr)), uintptr(unsafe.Pointer(data)), 0)
	runtime.KeepAlive(hdr)
	runtime.KeepAlive(data)
	if errno != 0 {
		return fmt.Errorf("capset: %w", errno)
	}
	return nil
}

// lastCap is the highest capability the kernel knows.
func lastCap() int {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 63
	}
	var n int
	if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%d", &n); err != nil {
		return 63
	}
	return n
}

// loopbackUp brings up the sandbox's own loopback interface. It is the only
// interface in the network namespace: commands can talk to themselves and
// to nothing else.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	ifr.SetUint16(unix.IFF_UP | unix.IFF_LOOPBACK | unix.IFF_RUNNING)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// keptSignals keep the Go runtime's handlers in the init: faults it turns
// into panics, its preemption (SIGURG), profiling and per-thread system
// call (SIGRTMIN+1: without it an all-threads system call, such as the
// capset of dropPrivileges, waits forever for threads that never answer)
// signals, seccomp's SIGSYS, and the two no process can change. Every other signal gets the
// default action (see defaultSignals), whatever the process that started
// the server ignored: a command must not inherit an ignored signal.
var keptSignals = map[syscall.Signal]bool{
	syscall.SIGKILL: true, syscall.SIGSTOP: true,
	syscall.SIGSEGV: true, syscall.SIGBUS: true, syscall.SIGFPE: true, syscall.SIGILL: true, syscall.SIGTRAP: true,
	syscall.SIGURG: true, syscall.SIGPROF: true, syscall.SIGSYS: true,
	sigPerThreadSyscall: true,
}

// sigPerThreadSyscall is the Go runtime's signal for a system call made on
// every thread (runtime/os_linux.go).
const sigPerThreadSyscall = syscall.Signal(33)

// lastSignal is the highest signal number (SIGRTMAX on Linux).
const lastSignal = 64

// kernelSigsetSize is the size of the kernel's sigset_t that rt_sigaction
// takes: 64 signals (mips, with 128, fails closed here).
const kernelSigsetSize = 8

// defaultSignals gives every signal but keptSignals its default action in
// the init, behind the Go runtime's back. The init is its PID namespace's init, and the
// kernel drops a signal with the default action sent to such an init, from
// inside the namespace or from the host (SIGKILL from the host excepted):
// so none of them ends the init, and the commands, which inherit the
// disposition through fork and execve, start with the default action as
// they would anywhere (an ignored SIGPIPE, say, would have stayed ignored).
//
// os/signal could catch them too, but its first Notify starts a goroutine
// on a thread of its own and waits for it: about 0.7 ms of every cold
// start. Stop asks for SIGTERM on the control socket instead.
func defaultSignals() error {
	var act [8]uint64 // larger than any arch's struct sigaction; all zero: SIG_DFL, no flags, empty mask
	for sig := syscall.Signal(1); sig <= lastSignal; sig++ {
		if keptSignals[sig] {
			continue
		}
		_, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, kernelSigsetSize, 0, 0)
		if errno != 0 {
			return fmt.Errorf("rt_sigaction(%v, SIG_DFL): %w", sig, errno)
		}
	}
	return nil
}
