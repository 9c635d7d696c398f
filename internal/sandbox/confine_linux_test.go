package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	seccomparch "github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"corral/internal/kerneltest"
)

// The confinement tests run in re-executed children (see main_test.go):
// rlimits, Landlock and seccomp cannot be undone. A child prints one line per
// check, "name ok" or "name FAIL: why", and exits 1 when a check failed.

func init() {
	testChildren["confine-seccomp"] = childSeccomp
	testChildren["confine-seccomp-foreign-arch"] = childSeccompForeignArch
	testChildren["confine-seccomp-refuses"] = childSeccompRefuses
	testChildren["confine-landlock"] = childLandlock
	testChildren["confine-landlock-abi0"] = childLandlockABI0
	testChildren["confine-rlimits"] = childRlimits
}

// confineCheck is one named check of a child.
type confineCheck struct {
	name string
	run  func() error
}

// runConfineChecks runs checks in order, prints a line for each and exits 1
// if any failed.
func runConfineChecks(checks []confineCheck) {
	failed := false
	for _, c := range checks {
		if err := c.run(); err != nil {
			failed = true
			fmt.Printf("%s FAIL: %v\n", c.name, err)
			continue
		}
		fmt.Printf("%s ok\n", c.name)
	}
	if failed {
		os.Exit(1)
	}
}

// confineChildDir is the directory the parent test made for the child.
func confineChildDir() string {
	dir := os.Getenv(confineDirEnv)
	if dir == "" {
		childFatal("%s not set", confineDirEnv)
	}
	return dir
}

// childFatal ends a child that cannot even set up its checks.
func childFatal(format string, args ...any) {
	fmt.Printf("setup FAIL: "+format+"\n", args...)
	os.Exit(2)
}

// wantErrno checks that err is exactly want.
func wantErrno(err error, want syscall.Errno) error {
	if err == nil {
		return fmt.Errorf("succeeded, want %v", want)
	}
	var got syscall.Errno
	if !errors.As(err, &got) || got != want {
		return fmt.Errorf("got %v, want %v", err, want)
	}
	return nil
}

