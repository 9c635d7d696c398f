package sandbox

// The sandbox's init confines itself with the functions here just before it
// starts the command, which inherits every restriction: rlimits, Landlock and
// a seccomp filter. Each one covers the whole process, not only the calling
// thread, because the Go runtime runs on several threads and any of them may
// fork the command.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	seccomparch "github.com/elastic/go-seccomp-bpf/arch"
	"github.com/landlock-lsm/go-landlock/landlock"
	llsyscall "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// setRlimits sets the per-process limits of l, soft and hard alike, so the
// command cannot raise them again. l has its defaults applied.
//
// RLIMIT_CPU is only a backstop for a single process: the CPU budget of the
// whole run is enforced on its cgroup. It is one second over l.CPU so that the
// cgroup's watchdog, which names the violation, normally acts first.
func setRlimits(l Limits) error {
	if l.CPU <= 0 || l.FileSize <= 0 || l.OpenFiles <= 0 {
		return fmt.Errorf("setrlimit: limits without defaults: CPU %v, FileSize %d, OpenFiles %d", l.CPU, l.FileSize, l.OpenFiles)
	}
	cpu := uint64(math.Ceil(l.CPU.Seconds())) + 1
	limits := []struct {
		name     string
		resource int
		value    uint64
	}{
		{"RLIMIT_FSIZE", unix.RLIMIT_FSIZE, uint64(l.FileSize)},
		{"RLIMIT_NOFILE", unix.RLIMIT_NOFILE, uint64(l.OpenFiles)},
		{"RLIMIT_CORE", unix.RLIMIT_CORE, 0},
		{"RLIMIT_CPU", unix.RLIMIT_CPU, cpu},
	}
	for _, lim := range limits {
		// syscall.Setrlimit, not unix.Setrlimit: for RLIMIT_NOFILE it also
		// stops os/exec from restoring, in the child, the soft limit the Go
		// runtime found at startup.
		rl := syscall.Rlimit{Cur: lim.value, Max: lim.value}
		if err := syscall.Setrlimit(lim.resource, &rl); err != nil {
			return fmt.Errorf("setrlimit %s=%d: %w", lim.name, lim.value, err)
		}
	}
	return nil
}

// fsRules are the only file hierarchies the command may reach under
// Landlock. Paths that do not exist are skipped.
type fsRules struct {
	ReadOnlyDirs   []string // read files, list directories, execute
	ReadWriteDirs  []string // everything, including creating, removing and renaming
	ReadOnlyFiles  []string // read and execute
	ReadWriteFiles []string // read, execute, write and truncate
}

// landlockABIFunc is landlockABI; tests replace it to simulate a kernel
// without Landlock.
var landlockABIFunc = landlockABI

// landlockABI returns the Landlock ABI version of the running kernel. It
// fails when Landlock is not built in (ENOSYS) or not enabled at boot
// (EOPNOTSUPP).
func landlockABI() (int, error) {
	v, err := llsyscall.LandlockGetABIVersion()
	if err != nil {
		return 0, fmt.Errorf("landlock_create_ruleset(LANDLOCK_CREATE_RULESET_VERSION): %w", err)
	}
	return v, nil
}

// applyLandlock restricts the whole process, and whatever it starts later, to
// the file hierarchies of r, with the strongest Landlock ABI the kernel
// supports, up to V7. It leaves the network alone: the sandbox's network
// namespace is empty already, and a command may want a loopback server
// inside it. It does not scope IPC either: below ABI 8 go-landlock restricts
// each thread separately, which gives each thread its own domain, and a
// signal scope would then stop any thread of the init but the one that
// forked a command from signalling it. The namespaces already scope both:
// the PID namespace holds only the sandbox's processes, and abstract UNIX
// sockets belong to the (empty) network namespace.
//
// It fails closed: when the kernel has no Landlock at all it returns an
// error, where go-landlock's best-effort mode would silently restrict
// nothing.
//
// go-landlock applies the ruleset to every thread of the process: on ABI 8+
// with LANDLOCK_RESTRICT_SELF_TSYNC, below that by running prctl
// (PR_SET_NO_NEW_PRIVS) and landlock_restrict_self on each thread through
// libpsx, which without cgo (our build) is syscall.AllThreadsSyscall. With
// cgo, libpsx lists /proc/<pid>/task after the restriction, so go-landlock
// then adds that directory to the rules and needs /proc mounted.
func applyLandlock(r fsRules) error {
	abi, err := landlockABIFunc()
	if err != nil {
		return fmt.Errorf("landlock unavailable, refusing to run unconfined: %w", err)
	}
	if abi < 1 {
		return fmt.Errorf("landlock unavailable (ABI version %d), refusing to run unconfined", abi)
	}

	cfg := landlock.V7
	cfg.HandledAccessNet = 0
	cfg.Scoped = 0
	cfg = cfg.BestEffort()

	rw := landlock.RWDirs(r.ReadWriteDirs...).WithIoctlDev()
	if abi >= 2 {
		// On ABI 1 a rule asking for "refer" makes go-landlock's best
		// effort fall back to no restriction at all; there, renames
		// across directories stay denied instead.
		rw = rw.WithRefer()
	}
	rules := []landlock.Rule{
		landlock.RODirs(r.ReadOnlyDirs...).IgnoreIfMissing(),
		rw.IgnoreIfMissing(),
		landlock.ROFiles(r.ReadOnlyFiles...).IgnoreIfMissing(),
		landlock.RWFiles(r.ReadWriteFiles...).WithIoctlDev().IgnoreIfMissing(),
	}
	if err := cfg.Restrict(rules...); err != nil {
		return fmt.Errorf("landlock (ABI %d): %w", abi, err)
	}
	return nil
}

