package sandbox

// The escape suite: attacks on the sandbox, each run inside its own sandbox
// by a copy of this test binary (escape_attacks_linux_test.go holds the
// attacker's side). Each case asserts that the attack failed, and that the
// host is unchanged: sentinel files hashed before and after, no file of the
// case's on the host, no process of it left, nothing reached on the host's
// sockets, a host process of the sandbox's own uid alive.
//
// TestEscapeSuiteCanFail runs a few of the same attacks on the host, outside
// any sandbox, and expects them to succeed: the verdicts are not tautologies.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"corral"
	"corral/internal/kerneltest"
	"corral/internal/poll"
)

// The attack classes, in the order of the summary.
const (
	classWrite   = "writes outside the workspace"
	classRO      = "writes in a read-only workspace"
	classLinks   = "symlink and hard-link escapes"
	classRead    = "reading the host"
	classPtrace  = "ptrace and process_vm"
	classNS      = "mount, unshare, setns"
	classSetuid  = "setuid binaries and privileges"
	classDevices = "device nodes and mknod"
	classNet     = "network"
	classRes     = "resource limits"
	classSignals = "signalling processes outside"
	classTTY     = "terminal injection"
	classOrphans = "no orphan process"
)

var escapeClasses = []string{classWrite, classRO, classLinks, classRead, classPtrace, classNS,
	classSetuid, classDevices, classNet, classRes, classSignals, classTTY, classOrphans}

// escapeCanaryNames are the server's secret variables, set in the test's
// environment: neither name nor value may show inside.
var escapeCanaryNames = []string{"CORRAL_CANARY_KEY", "CORRAL_MODEL_API_KEY", "CORRAL_DATABASE_PASSWORD"}

// Files of the read-only workspace.
const roFile, roInner, roEmptyDir = "file.txt", "dir/inner.txt", "empty-dir"

// escapeCase is one attack and how the host runs and judges it.
type escapeCase struct {
	name      string // also $ATTACK
	class     string
	rw        bool             // a fresh read-write workspace; otherwise the shared read-only one
	limits    Limits           // Wall defaults to 10s
	end       string           // "stop" or "kill": how the host ends the run once the attack reported
	violation corral.Violation // the limit that must end the run; then no verdict line is needed
	want      string           // a substring the verdict line must hold
	attack    attack
	setup     func(t *testing.T, r *caseRun) // on the host, before the run
	verify    func(t *testing.T, r *caseRun) // on the host, after it
}

// caseRun is one case's run.
type caseRun struct {
	h       *escapeHost
	ws      string // the workspace's host path
	nonce   string
	stdin   *os.File
	res     Result
	out     string
	verdict string
}

// escapeHost is the host the attacks aim at.
type escapeHost struct {
	root      string // parent of the workspaces: /workspace/.. on the host
	data      string // the server's data directory
	other     string // another agent's workspace
	sibling   string // a file next to the workspaces
	sentinel  string // a file outside /tmp
	ro        string // the read-only workspace, shared by the cases
	bin       string // the attack binary, hard-linked into each read-write workspace
	nonce     string
	env       attackEnv
	udp       *net.UDPConn
	accepted  map[string]*atomic.Int64 // connections each host listener accepted
	sleep     *exec.Cmd                // a host process of uid 65534, the sandbox's host uid
	slept     chan struct{}            // closed when it ends
	otherProc *Proc                    // a command in another session
	watched   []string                 // hashed before and after each case
	sums      sync.Map                 // content hashes by file identity and metadata
	skipped   map[string]bool          // cases whose setup skipped them
}