// errnoOf turns a raw system call's errno into an error (nil for 0).
func errnoOf(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// rawErrno is a check that the raw system call fails with want. The
// arguments are chosen so that the call, were it not filtered, would fail
// harmlessly with another error (we run as root on the host).
func rawErrno(nr uintptr, want syscall.Errno, args ...uintptr) func() error {
	return func() error {
		var a [6]uintptr
		copy(a[:], args)
		r, _, e := unix.RawSyscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
		if e == 0 {
			return fmt.Errorf("returned %d, want %v", int(r), want)
		}
		return wantErrno(e, want)
	}
}

// addrNoRandomize is the personality flag that turns ASLR off.
const addrNoRandomize = 0x0040000

// atFDCWD is AT_FDCWD as a raw system call argument.
var atFDCWD = func() uintptr { fd := unix.AT_FDCWD; return uintptr(fd) }()

// confineDirEnv names the directory a child may work in: the parent test creates
// and removes it, since a child under Landlock could not.
const confineDirEnv = "SANDBOX_TEST_DIR"

// runConfineChild runs a registered child in a fresh directory and fails the
// test unless it exits 0.
func runConfineChild(t *testing.T, name string) string {
	t.Helper()
	out, code := runChild(t, name, confineDirEnv+"="+t.TempDir())
	t.Logf("child %s:\n%s", name, out)
	if code != 0 {
		t.Fatalf("child %s exited %d, want 0", name, code)
	}
	return out
}

// skipUnlessSeccomp skips when the kernel has no seccomp filters.
func skipUnlessSeccomp(t *testing.T) {
	t.Helper()
	if err := seccompAvailable(); err != nil {
		kerneltest.Skip(t, "kernel lacks seccomp filters: %v", err)
	}
}

// skipUnlessLandlock skips when the kernel has no Landlock.
func skipUnlessLandlock(t *testing.T) int {
	t.Helper()
	abi, err := landlockABI()
	if err != nil || abi < 1 {
		kerneltest.Skip(t, "kernel lacks Landlock: ABI %d, %v", abi, err)
	}
	return abi
}

// seccompData encodes a struct seccomp_data the way the kernel's filter sees
// it through 32-bit loads, for x/net/bpf's VM, which loads big-endian words.
func seccompData(nr int32, arch uint32, args ...uint64) []byte {
	b := make([]byte, seccompDataArgs+6*8)
	binary.NativeEndian.PutUint32(b[seccompDataNr:], uint32(nr))
	binary.NativeEndian.PutUint32(b[seccompDataArch:], arch)
	for i, a := range args {
		binary.NativeEndian.PutUint64(b[seccompDataArgs+8*i:], a)
	}
	for i := 0; i < len(b); i += 4 {
		binary.BigEndian.PutUint32(b[i:], binary.NativeEndian.Uint32(b[i:]))
	}
	return b
}

// TestSeccompFilterDecisions runs the assembled filter in a BPF interpreter
// against every rule and its edges, including the cases a kernel test cannot
// safely reach (reboot, kexec...) and foreign architectures.
func TestSeccompFilterDecisions(t *testing.T) {
	// The program as the init receives it, decoded back.
	prog, err := seccompProgram()
	if err != nil {
		t.Fatalf("seccompProgram: %v", err)
	}
	var raw []bpf.RawInstruction
	for b := prog; len(b) >= sizeofSockFilter; b = b[sizeofSockFilter:] {
		raw = append(raw, bpf.RawInstruction{Op: binary.NativeEndian.Uint16(b), Jt: b[2], Jf: b[3], K: binary.NativeEndian.Uint32(b[4:])})
	}
	insts, ok := bpf.Disassemble(raw)
	if want, _ := seccompFilter(); !ok || len(prog) != len(want)*sizeofSockFilter {
		t.Fatalf("seccompProgram is %d bytes that disassemble to %d instructions (all: %v), want %d", len(prog), len(insts), ok, len(want))
	}
	vm, err := bpf.NewVM(insts)
	if err != nil {
		t.Fatalf("bpf.NewVM: %v", err)
	}
	native, err := seccomparch.GetInfo("")
	if err != nil {
		t.Fatal(err)
	}
	nr := func(name string) int32 {
		n, ok := native.SyscallNames[name]
		if !ok {
			t.Fatalf("no system call %q on %s", name, native.Name)
		}
		return int32(n)
	}
	const (
		allow    = unix.SECCOMP_RET_ALLOW
		kill     = unix.SECCOMP_RET_KILL_PROCESS
		eperm    = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		enosys   = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
		eafnosup = unix.SECCOMP_RET_ERRNO | uint32(unix.EAFNOSUPPORT)
	)
	arch := uint32(native.ID)
	type decision struct {
		name string
		data []byte
		want uint32
	}
	var cases []decision
	for _, name := range seccompDenied {
		cases = append(cases, decision{name, seccompData(nr(name), arch), eperm})
	}
	cases = append(cases,
		decision{"read", seccompData(nr("read"), arch, 0, 0, 10), allow},
		decision{"openat", seccompData(nr("openat"), arch), allow},
		decision{"execve", seccompData(nr("execve"), arch), allow},
		decision{"clone3", seccompData(nr("clone3"), arch), enosys},
		decision{"clone thread", seccompData(nr("clone"), arch, unix.CLONE_VM|unix.CLONE_FS|unix.CLONE_FILES|unix.CLONE_SIGHAND|unix.CLONE_THREAD|unix.CLONE_SYSVSEM), allow},
		decision{"clone fork", seccompData(nr("clone"), arch, uint64(unix.SIGCHLD)), allow},
		decision{"clone vfork pidfd", seccompData(nr("clone"), arch, unix.CLONE_VM|unix.CLONE_VFORK|unix.CLONE_PIDFD|uint64(unix.SIGCHLD)), allow},
		decision{"personality 0", seccompData(nr("personality"), arch, 0), allow},
		decision{"personality query", seccompData(nr("personality"), arch, 0xffffffff), allow},
		decision{"personality -1", seccompData(nr("personality"), arch, math.MaxUint64), allow},
		decision{"personality ADDR_NO_RANDOMIZE", seccompData(nr("personality"), arch, addrNoRandomize), eperm},
		decision{"personality 1", seccompData(nr("personality"), arch, 1), eperm},
		decision{"personality 0xfffffffe", seccompData(nr("personality"), arch, 0xfffffffe), eperm},
		decision{"personality high bits", seccompData(nr("personality"), arch, 1<<32), eperm},
		decision{"ioctl TIOCSTI", seccompData(nr("ioctl"), arch, 0, unix.TIOCSTI), eperm},
		decision{"ioctl TIOCSTI high bits", seccompData(nr("ioctl"), arch, 0, 0xdeadbeef<<32|unix.TIOCSTI), eperm},
		decision{"ioctl TIOCLINUX", seccompData(nr("ioctl"), arch, 0, unix.TIOCLINUX), eperm},
		decision{"ioctl TIOCLINUX high bits", seccompData(nr("ioctl"), arch, 0, 1<<63|unix.TIOCLINUX), eperm},
		decision{"ioctl TCGETS", seccompData(nr("ioctl"), arch, 0, unix.TCGETS), allow},
		decision{"ioctl TIOCINQ", seccompData(nr("ioctl"), arch, 0, unix.TIOCINQ), allow},
		decision{"ioctl TIOCSTI|0x10000", seccompData(nr("ioctl"), arch, 0, 0x10000|unix.TIOCSTI), allow},
		decision{"ioctl sign-extended", seccompData(nr("ioctl"), arch, 0, 0xffffffff80045430), allow},
		decision{"socket AF_UNSPEC", seccompData(nr("socket"), arch, unix.AF_UNSPEC), allow},
		decision{"socket AF_UNIX", seccompData(nr("socket"), arch, unix.AF_UNIX), allow},
		decision{"socket AF_INET", seccompData(nr("socket"), arch, unix.AF_INET), allow},
		decision{"socket AF_INET6", seccompData(nr("socket"), arch, unix.AF_INET6), allow},
		decision{"socket AF_AX25", seccompData(nr("socket"), arch, unix.AF_AX25), eafnosup},
		decision{"socket AF_IPX", seccompData(nr("socket"), arch, unix.AF_IPX), eafnosup},
		decision{"socket 9", seccompData(nr("socket"), arch, 9), eafnosup},
		decision{"socket AF_NETLINK", seccompData(nr("socket"), arch, unix.AF_NETLINK), eafnosup},
		decision{"socket AF_PACKET", seccompData(nr("socket"), arch, unix.AF_PACKET), eafnosup},
		decision{"socket AF_VSOCK", seccompData(nr("socket"), arch, unix.AF_VSOCK), eafnosup},
		decision{"socket AF_INET high bits", seccompData(nr("socket"), arch, 1<<32|unix.AF_INET), eafnosup},
		decision{"mknod S_IFCHR", seccompData(nr("mknod"), arch, 0, unix.S_IFCHR|0o666), eperm},
		decision{"mknod S_IFBLK", seccompData(nr("mknod"), arch, 0, unix.S_IFBLK|0o666), eperm},
		decision{"mknod S_IFIFO", seccompData(nr("mknod"), arch, 0, unix.S_IFIFO|0o666), allow},
		decision{"mknod S_IFSOCK", seccompData(nr("mknod"), arch, 0, unix.S_IFSOCK|0o666), allow},
		decision{"mknod S_IFREG", seccompData(nr("mknod"), arch, 0, unix.S_IFREG|0o666), allow},
		decision{"mknodat S_IFCHR", seccompData(nr("mknodat"), arch, 0, 0, unix.S_IFCHR|0o666), eperm},
		decision{"mknodat S_IFBLK", seccompData(nr("mknodat"), arch, 0, 0, unix.S_IFBLK|0o666), eperm},
		decision{"mknodat S_IFIFO", seccompData(nr("mknodat"), arch, 0, 0, unix.S_IFIFO|0o666), allow},
		decision{"mknodat mode in arg1 ignored", seccompData(nr("mknodat"), arch, 0, unix.S_IFCHR, unix.S_IFIFO), allow},
	)
	for _, flag := range cloneNamespaceFlags {
		cases = append(cases, decision{fmt.Sprintf("clone %#x", flag),
			seccompData(nr("clone"), arch, flag|unix.CLONE_VM|uint64(unix.SIGCHLD)), eperm})
	}
	if native.ID == seccomparch.X86_64.ID {
		cases = append(cases,
			decision{"i386 getpid", seccompData(20, uint32(seccomparch.I386.ID)), kill},
			decision{"i386 ptrace", seccompData(26, uint32(seccomparch.I386.ID)), kill},
			decision{"x32 getpid", seccompData(0x40000000|39, arch), enosys},
			decision{"x32 unshare", seccompData(0x40000000|272, arch), enosys},
		)
	}
	cases = append(cases, decision{"unknown arch", seccompData(0, 0x12345678), kill})

	for _, c := range cases {
		got, err := vm.Run(c.data)
		if err != nil {
			t.Errorf("%s: vm.Run: %v", c.name, err)
			continue
		}
		if uint32(got) != c.want {
			t.Errorf("%s: filter returns %#x, want %#x", c.name, uint32(got), c.want)
		}
	}
}

func TestSeccomp(t *testing.T) {
	skipUnlessSeccomp(t)
	runConfineChild(t, "confine-seccomp")
}

func childSeccomp() {
	dir := confineChildDir()

	// Threads that exist before the filter must get it too (TSYNC).
	threads := lockedThreads(4)
	defer threads.stop()

	if err := applySeccompNow(); err != nil {
		childFatal("applySeccomp: %v", err)
	}

	// A pid that cannot exist (above PID_MAX_LIMIT): ptrace without the
	// filter fails with ESRCH instead of stopping a real process.
	const noPid = 1 << 30
	// CLONE_SIGHAND without CLONE_VM is invalid: without the filter, clone
	// fails with EINVAL instead of forking a copy of the Go runtime.
	const badClone = unix.CLONE_SIGHAND

	cs := []confineCheck{
		{"unshare(CLONE_NEWUSER)", func() error { return wantErrno(unix.Unshare(unix.CLONE_NEWUSER), unix.EPERM) }},
		{"unshare(CLONE_NEWNS)", func() error { return wantErrno(unix.Unshare(unix.CLONE_NEWNS), unix.EPERM) }},
		{"setns", func() error { return wantErrno(unix.Setns(0, 0), unix.EPERM) }},
		{"mount", func() error {
			return wantErrno(unix.Mount("none", filepath.Join(dir, "missing"), "tmpfs", 0, ""), unix.EPERM)
		}},
		{"umount2", func() error { return wantErrno(unix.Unmount(filepath.Join(dir, "missing"), 0), unix.EPERM) }},
		{"fsopen", rawErrno(unix.SYS_FSOPEN, unix.EPERM, 0)},
		{"open_tree", rawErrno(unix.SYS_OPEN_TREE, unix.EPERM, atFDCWD, 0, 0xffffffff)},
		{"chroot", func() error { return wantErrno(unix.Chroot(filepath.Join(dir, "missing")), unix.EPERM) }},
		{"ptrace(PTRACE_ATTACH)", rawErrno(unix.SYS_PTRACE, unix.EPERM, unix.PTRACE_ATTACH, noPid)},
		{"process_vm_readv", rawErrno(unix.SYS_PROCESS_VM_READV, unix.EPERM, uintptr(os.Getpid()))},
		{"bpf", rawErrno(unix.SYS_BPF, unix.EPERM, 0xffff)},
		{"perf_event_open", rawErrno(unix.SYS_PERF_EVENT_OPEN, unix.EPERM, 0, 0, ^uintptr(0), ^uintptr(0))},
		{"keyctl", rawErrno(unix.SYS_KEYCTL, unix.EPERM, 0xffff)},
		{"add_key", rawErrno(unix.SYS_ADD_KEY, unix.EPERM)},
		{"io_uring_setup", rawErrno(unix.SYS_IO_URING_SETUP, unix.EPERM, 0, 0)},
		{"userfaultfd", rawErrno(unix.SYS_USERFAULTFD, unix.EPERM, 0xffff)},
		{"name_to_handle_at", rawErrno(unix.SYS_NAME_TO_HANDLE_AT, unix.EPERM, atFDCWD)},
		{"syslog", rawErrno(unix.SYS_SYSLOG, unix.EPERM, 0xffff)},
		{"pidfd_getfd", rawErrno(unix.SYS_PIDFD_GETFD, unix.EPERM, ^uintptr(0), 0, 0)},
		{"personality(ADDR_NO_RANDOMIZE)", rawErrno(unix.SYS_PERSONALITY, unix.EPERM, addrNoRandomize)},
		{"personality query allowed", func() error {
			_, _, e := unix.RawSyscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0)
			return errnoOf(e)
		}},
		{"personality(PER_LINUX) allowed", func() error {
			_, _, e := unix.RawSyscall(unix.SYS_PERSONALITY, 0, 0, 0)
			return errnoOf(e)
		}},
		{"clone(CLONE_NEWNS)", rawErrno(unix.SYS_CLONE, unix.EPERM, unix.CLONE_NEWNS|badClone)},
		{"clone(CLONE_NEWUSER)", rawErrno(unix.SYS_CLONE, unix.EPERM, unix.CLONE_NEWUSER|badClone)},
		{"clone(CLONE_NEWPID)", rawErrno(unix.SYS_CLONE, unix.EPERM, unix.CLONE_NEWPID|badClone)},
		{"clone(CLONE_NEWNET)", rawErrno(unix.SYS_CLONE, unix.EPERM, unix.CLONE_NEWNET|badClone)},
		{"clone(CLONE_NEWCGROUP)", rawErrno(unix.SYS_CLONE, unix.EPERM, unix.CLONE_NEWCGROUP|badClone)},
		{"clone without namespaces passes the filter", rawErrno(unix.SYS_CLONE, unix.EINVAL, badClone)},
		{"clone3", rawErrno(unix.SYS_CLONE3, unix.ENOSYS, 0, 0)},
		{"rawIoctl(TIOCSTI)", func() error {
			c := byte('x')
			return wantErrno(errnoOf(rawIoctl(0, unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))), unix.EPERM)
		}},
		{"rawIoctl(TIOCSTI) with high bits", func() error {
			c := byte('x')
			return wantErrno(errnoOf(rawIoctl(0, 0xdead<<32|unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))), unix.EPERM)
		}},
		{"rawIoctl(TIOCLINUX)", func() error {
			c := byte(0)
			return wantErrno(errnoOf(rawIoctl(0, unix.TIOCLINUX, uintptr(unsafe.Pointer(&c)))), unix.EPERM)
		}},
		{"rawIoctl(TIOCINQ) allowed", func() error {
			var p [2]int
			if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
				return err
			}
			defer unix.Close(p[0])
			defer unix.Close(p[1])
			_, err := unix.IoctlGetInt(p[0], unix.TIOCINQ)
			return err
		}},
		{"socket(AF_PACKET)", func() error {
			return wantErrno(openSocket(unix.AF_PACKET, unix.SOCK_RAW), unix.EAFNOSUPPORT)
		}},
		{"socket(AF_NETLINK)", func() error {
			return wantErrno(openSocket(unix.AF_NETLINK, unix.SOCK_RAW), unix.EAFNOSUPPORT)
		}},
		{"socket(AF_VSOCK)", func() error {
			return wantErrno(openSocket(unix.AF_VSOCK, unix.SOCK_STREAM), unix.EAFNOSUPPORT)
		}},
		{"socket(AF_INET) allowed", func() error { return openSocket(unix.AF_INET, unix.SOCK_STREAM) }},
		{"socket(AF_UNIX) allowed", func() error { return openSocket(unix.AF_UNIX, unix.SOCK_STREAM) }},
		{"mknod char device", func() error {
			return wantErrno(unix.Mknod(filepath.Join(dir, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))), unix.EPERM)
		}},
		{"mknodat block device", func() error {
			return wantErrno(unix.Mknodat(unix.AT_FDCWD, filepath.Join(dir, "loop"), unix.S_IFBLK|0o666, int(unix.Mkdev(7, 0))), unix.EPERM)
		}},
		{"mkfifo allowed", func() error { return unix.Mkfifo(filepath.Join(dir, "fifo"), 0o600) }},
		{"x32 system call", rawErrno(0x40000000|unix.SYS_GETPID, unix.ENOSYS)},
		{"every thread filtered", threads.check(func() error {
			return wantErrno(unix.Unshare(unix.CLONE_NEWUSER), unix.EPERM)
		})},
		{"every thread has seccomp and no_new_privs", everyThreadStatus("Seccomp:", "2", "NoNewPrivs:", "1")},
		{"fork and exec", func() error {
			out, err := exec.Command("/bin/sh", "-c", "echo ok | cat").CombinedOutput()
			if err != nil {
				return fmt.Errorf("sh: %v: %s", err, out)
			}
			if string(out) != "ok\n" {
				return fmt.Errorf("sh printed %q, want %q", out, "ok\n")
			}
			return nil
		}},
	}
	runConfineChecks(cs)
}