// seccompDenied are the system calls the command may not make at all: they
// reach the kernel's most exposed surfaces (namespaces, mounts, BPF, keys,
// io_uring, modules), other processes' memory, or the machine's state
// (clock, swap, reboot). They fail with EPERM.
var seccompDenied = []string{
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
	"mount", "umount2", "pivot_root", "chroot",
	"move_mount", "open_tree", "open_tree_attr", "fsopen", "fsmount", "fsconfig", "fspick", "mount_setattr",
	"unshare", "setns",
	"bpf", "perf_event_open", "userfaultfd",
	"keyctl", "add_key", "request_key",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"open_by_handle_at", "name_to_handle_at", "fanotify_init", "lookup_dcookie",
	"swapon", "swapoff", "reboot", "acct", "quotactl", "quotactl_fd", "syslog", "vhangup",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"iopl", "ioperm",
}

// cloneNamespaceFlags are the clone flags that create a namespace. clone with
// any of them fails with EPERM, as unshare does.
var cloneNamespaceFlags = []uint64{
	unix.CLONE_NEWNS, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC, unix.CLONE_NEWUSER,
	unix.CLONE_NEWPID, unix.CLONE_NEWNET, unix.CLONE_NEWCGROUP, unix.CLONE_NEWTIME,
}

// sIFCHR is the mode bit set in S_IFCHR and S_IFBLK and in no other file
// type that mknod accepts: FIFOs, sockets and regular files stay allowed.
const sIFCHR = unix.S_IFCHR

// seccompErrno is the action that makes a call fail with errno e.
func seccompErrno(e syscall.Errno) seccomp.Action {
	return seccomp.ActionErrno | seccomp.Action(e)
}

// seccompPolicy is the deny-list policy: everything not listed is allowed.
//
// go-seccomp-bpf ORs the NameWithConditions entries of one system call and
// ANDs the conditions within an entry, comparing all 64 bits of an argument.
func seccompPolicy() seccomp.Policy {
	eperm := seccompErrno(unix.EPERM)

	var conditioned []seccomp.NameWithConditions
	for _, flag := range cloneNamespaceFlags {
		conditioned = append(conditioned, seccomp.NameWithConditions{
			Name:       "clone",
			Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: flag}},
		})
	}
	conditioned = append(conditioned,
		// Only PER_LINUX and the query 0xffffffff (also as -1): the other
		// personalities turn off ASLR or change the ABI. A value with other
		// high bits set is refused, although the kernel would truncate it.
		seccomp.NameWithConditions{Name: "personality", Conditions: seccomp.ArgumentConditions{
			{Argument: 0, Operation: seccomp.NotEqual, Value: 0},
			{Argument: 0, Operation: seccomp.NotEqual, Value: 0xffffffff},
			{Argument: 0, Operation: seccomp.NotEqual, Value: math.MaxUint64},
		}},
		// TIOCSTI pushes input into a terminal, TIOCLINUX can too.
		seccomp.NameWithConditions{Name: "ioctl", Conditions: low32Equals(1, unix.TIOCSTI)},
		seccomp.NameWithConditions{Name: "ioctl", Conditions: low32Equals(1, unix.TIOCLINUX)},
		// Device nodes; mode is a umode_t, its low 16 bits matter.
		seccomp.NameWithConditions{Name: "mknod", Conditions: seccomp.ArgumentConditions{
			{Argument: 1, Operation: seccomp.BitsSet, Value: sIFCHR},
		}},
		seccomp.NameWithConditions{Name: "mknodat", Conditions: seccomp.ArgumentConditions{
			{Argument: 2, Operation: seccomp.BitsSet, Value: sIFCHR},
		}},
	)
	conditioned = append(conditioned, setIDModes()...)

	return seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Action: eperm, Names: seccompDenied, NamesWithCondtions: conditioned},
			// clone3 passes its flags in memory, which a filter cannot read,
			// and openat2 its mode. ENOSYS makes glibc and Go fall back to
			// clone and openat, filtered above.
			{Action: seccompErrno(unix.ENOSYS), Names: []string{"clone3", "openat2"}},
			// Only AF_UNSPEC, AF_UNIX, AF_INET and AF_INET6. family is an
			// int; any value with high bits set is above 10, so refused.
			{Action: seccompErrno(unix.EAFNOSUPPORT), NamesWithCondtions: []seccomp.NameWithConditions{
				{Name: "socket", Conditions: seccomp.ArgumentConditions{
					{Argument: 0, Operation: seccomp.GreaterThan, Value: unix.AF_INET6},
				}},
				{Name: "socket", Conditions: seccomp.ArgumentConditions{
					{Argument: 0, Operation: seccomp.GreaterThan, Value: unix.AF_INET},
					{Argument: 0, Operation: seccomp.LessThan, Value: unix.AF_INET6},
				}},
			}},
		},
	}
}

