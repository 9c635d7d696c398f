package sandbox

// The attacker's side of the escape suite (escape_linux_test.go): the
// machinery every attack shares, and the attacks that take more than one
// line. Each attack runs inside a sandbox as the test binary's "attack"
// child, makes its attack with direct system calls and prints one verdict
// line: "BLOCKED <detail>" when it failed, as it must, or "ESCAPED <detail>".
// What an attack cannot see from inside (sentinel files, listeners, orphans)
// the host side judges.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func init() { testChildren["attack"] = runAttack }

// attackEnv is what an attack knows of the host: paths and values, passed in
// the command's environment. The point is that none of them is reachable.
type attackEnv struct {
	ws        string   // the workspace: /workspace inside, a host directory in TestEscapeSuiteCanFail
	nonce     string   // unique to the case: names the files it creates, marks its processes
	data      string   // the server's data directory
	other     string   // another agent's workspace
	sibling   string   // a host file next to the workspace
	parent    string   // the workspace's host parent
	sentinel  string   // a host file outside /tmp
	canaries  []string // values of the server's secret environment variables
	hostPID   int      // the test process
	hostPGID  int      // its process group
	sleepPID  int      // a host process of the sandbox's own host uid
	otherPID  int      // a command in another run's session, by its host pid
	tcp       string   // a TCP listener on the host's 127.0.0.1
	tcp6      string   // one on the host's ::1, "" if none
	hostTCP   string   // one on the host's network address, "" if none
	udp       string   // a UDP socket on the host's 127.0.0.1
	abstract  string   // a host abstract UNIX socket (without the "@")
	unixSock  string   // a host UNIX socket by path
	suid      []string // the host's setuid-root files
	devices   []string // the host's device nodes that the sandbox does not provide
	blockDevs []string // the host's block devices
	shmKey    int      // the key of a host SysV shared memory segment
}

// The environment variables of attackEnv. The canaries travel hex-encoded,
// so that their values appear nowhere in the command's environment.
func (e *attackEnv) environ() []string {
	var hexed []string
	for _, c := range e.canaries {
		hexed = append(hexed, hex.EncodeToString([]byte(c)))
	}
	kv := []string{
		"ESC_NONCE=" + e.nonce, "ESC_DATA=" + e.data, "ESC_OTHER=" + e.other,
		"ESC_SIBLING=" + e.sibling, "ESC_PARENT=" + e.parent, "ESC_SENTINEL=" + e.sentinel,
		"ESC_CANARIES=" + strings.Join(hexed, ","),
		"ESC_HOSTPID=" + strconv.Itoa(e.hostPID), "ESC_HOSTPGID=" + strconv.Itoa(e.hostPGID),
		"ESC_SLEEPPID=" + strconv.Itoa(e.sleepPID), "ESC_OTHERPID=" + strconv.Itoa(e.otherPID),
		"ESC_TCP=" + e.tcp, "ESC_TCP6=" + e.tcp6, "ESC_HOSTTCP=" + e.hostTCP, "ESC_UDP=" + e.udp,
		"ESC_ABSTRACT=" + e.abstract, "ESC_UNIX=" + e.unixSock,
		"ESC_SUID=" + strings.Join(e.suid, ":"), "ESC_DEVICES=" + strings.Join(e.devices, ":"),
		"ESC_BLOCKDEVS=" + strings.Join(e.blockDevs, ":"), "ESC_SHMKEY=" + strconv.Itoa(e.shmKey),
	}
	if e.ws != "" {
		kv = append(kv, "ESC_WS="+e.ws)
	}
	return kv
}

func loadAttackEnv() *attackEnv {
	g := os.Getenv
	list := func(s, sep string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, sep)
	}
	num := func(s string) int { n, _ := strconv.Atoi(g(s)); return n }
	e := &attackEnv{
		ws: g("ESC_WS"), nonce: g("ESC_NONCE"), data: g("ESC_DATA"), other: g("ESC_OTHER"),
		sibling: g("ESC_SIBLING"), parent: g("ESC_PARENT"), sentinel: g("ESC_SENTINEL"),
		shmKey: num("ESC_SHMKEY"), hostPID: num("ESC_HOSTPID"), hostPGID: num("ESC_HOSTPGID"), sleepPID: num("ESC_SLEEPPID"), otherPID: num("ESC_OTHERPID"),
		tcp: g("ESC_TCP"), tcp6: g("ESC_TCP6"), hostTCP: g("ESC_HOSTTCP"), udp: g("ESC_UDP"),
		abstract: g("ESC_ABSTRACT"), unixSock: g("ESC_UNIX"),
		suid: list(g("ESC_SUID"), ":"), devices: list(g("ESC_DEVICES"), ":"), blockDevs: list(g("ESC_BLOCKDEVS"), ":"),
	}
	if e.ws == "" {
		e.ws = insideWorkspace
	}
	for _, h := range list(g("ESC_CANARIES"), ",") {
		b, _ := hex.DecodeString(h)
		e.canaries = append(e.canaries, string(b))
	}
	return e
}

// in is a path in the workspace.
func (e *attackEnv) in(name string) string { return filepath.Join(e.ws, name) }

// mine is a file name unique to the case, which the host looks for after it.
func (e *attackEnv) mine(suffix string) string { return "corral-escape-" + e.nonce + suffix }

// verdict is an attack's outcome. unsure is for an attack that could not
// tell; it fails the case without claiming an escape.
type verdict struct {
	escaped, unsure bool
	detail          string
}

func blockedf(format string, a ...any) verdict { return verdict{detail: fmt.Sprintf(format, a...)} }

func escapedf(format string, a ...any) verdict {
	return verdict{escaped: true, detail: fmt.Sprintf(format, a...)}
}

// runAttack is the "attack" test child: it runs the attack or helper named
// by $ATTACK and prints its verdict.
func runAttack() {
	name := os.Getenv("ATTACK")
	if h, ok := attackHelpers[name]; ok {
		h()
		return
	}
	for _, c := range escapeCases() {
		if c.name != name {
			continue
		}
		v := c.attack(loadAttackEnv())
		word := "BLOCKED"
		switch {
		case v.escaped:
			word = "ESCAPED"
		case v.unsure:
			word = "UNSURE"
		}
		fmt.Printf("%s %s\n", word, strings.ReplaceAll(v.detail, "\n", " "))
		return
	}
	fmt.Printf("unknown attack %q\n", name)
	os.Exit(3)
}