// escapeCases is the suite. Most cases are a list of steps that must all
// fail (see fails); the others are attacks of their own.
func escapeCases() []escapeCase {
	const wa, cr = unix.O_WRONLY | unix.O_APPEND, unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL
	steps := func(class string, rw bool) func(string, func(e *attackEnv) []step) escapeCase {
		return func(name string, f func(e *attackEnv) []step) escapeCase {
			return escapeCase{name: name, class: class, rw: rw, attack: fails(f)}
		}
	}
	wr, ro, ln, rd := steps(classWrite, true), steps(classRO, false), steps(classLinks, true), steps(classRead, false)
	pt, ns, dv, nt := steps(classPtrace, false), steps(classNS, true), steps(classDevices, false), steps(classNet, false)
	sg := steps(classSignals, false)
	return []escapeCase{
		wr("write /etc/passwd", func(e *attackEnv) []step {
			return []step{openFor("/etc/passwd", wa), openFor("/etc/passwd", unix.O_RDWR)}
		}),
		wr("create in /etc", func(e *attackEnv) []step {
			return []step{openFor("/etc/"+e.mine(""), cr), mkdirStep("/etc/" + e.mine(""))}
		}),
		wr("open /usr binaries for writing", func(e *attackEnv) []step {
			return []step{openFor("/usr/bin/env", wa), openFor("/bin/sh", wa), openFor("/usr/bin/env", unix.O_RDWR)}
		}),
		wr("create in /usr/bin", func(e *attackEnv) []step {
			return []step{openFor("/usr/bin/"+e.mine(""), cr), linkStep("/usr/bin/env", "/usr/bin/"+e.mine("-link"))}
		}),
		wr("create in /", func(e *attackEnv) []step { return []step{openFor("/"+e.mine(""), cr), mkdirStep("/" + e.mine("-dir"))} }),
		wr("write the host parent through /workspace/..", func(e *attackEnv) []step {
			up := e.ws + "/../"
			return []step{openFor(up+filepath.Base(e.sibling), wa), openFor(up+e.mine(""), cr), mkdirStep(up + e.mine("-dir"))}
		}),
		wr("write the host sentinel by its path", func(e *attackEnv) []step {
			return []step{openFor(e.sentinel, wa), openFor(filepath.Join(filepath.Dir(e.sentinel), e.mine("")), cr)}
		}),
		wr("write /proc/sys", func(e *attackEnv) []step {
			var s []step
			for _, f := range []string{"kernel/core_pattern", "kernel/modprobe", "vm/drop_caches", "kernel/hostname", "net/ipv4/ip_forward"} {
				s = append(s, openFor("/proc/sys/"+f, unix.O_WRONLY))
			}
			return s
		}),
		wr("open /proc/sysrq-trigger for writing", func(e *attackEnv) []step { return []step{openFor("/proc/sysrq-trigger", unix.O_WRONLY)} }),
		wr("lower the OOM score", func(e *attackEnv) []step {
			return []step{writeTo("/proc/self/oom_score_adj", unix.O_WRONLY, "-1000"), writeTo("/proc/1/oom_score_adj", unix.O_WRONLY, "-1000")}
		}),
		wr("create in /dev", func(e *attackEnv) []step {
			return []step{openFor("/dev/"+e.mine(""), cr), mkdirStep("/dev/" + e.mine("-dir"))}
		}),
		wr("write /sys", func(e *attackEnv) []step {
			return []step{openFor("/sys/kernel/uevent_helper", unix.O_WRONLY), openFor("/sys/fs/cgroup/cgroup.procs", unix.O_WRONLY),
				mkdirStep("/sys/fs/cgroup/pids/" + e.mine(""))}
		}),
		wr("write through /proc/self/root and /proc/1/root", func(e *attackEnv) []step {
			return []step{openFor("/proc/self/root/etc/passwd", wa), openFor("/proc/1/root/"+e.mine(""), cr), openFor("/proc/1/root/usr/bin/"+e.mine(""), cr)}
		}),
		wr("reopen read-only files for writing through /proc/self/fd", func(e *attackEnv) []step {
			return []step{openFor(viaFD("/usr/bin/env"), wa), openFor(viaFD("/etc/passwd"), wa)}
		}),
		wr("rename the workspace mount point", func(e *attackEnv) []step {
			return []step{renameStep(e.ws, "/tmp/"+e.mine("")), renameStep(e.ws, "/"+e.mine(""))}
		}),
		wr("set the host's clock", func(e *attackEnv) []step { return setClock() }),
		{name: "/tmp is the sandbox's own", class: classWrite, rw: true, attack: privateTmp},

		ro("create a file", func(e *attackEnv) []step {
			return []step{writeTo(e.in(e.mine("")), cr, "escaped\n"), writeTo(e.in("dir/"+e.mine("")), cr, "escaped\n")}
		}),
		ro("append to a file", func(e *attackEnv) []step {
			return []step{writeTo(e.in(roFile), wa, "escaped\n"), writeTo(e.in(roFile), unix.O_RDWR, "escaped\n")}
		}),
		ro("truncate with O_TRUNC", func(e *attackEnv) []step { return []step{openFor(e.in(roFile), unix.O_WRONLY|unix.O_TRUNC)} }),
		ro("truncate(2) and ftruncate", func(e *attackEnv) []step {
			return []step{call("truncate", func() error { return unix.Truncate(e.in(roFile), 0) }), ftruncateRO(e.in(roFile))}
		}),
		ro("rename", func(e *attackEnv) []step {
			return []step{renameStep(e.in(roFile), e.in(e.mine(""))), renameStep(e.in("dir"), e.in(e.mine("-dir"))),
				call("renameat2 RENAME_EXCHANGE", func() error {
					return unix.Renameat2(unix.AT_FDCWD, e.in(roFile), unix.AT_FDCWD, e.in(roInner), unix.RENAME_EXCHANGE)
				})}
		}),
		ro("unlink", func(e *attackEnv) []step {
			return []step{call("unlink", func() error { return unix.Unlink(e.in(roFile)) }),
				call("unlinkat", func() error { return unix.Unlinkat(unix.AT_FDCWD, e.in(roInner), 0) })}
		}),
		ro("chmod", func(e *attackEnv) []step {
			return []step{call("chmod", func() error { return unix.Chmod(e.in(roFile), 0o777) }),
				call("fchmodat on the directory", func() error { return unix.Fchmodat(unix.AT_FDCWD, e.in("dir"), 0o700, 0) })}
		}),
		ro("chown", func(e *attackEnv) []step {
			return []step{call("chown to itself", func() error { return unix.Chown(e.in(roFile), os.Getuid(), os.Getgid()) }),
				call("lchown", func() error { return unix.Lchown(e.in("dir"), os.Getuid(), os.Getgid()) })}
		}),
		ro("mkdir", func(e *attackEnv) []step { return []step{mkdirStep(e.in(e.mine("")))} }),
		ro("rmdir", func(e *attackEnv) []step {
			return []step{call("rmdir", func() error { return unix.Rmdir(e.in(roEmptyDir)) })}
		}),
		ro("symlink", func(e *attackEnv) []step {
			return []step{call("symlink", func() error { return unix.Symlink(roFile, e.in(e.mine(""))) })}
		}),
		ro("hard link", func(e *attackEnv) []step { return []step{linkStep(e.in(roFile), e.in(e.mine("")))} }),
		ro("mmap shared and writable", func(e *attackEnv) []step { return []step{openFor(e.in(roFile), unix.O_RDWR), mmapShared(e.in(roFile))} }),
		ro("utimensat", func(e *attackEnv) []step {
			ts := []unix.Timespec{{Sec: 1}, {Sec: 1}}
			return []step{call("utimensat", func() error { return unix.UtimesNanoAt(unix.AT_FDCWD, e.in(roFile), ts, 0) }),
				call("utimensat UTIME_NOW", func() error { return unix.UtimesNanoAt(unix.AT_FDCWD, e.in("dir"), nil, 0) })}
		}),
		ro("setxattr", func(e *attackEnv) []step {
			return []step{call("setxattr user.corral", func() error { return unix.Setxattr(e.in(roFile), "user.corral", []byte("x"), 0) })}
		}),
		ro("mkfifo", func(e *attackEnv) []step {
			return []step{call("mkfifo", func() error { return unix.Mkfifo(e.in(e.mine("")), 0o666) })}
		}),
		ro("O_TMPFILE", func(e *attackEnv) []step { return []step{openFor(e.ws, unix.O_TMPFILE|unix.O_WRONLY)} }),
		ro("reopen a read-only descriptor for writing", func(e *attackEnv) []step {
			return []step{openFor(viaFD(e.in(roFile)), wa), openFor("/proc/self/root"+e.in(roFile), wa)}
		}),
		ro("bind a UNIX socket", func(e *attackEnv) []step { return []step{bindUnix(e.in(e.mine("")))} }),
		ro("move a file in from /tmp", func(e *attackEnv) []step { return []step{moveInFromTmp(e)} }),

		{name: "read the host sentinel through a symlink", class: classLinks, rw: true,
			attack: symlinkThen(func(e *attackEnv) string { return e.sentinel }, func(l string) []step { return []step{readFile(l)} })},
		{name: "write the host sentinel through a symlink", class: classLinks, rw: true,
			attack: symlinkThen(func(e *attackEnv) string { return e.sentinel }, func(l string) []step {
				return []step{openFor(l, wa), openFor(l, unix.O_WRONLY|unix.O_CREAT)}
			})},
		{name: "the data directory through a symlink", class: classLinks, rw: true,
			attack: symlinkThen(func(e *attackEnv) string { return e.data }, func(l string) []step {
				return []step{readFile(l + "/corral.db"), readDir(l), openFor(l+"/new", cr)}
			})},
		{name: "another workspace through a symlink", class: classLinks, rw: true,
			attack: symlinkThen(func(e *attackEnv) string { return e.other }, func(l string) []step {
				return []step{readFile(l + "/secret.txt"), openFor(l+"/secret.txt", wa)}
			})},
		{name: "the host sibling through a relative symlink", class: classLinks, rw: true,
			attack: symlinkThen(func(e *attackEnv) string { return "../" + filepath.Base(e.sibling) }, func(l string) []step {
				return []step{readFile(l), openFor(l, wa)}
			})},
		{name: "the host parent through an absolute symlink", class: classLinks, rw: true,
			attack: symlinkThen(func(e *attackEnv) string { return e.parent }, func(l string) []step {
				return []step{readDir(l), readFile(l + "/sibling.txt")}
			})},
		ln("hard link a /usr file", func(e *attackEnv) []step {
			return []step{linkStep("/usr/bin/env", e.in(e.mine(""))), linkStep("/etc/passwd", e.in(e.mine("2")))}
		}),
		ln("hard link the host sentinel", func(e *attackEnv) []step { return []step{linkStep(e.sentinel, e.in(e.mine("")))} }),
		ln("hard link through a descriptor", linkThroughFD),
		ln("walk .. out of the workspace", func(e *attackEnv) []step {
			return []step{readFile(e.ws + strings.Repeat("/..", 16) + e.data + "/corral.db"), readFile(e.ws + "/../" + filepath.Base(e.sibling)), openatDotDot(e)}
		}),
		ln("/proc/self/root and /proc/1/root", func(e *attackEnv) []step {
			return []step{readFile("/proc/self/root" + e.data + "/corral.db"), readFile("/proc/1/root" + e.other + "/secret.txt"), readDir("/proc/1/root/oldroot")}
		}),
		ln("/proc/self/cwd", func(e *attackEnv) []step {
			os.Chdir(e.ws)
			return []step{readFile("/proc/self/cwd/../" + filepath.Base(e.sibling)), readFile("/proc/self/cwd" + strings.Repeat("/..", 16) + e.sibling)}
		}),
		ln("openat2 out of the workspace", openat2Escape),
		ln("open_by_handle_at", func(e *attackEnv) []step { return []step{openByHandle(e)} }),
		ln("name_to_handle_at", func(e *attackEnv) []step {
			return []step{call("name_to_handle_at", func() error { _, _, err := unix.NameToHandleAt(unix.AT_FDCWD, e.ws, 0); return err })}
		}),
		ln("move the working directory out of the workspace", func(e *attackEnv) []step {
			d := e.in(e.mine(""))
			os.MkdirAll(d+"/a/b", 0o755)
			os.Chdir(d + "/a/b")
			return []step{renameStep(d+"/a", "/tmp/"+e.mine("")), readFile("../../../../" + filepath.Base(e.sibling))}
		}),

		rd("read the server's data directory", func(e *attackEnv) []step {
			return []step{readDir(e.data), readFile(e.data + "/corral.db"), readFile(e.data + "/secret")}
		}),
		rd("read /root", func(e *attackEnv) []step {
			return []step{readDir("/root"), readFile("/root/.ssh/id_ed25519"), readFile("/root/.bash_history")}
		}),
		rd("read another agent's workspace", func(e *attackEnv) []step { return []step{readDir(e.other), readFile(e.other + "/secret.txt")} }),
		rd("read the host sentinel", func(e *attackEnv) []step { return []step{readFile(e.sentinel)} }),
		rd("read the workspace's host sibling", func(e *attackEnv) []step {
			return []step{readFile(e.sibling), readFile(e.ws + "/../" + filepath.Base(e.sibling)), readDir(e.parent)}
		}),
		rd("host secrets in /etc", func(e *attackEnv) []step {
			return []step{readFile("/etc/shadow"), readFile("/etc/gshadow"), readFile("/etc/sudoers"), readFile("/etc/ssh/ssh_host_ed25519_key"), readDir("/etc/ssl/private")}
		}),
		rd("read /sys", func(e *attackEnv) []step {
			return []step{readDir("/sys"), readDir("/sys/fs/cgroup"), readFile("/sys/class/dmi/id/product_uuid")}
		}),
		rd("kernel memory and log through /proc", func(e *attackEnv) []step {
			return []step{openFor("/proc/kcore", unix.O_RDONLY), openFor("/proc/kmsg", unix.O_RDONLY)}
		}),
		rd("the host's SysV shared memory", func(e *attackEnv) []step { return []step{sysvShm(e.shmKey)} }),
		rd("the kernel keyrings", func(e *attackEnv) []step { return keyrings() }),
		{name: "canaries in /proc/1/environ", class: classRead, attack: canariesIn(func(*attackEnv) []string { return []string{"/proc/1/environ"} })},
		{name: "canaries in /proc/self/environ", class: classRead, attack: canariesIn(func(*attackEnv) []string { return []string{"/proc/self/environ"} })},
		{name: "canaries in every visible process", class: classRead, attack: canariesIn(func(*attackEnv) []string { return procFiles("environ", "cmdline") })},
		{name: "canaries in the init's memory", class: classRead, attack: initMemoryCanaries},
		{name: "host processes", class: classRead, attack: hostProcesses},
		{name: "descriptors inherited from the server", class: classRead, attack: leakedFDs, setup: leakFD},
		{name: "server paths in the mount table", class: classRead, attack: mountTable},
		{name: "the init's open files", class: classRead, attack: initFiles},

		pt("PTRACE_ATTACH the init", func(e *attackEnv) []step {
			return []step{call("ptrace(PTRACE_ATTACH, 1)", func() error { return unix.PtraceAttach(1) })}
		}),
		pt("PTRACE_SEIZE the init", func(e *attackEnv) []step {
			return []step{call("ptrace(PTRACE_SEIZE, 1)", func() error { return unix.PtraceSeize(1) })}
		}),
		pt("PTRACE_ATTACH an own child", func(e *attackEnv) []step {
			return []step{call("ptrace(PTRACE_ATTACH, child)", func() error { return ptraceChild(false) })}
		}),
		pt("PTRACE_SEIZE an own child", func(e *attackEnv) []step {
			return []step{call("ptrace(PTRACE_SEIZE, child)", func() error { return ptraceChild(true) })}
		}),
		pt("PTRACE_TRACEME then exec", func(e *attackEnv) []step {
			return []step{call("PTRACE_TRACEME, exec /bin/true", func() error { return startWith(&syscall.SysProcAttr{Ptrace: true}) })}
		}),
		pt("process_vm_readv the init", func(e *attackEnv) []step {
			return []step{call("process_vm_readv(1)", func() error { return processVM(1, false) })}
		}),
		pt("process_vm_writev an own child", func(e *attackEnv) []step {
			return []step{call("process_vm_writev(child)", func() error { return withChild(func(pid int) error { return processVM(pid, true) }) })}
		}),
		pt("write the init's memory through /proc/1/mem", func(e *attackEnv) []step {
			return []step{openFor("/proc/1/mem", unix.O_RDWR), openFor("/proc/1/mem", unix.O_WRONLY)}
		}),
		pt("pidfd_getfd from the init", func(e *attackEnv) []step { return []step{pidfdGetfd(1)} }),

		ns("mount a tmpfs", func(e *attackEnv) []step { return []step{mountTmpfs(e.in("mnt"))} }),
		ns("bind-mount the workspace", func(e *attackEnv) []step {
			return []step{call("mount --bind /workspace /tmp/x", func() error {
				os.Mkdir("/tmp/"+e.mine(""), 0o755)
				return unix.Mount(e.ws, "/tmp/"+e.mine(""), "", unix.MS_BIND, "")
			})}
		}),
		{name: "remount the workspace read-write", class: classNS, attack: fails(func(e *attackEnv) []step {
			return []step{call("mount -o remount,rw /workspace", func() error { return unix.Mount("", e.ws, "", unix.MS_REMOUNT|unix.MS_BIND, "") })}
		})},
		ns("remount / read-write", func(e *attackEnv) []step {
			return []step{call("mount -o remount,rw /", func() error { return unix.Mount("", "/", "", unix.MS_REMOUNT, "") })}
		}),
		ns("unmount the workspace and /proc", func(e *attackEnv) []step {
			return []step{call("umount2 /workspace", func() error { return unix.Unmount(e.ws, unix.MNT_DETACH) }),
				call("umount2 /proc", func() error { return unix.Unmount("/proc", unix.MNT_DETACH) })}
		}),
		ns("unshare a user namespace", func(e *attackEnv) []step { return namespaces(false, unix.CLONE_NEWUSER) }),
		ns("unshare a mount namespace", func(e *attackEnv) []step {
			return append(namespaces(false, unix.CLONE_NEWNS), call("unshare(CLONE_NEWNS) in place", func() error { return unix.Unshare(unix.CLONE_NEWNS) }))
		}),
		ns("unshare the other namespaces", func(e *attackEnv) []step {
			return namespaces(false, unix.CLONE_NEWNET, unix.CLONE_NEWPID, unix.CLONE_NEWIPC, unix.CLONE_NEWUTS, unix.CLONE_NEWCGROUP, unix.CLONE_NEWTIME)
		}),
		ns("clone into new namespaces", func(e *attackEnv) []step {
			return namespaces(true, unix.CLONE_NEWUSER, unix.CLONE_NEWNS, unix.CLONE_NEWPID, unix.CLONE_NEWNET)
		}),
		{name: "clone3 into a new user namespace", class: classNS, want: "ENOSYS", attack: fails(func(e *attackEnv) []step {
			return []step{call("clone3(CLONE_NEWUSER)", clone3NewUser)}
		})},
		ns("setns into the init's namespaces", func(e *attackEnv) []step { return setnsInit() }),
		ns("pivot_root", func(e *attackEnv) []step {
			return []step{call("pivot_root(/tmp, /tmp/x)", func() error {
				os.Mkdir("/tmp/"+e.mine(""), 0o755)
				return unix.PivotRoot("/tmp", "/tmp/"+e.mine(""))
			})}
		}),
		ns("chroot", func(e *attackEnv) []step {
			return []step{call("chroot(/tmp)", func() error { return unix.Chroot("/tmp") })}
		}),
		ns("the new mount API", newMountAPI),

		{name: "setuid su", class: classSetuid, setup: needSetuid("/usr/bin/su"), attack: setuidRuns(func(*attackEnv) []string { return []string{"/usr/bin/su"} })},
		{name: "setuid passwd", class: classSetuid, setup: needSetuid("/usr/bin/passwd"), attack: setuidRuns(func(*attackEnv) []string { return []string{"/usr/bin/passwd"} })},
		{name: "setuid mount", class: classSetuid, setup: needSetuid("/usr/bin/mount"), attack: setuidRuns(func(*attackEnv) []string { return []string{"/usr/bin/mount"} })},
		{name: "every other setuid-root file of the host", class: classSetuid, attack: setuidRuns(func(e *attackEnv) []string {
			return slices.DeleteFunc(e.suid, func(p string) bool {
				return slices.Contains([]string{"/usr/bin/su", "/usr/bin/passwd", "/usr/bin/mount"}, p)
			})
		})},
		{name: "planted setuid-root binary", class: classSetuid, rw: true, setup: plant("attack-suid", 0o4755), attack: plantedRuns("attack-suid")},
		{name: "planted setgid-root binary", class: classSetuid, rw: true, setup: plant("attack-sgid", 0o2755), attack: plantedRuns("attack-sgid")},
		{name: "planted file capabilities", class: classSetuid, rw: true, setup: plantFileCaps, attack: plantedRuns("attack-fcaps")},
		{name: "become root", class: classSetuid, attack: fails(func(e *attackEnv) []step { return becomeRoot() })},
		{name: "make a setuid or setgid file", class: classSetuid, rw: true, want: "EPERM", verify: noSetIDFiles, attack: fails(func(e *attackEnv) []step {
			return makeSetID(e.in(e.mine("")))
		})},
		{name: "raise capabilities", class: classSetuid, attack: fails(func(e *attackEnv) []step { return raiseCaps() })},

		{name: "mknod a character device", class: classDevices, want: "EPERM", attack: fails(func(e *attackEnv) []step {
			return []step{mknodStep("/tmp/"+e.mine(""), unix.S_IFCHR, 1, 1)}
		})},
		{name: "mknod a block device", class: classDevices, want: "EPERM", attack: fails(func(e *attackEnv) []step {
			return []step{mknodStep("/tmp/"+e.mine(""), unix.S_IFBLK, 254, 0)}
		})},
		{name: "mknod a device in the workspace", class: classDevices, rw: true, want: "EPERM", attack: fails(func(e *attackEnv) []step {
			return []step{mknodStep(e.in(e.mine("")), unix.S_IFCHR, 1, 11), mknodStep(e.in(e.mine("2")), unix.S_IFBLK, 7, 0)}
		})},
		dv("open /dev/mem, /dev/kmem, /dev/port", func(e *attackEnv) []step {
			return []step{openFor("/dev/mem", unix.O_RDONLY), openFor("/dev/kmem", unix.O_RDONLY), openFor("/dev/port", unix.O_RDONLY)}
		}),
		dv("open /dev/kmsg", func(e *attackEnv) []step {
			return []step{openFor("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK), openFor("/dev/kmsg", unix.O_WRONLY)}
		}),
		dv("open the host's block devices", func(e *attackEnv) []step {
			return openEach(append(e.blockDevs, "/dev/vda", "/dev/sda", "/dev/nvme0n1", "/dev/xvda"), unix.O_RDONLY|unix.O_NONBLOCK)
		}),
		dv("open every other host device", func(e *attackEnv) []step { return openEach(e.devices, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY) }),
		{name: "a block device node planted in the workspace", class: classDevices, rw: true, setup: plantDevice("disk"), attack: fails(func(e *attackEnv) []step {
			return []step{openFor(e.in("disk"), unix.O_RDONLY)}
		})},
		{name: "a character device node planted in the workspace", class: classDevices, rw: true, setup: plantDevice("kmsg"), attack: fails(func(e *attackEnv) []step {
			return []step{openFor(e.in("kmsg"), unix.O_RDONLY)}
		})},
		dv("a new pseudo-terminal", func(e *attackEnv) []step { return []step{openFor("/dev/ptmx", unix.O_RDWR), readDir("/dev/pts")} }),

		nt("TCP to the host's 127.0.0.1 listener", func(e *attackEnv) []step { return []step{dialStep("tcp", e.tcp)} }),
		{name: "TCP to the host's ::1 listener", class: classNet, setup: needEnv("tcp6"), attack: fails(func(e *attackEnv) []step { return []step{dialStep("tcp", e.tcp6)} })},
		{name: "TCP to the host's network address", class: classNet, setup: needEnv("hostTCP"), attack: fails(func(e *attackEnv) []step { return []step{dialStep("tcp", e.hostTCP)} })},
		{name: "UDP to the host's socket", class: classNet, attack: udpSend, verify: udpSilent},
		{name: "DNS lookup", class: classNet, attack: dnsLookup},
		nt("DNS to a public resolver by address", func(e *attackEnv) []step { return []step{udpQuery("8.8.8.8:53"), dialStep("tcp", "1.1.1.1:53")} }),
		nt("raw IP sockets", func(e *attackEnv) []step {
			return []step{socketStep(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP), socketStep(unix.AF_INET6, unix.SOCK_RAW, unix.IPPROTO_ICMPV6),
				socketStep(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)}
		}),
		nt("AF_PACKET socket", func(e *attackEnv) []step {
			return []step{socketStep(unix.AF_PACKET, unix.SOCK_RAW, 0x0300), socketStep(unix.AF_PACKET, unix.SOCK_DGRAM, 0x0300)}
		}),
		nt("netlink route dump", func(e *attackEnv) []step {
			return []step{call("RTM_GETLINK dump", func() error { _, err := syscall.NetlinkRIB(syscall.RTM_GETLINK, syscall.AF_UNSPEC); return err }),
				socketStep(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE)}
		}),
		{name: "interfaces other than lo", class: classNet, attack: interfaces},
		nt("the host's abstract UNIX socket", func(e *attackEnv) []step { return []step{dialStep("unix", "@"+e.abstract)} }),
		nt("the host's UNIX sockets by path", func(e *attackEnv) []step {
			s := []step{dialStep("unix", e.unixSock)}
			for _, p := range []string{"/run/docker.sock", "/var/run/docker.sock", "/run/containerd/containerd.sock", "/run/systemd/private", "/run/dbus/system_bus_socket"} {
				s = append(s, dialStep("unix", p))
			}
			return s
		}),
		nt("vsock to the host", func(e *attackEnv) []step { return []step{vsockHost()} }),

		{name: "fork bomb", class: classRes, limits: Limits{Pids: 16}, violation: ViolationPids, attack: endless(forkBomb)},
		{name: "thread bomb", class: classRes, limits: Limits{Pids: 16}, violation: ViolationPids, attack: endless(threadBomb)},
		{name: "memory bomb", class: classRes, limits: Limits{Memory: 64 << 20}, violation: ViolationMemory, attack: endless(memoryBomb)},
		{name: "memory bomb in /tmp", class: classRes, limits: Limits{Memory: 48 << 20, Tmp: 1 << 30}, violation: ViolationMemory,
			attack: endless(func() { fill("/tmp/fill", 1<<20); memoryBomb() })},
		{name: "CPU spin past the limit", class: classRes, limits: Limits{CPU: 300 * time.Millisecond}, violation: ViolationCPU, attack: endless(spin)},
		{name: "sleep past the wall limit", class: classRes, limits: Limits{Wall: 300 * time.Millisecond}, violation: ViolationTimeout, attack: endless(sleepForever)},
		{name: "output flood", class: classRes, limits: Limits{Output: 4096}, violation: ViolationOutput, verify: outputBounded(4096), attack: endless(floodStdout)},
		{name: "output flood on stderr", class: classRes, limits: Limits{Output: 4096}, violation: ViolationOutput, verify: outputBounded(4096), attack: endless(floodStderr)},
		{name: "disk fill of /tmp", class: classRes, limits: Limits{Tmp: 8 << 20}, want: "ENOSPC", verify: countAtMost(8 << 20),
			attack: func(*attackEnv) verdict { return fill("/tmp/fill", 64<<10) }},
		{name: "inode exhaustion of /tmp", class: classRes, limits: Limits{Tmp: 4 << 20}, want: "ENOSPC", verify: countAtMost(1024),
			attack: func(*attackEnv) verdict { return fillInodes("/tmp") }},
		{name: "file size limit", class: classRes, limits: Limits{FileSize: 1 << 20}, want: "EFBIG", verify: countAtMost(1 << 20),
			attack: func(*attackEnv) verdict { return fill("/tmp/big", 64<<10) }},
		{name: "open files limit", class: classRes, limits: Limits{OpenFiles: 64}, want: "EMFILE", verify: countAtMost(64), attack: openFiles},
		{name: "raise the limits", class: classRes, attack: fails(func(e *attackEnv) []step { return raiseLimits() })},

		sg("signal the test process", func(e *attackEnv) []step {
			return []step{killStep(e.hostPID, 0, "test"), killStep(e.hostPID, unix.SIGCONT, "test")}
		}),
		sg("kill a host process of the same uid", func(e *attackEnv) []step { return []step{killStep(e.sleepPID, unix.SIGKILL, "host sleep")} }),
		{name: "kill(-1, SIGKILL)", class: classSignals, attack: killAll},
		sg("signal the host's process group", func(e *attackEnv) []step { return []step{killStep(-e.hostPGID, unix.SIGCONT, "-pgid")} }),
		sg("pidfd_open a host process", func(e *attackEnv) []step {
			return []step{pidfdOpen(e.hostPID, "test"), pidfdOpen(e.sleepPID, "host sleep")}
		}),
		sg("F_SETOWN to a host process", func(e *attackEnv) []step { return []step{setown(e.hostPID)} }),
		{name: "renice the host's processes of the same uid", class: classSignals, attack: renice, verify: sleepNotReniced},
		{name: "reach another run's session", class: classSignals, verify: otherSessionAlive, attack: fails(func(e *attackEnv) []step {
			return []step{
				killStep(e.otherPID, unix.SIGKILL, "another session's command"), pidfdOpen(e.otherPID, "another session's command"),
				openFor(fmt.Sprintf("/proc/%d/root/workspace", e.otherPID), unix.O_RDONLY),
				openFor(fmt.Sprintf("/proc/%d/fd/0", e.otherPID), unix.O_RDONLY),
			}
		})},
		{name: "SIGKILL the init", class: classSignals, attack: killInit},
		{name: "SIGTERM the init", class: classSignals, attack: signalInit(unix.SIGTERM)},
		{name: "SIGQUIT the init", class: classSignals, attack: signalInit(unix.SIGQUIT)},

		{name: "TIOCSTI on a terminal given as stdin", class: classTTY, want: "EPERM", setup: givePTY, verify: ptyQuiet, attack: fails(func(e *attackEnv) []step {
			return []step{ioctlStep("ioctl(0, TIOCSTI)", false, unix.TIOCSTI, '!')}
		})},
		{name: "TIOCSTI on /dev/tty", class: classTTY, want: "EPERM", setup: givePTY, verify: ptyQuiet, attack: fails(func(e *attackEnv) []step {
			return []step{ioctlStep("ioctl(/dev/tty, TIOCSTI)", true, unix.TIOCSTI, '!')}
		})},
		{name: "TIOCSTI with high bits in the request", class: classTTY, want: "EPERM", setup: givePTY, verify: ptyQuiet, attack: fails(func(e *attackEnv) []step {
			return []step{ioctlStep("ioctl(0, 0xdead00000000|TIOCSTI)", false, 0xdead<<32|unix.TIOCSTI, '!')}
		})},
		{name: "TIOCLINUX on the terminal", class: classTTY, want: "EPERM", setup: givePTY, verify: ptyQuiet, attack: fails(func(e *attackEnv) []step {
			return []step{ioctlStep("ioctl(0, TIOCLINUX, TIOCL_PASTESEL)", false, unix.TIOCLINUX, 3), ioctlStep("ioctl(/dev/tty, TIOCLINUX)", true, unix.TIOCLINUX, 3)}
		})},
		{name: "TIOCSTI on /dev/null as stdin", class: classTTY, want: "EPERM", attack: fails(func(e *attackEnv) []step {
			return []step{ioctlStep("ioctl(0, TIOCSTI)", false, unix.TIOCSTI, '!')}
		})},

		{name: "orphan after exit", class: classOrphans, attack: daemonThen(func() {})},
		{name: "orphan after stop", class: classOrphans, end: "stop", attack: daemonThen(sleepForever)},
		{name: "orphan after kill", class: classOrphans, end: "kill", attack: daemonThen(sleepForever)},
		{name: "orphan after the wall timeout", class: classOrphans, limits: Limits{Wall: time.Second}, violation: ViolationTimeout, attack: daemonThen(sleepForever)},
		{name: "orphan after the output limit", class: classOrphans, limits: Limits{Output: 4096}, violation: ViolationOutput, attack: daemonThen(floodStdout)},
	}
}

// TestEscapeCaseTable checks the table itself: unique names, known classes.
func TestEscapeCaseTable(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range escapeCases() {
		if seen[c.name] || c.attack == nil || !slices.Contains(escapeClasses, c.class) {
			t.Errorf("case %q: duplicate, no attack, or unknown class %q", c.name, c.class)
		}
		seen[c.name] = true
	}
}

func TestEscape(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (about a minute): skipped under -short; make test runs it")
	}
	needSandbox(t)
	start := time.Now()
	h := newEscapeHost(t)
	ran, skipped := map[string]int{}, map[string]int{}
	for i, c := range escapeCases() {
		t.Run(c.name, func(t *testing.T) { h.runCase(t, i, c) })
	}
	// Count after the runs: a case skipped in setup counts as skipped.
	for _, c := range escapeCases() {
		if h.skipped[c.name] {
			skipped[c.class]++
		} else {
			ran[c.class]++
		}
	}
	total := 0
	for i, cl := range escapeClasses {
		t.Logf("class %2d %-34s %3d cases (%d skipped)", i+1, cl, ran[cl], skipped[cl])
		total += ran[cl]
		// A case may skip for want of something on the host (a setuid
		// file, a listener); a whole class may not where CI runs.
		if ran[cl] == 0 && kerneltest.Required() {
			t.Errorf("class %q: all %d cases skipped (%s=1: every attack class must run here)", cl, skipped[cl], kerneltest.Env)
		}
	}
	t.Logf("escape suite: %d cases in %v", total, time.Since(start).Round(time.Millisecond))
	if total < 60 {
		t.Errorf("only %d escape cases ran, want at least 60", total)
	}
	udpSilent(t, &caseRun{h: h})
}

// runCase runs one case in its own sandbox and judges it.
func (h *escapeHost) runCase(t *testing.T, i int, c escapeCase) {
	r := &caseRun{h: h, ws: h.ro, nonce: fmt.Sprintf("%s%03dz", h.nonce, i)}
	mode := ReadOnly
	if c.rw {
		mode = ReadWrite
		r.ws = h.newWorkspace(t, fmt.Sprintf("rw-%03d", i))
	}
	if c.setup != nil {
		h.skipped[c.name] = true // until setup returns: t.Skip ends the goroutine
		c.setup(t, r)
		h.skipped[c.name] = false
	}
	before := h.snapshot()
	l := c.limits
	if l.Wall == 0 {
		l.Wall = 10 * time.Second
	}
	e := h.env
	e.nonce = r.nonce
	// GORACE: under -race, a race-enabled attack would otherwise wait 1s at exit.
	env := append(slices.Clone(testEnv), childEnv+"=attack", "ATTACK="+c.name, "GORACE=atexit_sleep_ms=0")
	env = append(env, e.environ()...)
	var stdin io.Reader
	if r.stdin != nil {
		stdin = r.stdin
	}
	out := &verdictWriter{reported: make(chan struct{})}
	sb, err := Start(Config{}, Spec{Workspace: r.ws, Mode: mode, Limits: l, Env: env, Command: []string{insideWorkspace + "/attack", "-test.run=^$"}}, stdin, out, out)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if c.end != "" {
		select {
		case <-out.reported:
		case <-sb.Done():
		}
		if c.end == "stop" {
			sb.Stop(200 * time.Millisecond)
		} else {
			sb.Kill()
		}
	}
	r.res, err = sb.Wait()
	if err != nil {
		t.Errorf("Wait: %v", err)
	}
	r.out = out.String()
	r.verdict = verdictLine(r.out)
	t.Logf("%s [exit %d %s, violation %q]", r.verdict, r.res.ExitCode, r.res.Signal, r.res.Violation)

	if r.res.Violation != c.violation {
		t.Errorf("violation %q, want %q", r.res.Violation, c.violation)
	}
	switch {
	case strings.Contains(r.out, "ESCAPED "):
		t.Errorf("the attack succeeded: %s", r.verdict)
	case c.violation == "" && !strings.HasPrefix(r.verdict, "BLOCKED "):
		t.Errorf("no BLOCKED verdict; output:\n%.2000s", r.out)
	case c.want != "" && !strings.Contains(r.verdict, c.want):
		t.Errorf("verdict %q does not say %s", r.verdict, c.want)
	}
	if c.verify != nil {
		c.verify(t, r)
	}
	h.checkHost(t, r.nonce, before)
}

// verdictWriter collects a run's output and tells when a verdict came.
type verdictWriter struct {
	mu       sync.Mutex
	buf      bytes.Buffer
	reported chan struct{}
	once     sync.Once
}

func (w *verdictWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if verdictLine(w.buf.String()) != "" {
		w.once.Do(func() { close(w.reported) })
	}
	return len(p), nil
}

func (w *verdictWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// verdictLine is the first verdict line of an output, "" if none.
func verdictLine(out string) string {
	for _, line := range strings.Split(out, "\n") {
		for _, w := range []string{"BLOCKED ", "ESCAPED ", "UNSURE "} {
			if strings.HasPrefix(line, w) {
				return line
			}
		}
	}
	return ""
}

// newEscapeHost builds the host the attacks aim at.
func newEscapeHost(t *testing.T) *escapeHost {
	root := t.TempDir()
	for p := root; p != "/tmp" && p != "/"; p = filepath.Dir(p) {
		must(t, os.Chmod(p, 0o755))
	}
	h := &escapeHost{root: root, nonce: randomHex(6), accepted: map[string]*atomic.Int64{}, skipped: map[string]bool{}}
	h.data = filepath.Join(root, "data")
	h.other = filepath.Join(root, "other-agent")
	h.sibling = filepath.Join(root, "sibling.txt")
	h.sentinel = "/var/tmp/corral-escape-sentinel-" + h.nonce
	// Everything is readable, most of it writable by the sandbox's host uid:
	// only the sandbox may stand in the way.
	mkdir(t, h.data, 0o755, 0)
	mkfile(t, filepath.Join(h.data, "corral.db"), "SQLite format 3\x00corral server database "+randomHex(8), 0o644, 0)
	mkfile(t, filepath.Join(h.data, "secret"), "server secret "+randomHex(8), 0o644, 0)
	mkdir(t, h.other, 0o777, 65534)
	mkfile(t, filepath.Join(h.other, "secret.txt"), "other agent's secret "+randomHex(8), 0o666, 65534)
	mkfile(t, h.sibling, "next to the workspace "+randomHex(8), 0o666, 65534)
	mkfile(t, h.sentinel, "host sentinel outside /tmp "+randomHex(8), 0o666, 65534)
	t.Cleanup(func() { os.Remove(h.sentinel) })
	h.bin = filepath.Join(root, "attack-bin")
	exe, err := os.Executable()
	must(t, err)
	copyFile(t, exe, h.bin, 0o755)
	h.ro = filepath.Join(root, "ro-workspace")
	mkdir(t, h.ro, 0o777, 65534)
	copyFile(t, h.bin, filepath.Join(h.ro, "attack"), 0o755)
	mkfile(t, filepath.Join(h.ro, roFile), "read-only workspace file: any change is an escape\n", 0o666, 65534)
	mkdir(t, filepath.Join(h.ro, "dir"), 0o777, 65534)
	mkfile(t, filepath.Join(h.ro, roInner), "inner file\n", 0o666, 65534)
	mkdir(t, filepath.Join(h.ro, roEmptyDir), 0o777, 65534)

	var canaries []string
	for _, n := range escapeCanaryNames {
		v := "corral-canary-" + randomHex(10)
		t.Setenv(n, v)
		canaries = append(canaries, v)
	}

	h.env = attackEnv{data: h.data, other: h.other, sibling: h.sibling, parent: root, sentinel: h.sentinel, canaries: canaries,
		hostPID: os.Getpid(), abstract: "corral-escape-" + h.nonce, unixSock: filepath.Join(root, "host.sock")}
	h.env.hostPGID, _ = unix.Getpgid(0)
	h.env.tcp = h.listen(t, "tcp", "tcp4", "127.0.0.1:0")
	h.env.tcp6 = h.listen(t, "tcp6", "tcp6", "[::1]:0")
	if ip := hostAddress(); ip != "" {
		h.env.hostTCP = h.listen(t, "host address", "tcp4", net.JoinHostPort(ip, "0"))
	}
	h.listen(t, "abstract", "unix", "@"+h.env.abstract)
	h.listen(t, "unix", "unix", h.env.unixSock)
	must(t, os.Chmod(h.env.unixSock, 0o777))
	udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	must(t, err)
	t.Cleanup(func() { udp.Close() })
	h.udp, h.env.udp = udp, udp.LocalAddr().String()

	h.sleep = exec.Command("sleep", "3600")
	h.sleep.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}, Pdeathsig: syscall.SIGKILL}
	must(t, h.sleep.Start())
	h.slept = make(chan struct{})
	go func() { h.sleep.Wait(); close(h.slept) }()
	t.Cleanup(func() { h.sleep.Process.Kill(); <-h.slept })
	h.env.sleepPID = h.sleep.Process.Pid

	// Another run's session, with a command of the same host uid in it.
	other, err := StartSession(Config{}, SessionSpec{Workspace: h.ro, Mode: ReadOnly})
	must(t, err)
	t.Cleanup(func() { other.End(); other.Wait() })
	null, err := os.Open(os.DevNull)
	must(t, err)
	defer null.Close()
	h.otherProc, err = other.Exec(Command{Argv: []string{"sleep", "3601"}, Env: testEnv}, null, null, null)
	must(t, err)
	h.env.otherPID = hostPIDOf(t, "sleep\x003601")

	// A SysV shared memory segment: it lives in the host's IPC namespace.
	var b [4]byte
	rand.Read(b[:])
	h.env.shmKey = int(binary.BigEndian.Uint32(b[:]) >> 1)
	shm, err := unix.SysvShmGet(h.env.shmKey, 4096, unix.IPC_CREAT|unix.IPC_EXCL|0o666)
	must(t, err)
	t.Cleanup(func() { unix.SysvShmCtl(shm, unix.IPC_RMID, nil) })
	h.env.suid = setuidRootFiles()
	h.env.devices, h.env.blockDevs = hostDevices()
	h.watched = []string{h.data, h.other, h.ro, h.sibling, h.sentinel, "/etc/passwd", "/etc/shadow", "/etc/hostname", "/usr/bin/env"}
	return h
}

