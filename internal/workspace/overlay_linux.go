package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The overlay stage.
//
// lowerdir is the persistent workspace, upperdir and workdir live under
// the stage's layers/ (root's, 0700), and the merged tree is mounted at
// tree/. Options:
//
//   - redirect_dir=off and metacopy=off: the upper layer holds whole files,
//     and a renamed directory is copied then deleted (the kernel answers
//     EXDEV, tools fall back to a copy), so the manifest reads every change
//     from the upper layer alone;
//   - index=off: nothing is recorded about the lower's hard links;
//   - volatile: no fsync on copy-up and no sync of the whole upper
//     filesystem on unmount (see Stage on durability);
//   - nodev and nosuid mount flags: a device node or setuid file of the
//     workspace is data here, never a door on the host.
//
// Secrets are made absent before the mount by whiteouts in the upper layer
// (character devices 0/0, what the kernel itself writes for a deletion),
// in upper directories that copy their lower directory's attributes, as a
// copy-up would.

// errNoOverlay says overlayfs cannot be used here: the stage falls back to
// a copy.
var errNoOverlay = errors.New("overlayfs unavailable")

// overlayMagic is OVERLAYFS_SUPER_MAGIC.
const overlayMagic = 0x794c7630

func (s *Stage) stageOverlay(root fs.FileInfo, opt StageOptions) error {
	s.state.Overlay = true
	var secrets []string
	err := walkSecrets(s.persistent, newSecretMatcher(s.state.Secrets), func(rel string) error {
		secrets = append(secrets, rel)
		return nil
	})
	if err != nil {
		return err
	}
	layers := filepath.Join(s.dir, stageLayersDir)
	if err := os.Mkdir(layers, 0o700); err != nil {
		return err
	}
	if s.state.Disk {
		// Besides the run's writes, the filesystem holds the stage's own:
		// the upper and work directories (and what the kernel makes in
		// the latter), each whiteout and a directory above it at most.
		own := int64(8 + 2*len(secrets))
		if err := makeDisk(s.diskImage(), layers, opt.diskBytes()+own*diskBlock, opt.diskInodes()+own); err != nil {
			return err
		}
		if err := os.Chmod(layers, 0o700); err != nil { // the filesystem's root
			return err
		}
	}
	upper := filepath.Join(s.dir, stageUpperDir)
	for _, d := range []string{filepath.Join(s.dir, stageWorkDir), upper, s.Tree()} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	// The upper layer's root is the merged tree's root: it carries the
	// workspace root's mode and the sandbox user as owner.
	if err := copyDirAttrs(upper, root, opt.UID, opt.GID); err != nil {
		return err
	}
	made := map[string]bool{}
	for _, rel := range secrets {
		if err := s.upperParents(rel, made); err != nil {
			return err
		}
		if err := unix.Mknod(filepath.Join(upper, filepath.FromSlash(rel)), unix.S_IFCHR, 0); err != nil {
			if errors.Is(err, unix.EPERM) {
				return fmt.Errorf("%w: whiteout: %v", errNoOverlay, err)
			}
			return fmt.Errorf("whiteout %s: %w", rel, err)
		}
		s.state.Whiteouts = append(s.state.Whiteouts, rel)
	}
	return s.mount(true)
}

// walkSecrets calls fn for every secret under root, not descending into a
// secret directory. It reads directories only, never a file, and follows
// no symlink.
func walkSecrets(root string, m secretMatcher, fn func(rel string) error) error {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	return walkSecretsAt(fd, "", m, fn)
}

// walkSecretsAt walks the directory open at fd, and closes it.
func walkSecretsAt(fd int, rel string, m secretMatcher, fn func(rel string) error) error {
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return fmt.Errorf("read directory %q: %w", rel, err)
	}
	for _, de := range ents {
		p := joinRel(rel, de.Name())
		if m.secretEntry(p, de.Name()) {
			if err := fn(p); err != nil {
				return err
			}
			continue
		}
		if !de.IsDir() {
			continue
		}
		sub, err := unix.Openat(fd, de.Name(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open directory %q: %w", p, err)
		}
		if err := walkSecretsAt(sub, p, m, fn); err != nil {
			return err
		}
	}
	return nil
}

// upperParents makes the upper layer's directories above rel, each with
// the attributes of its lower directory, as a copy-up would.
func (s *Stage) upperParents(rel string, made map[string]bool) error {
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		d := strings.Join(parts[:i], "/")
		if made[d] {
			continue
		}
		fi, err := os.Lstat(filepath.Join(s.persistent, filepath.FromSlash(d)))
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("whiteout parent %s: not a directory", d)
		}
		up := filepath.Join(s.dir, stageUpperDir, filepath.FromSlash(d))
		if err := os.Mkdir(up, 0o700); err != nil {
			return err
		}
		if err := copyDirAttrs(up, fi, -1, -1); err != nil {
			return err
		}
		made[d] = true
	}
	return nil
}

