package sandbox

// The workspace keeps its host owner. The sandbox's user is one host
// identity (65534 when the server runs as root); a workspace that belongs to
// someone else (root's project, a colleague's checkout) is handed to the
// sandbox as an idmapped mount: through it, the directory's owner appears as
// the sandbox's user, so the command works on the tree as its owner would
// (within the owner's permission bits, with no capability), and what it
// creates belongs on the host to the directory's owner, uid and gid alike.
//
// The rule, decided from the directory itself:
//
//   - owned by the sandbox's host user and group, and reachable by them along
//     its path: the init binds it by its path, as it always did (the
//     server's staged trees);
//   - otherwise the server, root on the host, opens the tree itself (so no
//     parent needs to be searchable by the sandbox's user) as a detached
//     mount, nosuid, nodev, private, read-only in read-only mode, and
//     idmapped when the owner is not the sandbox's user. The init attaches
//     it at /workspace with move_mount before it confines itself.
//
// Where the kernel or the filesystem cannot idmap, the session is refused
// (EUNAVAIL, naming what is missing): Corral never changes the owner of the
// user's files and never falls back to files owned by the sandbox's user.
//
// The syscall sequence, all on the host before the init starts:
//
//	openat2(path, O_PATH|O_DIRECTORY, RESOLVE_NO_SYMLINKS)  the checked path, still symlink-free
//	fstat                                                    the owner, from what was opened
//	open_tree(fd, "", OPEN_TREE_CLONE|AT_EMPTY_PATH)          a detached bind mount
//	mount_setattr(nosuid, nodev[, rdonly], MS_PRIVATE)
//	clone(CLONE_NEWUSER) stopped at exec, uid_map "owner hostuid 1", gid_map likewise
//	mount_setattr(MOUNT_ATTR_IDMAP, /proc/PID/ns/user)        then the helper is killed
//
// and in the init, in its own mount namespace after pivot_root:
//
//	move_mount(fd, "", AT_FDCWD, "/workspace", MOVE_MOUNT_F_EMPTY_PATH)
//
// The idmapping maps the owner, as the id the filesystem stores, to the
// sandbox user's host id: the kernel reads an on-disk id through a mount's
// idmapping as an id inside it (make_kuid), and writes the caller's id back
// through the inverse (from_kuid), so "owner -> 65534" shows the owner's
// files as the sandbox user's and stores the sandbox user's as the owner's.
// Other ids have no mapping: their files show as nobody and cannot be
// chowned, as before.

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"corral"
)

// openWorkspace decides how the workspace reaches the init. nil: the init
// binds it by its path. Otherwise the file is a detached mount of it, ready
// to attach, idmapped where needed; the caller closes it once the init has
// it. initPath is the binary the idmapping's helper process is made from.
func openWorkspace(dir string, write bool, uid, gid int, initPath string) (*os.File, error) {
	// The path was resolved and checked (checkWorkspace); refusing any
	// symbolic link now means a path changed since cannot lead elsewhere,
	// which matters because what is opened here is opened as root.
	fd, err := unix.Openat2(unix.AT_FDCWD, dir, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOSYS) {
		return nil, kernelLacks(dir, "openat2", "5.6", err)
	}
	if err != nil {
		return nil, invalid("workspace %s cannot be opened (did it change while it was checked?): %v", dir, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, corral.Internal("sandbox: stat workspace", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, invalid("workspace %q is not a directory", dir)
	}
	// Either way the sandbox's user is the directory's owner: its owner
	// bits are what the command gets.
	if err := ownerMay(dir, st.Mode, write); err != nil {
		return nil, err
	}
	owned := int(st.Uid) == uid && int(st.Gid) == gid
	if owned {
		ok, err := reachable(dir, uid, gid)
		if err != nil {
			return nil, err
		}
		if ok {
			return nil, nil
		}
	}
	return cloneWorkspace(fd, dir, write, owned, &st, uid, gid, initPath)
}

// cloneWorkspace makes the detached mount of the directory open at fd.
func cloneWorkspace(fd int, dir string, write, owned bool, st *unix.Stat_t, uid, gid int, initPath string) (*os.File, error) {
	// Not recursive, as the bind by path: mounts under the workspace stay
	// out, their mount points show empty.
	mfd, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return nil, idmapUnavailable(dir, "open_tree", err, st, uid, gid, fsType(dir))
	}
	mnt := os.NewFile(uintptr(mfd), "workspace-mount")
	fail := func(e error) (*os.File, error) {
		mnt.Close()
		return nil, e
	}
	// Private: a clone of a shared mount would stay a peer of the host's,
	// and mounts would propagate between the host and the sandbox.
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Propagation: unix.MS_PRIVATE}
	if !write {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(mfd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return fail(idmapUnavailable(dir, "mount_setattr", err, st, uid, gid, fsType(dir)))
	}
	if owned {
		return mnt, nil
	}
	ns, err := idmapUserns(initPath, int(st.Uid), int(st.Gid), uid, gid)
	if err != nil {
		return fail(err)
	}
	defer ns.Close()
	// Its own call, so that EINVAL here means the idmapping alone.
	if err := unix.MountSetattr(mfd, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns.Fd())}); err != nil {
		return fail(idmapUnavailable(dir, "idmap", err, st, uid, gid, fsType(dir)))
	}
	return mnt, nil
}