// A step is one attempt of an attack; every step must fail.
type step struct {
	what string
	do   func() error
}

type attack func(e *attackEnv) verdict

// fails is the attack whose every step must fail: the first that succeeds
// is an escape.
func fails(steps func(e *attackEnv) []step) attack {
	return func(e *attackEnv) verdict {
		var seen []string
		for _, s := range steps(e) {
			err := s.do()
			if err == nil {
				return escapedf("%s succeeded", s.what)
			}
			seen = append(seen, s.what+": "+errName(err))
		}
		return blockedf("%s", strings.Join(seen, "; "))
	}
}

// errName names an error by its errno when it has one.
func errName(err error) string {
	var en syscall.Errno
	if errors.As(err, &en) {
		if n := unix.ErrnoName(en); n != "" {
			return n
		}
	}
	return err.Error()
}

// rawErr turns a raw system call's errno into an error, nil for 0.
func rawErr(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func call(what string, f func() error) step { return step{what, f} }

// cstr is s as a NUL-terminated C string.
func cstr(s string) *byte {
	p, err := unix.BytePtrFromString(s)
	if err != nil {
		panic(err)
	}
	return p
}

// makeSetID tries every way of giving a file under base the setuid or
// setgid bit. The file it starts from is made first, with plain modes.
func makeSetID(base string) []step {
	plain := base + "-plain"
	if fd, err := unix.Open(plain, unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o755); err == nil {
		unix.Close(fd)
	}
	fchmod := func(mode uint32) error {
		fd, err := unix.Open(plain, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Fchmod(fd, mode)
	}
	create := func(name string, flags int, mode uint32) error {
		fd, err := unix.Open(name, flags|unix.O_CLOEXEC, mode)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}
	return []step{
		call("chmod(4755)", func() error { return unix.Chmod(plain, 0o4755) }),
		call("chmod(2755)", func() error { return unix.Chmod(plain, 0o2755) }),
		call("fchmod(6755)", func() error { return fchmod(0o6755) }),
		call("fchmodat(4755)", func() error { return unix.Fchmodat(unix.AT_FDCWD, plain, 0o4755, 0) }),
		call("fchmodat2(4755)", func() error {
			_, _, e := unix.Syscall6(452, atFDCWD, uintptr(unsafe.Pointer(cstr(plain))), 0o4755, 0, 0, 0)
			return rawErr(e)
		}),
		call("open(O_CREAT, 4755)", func() error { return create(base+"-open", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o4755) }),
		call("open(O_CREAT, 2755)", func() error { return create(base+"-open2", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o2755) }),
		call("open(O_TMPFILE, 4755)", func() error { return create(filepath.Dir(base), unix.O_WRONLY|unix.O_TMPFILE, 0o4755) }),
		call("creat(4755)", func() error {
			_, _, e := unix.Syscall(unix.SYS_CREAT, uintptr(unsafe.Pointer(cstr(base+"-creat"))), 0o4755, 0)
			return rawErr(e)
		}),
		call("mknod(S_IFREG|4755)", func() error { return unix.Mknod(base+"-mknod", unix.S_IFREG|0o4755, 0) }),
		call("openat2(O_CREAT, 4755)", func() error {
			how := unix.OpenHow{Flags: unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL, Mode: 0o4755}
			fd, err := unix.Openat2(unix.AT_FDCWD, base+"-openat2", &how)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}),
	}
}

// openFor opens path and closes it at once: it writes nothing, so that an
// escape through it damages nothing on the host.
func openFor(path string, flags int) step {
	return call(fmt.Sprintf("open(%s, %s)", path, flagNames(flags)), func() error {
		fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0o666)
		if err == nil {
			unix.Close(fd)
		}
		return err
	})
}

// writeTo opens path and writes data: for the test's own files only.
func writeTo(path string, flags int, data string) step {
	return call(fmt.Sprintf("write(%s, %s)", path, flagNames(flags)), func() error {
		fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0o666)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		_, err = unix.Write(fd, []byte(data))
		return err
	})
}

func readFile(path string) step {
	return call("read "+path, func() error { _, err := os.ReadFile(path); return err })
}

func readDir(path string) step {
	return call("list "+path, func() error { _, err := os.ReadDir(path); return err })
}

func flagNames(flags int) string {
	names := []string{[]string{"O_RDONLY", "O_WRONLY", "O_RDWR"}[flags&unix.O_ACCMODE]}
	if flags&unix.O_TMPFILE == unix.O_TMPFILE {
		names = append(names, "O_TMPFILE")
	}
	for _, f := range []struct {
		bit  int
		name string
	}{{unix.O_CREAT, "O_CREAT"}, {unix.O_EXCL, "O_EXCL"}, {unix.O_TRUNC, "O_TRUNC"}, {unix.O_APPEND, "O_APPEND"}, {unix.O_PATH, "O_PATH"}} {
		if flags&f.bit != 0 {
			names = append(names, f.name)
		}
	}
	return strings.Join(names, "|")
}

// viaFD opens path with O_PATH and returns /proc/self/fd/N, a second name
// for the same file; the descriptor stays open for the attack's life.
func viaFD(path string) string {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return path + " (O_PATH: " + errName(err) + ")"
	}
	return fmt.Sprintf("/proc/self/fd/%d", fd)
}

func mkdirStep(path string) step {
	return call("mkdir "+path, func() error { return unix.Mkdir(path, 0o755) })
}

func linkStep(oldpath, newpath string) step {
	return call("link "+oldpath+" to "+newpath, func() error { return unix.Link(oldpath, newpath) })
}

func renameStep(oldpath, newpath string) step {
	return call("rename "+oldpath+" to "+newpath, func() error { return unix.Rename(oldpath, newpath) })
}