// copyDirAttrs gives the directory name the mode, times and owner of fi;
// uid or gid > 0 replace fi's owner.
func copyDirAttrs(name string, fi fs.FileInfo, uid, gid int) error {
	st := fi.Sys().(*syscall.Stat_t)
	if uid <= 0 {
		uid = int(st.Uid)
	}
	if gid <= 0 {
		gid = int(st.Gid)
	}
	if os.Geteuid() == 0 {
		if err := os.Lchown(name, uid, gid); err != nil {
			return err
		}
	}
	if err := os.Chmod(name, fi.Mode()&(fs.ModePerm|fs.ModeSetgid|fs.ModeSticky)); err != nil {
		return err
	}
	return os.Chtimes(name, statTime(st.Atim), statTime(st.Mtim))
}

// mount mounts the overlay at the tree, volatile where the kernel knows
// the option (5.10 and later), and records whether it was.
func (s *Stage) mount(volatile bool) error {
	err := mountOverlay(s.persistent, filepath.Join(s.dir, stageUpperDir), filepath.Join(s.dir, stageWorkDir), s.Tree(), volatile)
	if volatile && errors.Is(err, unix.EINVAL) {
		volatile = false
		err = mountOverlay(s.persistent, filepath.Join(s.dir, stageUpperDir), filepath.Join(s.dir, stageWorkDir), s.Tree(), false)
	}
	if err != nil {
		return fmt.Errorf("%w: mount: %v", errNoOverlay, err)
	}
	s.state.Volatile = volatile
	return nil
}

// remount mounts the overlay of a re-opened stage. A volatile overlay
// leaves a mark in its work directory that makes the kernel refuse to
// mount it again, lest a crash have lost its data: OpenStage has checked
// that the data is safe (same boot, or synced by Manifest).
func (s *Stage) remount() error {
	if s.state.Volatile {
		if err := os.RemoveAll(filepath.Join(s.dir, stageWorkDir, "work", "incompat")); err != nil {
			return err
		}
	}
	return s.mount(s.state.Volatile)
}

func mountOverlay(lower, upper, work, target string, volatile bool) error {
	// The layers go by file descriptor: overlay's options cannot carry a
	// path with a comma or a colon, and /proc/self/fd/N has neither.
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, d := range []string{lower, upper, work} {
		fd, err := unix.Open(d, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open layer %s: %w", d, err)
		}
		fds = append(fds, fd)
	}
	opts := fmt.Sprintf("lowerdir=/proc/self/fd/%d,upperdir=/proc/self/fd/%d,workdir=/proc/self/fd/%d,redirect_dir=off,metacopy=off,index=off",
		fds[0], fds[1], fds[2])
	if volatile {
		opts += ",volatile"
	}
	return unix.Mount("overlay", target, "overlay", unix.MS_NODEV|unix.MS_NOSUID, opts)
}

func (s *Stage) unmount() error { return unmountOverlay(s.Tree()) }

// unmountOverlay unmounts the overlay at tree if there is one: at once
// when nothing uses it, else lazily (it leaves this namespace now, and
// goes when unused).
func unmountOverlay(tree string) error {
	for range 8 { // mounts stacked on one another, by accident
		mounted, err := overlayMounted(tree)
		if err != nil || !mounted {
			return err
		}
		err = unix.Unmount(tree, 0)
		if errors.Is(err, unix.EBUSY) {
			err = unix.Unmount(tree, unix.MNT_DETACH)
		}
		if err != nil {
			return fmt.Errorf("unmount %s: %w", tree, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted", tree)
}

// overlayMounted reports whether an overlay is mounted at tree.
func overlayMounted(tree string) (bool, error) { return mountedAt(tree, overlayMagic) }

// mountedAt reports whether a filesystem of type magic is mounted at dir:
// one of that type on another device than dir's parent (the stage may
// itself live on an overlay, as in a container, or on ext4).
func mountedAt(dir string, magic int64) (bool, error) {
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return false, nil
		}
		return false, err
	}
	if int64(fs.Type) != magic {
		return false, nil
	}
	var t, p unix.Stat_t
	if err := unix.Lstat(dir, &t); err != nil {
		return false, err
	}
	if err := unix.Lstat(filepath.Dir(dir), &p); err != nil {
		return false, err
	}
	return t.Dev != p.Dev, nil
}