// newWorkspace makes a read-write workspace with the attack binary in it.
func (h *escapeHost) newWorkspace(t *testing.T, name string) string {
	dir := filepath.Join(h.root, name)
	mkdir(t, dir, 0o755, 65534)
	must(t, os.Link(h.bin, filepath.Join(dir, "attack")))
	return dir
}

// listen starts a host listener that counts what it accepts; "" when the
// host cannot listen there (no IPv6).
func (h *escapeHost) listen(t *testing.T, name, network, addr string) string {
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Logf("no %s listener: %v", name, err)
		return ""
	}
	t.Cleanup(func() { l.Close() })
	n := new(atomic.Int64)
	h.accepted[name] = n
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return l.Addr().String()
}

// checkHost judges what the attack cannot see: the host is as it was.
func (h *escapeHost) checkHost(t *testing.T, nonce string, before map[string]string) {
	t.Helper()
	after := h.snapshot()
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if before[k] != after[k] {
			t.Errorf("host changed: %s: %q -> %q", k, before[k], after[k])
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			t.Errorf("host changed: %s is gone", k)
		}
	}
	for _, dir := range []string{"/", "/etc", "/usr/bin", "/tmp", "/var/tmp", "/dev", "/dev/shm", h.root, h.data, h.other} {
		found, _ := filepath.Glob(filepath.Join(dir, "corral-escape-"+nonce+"*"))
		for _, p := range found {
			t.Errorf("the attack created %s on the host", p)
			os.RemoveAll(p)
		}
	}
	if ps := processesMarked(nonce); len(ps) > 0 {
		t.Errorf("processes of the sandbox outlived it: %v", ps)
	}
	select {
	case <-h.slept:
		t.Fatalf("the host's sleep (uid 65534, the sandbox's host uid) died")
	default:
	}
	for name, n := range h.accepted {
		if c := n.Swap(0); c > 0 {
			t.Errorf("the host's %s listener accepted %d connections", name, c)
		}
	}
}