// rawIoctl is the raw system call, with a request of all 64 bits.
func rawIoctl(fd int, req uint64, arg uintptr) syscall.Errno {
	_, _, e := unix.RawSyscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), arg)
	return e
}

// openSocket opens and closes a socket.
func openSocket(family, typ int) error {
	fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// everyThreadStatus checks that each thread's /proc status has the given
// key-value pairs.
func everyThreadStatus(kv ...string) func() error {
	return func() error {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		for _, task := range tasks {
			status, err := os.ReadFile(filepath.Join("/proc/self/task", task.Name(), "status"))
			if err != nil {
				return err
			}
			for i := 0; i < len(kv); i += 2 {
				if !hasStatusLine(string(status), kv[i], kv[i+1]) {
					return fmt.Errorf("thread %s: no %q %q line", task.Name(), kv[i], kv[i+1])
				}
			}
		}
		if len(tasks) < 2 {
			return fmt.Errorf("only %d threads seen", len(tasks))
		}
		return nil
	}
}

func hasStatusLine(status, key, value string) bool {
	for _, line := range strings.Split(status, "\n") {
		if k, v, ok := strings.Cut(line, "\t"); ok && k == key && strings.TrimSpace(v) == value {
			return true
		}
	}
	return false
}

// threadPool is goroutines locked to their own OS threads, started before a
// restriction so a check can run on threads that existed when it was applied.
type threadPool struct {
	work []chan func()
}

func lockedThreads(n int) *threadPool {
	p := &threadPool{}
	ready := make(chan struct{})
	for range n {
		work := make(chan func())
		p.work = append(p.work, work)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			ready <- struct{}{}
			for f := range work {
				f()
			}
		}()
	}
	for range n {
		<-ready
	}
	return p
}

