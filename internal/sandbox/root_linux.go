package sandbox

import (
	"fmt"
	"os"
	"path/filepath"

	"corral"

	"golang.org/x/sys/unix"
)

// systemDirs are bound read-only from the host: programs and libraries,
// nothing else. /etc is not among them: it is made from scratch below.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcBinds are the few host files of /etc that programs need to load
// libraries and find alternatives; nothing with secrets.
var etcBinds = []string{"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/localtime"}

// devices are bound from the host's /dev; no other device exists inside.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// etcFiles are written into the sandbox's /etc.
var etcFiles = map[string]string{
	"passwd":        "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\nagent:x:1000:1000:agent:/workspace:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
	"group":         "root:x:0:\nagent:x:1000:\nnogroup:x:65534:\n",
	"hosts":         "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n",
	"hostname":      "sandbox\n",
	"nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
	"resolv.conf":   "",
}

// buildRoot replaces the init's view of the filesystem with the sandbox's
// minimal root and detaches the host's. It runs inside the new mount
// namespace, before privileges are dropped.
//
// The new root is a tmpfs mounted over /tmp and pivoted into; the old root
// then sits at /oldroot, where the host's own /tmp shows again (the tmpfs
// that covered it became /), so a workspace under /tmp is still reachable
// to bind. Once everything is bound, /oldroot is detached and removed.
func buildRoot(s childSpec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=4m,nr_inodes=4096"); err != nil {
		return fmt.Errorf("mount root tmpfs: %w", err)
	}
	if err := os.Mkdir("/tmp/oldroot", 0o700); err != nil {
		return err
	}
	if err := unix.PivotRoot("/tmp", "/tmp/oldroot"); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}

	for _, d := range systemDirs {
		if err := bindFromHost(d, d, true); err != nil {
			return err
		}
	}
	if err := os.Mkdir("/etc", 0o755); err != nil {
		return err
	}
	for name, content := range etcFiles {
		if err := os.WriteFile("/etc/"+name, []byte(content), 0o644); err != nil {
			return err
		}
	}
	for _, p := range etcBinds {
		if err := bindFromHost(p, p, true); err != nil {
			return err
		}
	}

	if err := os.Mkdir(insideWorkspace, 0o755); err != nil {
		return err
	}
	if s.Mounted {
		// The parent made it nosuid, nodev, private and read-only as asked.
		if err := attachWorkspace(fdWorkspace, insideWorkspace); err != nil {
			return err
		}
	} else if err := bindMount("/oldroot"+s.Workspace, insideWorkspace, !s.ReadWrite, unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return fmt.Errorf("bind workspace: %w", err)
	}

	if s.Tools != "" {
		if err := os.MkdirAll(corral.ToolsDir, 0o755); err != nil {
			return err
		}
		if err := bindMount("/oldroot"+s.Tools, corral.ToolsDir, true, unix.MS_NOSUID|unix.MS_NODEV); err != nil {
			return fmt.Errorf("bind tools: %w", err)
		}
	}

	if err := os.Mkdir("/tmp", 0o1777); err != nil {
		return err
	}
	opts := fmt.Sprintf("mode=1777,size=%d,nr_inodes=%d", s.Limits.Tmp, max(s.Limits.Tmp/4096, 1024))
	if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount /tmp: %w", err)
	}

	if err := os.Mkdir("/proc", 0o555); err != nil {
		return err
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}

	if err := os.Mkdir("/dev", 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", "/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k,nr_inodes=64"); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, d := range devices {
		if err := bindFromHost("/dev/"+d, "/dev/"+d, false); err != nil {
			return err
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, "/dev/"+name); err != nil {
			return err
		}
	}
	if err := unix.Mount("", "/dev", "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("remount /dev read-only: %w", err)
	}

	if err := unix.Unmount("/oldroot", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the host root: %w", err)
	}
	if err := os.Remove("/oldroot"); err != nil {
		return err
	}
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("remount / read-only: %w", err)
	}
	return unix.Chdir(insideWorkspace)
}

// bindFromHost binds the host's path (seen under /oldroot) at dst when it
// exists. A host symbolic link becomes the same link (Debian's /bin is one).
func bindFromHost(path, dst string, readOnly bool) error {
	src := "/oldroot" + path
	fi, err := os.Lstat(src)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	}
	flags := uintptr(unix.MS_NOSUID)
	if fi.IsDir() {
		if err := os.Mkdir(dst, 0o755); err != nil {
			return err
		}
		flags |= unix.MS_NODEV
	} else {
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		f.Close()
		if fi.Mode()&os.ModeDevice == 0 {
			flags |= unix.MS_NODEV
		}
	}
	return bindMount(src, dst, readOnly, flags)
}

// bindMount binds src at dst, then remounts it with flags (and read-only).
// Flags the source mount already has (noexec, nosuid, atime modes) are kept:
// inside a user namespace the kernel refuses a remount that would clear
// them.
func bindMount(src, dst string, readOnly bool, flags uintptr) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dst, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", dst, err)
	}
	flags |= lockedFlags(st.Flags)
	if readOnly {
		flags |= unix.MS_RDONLY
	}
	if err := unix.Mount("", dst, "", unix.MS_REMOUNT|unix.MS_BIND|flags, ""); err != nil {
		return fmt.Errorf("remount %s: %w", dst, err)
	}
	return nil
}

// lockedFlags maps statfs flags to the mount flags a remount must keep.
func lockedFlags(f int64) uintptr {
	var m uintptr
	for _, p := range []struct {
		st int64
		ms uintptr
	}{
		{unix.ST_RDONLY, unix.MS_RDONLY},
		{unix.ST_NOSUID, unix.MS_NOSUID},
		{unix.ST_NODEV, unix.MS_NODEV},
		{unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME},
		{unix.ST_NODIRATIME, unix.MS_NODIRATIME},
		{unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if f&p.st != 0 {
			m |= p.ms
		}
	}
	return m
}