// processesMarked lists (and kills) the host processes whose command line
// or environment holds the nonce.
func processesMarked(nonce string) []string {
	var found []string
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		for _, f := range []string{"cmdline", "environ"} {
			b, _ := os.ReadFile("/proc/" + d.Name() + "/" + f)
			if bytes.Contains(b, []byte(nonce)) {
				cmdline, _ := os.ReadFile("/proc/" + d.Name() + "/cmdline")
				found = append(found, fmt.Sprintf("%d %q", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
				unix.Kill(pid, unix.SIGKILL)
				break
			}
		}
	}
	return found
}

// snapshot describes every watched file: metadata, and the SHA-256 of a
// regular file's content; plus the entries of the workspaces' parent.
func (h *escapeHost) snapshot() map[string]string {
	m := map[string]string{}
	for _, p := range h.watched {
		filepath.WalkDir(p, func(path string, _ fs.DirEntry, _ error) error {
			m[path] = h.state(path)
			return nil
		})
	}
	var names []string
	ents, _ := os.ReadDir(h.root)
	for _, d := range ents {
		if !strings.HasPrefix(d.Name(), "rw-") {
			names = append(names, d.Name())
		}
	}
	m[h.root+" entries"] = strings.Join(names, " ")
	return m
}

func (h *escapeHost) state(path string) string {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return "error " + errName(err)
	}
	s := fmt.Sprintf("mode %o uid %d gid %d size %d nlink %d mtime %d.%09d ctime %d.%09d",
		st.Mode, st.Uid, st.Gid, st.Size, st.Nlink, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		target, _ := os.Readlink(path)
		s += " -> " + target
	case unix.S_IFREG:
		// A write changes the ctime, which no process can set back: the
		// content needs hashing again only when the metadata changed.
		key := fmt.Sprintf("%d:%d %s", st.Dev, st.Ino, s)
		if sum, ok := h.sums.Load(key); ok {
			return s + " sha256 " + sum.(string)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return s + " unreadable: " + err.Error()
		}
		sum := sha256.Sum256(b)
		h.sums.Store(key, hex.EncodeToString(sum[:]))
		s += " sha256 " + hex.EncodeToString(sum[:])
	}
	return s
}