// check returns a check that runs f on every thread of the pool.
func (p *threadPool) check(f func() error) func() error {
	return func() error {
		for i, work := range p.work {
			errc := make(chan error)
			work <- func() { errc <- f() }
			if err := <-errc; err != nil {
				return fmt.Errorf("thread %d: %w", i, err)
			}
		}
		return nil
	}
}

func (p *threadPool) stop() {
	for _, work := range p.work {
		close(work)
	}
}

// i386GetpidCode is x86-64 machine code that makes an i386 getpid system call
// (number 20) through int 0x80, stores its result 64 bytes into its own page
// and returns:
//
//	mov eax, 20
//	int 0x80
//	mov [rip+51], eax   ; 13+51 = 64
//	ret
var i386GetpidCode = []byte{0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0x89, 0x05, 51, 0, 0, 0, 0xc3}

// i386Getpid runs i386GetpidCode and returns what the system call returned.
func i386Getpid() (int32, error) {
	page, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return 0, err
	}
	defer unix.Munmap(page)
	copy(page, i386GetpidCode)
	if err := unix.Mprotect(page, unix.PROT_READ|unix.PROT_WRITE|unix.PROT_EXEC); err != nil {
		return 0, err
	}
	// A Go func value points to a word that holds the code's address.
	code := uintptr(unsafe.Pointer(&page[0]))
	codep := &code
	f := *(*func())(unsafe.Pointer(&codep))
	f()
	return int32(binary.NativeEndian.Uint32(page[64:])), nil
}