// setIDBits are the mode bits that make a file run as its owner or group.
const setIDBits = unix.S_ISUID | unix.S_ISGID

// createFlags are the open flags with which open takes a mode: O_CREAT,
// and O_TMPFILE (its own bit, without O_DIRECTORY).
const createFlags = unix.O_CREAT | (unix.O_TMPFILE &^ unix.O_DIRECTORY)

// setIDModes refuse every way of giving a file the setuid or setgid bit:
// chmod and its kin, creation with such a mode, mknod of a regular file.
// In a workspace that keeps its host owner (an idmapped mount), such a
// file would be setuid to that owner on the host, root's for a root-owned
// project: the sandbox's nosuid mount protects the sandbox, not the host.
// openat2, whose mode is in memory a filter cannot read, answers ENOSYS
// (see seccompPolicy); libraries fall back to openat.
func setIDModes() []seccomp.NameWithConditions {
	mode := func(name string, arg uint32) seccomp.NameWithConditions {
		return seccomp.NameWithConditions{Name: name, Conditions: seccomp.ArgumentConditions{
			{Argument: arg, Operation: seccomp.BitsSet, Value: setIDBits},
		}}
	}
	create := func(name string, flagsArg, modeArg uint32) seccomp.NameWithConditions {
		return seccomp.NameWithConditions{Name: name, Conditions: seccomp.ArgumentConditions{
			{Argument: flagsArg, Operation: seccomp.BitsSet, Value: createFlags},
			{Argument: modeArg, Operation: seccomp.BitsSet, Value: setIDBits},
		}}
	}
	return []seccomp.NameWithConditions{
		mode("chmod", 1), mode("fchmod", 1), mode("fchmodat", 2), mode("fchmodat2", 2),
		mode("creat", 1), mode("mknod", 1), mode("mknodat", 2),
		create("open", 1, 2), create("openat", 2, 3),
	}
}

// low32Equals matches when the low 32 bits of argument arg equal v, whatever
// the high 32 bits hold. The kernel truncates an unsigned int argument such
// as ioctl's request, so comparing all 64 bits (go-seccomp-bpf's Equal) could
// be bypassed by setting high bits. go-seccomp-bpf's BitsSet and BitsNotSet
// look at the high word only where the value has high bits, so: no bit
// outside v is set, and each bit of v is.
func low32Equals(arg uint32, v uint32) seccomp.ArgumentConditions {
	c := seccomp.ArgumentConditions{{Argument: arg, Operation: seccomp.BitsNotSet, Value: uint64(^v)}}
	for bit := uint32(1); bit != 0; bit <<= 1 {
		if v&bit != 0 {
			c = append(c, seccomp.Condition{Argument: arg, Operation: seccomp.BitsSet, Value: uint64(bit)})
		}
	}
	return c
}

// Offsets in struct seccomp_data { int nr; __u32 arch; __u64
// instruction_pointer; __u64 args[6]; }, what a filter reads.
const (
	seccompDataNr   = 0
	seccompDataArch = 4
	seccompDataArgs = 16
)