// Setup and verify hooks.

// leakFD opens the server's database without close-on-exec, as a server
// holds any descriptor it inherited that way (from a shell, a supervisor):
// the sandbox must not hand it to the command.
func leakFD(t *testing.T, r *caseRun) {
	fd, err := unix.Open(filepath.Join(r.h.data, "corral.db"), unix.O_RDONLY, 0)
	must(t, err)
	t.Cleanup(func() { unix.Close(fd) })
}

func needSetuid(path string) func(t *testing.T, r *caseRun) {
	return func(t *testing.T, r *caseRun) {
		if !slices.Contains(r.h.env.suid, path) {
			t.Skipf("%s is not a setuid-root file on this host", path)
		}
	}
}

func needEnv(what string) func(t *testing.T, r *caseRun) {
	return func(t *testing.T, r *caseRun) {
		if (what == "tcp6" && r.h.env.tcp6 == "") || (what == "hostTCP" && r.h.env.hostTCP == "") {
			t.Skipf("the host has no %s listener", what)
		}
	}
}

// plant puts a copy of the attack binary in the workspace, owned by root
// with mode (0o4755: setuid).
func plant(name string, mode uint32) func(t *testing.T, r *caseRun) {
	return func(t *testing.T, r *caseRun) {
		p := filepath.Join(r.ws, name)
		copyFile(t, r.h.bin, p, 0o755)
		must(t, os.Chown(p, 0, 0))
		must(t, unix.Chmod(p, mode)) // after chown, which clears the setuid bits
	}
}