func mknodStep(path string, typ uint32, major, minor uint32) step {
	return call(fmt.Sprintf("mknod %s %#o %d:%d", path, typ, major, minor), func() error {
		return unix.Mknodat(unix.AT_FDCWD, path, typ|0o666, int(unix.Mkdev(major, minor)))
	})
}

func openEach(paths []string, flags int) []step {
	var steps []step
	for _, p := range paths {
		steps = append(steps, openFor(p, flags))
	}
	return steps
}

func socketStep(family, typ, proto int) step {
	return call(fmt.Sprintf("socket(%d, %d, %d)", family, typ, proto), func() error {
		fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC, proto)
		if err == nil {
			unix.Close(fd)
		}
		return err
	})
}

func dialStep(network, addr string) step {
	return call("connect "+network+" "+addr, func() error {
		c, err := net.DialTimeout(network, addr, 3*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
}

func killStep(pid int, sig syscall.Signal, who string) step {
	return call(fmt.Sprintf("kill(%s, %d)", who, sig), func() error { return unix.Kill(pid, sig) })
}

// self is the attack binary, to start helpers and copies of the attack.
func self() string {
	p, err := os.Executable()
	if err != nil {
		return "/proc/self/exe"
	}
	return p
}

// helper starts the attack binary as the named helper.
func helper(name string) *exec.Cmd {
	cmd := exec.Command(self(), "-test.run=^$")
	cmd.Env = append(os.Environ(), "ATTACK="+name)
	return cmd
}

// attackHelpers are the processes attacks start: they print no verdict.
var attackHelpers = map[string]func(){
	// helper:sleeper sleeps, deaf to the signals that ask it to end.
	"helper:sleeper": func() {
		signal.Ignore(syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
		time.Sleep(10 * time.Minute)
	},
	// helper:daemon is the middle of a double fork: it starts a sleeper in
	// a new session, marked in argv[0] and its environment with the case's
	// nonce, prints its pid and exits, leaving it an orphan.
	"helper:daemon": func() {
		cmd := helper("helper:sleeper")
		cmd.Args[0] = "corral-orphan-" + os.Getenv("ESC_NONCE")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			fmt.Println("error", err)
			return
		}
		fmt.Println(cmd.Process.Pid)
	},
	// helper:status prints its own credentials, for the setuid attacks.
	"helper:status": func() {
		b, _ := os.ReadFile("/proc/self/status")
		os.Stdout.Write(b)
	},
	// helper:fork-bomb forks copies of itself without end.
	"helper:fork-bomb": forkBomb,
}

// withChild runs f with the pid of a sleeping child of the attack, which it
// kills afterwards.
func withChild(f func(pid int) error) error {
	cmd := helper("helper:sleeper")
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start child: %w", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	return f(cmd.Process.Pid)
}

// startWith starts /bin/true with attr: for the namespace attacks that
// clone or unshare, which the multi-threaded Go runtime cannot do in place.
func startWith(attr *syscall.SysProcAttr) error {
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		return err
	}
	return cmd.Wait()
}

// Writes outside the workspace.

// setClock sets the host's clock to the time it already has.
func setClock() []step {
	return []step{
		call("clock_settime(CLOCK_REALTIME)", func() error {
			var ts unix.Timespec
			unix.ClockGettime(unix.CLOCK_REALTIME, &ts)
			return unix.ClockSettime(unix.CLOCK_REALTIME, &ts)
		}),
		call("settimeofday", func() error { var tv unix.Timeval; unix.Gettimeofday(&tv); return unix.Settimeofday(&tv) }),
		call("adjtimex(ADJ_OFFSET 0)", func() error { _, err := unix.Adjtimex(&unix.Timex{Modes: unix.ADJ_OFFSET}); return err }),
	}
}

// privateTmp writes in /tmp, which must be the sandbox's own tmpfs; the
// host checks its own /tmp did not get the file.
func privateTmp(e *attackEnv) verdict {
	p := "/tmp/" + e.mine("")
	if err := os.WriteFile(p, []byte("escaped\n"), 0o644); err != nil {
		return verdict{unsure: true, detail: "write " + p + ": " + errName(err)}
	}
	var st unix.Statfs_t
	if err := unix.Statfs("/tmp", &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		return escapedf("/tmp is not a private tmpfs: type %#x, %v", st.Type, err)
	}
	return blockedf("wrote %s on the sandbox's own tmpfs; the host checks its /tmp", p)
}

// Writes in a read-only workspace.

func ftruncateRO(path string) step {
	return call("ftruncate of a read-only descriptor", func() error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		return unix.Ftruncate(int(f.Fd()), 0)
	})
}

// mmapShared maps a file of the read-only workspace shared and writable
// through a read-only descriptor, writes and msyncs.
func mmapShared(path string) step {
	return call("mmap(PROT_WRITE, MAP_SHARED) then msync of "+path, func() error {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open for reading: %w", err)
		}
		defer unix.Close(fd)
		b, err := unix.Mmap(fd, 0, 8, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			return err
		}
		defer unix.Munmap(b)
		copy(b, "ESCAPED!")
		return unix.Msync(b, unix.MS_SYNC)
	})
}

func bindUnix(path string) step {
	return call("bind a UNIX socket at "+path, func() error {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Bind(fd, &unix.SockaddrUnix{Name: path})
	})
}

func moveInFromTmp(e *attackEnv) step {
	return call("rename a file of /tmp into the workspace", func() error {
		src := "/tmp/" + e.mine("-src")
		if err := os.WriteFile(src, []byte("escaped\n"), 0o644); err != nil {
			return fmt.Errorf("setup: %w", err)
		}
		return unix.Rename(src, e.in(e.mine("")))
	})
}

// Symlink and hard-link escapes.

// symlinkThen makes link -> target in the workspace, then runs steps on it.
func symlinkThen(target func(e *attackEnv) string, steps func(link string) []step) attack {
	return func(e *attackEnv) verdict {
		link := e.in(e.mine("-link"))
		if err := os.Symlink(target(e), link); err != nil {
			return verdict{unsure: true, detail: "symlink: " + errName(err)}
		}
		return fails(func(*attackEnv) []step { return steps(link) })(e)
	}
}