// seccompFilter assembles the filter that applySeccomp installs.
//
// go-seccomp-bpf checks the arch field, but a call from another architecture
// (an i386 int 0x80 on x86-64, or arm32 on arm64) jumps to the policy's
// default action, which for this deny list is "allow": such calls would
// bypass every rule, since their numbers differ. So the filter starts with
// its own check that kills the process on any foreign arch. The library's
// part also refuses every x32 call (same arch as x86-64, number with bit 30
// set) with ENOSYS.
func seccompFilter() ([]bpf.Instruction, error) {
	native, err := seccomparch.GetInfo("")
	if err != nil {
		return nil, err
	}
	policy := seccompPolicy()
	insts, err := policy.Assemble()
	if err != nil {
		return nil, err
	}
	guard := []bpf.Instruction{
		bpf.LoadAbsolute{Off: seccompDataArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(native.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(seccomp.ActionKillProcess)},
	}
	return append(guard, insts...), nil
}

// seccompAvailable reports whether the kernel can run applySeccomp's filter:
// seccomp in filter mode with the actions it uses.
func seccompAvailable() error {
	if _, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("seccomp unavailable: prctl(PR_GET_SECCOMP): %w", err)
	}
	for _, action := range []uint32{unix.SECCOMP_RET_ALLOW, unix.SECCOMP_RET_ERRNO, unix.SECCOMP_RET_KILL_PROCESS} {
		_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action)))
		if errno != 0 {
			return fmt.Errorf("seccomp filter action %#x unavailable: %w", action, errno)
		}
	}
	return nil
}

// seccompProgram is the filter applySeccomp installs, as the kernel takes
// it: struct sock_filter after struct sock_filter, in native byte order. The
// parent assembles it once per process and hands it to each init with its
// spec, so that no init spends its start on it (go-seccomp-bpf's assembly
// is about 0.15 ms); the init is the same binary on the same machine.
var seccompProgram = sync.OnceValues(func() ([]byte, error) {
	insts, err := seccompFilter()
	if err != nil {
		return nil, fmt.Errorf("seccomp: assemble filter: %w", err)
	}
	raw, err := bpf.Assemble(insts)
	if err != nil {
		return nil, fmt.Errorf("seccomp: assemble filter: %w", err)
	}
	if len(raw) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp: filter has %d instructions, the kernel takes %d", len(raw), unix.BPF_MAXINSNS)
	}
	b := make([]byte, 0, len(raw)*sizeofSockFilter)
	for _, in := range raw {
		b = binary.NativeEndian.AppendUint16(b, in.Op)
		b = append(b, in.Jt, in.Jf)
		b = binary.NativeEndian.AppendUint32(b, in.K)
	}
	return b, nil
})

// sizeofSockFilter is the size of a struct sock_filter.
const sizeofSockFilter = int(unsafe.Sizeof(unix.SockFilter{}))

// applySeccomp sets no_new_privs and installs the deny-list filter, as
// seccompProgram made it, on every thread of the process
// (SECCOMP_FILTER_FLAG_TSYNC). The filter is loaded here rather than with
// go-seccomp-bpf's LoadFilter for two reasons: the arch guard (see
// seccompFilter), and TSYNC's failure mode, where seccomp returns the ID of
// a thread it could not synchronize instead of an error, which LoadFilter
// would take for success.
func applySeccomp(program []byte) error {
	n := len(program) / sizeofSockFilter
	if n == 0 || n > unix.BPF_MAXINSNS || len(program)%sizeofSockFilter != 0 {
		return fmt.Errorf("seccomp: a filter of %d bytes is no filter of 1 to %d instructions", len(program), unix.BPF_MAXINSNS)
	}
	prog := make([]unix.SockFilter, n)
	for i := range prog {
		b := program[i*sizeofSockFilter:]
		prog[i] = unix.SockFilter{Code: binary.NativeEndian.Uint16(b), Jt: b[2], Jf: b[3], K: binary.NativeEndian.Uint32(b[4:])}
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}

	// no_new_privs must be set on the thread that installs the filter (we
	// hold no CAP_SYS_ADMIN); TSYNC then copies it to the other threads.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("seccomp: prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	tid, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		if errors.Is(errno, unix.ENOSYS) {
			return fmt.Errorf("seccomp: filters not supported by the kernel: %w", errno)
		}
		return fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER, TSYNC): %w", errno)
	}
	if tid != 0 {
		return fmt.Errorf("seccomp: thread %d could not be synchronized to the filter", tid)
	}
	return nil
}