// plantFileCaps puts a copy of the attack binary with the file capabilities
// CAP_SYS_ADMIN and CAP_DAC_OVERRIDE, effective, in the workspace.
func plantFileCaps(t *testing.T, r *caseRun) {
	p := filepath.Join(r.ws, "attack-fcaps")
	copyFile(t, r.h.bin, p, 0o755)
	caps := make([]byte, 20) // struct vfs_cap_data, revision 2
	binary.LittleEndian.PutUint32(caps[0:], 0x02000000|1)
	binary.LittleEndian.PutUint32(caps[4:], 1<<unix.CAP_SYS_ADMIN|1<<unix.CAP_DAC_OVERRIDE)
	must(t, unix.Setxattr(p, "security.capability", caps, 0))
}

// plantDevice makes a device node, readable and writable by all, in the
// workspace: the host's root disk ("disk") or the kernel log ("kmsg").
func plantDevice(name string) func(t *testing.T, r *caseRun) {
	return func(t *testing.T, r *caseRun) {
		mode, dev := uint32(unix.S_IFCHR), unix.Mkdev(1, 11)
		if name == "disk" {
			var st unix.Stat_t
			must(t, unix.Stat("/", &st))
			mode, dev = unix.S_IFBLK, st.Dev
		}
		p := filepath.Join(r.ws, name)
		must(t, unix.Mknod(p, mode|0o666, int(dev)))
		must(t, os.Chmod(p, 0o666))
	}
}