// linkThroughFD links a file the attack holds open into the workspace.
func linkThroughFD(e *attackEnv) []step {
	fd, _ := unix.Open("/usr/bin/env", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	return []step{
		call("linkat(fd of /usr/bin/env, AT_EMPTY_PATH)", func() error {
			return unix.Linkat(fd, "", unix.AT_FDCWD, e.in(e.mine("")), unix.AT_EMPTY_PATH)
		}),
		call("linkat(/proc/self/fd/N, AT_SYMLINK_FOLLOW)", func() error {
			return unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), unix.AT_FDCWD, e.in(e.mine("2")), unix.AT_SYMLINK_FOLLOW)
		}),
	}
}

func openatDotDot(e *attackEnv) step {
	return call("openat(workspace, ../../..)", func() error {
		dir, err := unix.Open(e.ws, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(dir)
		fd, err := unix.Openat(dir, strings.Repeat("../", 16)+e.sibling[1:], unix.O_RDONLY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		return err
	})
}

func openat2Escape(e *attackEnv) []step {
	dir, _ := unix.Open(e.ws, unix.O_PATH|unix.O_CLOEXEC, 0)
	open := func(path string, resolve uint64) step {
		return call(fmt.Sprintf("openat2(%s, resolve %#x)", path, resolve), func() error {
			fd, err := unix.Openat2(dir, path, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC, Resolve: resolve})
			unix.Close(fd)
			return err
		})
	}
	up := "../" + filepath.Base(e.sibling)
	return []step{open(up, unix.RESOLVE_BENEATH), open(up, 0), open(e.sibling, unix.RESOLVE_IN_ROOT), open(e.sibling, 0)}
}

// openByHandle is the "shocker" attack: a file handle for inode 2, the
// root of an ext4 file system, opened relative to the workspace's mount.
func openByHandle(e *attackEnv) step {
	return call("open_by_handle_at(inode 2 of the workspace's file system)", func() error {
		dir, err := unix.Open(e.ws, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(dir)
		h := make([]byte, 8) // FILEID_INO32_GEN: inode, generation
		binary.NativeEndian.PutUint32(h, 2)
		fd, err := unix.OpenByHandleAt(dir, unix.NewFileHandle(1, h), unix.O_RDONLY)
		unix.Close(fd)
		return err
	})
}

// Reading the host.

// canaryIn names the canary found in b, or "". With names, the variables'
// names count too (not in memory, where the binary's own text holds them).
func (e *attackEnv) canaryIn(b []byte, names bool) string {
	for _, c := range e.canaries {
		if c != "" && bytes.Contains(b, []byte(c)) {
			return "value " + c
		}
	}
	if names {
		for _, n := range escapeCanaryNames {
			if bytes.Contains(b, []byte(n+"=")) {
				return "variable " + n
			}
		}
	}
	return ""
}

// canariesIn reads each file and looks for the canaries.
func canariesIn(files func(e *attackEnv) []string) attack {
	return func(e *attackEnv) verdict {
		read := 0
		for _, f := range files(e) {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			read++
			if c := e.canaryIn(b, true); c != "" {
				return escapedf("%s holds the canary %s", f, c)
			}
		}
		for _, kv := range os.Environ() {
			if c := e.canaryIn([]byte(kv), true); c != "" {
				return escapedf("the command's environment holds the canary %s", c)
			}
		}
		if read == 0 {
			// The init is not dumpable, so its /proc files are closed to the
			// command: nothing to read is the strongest answer.
			return blockedf("none of %d files could be read", len(files(e)))
		}
		return blockedf("no canary in %d files nor in the environment", read)
	}
}

func procFiles(names ...string) []string {
	var files []string
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		if _, err := strconv.Atoi(d.Name()); err == nil {
			for _, n := range names {
				files = append(files, "/proc/"+d.Name()+"/"+n)
			}
		}
	}
	return files
}

// initMemoryCanaries reads every readable mapping of the sandbox's init
// through /proc/1/mem and looks for the canaries' values.
func initMemoryCanaries(e *attackEnv) verdict {
	maps, err := os.ReadFile("/proc/1/maps")
	if err != nil {
		return blockedf("read /proc/1/maps: %s", errName(err))
	}
	mem, err := os.Open("/proc/1/mem")
	if err != nil {
		return blockedf("open /proc/1/mem: %s", errName(err))
	}
	defer mem.Close()
	var total int64
	buf := make([]byte, 1<<20)
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[1][0] != 'r' {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start, _ := strconv.ParseUint(lo, 16, 64)
		end, _ := strconv.ParseUint(hi, 16, 64)
		for off := start; off < end && total < 512<<20; off += uint64(len(buf)) {
			n, _ := mem.ReadAt(buf[:min(uint64(len(buf)), end-off)], int64(off))
			total += int64(n)
			if c := e.canaryIn(buf[:n], false); c != "" {
				return escapedf("the init's memory at %#x holds the canary %s", off, c)
			}
		}
	}
	return blockedf("no canary in %d bytes of the init's memory", total)
}

// hostProcesses lists /proc: only the init and the attack may be there.
func hostProcesses(e *attackEnv) verdict {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return blockedf("list /proc: %s", errName(err))
	}
	var pids []string
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		cmd := strings.ReplaceAll(string(cmdline), "\x00", " ")
		pids = append(pids, d.Name())
		if pid != 1 && pid != os.Getpid() || pid == 1 && !strings.HasPrefix(cmd, "corral-sandbox "+InitArg) {
			return escapedf("process %d (%q) is visible", pid, cmd)
		}
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", e.hostPID)); err == nil && e.hostPID > 1 && e.hostPID != os.Getpid() {
		return escapedf("the test process %d is visible", e.hostPID)
	}
	return blockedf("only pids %s are visible: the init and the attack", strings.Join(pids, ", "))
}