// idmapUserns returns a user namespace that maps owner to uid and group to
// gid, the idmapping of the workspace's mount. A user namespace lives while
// a process or a descriptor holds it: a throwaway child is created in it,
// stopped (PTRACE_TRACEME) at its execve so that none of its program runs,
// its namespace opened, and the child killed. runc makes its idmappings the
// same way.
func idmapUserns(exe string, owner, group, uid, gid int) (*os.File, error) {
	// The tracer, and the parent Pdeathsig watches, is this thread: it
	// stays until the child is reaped.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p, err := os.StartProcess(exe, []string{"corral-idmap"}, &os.ProcAttr{
		Env: []string{},
		Sys: &syscall.SysProcAttr{
			Cloneflags:                 syscall.CLONE_NEWUSER,
			UidMappings:                []syscall.SysProcIDMap{{ContainerID: owner, HostID: uid, Size: 1}},
			GidMappings:                []syscall.SysProcIDMap{{ContainerID: group, HostID: gid, Size: 1}},
			GidMappingsEnableSetgroups: false,
			Ptrace:                     true,
			Pdeathsig:                  syscall.SIGKILL,
		},
	})
	if err != nil {
		return nil, corral.Errorf(corral.EUNAVAIL, "sandbox: cannot create the user namespace of the workspace's idmapping (it takes a user namespace and PTRACE_TRACEME): %v", err)
	}
	defer func() {
		p.Kill()
		p.Wait()
	}()
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", p.Pid))
	if err != nil {
		return nil, corral.Internal("sandbox: open the idmapping's user namespace", err)
	}
	return ns, nil
}

// attachWorkspace attaches the detached mount at fd on dst, in the init's
// mount namespace, and closes fd.
func attachWorkspace(fd int, dst string) error {
	defer unix.Close(fd)
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount the workspace: %w", err)
	}
	return nil
}

// ownerMay refuses a directory whose owner bits do not give what the mode
// needs: search and read, and write in read-write mode. The sandbox's user
// acts as the owner, so a clear error here beats EACCES inside.
func ownerMay(dir string, mode uint32, write bool) error {
	want, verb, bits := uint32(0o500), "readable", "rx"
	if write {
		want, verb, bits = 0o700, "writable", "rwx"
	}
	if mode&want != want {
		return invalid("workspace %s is not %s by its owner (mode %04o), as whom the sandbox works in it: chmod u+%s it", dir, verb, mode&0o7777, bits)
	}
	return nil
}

// idmapUnavailable is the error for a workspace the kernel would not hand
// over, step being the refused call: EUNAVAIL naming what is missing.
func idmapUnavailable(dir, step string, err error, st *unix.Stat_t, uid, gid int, fs string) error {
	owner := fmt.Sprintf("owned by %d:%d, not by the sandbox's user %d:%d", st.Uid, st.Gid, uid, gid)
	if int(st.Uid) == uid && int(st.Gid) == gid {
		owner = fmt.Sprintf("owned by the sandbox's user %d:%d but not reachable by it along its path", uid, gid)
	}
	var what string
	switch {
	case errors.Is(err, unix.ENOSYS) && step == "open_tree":
		return kernelLacks(dir, "open_tree", "5.2", err)
	case errors.Is(err, unix.ENOSYS):
		return kernelLacks(dir, "mount_setattr", "5.12", err)
	case errors.Is(err, unix.EPERM) && os.Geteuid() != 0:
		what = "handing it to the sandbox as a mount of its own needs Corral to run as root"
	case step == "idmap" && errors.Is(err, unix.EINVAL):
		// The lists are upstream's FS_ALLOW_IDMAP as of 6.18 (overlayfs
		// mounts themselves gained it only in 2026, after 7.2-rc1).
		what = fmt.Sprintf("its filesystem (%s) cannot be idmapped on this kernel (Linux %s; ext4, xfs, btrfs, vfat and, from 6.3, tmpfs can; overlayfs, NFS and ramfs cannot)", fs, kernelRelease())
	case step == "idmap":
		what = fmt.Sprintf("the kernel refused to idmap it (%v; an idmapped mount cannot be idmapped again before Linux 6.15)", err)
	default:
		what = fmt.Sprintf("the kernel refused %s on it (%v)", step, err)
	}
	return &corral.Error{Code: corral.EUNAVAIL, Op: "sandbox", Err: err, Message: fmt.Sprintf(
		"sandbox: workspace %s is %s, and %s. Corral does not change the owner of your files: use a workspace on a filesystem that can be idmapped, or make it the sandbox user's yourself (chown -R %d:%d)",
		dir, owner, what, uid, gid)}
}

// kernelLacks is the error for a kernel without a system call the
// workspace needs.
func kernelLacks(dir, call, since string, err error) error {
	return &corral.Error{Code: corral.EUNAVAIL, Op: "sandbox", Err: err, Message: fmt.Sprintf(
		"sandbox: workspace %s cannot be handed to the sandbox: this kernel (Linux %s) has no %s (Linux %s and later)", dir, kernelRelease(), call, since)}
}

// fsType names the filesystem dir is on, from the mount table.
func fsType(dir string) string {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, dir, 0, unix.STATX_MNT_ID, &stx); err == nil && stx.Mask&unix.STATX_MNT_ID != 0 {
		if t := mountType(stx.Mnt_id); t != "" {
			return t
		}
	}
	var sfs unix.Statfs_t
	if unix.Statfs(dir, &sfs) == nil {
		return fmt.Sprintf("type 0x%x", sfs.Type)
	}
	return "unknown"
}

// mountType is the filesystem type of mount id in /proc/self/mountinfo.
func mountType(id uint64) string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	want := strconv.FormatUint(id, 10)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if first, _, _ := strings.Cut(line, " "); first != want {
			continue
		}
		if _, rest, ok := strings.Cut(line, " - "); ok {
			t, _, _ := strings.Cut(rest, " ")
			return t
		}
	}
	return ""
}

func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}