// givePTY gives the command a pseudo-terminal as stdin, in raw mode so that
// one injected byte is readable at once.
func givePTY(t *testing.T, r *caseRun) {
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	must(t, err)
	t.Cleanup(func() { unix.Close(m) })
	must(t, unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetUint32(m, unix.TIOCGPTN)
	must(t, err)
	s, err := unix.Open(fmt.Sprintf("/dev/pts/%d", n), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	must(t, err)
	tio, err := unix.IoctlGetTermios(s, unix.TCGETS)
	must(t, err)
	tio.Lflag &^= unix.ICANON | unix.ECHO
	must(t, unix.IoctlSetTermios(s, unix.TCSETS, tio))
	r.stdin = os.NewFile(uintptr(s), "pty")
	t.Cleanup(func() { r.stdin.Close() })
}

func ptyQuiet(t *testing.T, r *caseRun) {
	if n, err := unix.IoctlGetInt(int(r.stdin.Fd()), unix.TIOCINQ); err != nil || n != 0 {
		t.Errorf("the terminal holds %d bytes of input (%v): the injection reached it", n, err)
	}
}

func udpSilent(t *testing.T, r *caseRun) {
	r.h.udp.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	buf := make([]byte, 512)
	if n, from, err := r.h.udp.ReadFrom(buf); err == nil {
		t.Errorf("the host's UDP socket received %q from %v", buf[:n], from)
	}
}

// hostPIDOf finds the one host process whose command line is cmdline
// (arguments separated by NULs), waiting for it to start.
func hostPIDOf(t *testing.T, cmdline string) int {
	t.Helper()
	pid := 0
	poll.Within(t, 30*time.Second, fmt.Sprintf("a process %q", cmdline), func() bool {
		dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, d := range dirs {
			if b, err := os.ReadFile(d); err == nil && string(bytes.TrimRight(b, "\x00")) == cmdline {
				pid, _ = strconv.Atoi(filepath.Base(filepath.Dir(d)))
				return true
			}
		}
		return false
	})
	return pid
}

// noSetIDFiles checks that nothing in the case's workspace has the setuid
// or setgid bit.
func noSetIDFiles(t *testing.T, r *caseRun) {
	filepath.WalkDir(r.ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			t.Errorf("%s has mode %v", p, fi.Mode())
		}
		return nil
	})
}