// leakedFDs looks for descriptors the command got without asking: a
// descriptor without close-on-exec above 2 came through exec from outside.
func leakedFDs(e *attackEnv) verdict {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return verdict{unsure: true, detail: "list /proc/self/fd: " + errName(err)}
	}
	var leaks []string
	for _, d := range ents {
		fd, _ := strconv.Atoi(d.Name())
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if fd <= 2 || err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue
		}
		target, _ := os.Readlink("/proc/self/fd/" + d.Name())
		buf := make([]byte, 48)
		n, rerr := unix.Pread(fd, buf, 0)
		what := fmt.Sprintf("fd %d -> %s", fd, target)
		if rerr == nil && n > 0 {
			what += fmt.Sprintf(" reads %q", buf[:n])
		}
		leaks = append(leaks, what)
	}
	if len(leaks) > 0 {
		return escapedf("descriptors inherited from outside the sandbox: %s", strings.Join(leaks, "; "))
	}
	return blockedf("no descriptor above 2 came through exec")
}

// mountTable reads the mount table: no server path may show in it.
func mountTable(e *attackEnv) verdict {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return blockedf("read mountinfo: %s", errName(err))
	}
	for _, p := range []string{e.data, e.other, e.sentinel, e.sibling, "/oldroot"} {
		if p != "" && bytes.Contains(b, []byte(p)) {
			return escapedf("the mount table shows %s", p)
		}
	}
	note := ""
	if bytes.Contains(b, []byte(e.parent)) {
		note = " (it does show the workspace's own host path)"
	}
	return blockedf("no server path in %d lines of mountinfo%s", bytes.Count(b, []byte("\n")), note)
}

// initFiles reopens, through /proc/1/fd, every file and pipe the sandbox's
// init holds that the attack does not hold itself.
func initFiles(e *attackEnv) verdict {
	own := map[string]bool{}
	for _, fd := range []string{"0", "1", "2"} {
		t, _ := os.Readlink("/proc/self/fd/" + fd)
		own[t] = true
	}
	ents, err := os.ReadDir("/proc/1/fd")
	if err != nil {
		return blockedf("list /proc/1/fd: %s", errName(err))
	}
	var seen []string
	for _, d := range ents {
		t, _ := os.Readlink("/proc/1/fd/" + d.Name())
		if own[t] || strings.HasPrefix(t, "anon_inode:") || t == "/dev/null" {
			continue
		}
		for _, flags := range []int{unix.O_RDONLY, unix.O_WRONLY} {
			fd, err := unix.Open("/proc/1/fd/"+d.Name(), flags|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
			if err == nil {
				unix.Close(fd)
				return escapedf("reopened the init's fd %s (%s) %s", d.Name(), t, flagNames(flags))
			}
			seen = append(seen, fmt.Sprintf("%s (%s) %s: %s", d.Name(), t, flagNames(flags), errName(err)))
		}
	}
	return blockedf("%s", strings.Join(append(seen, "nothing else held"), "; "))
}

func sysvShm(key int) step {
	return call(fmt.Sprintf("shmget(%#x)", key), func() error {
		id, err := unix.SysvShmGet(key, 0, 0)
		if err == nil {
			_, err = unix.SysvShmAttach(id, 0, unix.SHM_RDONLY)
		}
		return err
	})
}

func keyrings() []step {
	var steps []step
	for _, k := range []struct {
		name string
		id   int
	}{{"session", unix.KEY_SPEC_SESSION_KEYRING}, {"user", unix.KEY_SPEC_USER_KEYRING}} {
		steps = append(steps, call("keyctl(KEYCTL_READ, @"+k.name+")", func() error {
			_, err := unix.KeyctlBuffer(unix.KEYCTL_READ, k.id, make([]byte, 256), 0)
			return err
		}))
	}
	return append(steps, call("add_key(user)", func() error {
		_, err := unix.AddKey("user", "corral-escape", []byte("x"), unix.KEY_SPEC_USER_KEYRING)
		return err
	}))
}

// ptrace and process_vm.

// ptraceChild attaches to a child of the attack, and detaches if it could.
func ptraceChild(seize bool) error {
	return withChild(func(pid int) error {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var err error
		if seize {
			err = unix.PtraceSeize(pid)
		} else {
			err = unix.PtraceAttach(pid)
		}
		if err == nil {
			var ws unix.WaitStatus
			unix.Wait4(pid, &ws, unix.WALL, nil)
			unix.PtraceDetach(pid)
		}
		return err
	})
}

// processVM reads (or writes back) 8 bytes of the first mapping of pid.
func processVM(pid int, write bool) error {
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return fmt.Errorf("maps: %w", err)
	}
	lo, _, _ := strings.Cut(string(maps), "-")
	addr, _ := strconv.ParseUint(lo, 16, 64)
	buf := make([]byte, 8)
	local := []unix.Iovec{{Base: &buf[0], Len: 8}}
	remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: 8}}
	if write {
		_, err = unix.ProcessVMWritev(pid, local, remote, 0)
	} else {
		_, err = unix.ProcessVMReadv(pid, local, remote, 0)
	}
	return err
}

// pidfdGetfd takes a copy of pid's standard input.
func pidfdGetfd(pid int) step {
	return call(fmt.Sprintf("pidfd_getfd(pidfd_open(%d), 0)", pid), func() error {
		pfd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			return fmt.Errorf("pidfd_open: %w", err)
		}
		defer unix.Close(pfd)
		fd, err := unix.PidfdGetfd(pfd, 0, 0)
		unix.Close(fd)
		return err
	})
}

// Mount, unshare, setns.

func mountTmpfs(dir string) step {
	return call("mount -t tmpfs "+dir, func() error {
		os.Mkdir(dir, 0o755)
		err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m")
		if err == nil {
			unix.Unmount(dir, unix.MNT_DETACH)
		}
		return err
	})
}

// namespaces starts a child in each new namespace, by clone or unshare.
func namespaces(clone bool, flags ...uintptr) []step {
	var steps []step
	for _, f := range flags {
		if clone {
			steps = append(steps, call(fmt.Sprintf("clone(%#x)", f), func() error { return startWith(&syscall.SysProcAttr{Cloneflags: f}) }))
		} else {
			steps = append(steps, call(fmt.Sprintf("unshare(%#x)", f), func() error { return startWith(&syscall.SysProcAttr{Unshareflags: f}) }))
		}
	}
	return steps
}