// TestSeccompForeignArch checks that an i386 system call from an x86-64
// process kills it: the filter's rules are written for x86-64 numbers.
func TestSeccompForeignArch(t *testing.T) {
	skipUnlessSeccomp(t)
	if runtime.GOARCH != "amd64" {
		t.Skip("the i386 system call test is x86-64 machine code")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = []string{childEnv + "=confine-seccomp-foreign-arch"}
	out, err := cmd.CombinedOutput()
	t.Logf("child:\n%s", out)
	if cmd.ProcessState == nil {
		t.Fatalf("child: %v", err)
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok {
		t.Fatalf("child: %v", err)
	}
	if !strings.Contains(string(out), "i386 getpid without filter ok") {
		// The child died at its probe, before any filter: this kernel
		// cannot make an IA-32 call at all (built without IA-32 emulation,
		// or booted with ia32_emulation=0), so int 0x80 faults, and Go's
		// runtime reports the SIGSEGV and exits 2. There is nothing for
		// the sandbox to block here; TestSeccompFilterDecisions checks
		// that the filter kills a foreign architecture's calls. Not a
		// kerneltest.Skip: the sandbox needs no IA-32 emulation.
		if strings.Contains(string(out), "probing i386 getpid") && strings.Contains(string(out), "SIGSEGV") {
			t.Skip("this kernel cannot make IA-32 system calls at all (no IA-32 emulation): int 0x80 faults with no filter installed")
		}
		t.Fatalf("child ended before its probe: %v", err)
	}
	if !strings.Contains(string(out), "filter applied") {
		t.Fatalf("child ended before the filter: %v", err)
	}
	if !ws.Signaled() || ws.Signal() != syscall.SIGSYS {
		t.Fatalf("child ended with %v, want killed by SIGSYS", err)
	}
}

// TestSeccompRefusesBadPrograms hands applySeccomp programs that are no
// whole filter: it must refuse each before installing anything.
func TestSeccompRefusesBadPrograms(t *testing.T) {
	skipUnlessSeccomp(t)
	runConfineChild(t, "confine-seccomp-refuses")
}

func childSeccompRefuses() {
	prog, err := seccompProgram()
	if err != nil {
		childFatal("seccompProgram: %v", err)
	}
	refused := func(p []byte) func() error {
		return func() error {
			if err := applySeccomp(p); err == nil {
				return errors.New("installed")
			}
			if mode, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err != nil || mode != 0 {
				return fmt.Errorf("refused, but the seccomp mode is now %d (%v)", mode, err)
			}
			return nil
		}
	}
	runConfineChecks([]confineCheck{
		{"no program", refused(nil)},
		{"half an instruction short", refused(prog[:len(prog)-sizeofSockFilter/2])},
		// A whole filter the kernel would take, and half an instruction.
		{"half an instruction more", refused(append(slices.Clone(prog), 0, 0, 0, 0))},
		{"one instruction more than the kernel takes", refused(make([]byte, (unix.BPF_MAXINSNS+1)*sizeofSockFilter))},
	})
}

func childSeccompForeignArch() {
	fmt.Println("probing i386 getpid without the filter")
	pid, err := i386Getpid()
	if err != nil {
		childFatal("i386 getpid: %v", err)
	}
	if int(pid) != os.Getpid() {
		childFatal("i386 getpid without filter = %d, want %d", pid, os.Getpid())
	}
	fmt.Println("i386 getpid without filter ok")
	if err := applySeccompNow(); err != nil {
		childFatal("applySeccomp: %v", err)
	}
	fmt.Println("filter applied")
	pid, err = i386Getpid()
	fmt.Printf("i386 getpid FAIL: returned %d, %v; want the process killed\n", pid, err)
	os.Exit(1)
}

func TestLandlock(t *testing.T) {
	skipUnlessLandlock(t)
	runConfineChild(t, "confine-landlock")
}

func childLandlock() {
	abi, err := landlockABI()
	if err != nil {
		childFatal("landlockABI: %v", err)
	}
	root := confineChildDir()
	path := func(p string) string { return filepath.Join(root, p) }
	for _, d := range []string{"ro", "rw/a", "rw/b", "secret"} {
		if err := os.MkdirAll(path(d), 0o755); err != nil {
			childFatal("%v", err)
		}
	}
	for _, f := range []string{"ro/file", "rw/file", "secret/file", "secret/ro-file", "secret/rw-file"} {
		if err := os.WriteFile(path(f), []byte("content\n"), 0o644); err != nil {
			childFatal("%v", err)
		}
	}

	// An abstract UNIX socket created outside the domain: Landlock must not
	// scope IPC (see applyLandlock; the namespaces do).
	abstract := fmt.Sprintf("@corral-confine-test-%d", os.Getpid())
	ln, err := net.Listen("unix", abstract)
	if err != nil {
		childFatal("listen %s: %v", abstract, err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()

	threads := lockedThreads(4)
	defer threads.stop()

	err = applyLandlock(fsRules{
		ReadOnlyDirs:   []string{path("ro"), "/usr", "/bin", "/lib", "/lib64", "/etc", path("missing-dir")},
		ReadWriteDirs:  []string{path("rw"), path("missing-rw")},
		ReadOnlyFiles:  []string{path("secret/ro-file"), path("missing-file")},
		ReadWriteFiles: []string{path("secret/rw-file"), "/dev/null"},
	})
	if err != nil {
		childFatal("applyLandlock: %v", err)
	}

	readErr := func(p string) error {
		_, err := os.ReadFile(p)
		return err
	}
	writeErr := func(p string) error {
		return os.WriteFile(p, []byte("new\n"), 0o644)
	}
	cs := []confineCheck{
		{"read ro", func() error { return readErr(path("ro/file")) }},
		{"list ro", func() error { _, err := os.ReadDir(path("ro")); return err }},
		{"write ro", func() error { return wantErrno(writeErr(path("ro/file")), unix.EACCES) }},
		{"create in ro", func() error { return wantErrno(writeErr(path("ro/new")), unix.EACCES) }},
		{"unlink in ro", func() error { return wantErrno(os.Remove(path("ro/file")), unix.EACCES) }},
		{"mkdir in ro", func() error { return wantErrno(os.Mkdir(path("ro/d"), 0o755), unix.EACCES) }},
		{"create in rw", func() error { return writeErr(path("rw/new")) }},
		{"rename in rw", func() error { return os.Rename(path("rw/new"), path("rw/renamed")) }},
		{"truncate in rw", func() error { return os.Truncate(path("rw/renamed"), 1) }},
		{"open O_TRUNC in rw", func() error { return writeErr(path("rw/file")) }},
		{"unlink in rw", func() error { return os.Remove(path("rw/renamed")) }},
		{"mkdir and rmdir in rw", func() error {
			if err := os.Mkdir(path("rw/d"), 0o755); err != nil {
				return err
			}
			return os.Remove(path("rw/d"))
		}},
		{"symlink and mkfifo in rw", func() error {
			if err := os.Symlink("file", path("rw/link")); err != nil {
				return err
			}
			return unix.Mkfifo(path("rw/fifo"), 0o600)
		}},
		{"rename across rw dirs (refer)", func() error {
			if abi < 2 {
				return nil // refused on ABI 1, by design
			}
			if err := writeErr(path("rw/a/x")); err != nil {
				return err
			}
			return os.Rename(path("rw/a/x"), path("rw/b/x"))
		}},
		{"read secret", func() error { return wantErrno(readErr(path("secret/file")), unix.EACCES) }},
		{"list secret", func() error { _, err := os.ReadDir(path("secret")); return wantErrno(err, unix.EACCES) }},
		{"write secret", func() error { return wantErrno(writeErr(path("secret/file")), unix.EACCES) }},
		{"move from rw to secret", func() error {
			if err := writeErr(path("rw/escape")); err != nil {
				return err
			}
			err := os.Rename(path("rw/escape"), path("secret/escape"))
			if wantErrno(err, unix.EXDEV) == nil {
				return nil
			}
			return wantErrno(err, unix.EACCES)
		}},
		{"read ro file", func() error { return readErr(path("secret/ro-file")) }},
		{"write ro file", func() error { return wantErrno(writeErr(path("secret/ro-file")), unix.EACCES) }},
		{"write rw file", func() error { return writeErr(path("secret/rw-file")) }},
		{"truncate rw file", func() error { return os.Truncate(path("secret/rw-file"), 0) }},
		{"read outside the rules", func() error { return wantErrno(readErr(os.Args[0]), unix.EACCES) }},
		{"write /dev/null", func() error { return writeErr("/dev/null") }},
		{"every thread restricted", threads.check(func() error {
			return wantErrno(readErr(path("secret/file")), unix.EACCES)
		})},
		{"exec /bin/sh", func() error {
			out, err := exec.Command("/bin/sh", "-c", "cat "+path("ro/file")+"; cat "+path("secret/file")+" 2>/dev/null || echo denied").CombinedOutput()
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			if string(out) != "content\ndenied\n" {
				return fmt.Errorf("sh printed %q", out)
			}
			return nil
		}},
		{"loopback network not restricted", func() error {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			defer l.Close()
			c, err := net.DialTimeout("tcp", l.Addr().String(), 5*time.Second)
			if err != nil {
				return err
			}
			return c.Close()
		}},
		{"signals are not scoped by Landlock", func() error {
			return unix.Kill(os.Getppid(), 0)
		}},
		{"abstract sockets are not scoped by Landlock", func() error {
			c, err := net.DialTimeout("unix", abstract, 5*time.Second)
			if err == nil {
				c.Close()
			}
			return err
		}},
	}
	runConfineChecks(cs)
}

func TestLandlockFailsClosed(t *testing.T) {
	runConfineChild(t, "confine-landlock-abi0")
}

func childLandlockABI0() {
	cases := []struct {
		name string
		abi  func() (int, error)
	}{
		{"ABI 0", func() (int, error) { return 0, nil }},
		{"ENOSYS", func() (int, error) { return 0, unix.ENOSYS }},
		{"EOPNOTSUPP", func() (int, error) { return 0, unix.EOPNOTSUPP }},
	}
	var cs []confineCheck
	for _, c := range cases {
		cs = append(cs, confineCheck{c.name, func() error {
			landlockABIFunc = c.abi
			defer func() { landlockABIFunc = landlockABI }()
			err := applyLandlock(fsRules{ReadOnlyDirs: []string{"/"}})
			if err == nil {
				return errors.New("applyLandlock succeeded, want an error")
			}
			if !strings.Contains(err.Error(), "landlock") {
				return fmt.Errorf("error %q does not name Landlock", err)
			}
			return nil
		}})
	}
	cs = append(cs, confineCheck{"still unconfined", func() error {
		_, err := os.ReadFile(os.Args[0])
		return err
	}})
	runConfineChecks(cs)
}

func TestRlimits(t *testing.T) {
	runConfineChild(t, "confine-rlimits")
}

func childRlimits() {
	signal.Ignore(syscall.SIGXFSZ)
	l := DefaultLimits
	l.FileSize = 1 << 20
	l.OpenFiles = 64
	l.CPU = 1500 * time.Millisecond
	if err := setRlimits(l); err != nil {
		childFatal("setRlimits: %v", err)
	}
	dir := confineChildDir()

	rlimit := func(resource int, want uint64) func() error {
		return func() error {
			var rl unix.Rlimit
			if err := unix.Getrlimit(resource, &rl); err != nil {
				return err
			}
			if rl.Cur != want || rl.Max != want {
				return fmt.Errorf("getrlimit = %d/%d, want %d/%d", rl.Cur, rl.Max, want, want)
			}
			return nil
		}
	}
	cs := []confineCheck{
		{"RLIMIT_FSIZE", rlimit(unix.RLIMIT_FSIZE, 1<<20)},
		{"RLIMIT_NOFILE", rlimit(unix.RLIMIT_NOFILE, 64)},
		{"RLIMIT_CORE", rlimit(unix.RLIMIT_CORE, 0)},
		{"RLIMIT_CPU", rlimit(unix.RLIMIT_CPU, 3)},
		{"write past RLIMIT_FSIZE", func() error {
			f, err := os.Create(filepath.Join(dir, "big"))
			if err != nil {
				return err
			}
			defer f.Close()
			n, err := f.Write(make([]byte, 2<<20))
			if n != 1<<20 {
				return fmt.Errorf("wrote %d bytes, want %d", n, 1<<20)
			}
			return wantErrno(err, unix.EFBIG)
		}},
		{"children inherit", func() error {
			out, err := exec.Command("/bin/cat", "/proc/self/limits").CombinedOutput()
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			want := map[string]string{
				"Max cpu time":       "3 3 seconds",
				"Max file size":      "1048576 1048576 bytes",
				"Max core file size": "0 0 bytes",
				"Max open files":     "64 64 files",
			}
			for _, line := range strings.Split(string(out), "\n") {
				for name, limits := range want {
					if rest, ok := strings.CutPrefix(line, name+"  "); ok {
						if got := strings.Join(strings.Fields(rest), " "); got != limits {
							return fmt.Errorf("%s: %s, want %s", name, got, limits)
						}
						delete(want, name)
					}
				}
			}
			if len(want) > 0 {
				return fmt.Errorf("missing from /proc/self/limits: %v", want)
			}
			return nil
		}},
	}
	runConfineChecks(cs)
}

// applySeccompNow assembles the filter and installs it, as a parent and its
// init do between them.
func applySeccompNow() error {
	prog, err := seccompProgram()
	if err != nil {
		return err
	}
	return applySeccomp(prog)
}
