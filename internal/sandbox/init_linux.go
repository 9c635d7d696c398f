package sandbox

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

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
	// dumps and exits on these) are ignored; stop signals are forwarded.
	signal.Ignore(syscall.SIGQUIT, syscall.SIGABRT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGVTALRM, syscall.SIGPIPE)
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
	if err := applyLandlock(rules); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	if err := applySeccomp(); err != nil {
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
func dropPrivileges() error {
	for c := 0; c <= lastCap(); c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop bounding capability %d: %w", c, err)
		}
	}
	if _, _, errno := psx.Syscall6(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0, 0); errno != 0 {
		return fmt.Errorf("clear ambient capabilities: %w", errno)
	}
	if err := syscall.Setresgid(insideGID, insideGID, insideGID); err != nil {
		return fmt.Errorf("setresgid: %w", err)
	}
	if err := syscall.Setresuid(insideUID, insideUID, insideUID); err != nil {
		return fmt.Errorf("setresuid: %w", err)
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