// clone3NewUser calls clone3 with CLONE_NEWUSER. Were it allowed, the child
// would be a copy of this process with one thread: it exits at once.
func clone3NewUser() error {
	var args [11]uint64 // struct clone_args
	args[0] = unix.CLONE_NEWUSER
	args[4] = uint64(unix.SIGCHLD)
	r, _, e := unix.RawSyscall(unix.SYS_CLONE3, uintptr(unsafe.Pointer(&args)), unsafe.Sizeof(args), 0)
	if e != 0 {
		return e
	}
	if r == 0 {
		unix.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
	}
	unix.Wait4(int(r), nil, 0, nil)
	return nil
}

func setnsInit() []step {
	var steps []step
	for _, n := range []string{"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"} {
		steps = append(steps, call("setns(/proc/1/ns/"+n+")", func() error {
			fd, err := unix.Open("/proc/1/ns/"+n, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("open: %w", err)
			}
			defer unix.Close(fd)
			return unix.Setns(fd, 0)
		}))
	}
	return steps
}

func newMountAPI(e *attackEnv) []step {
	return []step{
		call("fsopen(tmpfs)", func() error { fd, err := unix.Fsopen("tmpfs", 0); unix.Close(fd); return err }),
		call("open_tree(/workspace, OPEN_TREE_CLONE)", func() error {
			fd, err := unix.OpenTree(unix.AT_FDCWD, e.ws, unix.OPEN_TREE_CLONE)
			unix.Close(fd)
			return err
		}),
		call("move_mount(/workspace, /tmp)", func() error { return unix.MoveMount(unix.AT_FDCWD, e.ws, unix.AT_FDCWD, "/tmp", 0) }),
		call("mount_setattr(/workspace, clear read-only)", func() error {
			return unix.MountSetattr(unix.AT_FDCWD, e.ws, 0, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY})
		}),
	}
}

// Setuid binaries and privileges.

// credsWrong checks the credentials in a /proc/PID/status text against the
// attacker's own: every uid and gid must be its real one, and no capability
// held. It returns the first line that is wrong, or "".
func credsWrong(status string) string {
	uid, gid := strconv.Itoa(os.Getuid()), strconv.Itoa(os.Getgid())
	for _, line := range strings.Split(status, "\n") {
		k, v, _ := strings.Cut(line, ":")
		for _, x := range strings.Fields(v) {
			switch {
			case k == "Uid" && x != uid, k == "Gid" && x != gid,
				(k == "CapPrm" || k == "CapEff") && strings.Trim(x, "0") != "":
				return line
			}
		}
	}
	return ""
}

func statusField(status, key string) string {
	for _, line := range strings.Split(status, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// observeExec runs a host program we do not control (a setuid binary) and
// samples its /proc/PID/status from the moment it runs until it exits,
// looking for any credential other than the attacker's. Its stdin is a pipe
// left open until it waits for input, so that a program that prompts (su,
// passwd) is sampled while it holds whatever it gained; then it gets EOF. A
// zombie keeps its last credentials, so a program that exits is seen too.
func observeExec(path string) (wrong, state string, err error) {
	r, w, err := os.Pipe()
	if err != nil {
		return "", "", err
	}
	defer w.Close()
	null, err := os.OpenFile("/dev/null", os.O_RDWR, 0)
	if err != nil {
		return "", "", err
	}
	pid, err := syscall.ForkExec(path, []string{path}, &syscall.ProcAttr{
		Env: []string{"PATH=/usr/bin:/bin"}, Files: []uintptr{r.Fd(), null.Fd(), null.Fd()},
	})
	r.Close()
	null.Close()
	if err != nil {
		return "", "", err
	}
	defer func() { unix.Kill(pid, unix.SIGKILL); unix.Wait4(pid, nil, 0, nil) }()
	name := filepath.Base(path)
	if len(name) > 15 {
		name = name[:15]
	}
	// Sampled from the first time it shows the program's name: it may
	// exec another (newgrp runs a shell), which keeps what it gained.
	execed, asleep := false, 0
	for range 3000 {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return "", state, err
		}
		st := string(b)
		if execed = execed || statusField(st, "Name") == name; execed {
			state = statusField(st, "State")
			if wrong = credsWrong(st); wrong != "" || strings.HasPrefix(state, "Z") {
				return wrong, state, nil
			}
			if strings.HasPrefix(state, "S") {
				if asleep++; asleep == 20 {
					w.Close()
				}
			}
		}
		time.Sleep(time.Millisecond)
	}
	return "", state, nil // still running after EOF: what it held was sampled
}

// setuidRuns runs each host setuid program and reports any gain.
func setuidRuns(paths func(e *attackEnv) []string) attack {
	return func(e *attackEnv) verdict {
		// Sampling is best effort: a program that exits before it is seen
		// (newgrp often does) is noted, not judged; the planted setuid
		// copies give the exact answer. The verdict needs at least one
		// program seen or refused, and none seen privileged.
		var seen, unseen []string
		for _, p := range paths(e) {
			wrong, state, err := observeExec(p)
			switch {
			case wrong != "":
				return escapedf("%s ran with %q", p, wrong)
			case err != nil:
				seen = append(seen, p+": "+errName(err))
			case state == "":
				unseen = append(unseen, p)
			default:
				seen = append(seen, fmt.Sprintf("%s: uid %d, no capability (%s)", p, os.Getuid(), state))
			}
		}
		if len(seen) == 0 {
			return verdict{unsure: true, detail: fmt.Sprintf("no setuid file observed (exited too fast: %v)", unseen)}
		}
		return blockedf("%s; exited before sampling: %v", strings.Join(seen, "; "), unseen)
	}
}

// plantedRuns execs a copy of the attack binary that the host planted in
// the workspace with setuid, setgid or file capabilities, and reads the
// credentials it reports.
func plantedRuns(name string) attack {
	return func(e *attackEnv) verdict {
		cmd := exec.Command(e.in(name), "-test.run=^$")
		cmd.Env = append(os.Environ(), "ATTACK=helper:status")
		out, err := cmd.Output()
		if err != nil {
			return blockedf("exec %s: %v", name, err)
		}
		if wrong := credsWrong(string(out)); wrong != "" {
			return escapedf("%s ran with %q", name, wrong)
		}
		return blockedf("%s ran as uid %d gid %d with no capability", name, os.Getuid(), os.Getgid())
	}
}

func becomeRoot() []step {
	return []step{
		call("setuid(0)", func() error { return syscall.Setuid(0) }),
		call("setresuid(0, 0, 0)", func() error { return syscall.Setresuid(0, 0, 0) }),
		call("setgid(0)", func() error { return syscall.Setgid(0) }),
		call("setgroups([0])", func() error { return syscall.Setgroups([]int{0}) }),
	}
}

func raiseCaps() []step {
	return []step{
		call("capset(every capability)", func() error {
			all := unix.CapUserData{Effective: ^uint32(0), Permitted: ^uint32(0), Inheritable: ^uint32(0)}
			data := [2]unix.CapUserData{all, all}
			return unix.Capset(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &data[0])
		}),
		call("PR_CAP_AMBIENT_RAISE CAP_SYS_ADMIN", func() error {
			return unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, unix.CAP_SYS_ADMIN, 0, 0)
		}),
	}
}