// otherSessionAlive checks the other session's command still runs.
func otherSessionAlive(t *testing.T, r *caseRun) {
	select {
	case <-r.h.otherProc.Done():
		t.Errorf("the other session's command ended")
	default:
	}
}

func sleepNotReniced(t *testing.T, r *caseRun) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", r.h.sleep.Process.Pid))
	must(t, err)
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if f[16] != "0" { // field 19, nice
		t.Errorf("the host's sleep of the same uid has nice %s, want 0", f[16])
	}
}

// outputBounded checks the kept output is the limit plus the marker at most.
func outputBounded(limit int) func(t *testing.T, r *caseRun) {
	return func(t *testing.T, r *caseRun) {
		if max := limit + len(fmt.Sprintf(OutputMarker, limit)); len(r.out) > max {
			t.Errorf("kept %d bytes of output, want at most %d", len(r.out), max)
		}
	}
}

var afterCount = regexp.MustCompile(`after (\d+) (bytes|files)`)

// countAtMost checks the amount the attack reached before it was stopped.
func countAtMost(max int64) func(t *testing.T, r *caseRun) {
	return func(t *testing.T, r *caseRun) {
		m := afterCount.FindStringSubmatch(r.verdict)
		if m == nil {
			t.Errorf("verdict %q says not how far it got", r.verdict)
			return
		}
		if n, _ := strconv.ParseInt(m[1], 10, 64); n > max || n == 0 {
			t.Errorf("reached %d %s, want between 1 and %d", n, m[2], max)
		}
	}
}

// setuidRootFiles lists the host's setuid-root files in the directories the
// sandbox binds.
func setuidRootFiles() []string {
	var files []string
	for _, dir := range []string{"/usr/bin", "/usr/sbin", "/usr/lib", "/usr/libexec", "/usr/local"} {
		filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			var st unix.Stat_t
			if unix.Lstat(path, &st) == nil && st.Mode&unix.S_ISUID != 0 && st.Uid == 0 {
				files = append(files, path)
			}
			return nil
		})
	}
	return files
}

// hostDevices lists the host's device nodes that the sandbox does not
// provide, and its block devices. Devices that act on open (a hardware
// watchdog, hibernation) are left out, in case an attack ever reached them.
func hostDevices() (devices, blocks []string) {
	ents, _ := os.ReadDir("/dev")
	for _, d := range ents {
		n := d.Name()
		if strings.HasPrefix(n, "watchdog") || n == "snapshot" || d.Type()&fs.ModeDevice == 0 {
			continue
		}
		if slices.Contains([]string{"null", "zero", "full", "random", "urandom", "tty"}, n) {
			continue
		}
		devices = append(devices, "/dev/"+n)
		if d.Type()&fs.ModeCharDevice == 0 {
			blocks = append(blocks, "/dev/"+n)
		}
	}
	return devices, blocks
}

// hostAddress is one of the host's non-loopback IPv4 addresses, or "".
func hostAddress() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

func mkdir(t *testing.T, dir string, mode os.FileMode, owner int) {
	must(t, os.Mkdir(dir, mode))
	must(t, os.Chmod(dir, mode))
	must(t, os.Chown(dir, owner, owner))
}

func mkfile(t *testing.T, file, content string, mode os.FileMode, owner int) {
	must(t, os.WriteFile(file, []byte(content), mode))
	must(t, os.Chmod(file, mode))
	must(t, os.Chown(file, owner, owner))
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	b, err := os.ReadFile(src)
	must(t, err)
	must(t, os.WriteFile(dst, b, mode))
	must(t, os.Chmod(dst, mode))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// TestEscapeSuiteCanFail runs one attack of each class that is safe to run
// on the host directly, outside any sandbox, and expects it to succeed: the
// attacks do attack, and BLOCKED inside is not a tautology. Resource
// attacks, TIOCSTI and the rest that could harm the host are left out.
func TestEscapeSuiteCanFail(t *testing.T) {
	needSandbox(t)
	h := newEscapeHost(t)
	ws := h.newWorkspace(t, "host-ws")
	mkfile(t, filepath.Join(ws, roFile), "a file\n", 0o666, 65534)
	plant("attack-suid", 0o4755)(t, &caseRun{h: h, ws: ws})
	byName := map[string]escapeCase{}
	for _, c := range escapeCases() {
		byName[c.name] = c
	}
	for i, m := range []struct {
		name string
		uid  int  // run as this host uid; 0: as root
		mnt  bool // in a new mount namespace, so that a mount stays there
	}{
		{name: "write the host sentinel by its path"},
		{name: "create a file"},
		{name: "read the host sentinel through a symlink"},
		{name: "read the server's data directory"},
		{name: "PTRACE_ATTACH an own child"},
		{name: "mount a tmpfs", mnt: true},
		{name: "planted setuid-root binary", uid: 65534},
		{name: "open /dev/kmsg"},
		{name: "TCP to the host's 127.0.0.1 listener"},
		{name: "kill a host process of the same uid"},
	} {
		c, ok := byName[m.name]
		if !ok {
			t.Fatalf("no case %q", m.name)
		}
		t.Run(c.class, func(t *testing.T) {
			out := h.runOnHost(t, ws, c.name, fmt.Sprintf("%smeta%02dz", h.nonce, i), m.uid, m.mnt)
			if v := verdictLine(out); !strings.HasPrefix(v, "ESCAPED ") {
				t.Errorf("%q on the host, unconfined: %q, want ESCAPED; output:\n%s", c.name, v, out)
			} else {
				t.Logf("%s: %s", c.name, v)
			}
		})
	}
	t.Run(classOrphans, func(t *testing.T) {
		nonce := h.nonce + "metaorphanz"
		h.runOnHost(t, ws, "orphan after exit", nonce, 0, false)
		if ps := processesMarked(nonce); len(ps) == 0 {
			t.Errorf("the orphan scan found nothing after a daemon was left on the host")
		} else {
			t.Logf("the scan found (and killed) %v", ps)
		}
	})
	t.Run("sentinel hashes", func(t *testing.T) {
		before := h.snapshot()
		f, err := os.OpenFile(h.sibling, os.O_WRONLY|os.O_APPEND, 0)
		must(t, err)
		f.WriteString("x")
		f.Close()
		changed := 0
		for k, v := range h.snapshot() {
			if before[k] != v {
				changed++
			}
		}
		if changed == 0 {
			t.Errorf("appending to %s changed no hash", h.sibling)
		}
	})
}

// runOnHost runs an attack as a plain host process, with the workspace ws.
func (h *escapeHost) runOnHost(t *testing.T, ws, name, nonce string, uid int, mnt bool) string {
	e := h.env
	e.ws, e.nonce = ws, nonce
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(ws, "attack"), "-test.run=^$")
	cmd.Env = append(append(slices.Clone(testEnv), childEnv+"=attack", "ATTACK="+name), e.environ()...)
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if uid != 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}
	}
	if mnt {
		cmd.SysProcAttr.Unshareflags = syscall.CLONE_NEWNS
	}
	out, _ := cmd.CombinedOutput()
	return string(out)
}