// Network.

// udpSend sends to the host's UDP socket. The send itself succeeds: it goes
// to the sandbox's own loopback, whose port is closed, so the next read gets
// ECONNREFUSED. The host checks its socket received nothing.
func udpSend(e *attackEnv) verdict {
	c, err := net.Dial("udp", e.udp)
	if err != nil {
		return blockedf("dial udp %s: %s", e.udp, errName(err))
	}
	defer c.Close()
	if _, err := c.Write([]byte("corral-escape " + e.nonce)); err != nil {
		return blockedf("send udp %s: %s", e.udp, errName(err))
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, err := c.Read(make([]byte, 64))
	if err == nil {
		return escapedf("udp %s answered %d bytes", e.udp, n)
	}
	return blockedf("sent to %s on the sandbox's own loopback; then: %s", e.udp, errName(err))
}

// dnsLookup resolves a public name with Go's resolver, as a program would.
func dnsLookup(e *attackEnv) verdict {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	addrs, err := (&net.Resolver{PreferGo: true}).LookupHost(ctx, "example.com")
	if err == nil {
		return escapedf("example.com resolved to %v", addrs)
	}
	return blockedf("lookup example.com: %v", err)
}

// udpQuery sends a DNS query for example.com and waits for an answer.
func udpQuery(addr string) step {
	return call("dns query to udp "+addr, func() error {
		c, err := net.Dial("udp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		c.Write([]byte("\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01"))
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err = c.Read(make([]byte, 512))
		return err
	})
}

// interfaces lists the network interfaces two ways: only lo may exist.
func interfaces(e *attackEnv) verdict {
	b, err := os.ReadFile("/proc/net/dev")
	if err != nil {
		return verdict{unsure: true, detail: "read /proc/net/dev: " + errName(err)}
	}
	var names []string
	for _, line := range strings.Split(string(b), "\n") {
		if n, _, ok := strings.Cut(line, ":"); ok && !strings.Contains(n, "|") {
			names = append(names, strings.TrimSpace(n))
		}
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return verdict{unsure: true, detail: "socket: " + errName(err)}
	}
	defer unix.Close(fd)
	for i := 1; i <= 64; i++ {
		ifr, _ := unix.NewIfreq("")
		ifr.SetUint32(uint32(i))
		if unix.IoctlIfreq(fd, unix.SIOCGIFNAME, ifr) == nil {
			names = append(names, ifr.Name())
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	for _, n := range names {
		if n != "lo" {
			return escapedf("interface %s is visible (all: %v)", n, names)
		}
	}
	return blockedf("interfaces: %v", names)
}

func vsockHost() step {
	return call("socket(AF_VSOCK), connect to the host (CID 2)", func() error {
		fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Connect(fd, &unix.SockaddrVM{CID: unix.VMADDR_CID_HOST, Port: 5001})
	})
}

// Resource limits.

// endless is a resource attack that never reports: the limit ends it.
func endless(f func()) attack {
	return func(*attackEnv) verdict { f(); return verdict{unsure: true, detail: "the attack ended by itself"} }
}

// fill writes to path until it fails and reports how far it got.
func fill(path string, chunk int) verdict {
	f, err := os.Create(path)
	if err != nil {
		return verdict{unsure: true, detail: "create: " + errName(err)}
	}
	buf := bytes.Repeat([]byte{'x'}, chunk)
	var n int64
	for {
		w, err := f.Write(buf)
		n += int64(w)
		if err != nil {
			return blockedf("%s after %d bytes", errName(err), n)
		}
		if n > 16<<30 {
			return escapedf("wrote %d bytes", n)
		}
	}
}

// fillInodes creates empty files in dir until it fails.
func fillInodes(dir string) verdict {
	for n := 0; n < 1<<22; n++ {
		f, err := os.Create(filepath.Join(dir, strconv.Itoa(n)))
		if err != nil {
			return blockedf("%s after %d files", errName(err), n)
		}
		f.Close()
	}
	return escapedf("created %d files", 1<<22)
}

// openFiles opens /dev/null until it fails and reports how many it held.
func openFiles(e *attackEnv) verdict {
	for n := 0; n < 1<<20; n++ {
		if _, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
			return blockedf("%s after %d files", errName(err), n)
		}
	}
	return escapedf("opened %d files", 1<<20)
}

// forkBomb starts copies of itself, which do the same, without end.
func forkBomb() {
	for {
		cmd := helper("helper:fork-bomb")
		if cmd.Start() != nil {
			time.Sleep(time.Millisecond)
		}
	}
}

// threadBomb holds OS threads in blocking system calls without end.
func threadBomb() {
	for {
		go func() {
			runtime.LockOSThread()
			unix.Nanosleep(&unix.Timespec{Sec: 3600}, nil)
		}()
	}
}

// memoryBomb allocates and touches memory without end.
func memoryBomb() {
	var keep [][]byte
	for {
		b := make([]byte, 1<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		//lint:ignore SA4010 keep is never read on purpose: it holds every chunk live, so the sandbox's memory limit must stop it
		keep = append(keep, b)
	}
}

// spin burns CPU on every CPU.
func spin() {
	for range runtime.NumCPU() {
		go func() {
			//lint:ignore SA5002 burning CPU without end is the attack
			for {
			}
		}()
	}
	//lint:ignore SA5002 burning CPU without end is the attack
	for {
	}
}

func floodStdout() {
	b := bytes.Repeat([]byte("flood "), 1000)
	for {
		os.Stdout.Write(b)
	}
}

func floodStderr() {
	b := bytes.Repeat([]byte("flood "), 1000)
	for {
		os.Stderr.Write(b)
	}
}

func sleepForever() { time.Sleep(time.Hour) }

// raiseLimits raises each hard limit by one, its own and the init's.
func raiseLimits() []step {
	raise := func(name string, res int, pid int) step {
		return call(fmt.Sprintf("raise %s of pid %d", name, pid), func() error {
			var old unix.Rlimit
			unix.Prlimit(pid, res, nil, &old)
			return unix.Prlimit(pid, res, &unix.Rlimit{Cur: old.Max + 1, Max: old.Max + 1}, nil)
		})
	}
	return []step{raise("RLIMIT_NOFILE", unix.RLIMIT_NOFILE, 0), raise("RLIMIT_CPU", unix.RLIMIT_CPU, 0),
		raise("RLIMIT_FSIZE", unix.RLIMIT_FSIZE, 0), raise("RLIMIT_NOFILE", unix.RLIMIT_NOFILE, 1)}
}

// Signalling processes outside.

// killAll sends SIGKILL to every process it may, after starting a child of
// its own: the child dies, nothing outside the sandbox does.
func killAll(e *attackEnv) verdict {
	cmd := helper("helper:sleeper")
	if err := cmd.Start(); err != nil {
		return verdict{unsure: true, detail: "start child: " + err.Error()}
	}
	if err := unix.Kill(-1, unix.SIGKILL); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return blockedf("kill(-1, SIGKILL): %s", errName(err))
	}
	err := cmd.Wait()
	return blockedf("kill(-1, SIGKILL) sent; the attack's own child: %v; the host checks its processes", err)
}

// killInit sends SIGKILL to the sandbox's init: the kernel drops SIGKILL
// sent to a PID namespace's init from inside it.
func killInit(e *attackEnv) verdict {
	if err := unix.Kill(1, unix.SIGKILL); err != nil {
		return blockedf("kill(1, SIGKILL): %s", errName(err))
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := os.Stat("/proc/1/status"); err != nil || os.Getppid() != 1 {
		return escapedf("the init is gone after SIGKILL")
	}
	return blockedf("kill(1, SIGKILL) returned 0 and the init lives on")
}

// renice lowers the priority of every process of its uid: only the
// sandbox's may change; the host checks its own process of the same uid.
func renice(e *attackEnv) verdict {
	if err := unix.Setpriority(unix.PRIO_PROCESS, e.sleepPID, 19); err == nil {
		return escapedf("setpriority(PRIO_PROCESS, %d) succeeded", e.sleepPID)
	}
	if err := unix.Setpriority(unix.PRIO_USER, os.Getuid(), 19); err != nil {
		return blockedf("setpriority(PRIO_USER): %s", errName(err))
	}
	return blockedf("setpriority(PRIO_USER, %d, 19) reniced the sandbox's processes; the host checks its own", os.Getuid())
}

func pidfdOpen(pid int, who string) step {
	return call("pidfd_open("+who+")", func() error { fd, err := unix.PidfdOpen(pid, 0); unix.Close(fd); return err })
}

// setown asks for SIGIO and SIGURG of a socket to go to pid.
func setown(pid int) step {
	return call("fcntl(F_SETOWN, host pid)", func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETOWN, pid)
		return err
	})
}

// signalInit leaves a daemon behind, then sends sig to the sandbox's init.
// signalInit leaves a daemon behind, signals the init and ends: whether
// the init dies of the signal, forwards it, or ignores it (it does for
// SIGQUIT and friends), no process of the sandbox may outlive the run.
func signalInit(sig syscall.Signal) attack {
	return daemonThen(func() {
		unix.Kill(1, sig)
	})
}

// Terminal injection.

// ioctlByte makes ioctl(fd, req, &b): TIOCSTI and TIOCLINUX take a pointer
// to a byte.
func ioctlByte(fd int, req uint64, b byte) error {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(unsafe.Pointer(&b)))
	return rawErr(e)
}

// devTTY makes stdin the controlling terminal (the command leads its own
// session) and opens /dev/tty.
func devTTY() (int, error) {
	unix.IoctlSetInt(0, unix.TIOCSCTTY, 0)
	return unix.Open("/dev/tty", unix.O_RDWR|unix.O_CLOEXEC, 0)
}

// ioctlStep makes a terminal ioctl on stdin, or on /dev/tty once stdin is
// the controlling terminal.
func ioctlStep(what string, tty bool, req uint64, arg byte) step {
	return call(what, func() error {
		fd := 0
		if tty {
			var err error
			if fd, err = devTTY(); err != nil {
				return fmt.Errorf("open /dev/tty: %w", err)
			}
			defer unix.Close(fd)
		}
		return ioctlByte(fd, req, arg)
	})
}

// Orphans.

// daemonize leaves a daemon behind (double fork, setsid) and checks that it
// is an orphan of the sandbox's init.
func daemonize() (string, error) {
	out, err := helper("helper:daemon").Output()
	if err != nil {
		return "", fmt.Errorf("start daemon: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return "", fmt.Errorf("daemon said %q", out)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", fmt.Errorf("daemon %d: %v", pid, err)
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return fmt.Sprintf("daemon %d in session %s, parent %s", pid, f[3], f[1]), nil
}

// daemonThen leaves a daemon behind, reports it and then ends as then says:
// the host checks that the daemon does not outlive the sandbox.
func daemonThen(then func()) attack {
	return func(e *attackEnv) verdict {
		d, err := daemonize()
		if err != nil {
			return verdict{unsure: true, detail: err.Error()}
		}
		fmt.Printf("BLOCKED %s left behind; the host checks it does not survive\n", d)
		os.Stdout.Sync()
		then()
		os.Exit(0)
		return verdict{}
	}
}
